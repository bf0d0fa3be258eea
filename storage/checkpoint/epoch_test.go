package checkpoint

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
)

func openCache(t *testing.T, tf testFS, entries ...EpochEntry) *LeaderEpochCache {
	t.Helper()
	c, err := OpenLeaderEpochCache(tf.fs, tf.path("leader-epoch-checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := c.Assign(e.Epoch, e.StartOffset); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Entries(); len(entries) > 0 && !slices.Equal(got, entries) {
		t.Fatalf("cache built as %v, want %v", got, entries)
	}
	return c
}

func TestLeaderEpochCacheAssignPersistsInKafkaFormat(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		c := openCache(t, tf)
		if _, _, ok := c.Latest(); ok {
			t.Fatal("new cache has a latest epoch")
		}
		if tf.exists(t, "leader-epoch-checkpoint") {
			t.Fatal("opening created the file")
		}
		for _, e := range []EpochEntry{{0, 0}, {0, 10}, {2, 15}, {2, 40}, {5, 90}} {
			if err := c.Assign(e.Epoch, e.StartOffset); err != nil {
				t.Fatal(err)
			}
		}
		if got := tf.read(t, "leader-epoch-checkpoint"); got != "0\n3\n0 0\n2 15\n5 90\n" {
			t.Fatalf("file is %q", got)
		}
		if e, off, ok := c.Latest(); !ok || e != 5 || off != 90 {
			t.Fatalf("Latest = (%d, %d, %v)", e, off, ok)
		}
		reopened := openCache(t, tf)
		if got, want := reopened.Entries(), c.Entries(); !slices.Equal(got, want) {
			t.Fatalf("reopened as %v, want %v", got, want)
		}
	})
}

// TestLeaderEpochCacheAssignIgnoresNonIncreasingEpochs: the same epoch
// continuing, and stale epochs, change nothing (and write nothing).
func TestLeaderEpochCacheAssignIgnoresNonIncreasingEpochs(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		c := openCache(t, tf, EpochEntry{1, 10}, EpochEntry{3, 20})
		ff := newFaultFS(tf.fs)
		c.fs = ff // count writes
		for _, e := range []EpochEntry{{3, 25}, {3, 20}, {3, 5}, {2, 30}, {1, 0}, {0, 100}} {
			if err := c.Assign(e.Epoch, e.StartOffset); err != nil {
				t.Fatal(err)
			}
		}
		if got, want := c.Entries(), []EpochEntry{{1, 10}, {3, 20}}; !slices.Equal(got, want) {
			t.Fatalf("entries %v, want %v", got, want)
		}
		if ff.calls["create"] != 0 {
			t.Fatalf("ignored assignments wrote the file %d times", ff.calls["create"])
		}
		for _, e := range []EpochEntry{{-1, 5}, {4, -1}} {
			if err := c.Assign(e.Epoch, e.StartOffset); !errors.Is(err, ErrInvalidEpoch) {
				t.Errorf("Assign(%d, %d) = %v, want ErrInvalidEpoch", e.Epoch, e.StartOffset, err)
			}
		}
	})
}

// TestLeaderEpochCacheAssignDropsEpochsThatWroteNothing: a newer epoch
// starting at or below the latest entries' start offsets replaces them (a
// leader elected and replaced before it wrote anything), as in Kafka.
func TestLeaderEpochCacheAssignDropsEpochsThatWroteNothing(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		c := openCache(t, tf, EpochEntry{1, 0}, EpochEntry{2, 100}, EpochEntry{3, 150})
		if err := c.Assign(4, 150); err != nil {
			t.Fatal(err)
		}
		if got, want := c.Entries(), []EpochEntry{{1, 0}, {2, 100}, {4, 150}}; !slices.Equal(got, want) {
			t.Fatalf("after Assign(4, 150): %v, want %v", got, want)
		}
		if err := c.Assign(7, 90); err != nil {
			t.Fatal(err)
		}
		if got, want := c.Entries(), []EpochEntry{{1, 0}, {7, 90}}; !slices.Equal(got, want) {
			t.Fatalf("after Assign(7, 90): %v, want %v", got, want)
		}
		if got := openCache(t, tf).Entries(); !slices.Equal(got, []EpochEntry{{1, 0}, {7, 90}}) {
			t.Fatalf("persisted %v", got)
		}
	})
}

func TestLeaderEpochCacheEndOffsetForMatchesKafka(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		empty := openCache(t, tf)
		if e, off := empty.EndOffsetFor(0, 100); e != UndefinedEpoch || off != UndefinedEpochOffset {
			t.Fatalf("empty cache: EndOffsetFor(0) = (%d, %d)", e, off)
		}
		c := openCache(t, tf, EpochEntry{1, 5}, EpochEntry{3, 10}, EpochEntry{6, 20})
		const leo = 30
		for _, x := range []struct {
			req       int32
			epoch     int32
			endOffset int64
		}{
			{UndefinedEpoch, UndefinedEpoch, UndefinedEpochOffset},
			{6, 6, leo}, // the latest epoch ends at the log end
			{0, 0, 5},   // below the first known: the first start offset
			{1, 1, 10},  // a known epoch ends where the next begins
			{2, 1, 10},  // unknown in between: the floor epoch's end
			{3, 3, 20},  //
			{5, 3, 20},  //
			{7, UndefinedEpoch, UndefinedEpochOffset}, // above every known epoch
		} {
			if e, off := c.EndOffsetFor(x.req, leo); e != x.epoch || off != x.endOffset {
				t.Errorf("EndOffsetFor(%d) = (%d, %d), want (%d, %d)", x.req, e, off, x.epoch, x.endOffset)
			}
		}
	})
}

func TestLeaderEpochCacheTruncateFromEndDropsEntriesAtOrAbove(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		initial := []EpochEntry{{1, 5}, {3, 10}, {6, 20}}
		for _, x := range []struct {
			end  int64
			want []EpochEntry
		}{
			{30, initial},
			{21, initial},
			{20, initial[:2]},
			{11, initial[:2]},
			{10, initial[:1]},
			{5, nil},
			{0, nil},
			{-1, initial}, // negative: nothing
		} {
			if err := tf.fs.Remove(tf.path("leader-epoch-checkpoint")); err != nil && tf.exists(t, "leader-epoch-checkpoint") {
				t.Fatal(err)
			}
			c := openCache(t, tf, initial...)
			if err := c.TruncateFromEnd(x.end); err != nil {
				t.Fatal(err)
			}
			if got := c.Entries(); !slices.Equal(got, x.want) {
				t.Errorf("TruncateFromEnd(%d) = %v, want %v", x.end, got, x.want)
			}
			if got := openCache(t, tf).Entries(); !slices.Equal(got, x.want) {
				t.Errorf("TruncateFromEnd(%d) persisted %v, want %v", x.end, got, x.want)
			}
		}
	})
}

func TestLeaderEpochCacheTruncateFromStartMovesLatestBelowUp(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		initial := []EpochEntry{{1, 5}, {3, 10}, {6, 20}}
		for _, x := range []struct {
			start int64
			want  []EpochEntry
		}{
			{0, initial},
			{4, initial},
			{5, initial},
			{7, []EpochEntry{{1, 7}, {3, 10}, {6, 20}}},
			{10, []EpochEntry{{3, 10}, {6, 20}}},
			{15, []EpochEntry{{3, 15}, {6, 20}}},
			{20, []EpochEntry{{6, 20}}},
			{100, []EpochEntry{{6, 100}}},
			{-1, initial},
		} {
			if err := tf.fs.Remove(tf.path("leader-epoch-checkpoint")); err != nil && tf.exists(t, "leader-epoch-checkpoint") {
				t.Fatal(err)
			}
			c := openCache(t, tf, initial...)
			if err := c.TruncateFromStart(x.start); err != nil {
				t.Fatal(err)
			}
			if got := c.Entries(); !slices.Equal(got, x.want) {
				t.Errorf("TruncateFromStart(%d) = %v, want %v", x.start, got, x.want)
			}
			if got := openCache(t, tf).Entries(); !slices.Equal(got, x.want) {
				t.Errorf("TruncateFromStart(%d) persisted %v, want %v", x.start, got, x.want)
			}
		}
	})
}

func TestLeaderEpochCacheClearEmptiesFile(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		c := openCache(t, tf, EpochEntry{1, 5}, EpochEntry{3, 10})
		if err := c.Clear(); err != nil {
			t.Fatal(err)
		}
		if len(c.Entries()) != 0 {
			t.Fatalf("entries after Clear: %v", c.Entries())
		}
		if got := tf.read(t, "leader-epoch-checkpoint"); got != "0\n0\n" {
			t.Fatalf("file after Clear: %q", got)
		}
		if err := c.Assign(0, 0); err != nil {
			t.Fatal(err)
		}
		if got := c.Entries(); !slices.Equal(got, []EpochEntry{{0, 0}}) {
			t.Fatalf("Assign after Clear: %v", got)
		}
	})
}

func TestOpenLeaderEpochCacheRejectsCorruptFiles(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		for _, content := range []string{
			"1\n0\n",             // version
			"0\n2\n1 0\n",        // count
			"0\n1\n1\n",          // fields
			"0\n1\nx 0\n",        // epoch not a number
			"0\n1\n1 y\n",        // offset not a number
			"0\n1\n-2 0\n",       // negative epoch
			"0\n1\n1 -5\n",       // negative offset
			"0\n2\n3 0\n2 10\n",  // epochs go back
			"0\n2\n3 10\n4 10\n", // offsets do not rise
			"0\n1\n2147483648 0\n",
			"\xff\xfe",
		} {
			tf.write(t, "leader-epoch-checkpoint", content)
			if _, err := OpenLeaderEpochCache(tf.fs, tf.path("leader-epoch-checkpoint")); !errors.Is(err, ErrCorruptCheckpoint) {
				t.Errorf("open of %q = %v, want ErrCorruptCheckpoint", content, err)
			}
		}
	})
}

// TestLeaderEpochCacheFailedWriteChangesNothing: a change whose file write
// fails returns the error and leaves both the cache and the file as they
// were.
func TestLeaderEpochCacheFailedWriteChangesNothing(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		want := []EpochEntry{{1, 5}, {3, 10}}
		c := openCache(t, tf, want...)
		ff := newFaultFS(tf.fs)
		ff.fail = "sync"
		c.fs = ff
		for name, op := range map[string]func() error{
			"Assign":            func() error { return c.Assign(4, 20) },
			"TruncateFromEnd":   func() error { return c.TruncateFromEnd(6) },
			"TruncateFromStart": func() error { return c.TruncateFromStart(12) },
			"Clear":             c.Clear,
		} {
			if err := op(); !errors.Is(err, errInjected) {
				t.Errorf("%s = %v, want the injected fault", name, err)
			}
			if got := c.Entries(); !slices.Equal(got, want) {
				t.Errorf("%s changed the cache to %v", name, got)
			}
		}
		if got := openCache(t, tf).Entries(); !slices.Equal(got, want) {
			t.Fatalf("file holds %v", got)
		}
	})
}

// TestLeaderEpochCacheConcurrentReadersDuringChanges: readers see one
// consistent snapshot at a time (entries strictly increasing in both
// fields) while a writer assigns and truncates. Run under -race.
func TestLeaderEpochCacheConcurrentReadersDuringChanges(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		c := openCache(t, tf)
		done := make(chan struct{})
		var wg sync.WaitGroup
		errc := make(chan error, 4)
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-done:
						return
					default:
					}
					es := c.Entries()
					for i := 1; i < len(es); i++ {
						if es[i].Epoch <= es[i-1].Epoch || es[i].StartOffset <= es[i-1].StartOffset {
							errc <- fmt.Errorf("inconsistent snapshot %v", es)
							return
						}
					}
					if e, _, ok := c.Latest(); ok {
						c.EndOffsetFor(e-1, 1<<40)
					}
				}
			}()
		}
		off := int64(0)
		for epoch := int32(0); epoch < 100; epoch++ {
			if err := c.Assign(epoch, off); err != nil {
				t.Fatal(err)
			}
			off += 10
			if epoch%20 == 19 {
				if err := c.TruncateFromEnd(off - 50); err != nil {
					t.Fatal(err)
				}
				if err := c.TruncateFromStart(off / 4); err != nil {
					t.Fatal(err)
				}
			}
		}
		close(done)
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Error(err)
		}
	})
}
