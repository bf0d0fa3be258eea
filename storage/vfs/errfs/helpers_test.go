package errfs

import (
	"bytes"
	"testing"

	"github.com/strata-io/strata/storage/vfs"
)

// newMem returns a MemFS holding the empty directory /d.
func newMem(t *testing.T) *vfs.MemFS {
	t.Helper()
	m := vfs.NewMem()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	return m
}

func mustCreate(t *testing.T, fs vfs.FS, name string) vfs.File {
	t.Helper()
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func mustContain(t *testing.T, fs vfs.FS, name string, want []byte) {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	got := make([]byte, st.Size())
	f.ReadAt(got, 0)
	if !bytes.Equal(got, want) {
		t.Fatalf("%s = %q, want %q", name, got, want)
	}
}
