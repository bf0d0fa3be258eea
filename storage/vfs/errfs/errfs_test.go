package errfs

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-io/strata/storage/vfs"
)

func TestErrfsNthMatchingWriteFailsWithENOSPC(t *testing.T) {
	m := newMem(t)
	r := On(OpWrite, OpWriteAt).Glob("*.log").Nth(3).Err(syscall.ENOSPC)
	e := Wrap(m, r)
	log, idx := mustCreate(t, e, "/d/0.log"), mustCreate(t, e, "/d/0.index")
	for i, s := range []string{"a", "b"} {
		if _, err := log.Write([]byte(s)); err != nil {
			t.Fatalf("write %d: %v", i+1, err)
		}
		if _, err := idx.Write([]byte(s)); err != nil {
			t.Fatalf("index write %d: %v", i+1, err)
		}
	}
	n, err := log.WriteAt([]byte("c"), 2)
	if n != 0 || !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, ErrInjected) {
		t.Fatalf("third log write = %d, %v; want ENOSPC marked injected", n, err)
	}
	var pe *os.PathError
	if !errors.As(err, &pe) || pe.Path != "/d/0.log" || pe.Op != "writeat" {
		t.Fatalf("error %#v is not a *PathError for /d/0.log", err)
	}
	if _, err := log.Write([]byte("d")); err != nil {
		t.Fatalf("fourth write: %v", err)
	}
	mustContain(t, m, "/d/0.log", []byte("abd"))
	mustContain(t, m, "/d/0.index", []byte("ab"))
	if r.Matched() != 4 || r.Fired() != 1 {
		t.Fatalf("Matched=%d Fired=%d, want 4 and 1", r.Matched(), r.Fired())
	}
}

func TestErrfsShortWriteLandsAPrefixThenFails(t *testing.T) {
	m := newMem(t)
	e := Wrap(m, On(OpWrite).Nth(2).Short(3, nil))
	f := mustCreate(t, e, "/d/f")
	f.Write([]byte("12345"))
	n, err := f.Write([]byte("abcdef"))
	if n != 3 || !errors.Is(err, syscall.EIO) {
		t.Fatalf("short write = %d, %v; want 3, EIO", n, err)
	}
	// The handle's offset moved by what landed, as with a real short write.
	f.Write([]byte("Z"))
	mustContain(t, m, "/d/f", []byte("12345abcZ"))

	// Negative means half; a short write never moves the whole buffer.
	e = Wrap(m, On(OpWriteAt).Short(-1, syscall.ENOSPC))
	g := mustCreate(t, e, "/d/g")
	if n, err := g.WriteAt([]byte("abcd"), 0); n != 2 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("half write = %d, %v", n, err)
	}
	if n, err := g.WriteAt([]byte("x"), 0); n != 0 || err == nil {
		t.Fatalf("one-byte short write = %d, %v; want nothing written and an error", n, err)
	}
	mustContain(t, m, "/d/g", []byte("ab"))
}

func TestErrfsFromKeepsFailing(t *testing.T) {
	m := newMem(t)
	r := On(OpSync).From(2).Err(syscall.EIO)
	e := Wrap(m, r)
	f := mustCreate(t, e, "/d/f")
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := f.Sync(); !errors.Is(err, syscall.EIO) {
			t.Fatalf("sync %d: %v", i+2, err)
		}
	}
	r.Disable()
	if err := f.Sync(); err != nil {
		t.Fatalf("sync after Disable: %v", err)
	}
	r.Enable()
	if err := f.Sync(); err == nil {
		t.Fatal("sync after Enable succeeded")
	}
}

func TestErrfsFailedSyncLeavesBytesUnsynced(t *testing.T) {
	m := newMem(t)
	e := Wrap(m, On(OpSync).Err(syscall.EIO))
	f := mustCreate(t, e, "/d/f")
	m.SyncDir("/")
	m.SyncDir("/d")
	f.Write([]byte("never durable"))
	if err := f.Sync(); err == nil {
		t.Fatal("sync succeeded")
	}
	mustContain(t, m.CrashClone(0, rand.New(rand.NewPCG(1, 1))), "/d/f", nil)
}

func TestErrfsFailedNamespaceOpsChangeNothing(t *testing.T) {
	m := newMem(t)
	e := Wrap(m, Any(
		On(OpRename).Glob("*.tmp").Err(syscall.EIO),
		On(OpCreate).Glob("/d/sub/*").Err(syscall.ENOSPC),
		On(OpRemove, OpMkdirAll, OpSyncDir).Glob("*.x").Err(syscall.EROFS),
	))
	mustCreate(t, e, "/d/cp.tmp")
	err := e.Rename("/d/cp.tmp", "/d/cp")
	var le *os.LinkError
	if !errors.As(err, &le) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("Rename = %v, want an injected *LinkError", err)
	}
	if _, err := m.Stat("/d/cp.tmp"); err != nil {
		t.Fatalf("failed rename moved the file: %v", err)
	}
	if _, err := m.Stat("/d/cp"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("failed rename created the target: %v", err)
	}
	if err := e.MkdirAll("/d/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Create("/d/sub/a"); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Create under /d/sub = %v", err)
	}
	if _, err := m.Stat("/d/sub/a"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("failed Create created the file")
	}
	if _, err := e.Create("/d/other"); err != nil {
		t.Fatalf("Create outside the glob: %v", err)
	}
	mustCreate(t, m, "/d/f.x")
	if err := e.Remove("/d/f.x"); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("Remove = %v", err)
	}
	if err := e.MkdirAll("/d/y.x", 0o755); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("MkdirAll = %v", err)
	}
	if err := e.SyncDir("/d/y.x"); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("SyncDir = %v", err)
	}
	if _, err := m.Stat("/d/f.x"); err != nil {
		t.Fatal("failed Remove removed the file")
	}
}

func TestErrfsReadFaults(t *testing.T) {
	m := newMem(t)
	f := mustCreate(t, m, "/d/f")
	f.Write([]byte("0123456789"))
	e := Wrap(m, Any(On(OpReadAt).Nth(1).Short(4, syscall.EIO), On(OpRead).Err(syscall.EIO), On(OpMmap).Err(syscall.ENOMEM)))
	g, err := e.OpenReadWrite("/d/f")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	buf := make([]byte, 10)
	if n, err := g.ReadAt(buf, 0); n != 4 || string(buf[:4]) != "0123" || !errors.Is(err, syscall.EIO) {
		t.Fatalf("short ReadAt = %d %q %v", n, buf[:n], err)
	}
	if n, err := g.ReadAt(buf, 0); n != 10 || err != nil {
		t.Fatalf("second ReadAt = %d %v", n, err)
	}
	if _, err := g.Read(buf); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Read = %v", err)
	}
	if _, err := g.Mmap(10); !errors.Is(err, syscall.ENOMEM) {
		t.Fatalf("Mmap = %v", err)
	}
}

func TestErrfsDelayAddsLatency(t *testing.T) {
	m := newMem(t)
	r := On(OpSync).Delay(20 * time.Millisecond)
	f := mustCreate(t, Wrap(m, r), "/d/f")
	start := time.Now()
	if err := f.Sync(); err != nil {
		t.Fatalf("a delay alone failed the call: %v", err)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("Sync took %v, want >= 20ms", d)
	}
	if r.Fired() != 1 {
		t.Fatalf("Fired = %d", r.Fired())
	}
}

func TestErrfsCountingRuleSizesASweep(t *testing.T) {
	// Run once with a counting rule, then fail each write in turn: every
	// run fails exactly the chosen write.
	workload := func(e *FS) (failedAt int) {
		f, err := e.Create("/d/f")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for i := 1; i <= 5; i++ {
			if _, err := f.Write([]byte{byte(i)}); err != nil {
				return i
			}
		}
		return 0
	}
	count := On(OpWrite)
	if workload(Wrap(newMem(t), count)) != 0 || count.Fired() != 0 {
		t.Fatal("a rule without an action injected a fault")
	}
	for n := 1; n <= count.Matched(); n++ {
		if got := workload(Wrap(newMem(t), On(OpWrite).Nth(n).Err(syscall.EIO))); got != n {
			t.Fatalf("Nth(%d) failed write %d", n, got)
		}
	}
}

func TestErrfsProbSelectsSomeCalls(t *testing.T) {
	r := On(OpStat).Prob(0.5, rand.New(rand.NewPCG(1, 2))).Err(syscall.EIO)
	e := Wrap(newMem(t), r)
	failed := 0
	for range 200 {
		if _, err := e.Stat("/d"); err != nil {
			failed++
		}
	}
	if failed < 60 || failed > 140 || r.Fired() != failed {
		t.Fatalf("failed %d of 200 (Fired %d), want about 100", failed, r.Fired())
	}
}

func TestErrfsNthFiresOnceUnderConcurrency(t *testing.T) {
	m := newMem(t)
	r := On(OpWrite).Nth(50).Err(syscall.EIO)
	e := Wrap(m, r)
	var wg sync.WaitGroup
	var mu sync.Mutex
	failures := 0
	for i := range 4 {
		wg.Go(func() {
			f, err := e.Create("/d/f" + string(rune('a'+i)))
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			for range 100 {
				if _, err := f.Write([]byte("x")); err != nil {
					mu.Lock()
					failures++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if failures != 1 || r.Matched() != 400 {
		t.Fatalf("failures=%d matched=%d, want 1 and 400", failures, r.Matched())
	}
}

func TestErrfsPassesThroughWithoutFaults(t *testing.T) {
	dir := t.TempDir()
	e := Wrap(vfs.Default, On())
	name := dir + "/f"
	f, err := e.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("hello"))
	f.Truncate(4)
	f.Sync()
	if st, err := f.Stat(); err != nil || st.Size() != 4 {
		t.Fatalf("Stat = %v %v", st, err)
	}
	if _, ok := f.(interface{ OSFile() *os.File }); ok {
		t.Fatal("errfs file exposes the OS file, so sendfile would bypass injection")
	}
	f.Close()
	if err := e.Rename(name, name+"2"); err != nil {
		t.Fatal(err)
	}
	if names, err := e.List(dir); err != nil || len(names) != 1 || names[0] != "f2" {
		t.Fatalf("List = %v %v", names, err)
	}
	mustContain(t, e, name+"2", []byte("hell"))
	if err := e.RemoveAll(dir + "/f2"); err != nil {
		t.Fatal(err)
	}
}

// CreateExclusive passes through (refusing an existing file as the
// wrapped FS does), and a fault on it creates nothing; OpCreate rules do
// not see it, Namespace ones do.
func TestErrfsCreateExclusive(t *testing.T) {
	m := newMem(t)
	e := Wrap(m, Any(On(OpCreate).Err(syscall.EIO), On(OpCreateExclusive).Glob("*.full").Err(syscall.ENOSPC)))
	f, err := e.CreateExclusive("/d/a", 0o600)
	if err != nil {
		t.Fatalf("CreateExclusive outside the glob: %v", err)
	}
	if _, err := f.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	mustContain(t, m, "/d/a", []byte("x"))
	if _, err := e.CreateExclusive("/d/a", 0o600); !errors.Is(err, fs.ErrExist) || errors.Is(err, ErrInjected) {
		t.Fatalf("CreateExclusive of an existing file = %v, want the wrapped FS's fs.ErrExist", err)
	}
	_, err = e.CreateExclusive("/d/b.full", 0o600)
	var pe *os.PathError
	if !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, ErrInjected) || !errors.As(err, &pe) || pe.Op != "createexcl" {
		t.Fatalf("CreateExclusive under the rule = %v, want an injected ENOSPC *PathError", err)
	}
	if _, err := m.Stat("/d/b.full"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("failed CreateExclusive created the file")
	}
	ns := Wrap(m, On(Namespace...).Err(syscall.EROFS))
	if _, err := ns.CreateExclusive("/d/c", 0o600); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("CreateExclusive under a Namespace rule = %v", err)
	}
}

func TestOpString(t *testing.T) {
	if OpWriteAt.String() != "writeat" || OpMunmap.String() != "munmap" || Op(99).String() != "op?" {
		t.Fatal(OpWriteAt.String(), OpMunmap.String())
	}
}
