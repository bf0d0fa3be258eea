package storage

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/strata-io/strata/storage/vfs"
)

// openCountFS counts the files it has open (descriptors, on an OS FS).
type openCountFS struct {
	vfs.FS
	open atomic.Int64
	max  atomic.Int64
}

type openCountFile struct {
	vfs.File
	fs     *openCountFS
	closed atomic.Bool
}

func (c *openCountFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	n := c.open.Add(1)
	for m := c.max.Load(); n > m && !c.max.CompareAndSwap(m, n); m = c.max.Load() {
	}
	return &openCountFile{File: f, fs: c}, nil
}

func (c *openCountFS) Create(n string) (vfs.File, error)        { return c.wrap(c.FS.Create(n)) }
func (c *openCountFS) Open(n string) (vfs.File, error)          { return c.wrap(c.FS.Open(n)) }
func (c *openCountFS) OpenReadWrite(n string) (vfs.File, error) { return c.wrap(c.FS.OpenReadWrite(n)) }

func (f *openCountFile) Close() error {
	if f.closed.CompareAndSwap(false, true) {
		f.fs.open.Add(-1)
	}
	return f.File.Close()
}

// TestManagerFileCacheBoundsOpenSealedSegments: with MaxOpenSealedSegments
// the files of sealed segments nobody read recently are closed, so open
// files stay at three per log (the active segment) plus three per cached
// segment however many segments there are, after rolls and after a clean
// or unclean reopen; reading an evicted segment reopens it, a held
// ReadView keeps its file open, and truncating back into an evicted
// segment reactivates it.
func TestManagerFileCacheBoundsOpenSealedSegments(t *testing.T) {
	const logs, rolls, maxOpen = 3, 8, 2
	mem := vfs.NewMem()
	cfs := &openCountFS{FS: mem}
	o := managerOptions(cfs)
	o.MaxOpenSealedSegments = maxOpen
	o.DisableCleaner = true
	bound := int64(3*logs + 3*maxOpen)
	m := openManager(t, o)
	var ls []*Log
	for p := range logs {
		l, err := m.GetOrCreate("t", int32(p), m.opts.Default)
		if err != nil {
			t.Fatal(err)
		}
		for range rolls {
			if _, err := l.Append(makeBatch(t, 2, 10, baseTs), AppendOptions{AssignOffsets: true}); err != nil {
				t.Fatal(err)
			}
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
		// The last roll's fsyncs pin its segment open until they ran.
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	if n := cfs.open.Load(); n > bound || m.OpenSealedSegments() > maxOpen {
		t.Fatalf("%d files open, %d sealed segments open after %d rolls of %d logs; want at most %d and %d",
			n, m.OpenSealedSegments(), rolls, logs, bound, maxOpen)
	}
	want := make([][]byte, logs)
	for i, l := range ls {
		want[i], _ = readAll(t, l)
		if l.LogEndOffset() != 2*rolls || len(want[i]) == 0 {
			t.Fatalf("log %d: end %d, %d bytes", i, l.LogEndOffset(), len(want[i]))
		}
	}
	if n := cfs.open.Load(); n > bound {
		t.Fatalf("%d files open after reading every segment, want at most %d", n, bound)
	}
	// A held view pins its segment: reading everything else does not
	// close its file.
	v, err := ls[0].Read(0, 1, ls[0].LogEndOffset())
	if err != nil || v.Size == 0 {
		t.Fatalf("read at 0: %+v %v", v, err)
	}
	for _, l := range ls[1:] {
		readAll(t, l)
	}
	if b, err := v.Bytes(); err != nil || !bytes.Equal(b, want[0][:len(b)]) {
		t.Fatalf("held view after evictions: %v", err)
	}
	v.Release()
	// Truncating into an evicted sealed segment makes it active again.
	if err := ls[1].Truncate(3); err != nil {
		t.Fatal(err)
	}
	if _, err := ls[1].Append(makeBatch(t, 2, 10, baseTs), AppendOptions{AssignOffsets: true}); err != nil || ls[1].LogEndOffset() != 4 {
		t.Fatalf("append after truncation into an evicted segment: end %d, %v", ls[1].LogEndOffset(), err)
	}
	want[1], _ = readAll(t, ls[1])
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if n := cfs.open.Load(); n != 0 {
		t.Fatalf("%d files open after Close", n)
	}

	for _, clean := range []bool{true, false} {
		if !clean {
			if err := mem.Remove("/data/" + CleanShutdownFile); err != nil {
				t.Fatal(err)
			}
		}
		cfs.max.Store(0)
		m := openManager(t, o)
		if n := cfs.open.Load(); n > bound {
			t.Fatalf("clean=%v: %d files open after loading, want at most %d", clean, n, bound)
		}
		for i := range logs {
			l, _ := m.Get("t", int32(i))
			if got, _ := readAll(t, l); !bytes.Equal(got, want[i]) {
				t.Fatalf("clean=%v: log %d reads back differently", clean, i)
			}
		}
		// Loading opens a few logs' segments at a time (RecoveryThreads).
		if mx := cfs.max.Load(); mx > bound+3*int64(o.RecoveryThreads) {
			t.Fatalf("clean=%v: up to %d files open at once, want at most %d", clean, mx, bound+3*int64(o.RecoveryThreads))
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFileCacheConcurrentReadsAndEvictions: readers of many sealed
// segments through a one-segment cache keep evicting each other's
// segments; every read still returns the right bytes (run with -race).
func TestFileCacheConcurrentReadsAndEvictions(t *testing.T) {
	o := managerOptions(vfs.NewMem())
	o.MaxOpenSealedSegments = 1
	o.DisableCleaner = true
	m := openManager(t, o)
	defer m.Close()
	var ls []*Log
	var want [][]byte
	for p := range 3 {
		l, _ := m.GetOrCreate("t", int32(p), m.opts.Default)
		for range 6 {
			l.Append(makeBatch(t, 1, 10, baseTs), AppendOptions{AssignOffsets: true})
			if err := l.Roll(); err != nil {
				t.Fatal(err)
			}
		}
		b, _ := readAll(t, l)
		ls, want = append(ls, l), append(want, b)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				l := ls[(g+i)%len(ls)]
				off := int64((g*7 + i) % 6)
				v, err := l.Read(off, 1, l.LogEndOffset())
				if err != nil {
					errs <- err
					return
				}
				b, err := v.Bytes()
				v.Release()
				if err != nil {
					errs <- err
					return
				}
				all := want[(g+i)%len(ls)]
				if !bytes.Contains(all, b) || len(b) == 0 {
					errs <- fmt.Errorf("log %d offset %d: wrong bytes", (g+i)%len(ls), off)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Segments pinned while another was added may leave the cache over
	// its cap by at most the readers' pins, until the next add.
	if n := m.OpenSealedSegments(); n > 1+4 {
		t.Fatalf("%d sealed segments open after the readers finished, want at most 5", n)
	}
}
