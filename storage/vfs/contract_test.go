package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"testing"
)

// The tests in this file run against both the operating system and MemFS:
// MemFS is only useful for crash tests if it behaves like the OS where
// storage can tell.

func TestFSCreateTruncatesExisting(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		name := join(dir, "a.log")
		writeFile(t, fsys, name, []byte("hello world"))
		f, err := fsys.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		st, err := f.Stat()
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() != 0 {
			t.Fatalf("size after Create of an existing file = %d, want 0", st.Size())
		}
		if _, err := f.Write([]byte("hi")); err != nil {
			t.Fatal(err)
		}
		f.Close()
		mustContain(t, fsys, name, []byte("hi"))
	})
}

// CreateExclusive creates a new file read-write, and refuses (fs.ErrExist)
// a path where a file or a directory exists, leaving it as it was; a
// missing parent is fs.ErrNotExist.
func TestFSCreateExclusive(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		name := join(dir, "1.chunk")
		f, err := fsys.CreateExclusive(name, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("chunk")); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 5)
		if n, err := f.ReadAt(b, 0); n != 5 || string(b) != "chunk" {
			t.Fatalf("ReadAt through the new file = %d %q %v, want it read-write", n, b, err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		mustContain(t, fsys, name, []byte("chunk"))

		var pe *os.PathError
		if _, err := fsys.CreateExclusive(name, 0o600); !errors.Is(err, fs.ErrExist) || !errors.As(err, &pe) || pe.Path != name {
			t.Fatalf("CreateExclusive of an existing file = %v, want a *PathError matching fs.ErrExist", err)
		}
		mustContain(t, fsys, name, []byte("chunk")) // neither truncated nor replaced

		sub := join(dir, "sub")
		if err := fsys.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := fsys.CreateExclusive(sub, 0o600); !errors.Is(err, fs.ErrExist) {
			t.Fatalf("CreateExclusive of a directory = %v, want fs.ErrExist", err)
		}
		if st, err := fsys.Stat(sub); err != nil || !st.IsDir() {
			t.Fatalf("directory after a refused CreateExclusive: %v %v", st, err)
		}
		if _, err := fsys.CreateExclusive(join(join(dir, "nope"), "f"), 0o600); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("CreateExclusive in a missing directory = %v, want fs.ErrNotExist", err)
		}
	})
}

func TestFSOpenReadWriteKeepsContents(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		name := join(dir, "a.log")
		writeFile(t, fsys, name, []byte("hello world"))
		f, err := fsys.OpenReadWrite(name)
		if err != nil {
			t.Fatal(err)
		}
		// A new handle starts at offset 0: Write overwrites in place.
		if _, err := f.Write([]byte("HE")); err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("!"), 11); err != nil {
			t.Fatal(err)
		}
		f.Close()
		mustContain(t, fsys, name, []byte("HEllo world!"))

		if _, err := fsys.OpenReadWrite(join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("OpenReadWrite of a missing file: %v, want ErrNotExist", err)
		}
	})
}

func TestFSOpenReadOnlyRefusesWrites(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		name := join(dir, "a.log")
		writeFile(t, fsys, name, make([]byte, 8192))
		f, err := fsys.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.Write([]byte("x")); err == nil {
			t.Error("Write on a read-only file succeeded")
		}
		if _, err := f.WriteAt([]byte("x"), 0); err == nil {
			t.Error("WriteAt on a read-only file succeeded")
		}
		if err := f.Truncate(0); err == nil {
			t.Error("Truncate on a read-only file succeeded")
		}
		if b, err := f.Mmap(4096); err == nil {
			f.Munmap(b)
			t.Error("read-write Mmap on a read-only file succeeded")
		}
		// Reads and Sync still work.
		buf := make([]byte, 10)
		if _, err := f.ReadAt(buf, 0); err != nil {
			t.Errorf("ReadAt: %v", err)
		}
		if err := f.Sync(); err != nil {
			t.Errorf("Sync on a read-only file: %v", err)
		}
		mustContain(t, fsys, name, make([]byte, 8192))
	})
}

func TestFSMissingPathsAreNotExist(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		missing := join(dir, "nope")
		if _, err := fsys.Open(missing); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Open: %v", err)
		}
		if _, err := fsys.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Stat: %v", err)
		}
		if err := fsys.Remove(missing); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Remove: %v", err)
		}
		if err := fsys.Rename(missing, join(dir, "x")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Rename: %v", err)
		}
		if _, err := fsys.List(missing); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("List: %v", err)
		}
		if _, err := fsys.Create(join(missing, "f")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Create in a missing directory: %v", err)
		}
		if err := fsys.RemoveAll(missing); err != nil {
			t.Errorf("RemoveAll of a missing path: %v", err)
		}
		var pe *os.PathError
		if _, err := fsys.Open(missing); !errors.As(err, &pe) || pe.Path != missing {
			t.Errorf("Open error %v is not a *PathError naming %s", err, missing)
		}
	})
}

func TestFSReadWriteOffsets(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		f, err := fsys.Create(join(dir, "a"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, s := range []string{"abc", "def"} {
			if n, err := f.Write([]byte(s)); n != 3 || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
		}
		// WriteAt does not move the handle's offset; past the end it
		// leaves a hole of zeros.
		if _, err := f.WriteAt([]byte("Z"), 8); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("g")); err != nil {
			t.Fatal(err)
		}
		want := []byte("abcdefg\x00Z")
		st, _ := f.Stat()
		if st.Size() != int64(len(want)) || st.IsDir() || st.Name() != "a" {
			t.Fatalf("Stat = size %d dir %v name %q", st.Size(), st.IsDir(), st.Name())
		}
		buf := make([]byte, 20)
		n, err := f.ReadAt(buf, 0)
		if n != len(want) || err != io.EOF || !bytes.Equal(buf[:n], want) {
			t.Fatalf("ReadAt = %d %v %q", n, err, buf[:n])
		}
		n, err = f.ReadAt(buf[:2], 1)
		if n != 2 || err != nil || string(buf[:2]) != "bc" {
			t.Fatalf("ReadAt inside = %d %v %q", n, err, buf[:2])
		}
		if n, err := f.ReadAt(buf, 100); n != 0 || err != io.EOF {
			t.Fatalf("ReadAt past the end = %d %v", n, err)
		}
		// The handle's offset is after "g": Read returns the rest, then EOF.
		if n, err := f.Read(buf); n != 2 || err != nil || string(buf[:2]) != "\x00Z" {
			t.Fatalf("Read = %d %v %q", n, err, buf[:n])
		}
		if n, err := f.Read(buf); n != 0 || err != io.EOF {
			t.Fatalf("Read at the end = %d %v", n, err)
		}

		r, err := fsys.Open(join(dir, "a"))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("ReadAll = %q %v", got, err)
		}
	})
}

func TestFSTruncateGrowsWithZerosAndShrinks(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		name := join(dir, "a")
		f, err := fsys.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte("abcdef"))
		if err := f.Truncate(3); err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(5); err != nil {
			t.Fatal(err)
		}
		f.Close()
		mustContain(t, fsys, name, []byte("abc\x00\x00"))
	})
}

func TestFSRenameReplacesTarget(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		a, b := join(dir, "a.tmp"), join(dir, "a")
		writeFile(t, fsys, b, []byte("old"))
		writeFile(t, fsys, a, []byte("new"))
		if err := fsys.Rename(a, b); err != nil {
			t.Fatal(err)
		}
		mustContain(t, fsys, b, []byte("new"))
		mustNotExist(t, fsys, a)
		if err := fsys.SyncDir(dir); err != nil {
			t.Fatal(err)
		}

		// Directories rename with their contents.
		sub := join(dir, "t-0")
		if err := fsys.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, fsys, join(sub, "x"), []byte("x"))
		del := join(dir, "t-0.abc-delete")
		if err := fsys.Rename(sub, del); err != nil {
			t.Fatal(err)
		}
		mustContain(t, fsys, join(del, "x"), []byte("x"))
		mustNotExist(t, fsys, sub)
		// A file cannot replace a directory.
		if err := fsys.Rename(b, del); err == nil {
			t.Fatal("renaming a file over a non-empty directory succeeded")
		}
		var le *os.LinkError
		if err := fsys.Rename(join(dir, "nope"), b); !errors.As(err, &le) {
			t.Fatalf("Rename error %T is not a *LinkError", err)
		}
	})
}

func TestFSDirectories(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		p := join(dir, "x/y/z")
		if err := fsys.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := fsys.MkdirAll(p, 0o755); err != nil {
			t.Fatalf("MkdirAll of an existing directory: %v", err)
		}
		for _, n := range []string{"c", "a", "b"} {
			writeFile(t, fsys, join(p, n), []byte(n))
		}
		names, err := fsys.List(p)
		if err != nil || len(names) != 3 || names[0] != "a" || names[1] != "b" || names[2] != "c" {
			t.Fatalf("List = %v %v", names, err)
		}
		st, err := fsys.Stat(p)
		if err != nil || !st.IsDir() || st.Name() != "z" {
			t.Fatalf("Stat dir = %v %v", st, err)
		}
		if err := fsys.MkdirAll(join(p, "a/q"), 0o755); err == nil {
			t.Fatal("MkdirAll below a file succeeded")
		}
		if err := fsys.Remove(p); err == nil {
			t.Fatal("Remove of a non-empty directory succeeded")
		}
		if err := fsys.Remove(join(p, "a")); err != nil {
			t.Fatal(err)
		}
		mustNotExist(t, fsys, join(p, "a"))
		if err := fsys.RemoveAll(join(dir, "x")); err != nil {
			t.Fatal(err)
		}
		mustNotExist(t, fsys, join(dir, "x"))
		if err := fsys.SyncDir(dir); err != nil {
			t.Fatal(err)
		}
		if err := fsys.SyncDir(join(dir, "x")); err == nil {
			t.Fatal("SyncDir of a missing directory succeeded")
		}
	})
}

func TestFSMmapSharesBytesWithTheFile(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		name := join(dir, "a.index")
		f, err := fsys.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(8192); err != nil {
			t.Fatal(err)
		}
		m, err := f.Mmap(8192)
		if err != nil {
			t.Fatal(err)
		}
		if len(m) != 8192 {
			t.Fatalf("len(mapping) = %d", len(m))
		}
		copy(m[100:], "through the mapping")
		buf := make([]byte, 19)
		if _, err := f.ReadAt(buf, 100); err != nil || string(buf) != "through the mapping" {
			t.Fatalf("ReadAt after a mapped write = %q %v", buf, err)
		}
		if _, err := f.WriteAt([]byte("through the file"), 5000); err != nil {
			t.Fatal(err)
		}
		if string(m[5000:5016]) != "through the file" {
			t.Fatalf("mapping after WriteAt = %q", m[5000:5016])
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := f.Munmap(m); err != nil {
			t.Fatal(err)
		}
		got, _ := readFile(t, fsys, name)
		if string(got[100:119]) != "through the mapping" {
			t.Fatalf("file after Munmap = %q", got[100:119])
		}
		if b, err := f.Mmap(0); err != nil || b != nil {
			t.Fatalf("Mmap(0) = %v, %v", b, err)
		}
	})
}

func TestFSClosedFileFails(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		f, err := fsys.Create(join(dir, "a"))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("x")); !errors.Is(err, os.ErrClosed) {
			t.Errorf("Write after Close: %v", err)
		}
		if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
			t.Errorf("ReadAt after Close: %v", err)
		}
		if err := f.Sync(); !errors.Is(err, os.ErrClosed) {
			t.Errorf("Sync after Close: %v", err)
		}
		if err := f.Close(); err == nil {
			t.Error("second Close succeeded")
		}
	})
}

func TestFSRemovedFileStaysReadableThroughOpenHandle(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		name := join(dir, "a")
		writeFile(t, fsys, name, []byte("still here"))
		f, err := fsys.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := fsys.Remove(name); err != nil {
			t.Fatal(err)
		}
		mustNotExist(t, fsys, name)
		buf := make([]byte, 10)
		if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "still here" {
			t.Fatalf("ReadAt after Remove = %q %v", buf, err)
		}
		// A new file under the same name is a different file.
		writeFile(t, fsys, name, []byte("new"))
		if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "still here" {
			t.Fatalf("ReadAt after re-Create = %q %v", buf, err)
		}
	})
}

func TestFSMmapPastTheEndFails(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		f, err := fsys.Create(join(dir, "a"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		f.Truncate(100)
		if b, err := f.Mmap(8192); err == nil {
			f.Munmap(b)
			t.Fatal("mapping past the end of the file succeeded (the OS would SIGBUS on touching it)")
		}
	})
}

// TestMemMatchesOSOnRandomOperations drives the OS and MemFS with the same
// random sequence of namespace and handle operations and compares every
// outcome: results, error classes, bytes read, sizes and listings.
func TestMemMatchesOSOnRandomOperations(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := newRand(seed)
			osDir := t.TempDir()
			mem := NewMem()
			mem.MkdirAll("/m", 0o755)
			type side struct {
				fs  FS
				dir string
			}
			sides := [2]side{{Default, osDir}, {mem, "/m"}}
			for _, s := range sides {
				if err := s.fs.MkdirAll(join(s.dir, "sub"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			names := []string{"a", "b", "c", "sub/d"}
			var handles [][2]File
			defer func() {
				for _, h := range handles {
					h[0].Close()
					h[1].Close()
				}
			}()
			class := func(err error) string {
				switch {
				case err == nil:
					return "ok"
				case errors.Is(err, io.EOF):
					return "EOF"
				case errors.Is(err, fs.ErrNotExist):
					return "notexist"
				case errors.Is(err, os.ErrClosed):
					return "closed"
				}
				return "error"
			}
			for step := range 400 {
				var out [2]string
				name := names[rng.IntN(len(names))]
				other := names[rng.IntN(len(names))]
				op := rng.IntN(13)
				if len(handles) == 0 && op >= 6 {
					op = rng.IntN(6)
				}
				hi := 0
				if len(handles) > 0 {
					hi = rng.IntN(len(handles))
				}
				data := randBytes(rng, 1+rng.IntN(50)) // zero-length I/O on a closed os.File succeeds; MemFS fails it
				off := rng.Int64N(120)
				var opened [2]File
				for i, s := range sides {
					var res string
					switch op {
					case 0, 1, 2:
						var f File
						var err error
						switch op {
						case 0:
							f, err = s.fs.Create(join(s.dir, name))
						case 1:
							f, err = s.fs.OpenReadWrite(join(s.dir, name))
						case 2:
							f, err = s.fs.Open(join(s.dir, name))
						}
						opened[i] = f
						res = class(err)
					case 3:
						res = class(s.fs.Rename(join(s.dir, name), join(s.dir, other)))
					case 4:
						res = class(s.fs.Remove(join(s.dir, name)))
					case 5:
						st, err := s.fs.Stat(join(s.dir, name))
						res = class(err)
						if err == nil {
							res += fmt.Sprint(" size=", st.Size())
						}
						l, err := s.fs.List(join(s.dir, "sub"))
						res += fmt.Sprint(" list=", l, class(err))
					case 6:
						n, err := handles[hi][i].Write(data)
						res = fmt.Sprint(n, " ", class(err))
					case 7:
						n, err := handles[hi][i].WriteAt(data, off)
						res = fmt.Sprint(n, " ", class(err))
					case 8:
						buf := make([]byte, len(data))
						n, err := handles[hi][i].Read(buf)
						res = fmt.Sprintf("%d %s %x", n, class(err), buf[:n])
					case 9:
						buf := make([]byte, len(data))
						n, err := handles[hi][i].ReadAt(buf, off)
						res = fmt.Sprintf("%d %s %x", n, class(err), buf[:n])
					case 10:
						res = class(handles[hi][i].Truncate(off))
					case 11:
						res = class(handles[hi][i].Sync())
						st, err := handles[hi][i].Stat()
						if err == nil {
							res += fmt.Sprint(" size=", st.Size())
						}
					case 12:
						res = class(handles[hi][i].Close())
					}
					out[i] = res
				}
				if opened[0] != nil && opened[1] != nil {
					handles = append(handles, opened)
				} else {
					for _, f := range opened {
						if f != nil {
							f.Close()
						}
					}
				}
				if out[0] != out[1] {
					t.Fatalf("step %d op %d on %s/%s handle %d: os %q, mem %q", step, op, name, other, hi, out[0], out[1])
				}
			}
			// Same files, same bytes.
			for _, n := range names {
				a, aok := readFile(t, Default, join(osDir, n))
				b, bok := readFile(t, mem, join("/m", n))
				if aok != bok || !bytes.Equal(a, b) {
					t.Fatalf("%s differs at the end: os %v %d bytes, mem %v %d bytes", n, aok, len(a), bok, len(b))
				}
			}
		})
	}
}

func TestFSLockIsExclusiveUntilClosed(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		name := join(dir, ".lock")
		l, err := fsys.Lock(name)
		if err != nil {
			t.Fatal(err)
		}
		_, err = fsys.Lock(name)
		var le *LockedError
		if !errors.Is(err, ErrLocked) || !errors.As(err, &le) || le.Path != name {
			t.Fatalf("second Lock: %v, want a *LockedError for %s", err, name)
		}
		if fsys == Default && le.Holder != fmt.Sprintf("pid=%d", os.Getpid()) {
			t.Fatalf("holder %q, want this process's pid", le.Holder)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l2, err := fsys.Lock(name)
		if err != nil {
			t.Fatalf("Lock after Close: %v", err)
		}
		l2.Close()
	})
}

func TestFSFreeSpace(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, dir string) {
		n, err := fsys.FreeSpace(dir)
		if err != nil || n <= 0 {
			t.Fatalf("FreeSpace(%s) = %d, %v", dir, n, err)
		}
		if _, err := fsys.FreeSpace(join(dir, "missing")); err == nil {
			t.Fatal("FreeSpace of a missing path: no error")
		}
		if m, ok := fsys.(*MemFS); ok {
			m.SetFreeSpace(7)
			if n, _ := fsys.FreeSpace(dir); n != 7 {
				t.Fatalf("after SetFreeSpace(7): %d", n)
			}
		}
	})
}
