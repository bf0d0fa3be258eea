package vfs_test

import (
	"errors"
	iofs "io/fs"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"

	"github.com/strata-io/strata/storage/vfs"
	"github.com/strata-io/strata/storage/vfs/errfs"
)

func readAll(t *testing.T, fs vfs.FS, path string) string {
	t.Helper()
	b, err := vfs.ReadFile(fs, path, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func newDir(t *testing.T) *vfs.MemFS {
	t.Helper()
	mem := vfs.NewMem()
	if err := mem.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := mem.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	if err := vfs.WriteFileAtomic(mem, "/d/f", []byte("old")); err != nil {
		t.Fatal(err)
	}
	return mem
}

// Each step of an atomic write failing leaves the old file intact and no
// temporary file, and the error names the step; a failing directory
// fsync comes after the rename, so the new file is in place (and the
// temporary file is gone with the rename).
func TestWriteFileAtomicFaults(t *testing.T) {
	for _, tc := range []struct {
		op      errfs.Op
		step    string
		renamed bool
	}{
		{errfs.OpCreate, "create /d/f.tmp", false},
		{errfs.OpWrite, "write /d/f.tmp", false},
		{errfs.OpSync, "sync /d/f.tmp", false},
		{errfs.OpClose, "close /d/f.tmp", false},
		{errfs.OpRename, "rename /d/f.tmp", false},
		{errfs.OpSyncDir, "sync dir of /d/f", true},
	} {
		t.Run(tc.op.String(), func(t *testing.T) {
			mem := newDir(t)
			rule := errfs.On(tc.op).Err(syscall.EIO)
			fs := errfs.Wrap(mem, rule)
			err := vfs.WriteFileAtomic(fs, "/d/f", []byte("new contents"))
			if !errors.Is(err, syscall.EIO) || !errors.Is(err, errfs.ErrInjected) {
				t.Fatalf("err = %v, want the injected EIO", err)
			}
			if !strings.HasPrefix(err.Error(), tc.step+": ") {
				t.Fatalf("err = %q, want it to start with %q", err, tc.step)
			}
			if rule.Fired() != 1 {
				t.Fatalf("fault fired %d times", rule.Fired())
			}
			want := "old"
			if tc.renamed {
				want = "new contents"
			}
			if got := readAll(t, mem, "/d/f"); got != want {
				t.Fatalf("file holds %q, want %q", got, want)
			}
			names, err := mem.List("/d")
			if err != nil {
				t.Fatal(err)
			}
			if len(names) != 1 || names[0] != "f" {
				t.Fatalf("directory holds %v, want only f", names)
			}
		})
	}
}

// A short write (part of the data lands, then an error) must not leave a
// torn file in place either.
func TestWriteFileAtomicShortWrite(t *testing.T) {
	mem := newDir(t)
	fs := errfs.Wrap(mem, errfs.On(errfs.OpWrite).Short(3, syscall.ENOSPC))
	if err := vfs.WriteFileAtomic(fs, "/d/f", []byte("new contents")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("err = %v", err)
	}
	if got := readAll(t, mem, "/d/f"); got != "old" {
		t.Fatalf("file holds %q", got)
	}
	if _, err := mem.Stat("/d/f.tmp"); err == nil {
		t.Fatal("temporary file left")
	}
}

// The order is: file fsync, then directory fsync (after the rename); a
// crash at any point leaves the old or the new contents, and after a
// successful write the new ones are durable.
func TestWriteFileAtomicOrderAndCrash(t *testing.T) {
	mem := newDir(t)
	var events []string
	crashes := []*vfs.MemFS{}
	rng := rand.New(rand.NewPCG(1, 2))
	mem.SetSyncHook(func(e vfs.SyncEvent) {
		kind := "sync"
		if e.Dir {
			kind = "syncdir"
		}
		events = append(events, kind+" "+e.Path)
	})
	fs := errfs.Wrap(mem, errfs.InjectorFunc(func(c errfs.Call) *errfs.Fault {
		// A crash before every operation of the write, with unsynced
		// state kept or lost at random.
		for range 4 {
			crashes = append(crashes, mem.CrashClone(50, rng))
		}
		return nil
	}))
	if err := vfs.WriteFileAtomic(fs, "/d/f", []byte("new contents")); err != nil {
		t.Fatal(err)
	}
	mem.SetSyncHook(nil)
	if want := []string{"sync /d/f.tmp", "syncdir /d"}; strings.Join(events, ",") != strings.Join(want, ",") {
		t.Fatalf("sync order %v, want %v", events, want)
	}
	for i, c := range crashes {
		if got := readAll(t, c, "/d/f"); got != "old" && got != "new contents" {
			t.Fatalf("crash %d: file holds %q", i, got)
		}
	}
	if got := readAll(t, mem.CrashClone(0, rng), "/d/f"); got != "new contents" {
		t.Fatalf("after the write, a crash keeps %q", got)
	}
}

// The deferred variant does everything but the directory fsync, which the
// caller owes.
func TestWriteFileAtomicDeferDirSync(t *testing.T) {
	mem := newDir(t)
	var dirSyncs int
	mem.SetSyncHook(func(e vfs.SyncEvent) {
		if e.Dir {
			dirSyncs++
		}
	})
	if err := vfs.WriteFileAtomicDeferDirSync(mem, "/d/f", []byte("new")); err != nil {
		t.Fatal(err)
	}
	mem.SetSyncHook(nil)
	if dirSyncs != 0 {
		t.Fatalf("%d directory syncs, want 0", dirSyncs)
	}
	if got := readAll(t, mem, "/d/f"); got != "new" {
		t.Fatalf("file holds %q", got)
	}
	fs := errfs.Wrap(vfs.NewMem(), errfs.On(errfs.OpSync).Err(syscall.EIO))
	_ = fs.MkdirAll("/d", 0o755)
	if err := vfs.WriteFileAtomicDeferDirSync(fs, "/d/f", []byte("x")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("err = %v", err)
	}
	if _, err := fs.Stat("/d/f.tmp"); err == nil {
		t.Fatal("temporary file left")
	}
}

func TestReadFileLimit(t *testing.T) {
	mem := newDir(t)
	if b, err := vfs.ReadFile(mem, "/d/f", 3); err != nil || string(b) != "old" {
		t.Fatalf("at the limit: %q %v", b, err)
	}
	if _, err := vfs.ReadFile(mem, "/d/f", 2); !errors.Is(err, vfs.ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	if _, err := vfs.ReadFile(mem, "/d/missing", 2); !errors.Is(err, iofs.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
}
