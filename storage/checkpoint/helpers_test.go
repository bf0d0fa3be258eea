package checkpoint

import (
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/storage/vfs"
)

// testFS is one file system the checkpoint tests run against.
type testFS struct {
	fs  vfs.FS
	dir string
}

func (tf testFS) path(name string) string { return filepath.Join(tf.dir, name) }

// forEachFS runs fn against the OS file system and MemFS.
func forEachFS(t *testing.T, fn func(t *testing.T, tf testFS)) {
	t.Helper()
	t.Run("fs=os", func(t *testing.T) { fn(t, testFS{fs: vfs.Default, dir: t.TempDir()}) })
	t.Run("fs=mem", func(t *testing.T) {
		m := vfs.NewMem()
		if err := m.MkdirAll("/data", 0o755); err != nil {
			t.Fatal(err)
		}
		fn(t, testFS{fs: m, dir: "/data"})
	})
}

func (tf testFS) write(t *testing.T, name, content string) {
	t.Helper()
	f, err := tf.fs.Create(tf.path(name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(content)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func (tf testFS) read(t *testing.T, name string) string {
	t.Helper()
	f, err := tf.fs.Open(tf.path(name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (tf testFS) exists(t *testing.T, name string) bool {
	t.Helper()
	names, err := tf.fs.List(tf.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

var errInjected = errors.New("injected fault")

// faultFS fails one kind of operation ("create", "write", "sync",
// "rename", "syncdir") while fail is that kind, and counts the operations.
type faultFS struct {
	vfs.FS
	fail  string
	calls map[string]int
}

func newFaultFS(fs vfs.FS) *faultFS { return &faultFS{FS: fs, calls: map[string]int{}} }

func (f *faultFS) hit(op string) error {
	f.calls[op]++
	if f.fail == op {
		return errInjected
	}
	return nil
}

func (f *faultFS) Create(name string) (vfs.File, error) {
	if err := f.hit("create"); err != nil {
		return nil, err
	}
	file, err := f.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return faultFile{File: file, fs: f}, nil
}

func (f *faultFS) Rename(o, n string) error {
	if err := f.hit("rename"); err != nil {
		return err
	}
	return f.FS.Rename(o, n)
}

func (f *faultFS) SyncDir(dir string) error {
	if err := f.hit("syncdir"); err != nil {
		return err
	}
	return f.FS.SyncDir(dir)
}

type faultFile struct {
	vfs.File
	fs *faultFS
}

func (f faultFile) Write(p []byte) (int, error) {
	if err := f.fs.hit("write"); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f faultFile) Sync() error {
	if err := f.fs.hit("sync"); err != nil {
		return err
	}
	return f.File.Sync()
}
