package vfs

import (
	"bytes"
	"math/rand/v2"
	"path/filepath"
	"testing"
)

// eachFS runs fn once against the operating system (in a fresh temporary
// directory) and once against a fresh MemFS, so one test states the
// contract both must honour.
func eachFS(t *testing.T, fn func(t *testing.T, fs FS, dir string)) {
	t.Helper()
	t.Run("fs=os", func(t *testing.T) { fn(t, Default, t.TempDir()) })
	t.Run("fs=mem", func(t *testing.T) {
		m := NewMem()
		if err := m.MkdirAll("/data", 0o755); err != nil {
			t.Fatal(err)
		}
		fn(t, m, "/data")
	})
}

// writeFile creates name holding b.
func writeFile(t *testing.T, fs FS, name string, b []byte) {
	t.Helper()
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// readFile returns name's contents; ok is false if it does not exist.
func readFile(t *testing.T, fs FS, name string) (b []byte, ok bool) {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b = make([]byte, st.Size())
	if n, err := f.ReadAt(b, 0); n != len(b) {
		t.Fatalf("read %s: %d of %d bytes: %v", name, n, len(b), err)
	}
	return b, true
}

// mustContain fails unless name holds exactly want.
func mustContain(t *testing.T, fs FS, name string, want []byte) {
	t.Helper()
	got, ok := readFile(t, fs, name)
	if !ok {
		t.Fatalf("%s: missing", name)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: got %q, want %q", name, trunc(got), trunc(want))
	}
}

func trunc(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

func mustNotExist(t *testing.T, fs FS, name string) {
	t.Helper()
	if _, err := fs.Stat(name); err == nil {
		t.Fatalf("%s: exists, want missing", name)
	}
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

func join(dir, name string) string { return filepath.Join(dir, name) }

// randBytes returns n deterministic pseudo-random bytes.
func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// durable makes name (file or directory) and all its ancestors' entries
// durable on m: it syncs the file's contents and every parent directory.
func durable(t *testing.T, m *MemFS, name string) {
	t.Helper()
	if st, err := m.Stat(name); err == nil && !st.IsDir() {
		f, err := m.OpenReadWrite(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	for d := filepath.Dir(name); ; d = filepath.Dir(d) {
		if err := m.SyncDir(d); err != nil {
			t.Fatal(err)
		}
		if d == "/" || d == "." {
			return
		}
	}
}
