package checkpoint

import (
	"errors"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/strata-io/strata/storage/vfs"
)

func TestWriteOffsetsWritesKafkaFormat(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		m := map[TopicPartition]int64{
			{"orders", 10}: 7,
			{"orders", 2}:  123456789012,
			{"audit", 0}:   0,
		}
		if err := WriteOffsets(tf.fs, tf.path("recovery-point-offset-checkpoint"), m); err != nil {
			t.Fatal(err)
		}
		const want = "0\n3\naudit 0 0\norders 2 123456789012\norders 10 7\n"
		if got := tf.read(t, "recovery-point-offset-checkpoint"); got != want {
			t.Fatalf("file is %q, want %q", got, want)
		}
		if tf.exists(t, "recovery-point-offset-checkpoint.tmp") {
			t.Fatal("temporary file left behind")
		}
		got, err := ReadOffsets(tf.fs, tf.path("recovery-point-offset-checkpoint"))
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got, m) {
			t.Fatalf("read back %v, want %v", got, m)
		}
		// An empty map is a valid checkpoint too.
		if err := WriteOffsets(tf.fs, tf.path("recovery-point-offset-checkpoint"), nil); err != nil {
			t.Fatal(err)
		}
		if got := tf.read(t, "recovery-point-offset-checkpoint"); got != "0\n0\n" {
			t.Fatalf("empty checkpoint is %q", got)
		}
	})
}

func TestReadOffsetsMissingFileIsEmpty(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		m, err := ReadOffsets(tf.fs, tf.path("log-start-offset-checkpoint"))
		if err != nil || m == nil || len(m) != 0 {
			t.Fatalf("ReadOffsets of a missing file = %v, %v; want empty map, nil", m, err)
		}
	})
}

// TestReadOffsetsAcceptsKafkaVariants: what Kafka's reader accepts, ours
// does: CRLF line ends, an empty file, a file with only the version line,
// repeated partitions (last wins), several spaces between fields.
func TestReadOffsetsAcceptsKafkaVariants(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		for _, c := range []struct {
			name, content string
			want          map[TopicPartition]int64
		}{
			{"crlf", "0\r\n1\r\nt 0 5\r\n", map[TopicPartition]int64{{"t", 0}: 5}},
			{"empty file", "", map[TopicPartition]int64{}},
			{"version only", "0\n", map[TopicPartition]int64{}},
			{"no final newline", "0\n1\nt 3 9", map[TopicPartition]int64{{"t", 3}: 9}},
			{"repeated partition", "0\n2\nt 0 5\nt 0 8\n", map[TopicPartition]int64{{"t", 0}: 8}},
			{"extra spaces", "0\n1\nt  1   2\n", map[TopicPartition]int64{{"t", 1}: 2}},
			{"dotted topic", "0\n1\n__consumer_offsets.x-y 49 -1\n", map[TopicPartition]int64{{"__consumer_offsets.x-y", 49}: -1}},
		} {
			tf.write(t, "cp", c.content)
			got, err := ReadOffsets(tf.fs, tf.path("cp"))
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
				continue
			}
			if !maps.Equal(got, c.want) {
				t.Errorf("%s: got %v, want %v", c.name, got, c.want)
			}
		}
	})
}

func TestReadOffsetsRejectsMalformedFiles(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		for _, c := range []struct{ name, content string }{
			{"unknown version", "1\n0\n"},
			{"version not a number", "zero\n0\n"},
			{"blank version", "\n"},
			{"count not a number", "0\nmany\n"},
			{"negative count", "0\n-1\n"},
			{"fewer entries than count", "0\n2\nt 0 1\n"},
			{"more entries than count", "0\n1\nt 0 1\nt 1 2\n"},
			{"two fields", "0\n1\nt 0\n"},
			{"four fields", "0\n1\nt 0 1 2\n"},
			{"partition not a number", "0\n1\nt x 1\n"},
			{"partition beyond int32", "0\n1\nt 2147483648 1\n"},
			{"offset not a number", "0\n1\nt 0 1.5\n"},
			{"offset beyond int64", "0\n1\nt 0 9223372036854775808\n"},
			{"binary garbage", "\x00\xff\x13\x37"},
			{"blank line entry", "0\n1\n\n"},
		} {
			tf.write(t, "cp", c.content)
			m, err := ReadOffsets(tf.fs, tf.path("cp"))
			if !errors.Is(err, ErrCorruptCheckpoint) {
				t.Errorf("%s: ReadOffsets = %v, %v; want ErrCorruptCheckpoint", c.name, m, err)
			}
		}
	})
}

func TestWriteOffsetsRefusesTopicsItCannotReadBack(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		tf.write(t, "cp", "0\n1\nt 0 1\n")
		for _, topic := range []string{"", "a b", "a\nb", "tab\there"} {
			err := WriteOffsets(tf.fs, tf.path("cp"), map[TopicPartition]int64{{topic, 0}: 1})
			if err == nil {
				t.Errorf("topic %q accepted", topic)
			}
		}
		if got := tf.read(t, "cp"); got != "0\n1\nt 0 1\n" {
			t.Fatalf("refused write changed the file to %q", got)
		}
	})
}

// TestWriteOffsetsKeepsOldFileWhenWriteFails: a failure at every step
// before the rename leaves the previous checkpoint intact and no temporary
// file; a failure of the directory sync after the rename leaves the new one.
func TestWriteOffsetsKeepsOldFileWhenWriteFails(t *testing.T) {
	forEachFS(t, func(t *testing.T, tf testFS) {
		old := map[TopicPartition]int64{{"t", 0}: 1}
		next := map[TopicPartition]int64{{"t", 0}: 2, {"t", 1}: 3}
		for _, c := range []struct {
			op      string
			wantNew bool
		}{{"create", false}, {"write", false}, {"sync", false}, {"rename", false}, {"syncdir", true}} {
			if err := WriteOffsets(tf.fs, tf.path("cp"), old); err != nil {
				t.Fatal(err)
			}
			ff := newFaultFS(tf.fs)
			ff.fail = c.op
			err := WriteOffsets(ff, tf.path("cp"), next)
			if !errors.Is(err, errInjected) {
				t.Fatalf("%s fault: WriteOffsets = %v", c.op, err)
			}
			got, rerr := ReadOffsets(tf.fs, tf.path("cp"))
			if rerr != nil {
				t.Fatalf("%s fault: read back: %v", c.op, rerr)
			}
			want := old
			if c.wantNew {
				want = next
			}
			if !maps.Equal(got, want) {
				t.Errorf("%s fault: file holds %v, want %v", c.op, got, want)
			}
			if tf.exists(t, "cp.tmp") {
				t.Errorf("%s fault: temporary file left behind", c.op)
			}
		}
		// Without faults the sequence is create, write, sync, rename, syncdir.
		ff := newFaultFS(tf.fs)
		if err := WriteOffsets(ff, tf.path("cp"), next); err != nil {
			t.Fatal(err)
		}
		for _, op := range []string{"create", "write", "sync", "rename", "syncdir"} {
			if ff.calls[op] != 1 {
				t.Errorf("%s called %d times, want 1", op, ff.calls[op])
			}
		}
	})
}

// TestWriteOffsetsSurvivesCrashAtAnyPoint: after a completed write, a
// power loss keeps the new file whatever unsynced state is lost; during a
// write (simulated by crashing after each step), a crash keeps the old or
// the new file, whole.
func TestWriteOffsetsSurvivesCrashAtAnyPoint(t *testing.T) {
	mem := vfs.NewMem()
	if err := mem.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := mem.SyncDir("/"); err != nil { // make /d itself durable
		t.Fatal(err)
	}
	old := map[TopicPartition]int64{{"t", 0}: 1}
	next := map[TopicPartition]int64{{"t", 0}: 2, {"u", 5}: 99}
	if err := WriteOffsets(mem, "/d/cp", old); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	// Crash clones taken at each sync the write makes.
	var clones []*vfs.MemFS
	mem.SetSyncHook(func(vfs.SyncEvent) {
		for _, pct := range []int{0, 50, 100} {
			clones = append(clones, mem.CrashClone(pct, rng))
		}
	})
	if err := WriteOffsets(mem, "/d/cp", next); err != nil {
		t.Fatal(err)
	}
	mem.SetSyncHook(nil)
	for _, pct := range []int{0, 30, 100} {
		clones = append(clones, mem.CrashClone(pct, rng))
	}
	sawNew := false
	for i, c := range clones {
		got, err := ReadOffsets(c, "/d/cp")
		if err != nil {
			t.Fatalf("clone %d: %v", i, err)
		}
		switch {
		case maps.Equal(got, next):
			sawNew = true
		case maps.Equal(got, old):
			if i >= len(clones)-3 {
				t.Fatalf("clone %d after the write completed holds the old checkpoint", i)
			}
		default:
			t.Fatalf("clone %d holds %v: neither old nor new", i, got)
		}
	}
	if !sawNew {
		t.Fatal("no crash point kept the new checkpoint")
	}
}

// FuzzReadOffsets: for any bytes, ReadOffsets
//   - never panics;
//   - returns either a map and nil, or nil and an error wrapping
//     ErrCorruptCheckpoint;
//   - on success, writing the map and reading it back gives the same map.
func FuzzReadOffsets(f *testing.F) {
	for _, s := range []string{"0\n1\nt 0 5\n", "0\n0\n", "", "0\n", "1\n0\n", "0\n2\na 1 2\nb 3 4\n", "0\r\n1\r\nx 1 1\r\n", "0\n1\nt 0\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		mem := vfs.NewMem()
		if err := mem.MkdirAll("/d", 0o755); err != nil {
			t.Fatal(err)
		}
		w, err := mem.Create("/d/cp")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		_ = w.Close()
		m, err := ReadOffsets(mem, "/d/cp")
		if err != nil {
			if !errors.Is(err, ErrCorruptCheckpoint) || m != nil {
				t.Fatalf("ReadOffsets(%q) = %v, %v", data, m, err)
			}
			return
		}
		if err := WriteOffsets(mem, "/d/cp2", m); err != nil {
			t.Fatalf("rewrite of %v: %v", m, err)
		}
		again, err := ReadOffsets(mem, "/d/cp2")
		if err != nil || !maps.Equal(again, m) {
			t.Fatalf("round trip of %v gave %v, %v", m, again, err)
		}
	})
}
