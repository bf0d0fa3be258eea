package broker

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/vfs"
)

// memFile is a vfs.File that is not an OS file (so the copy path runs).
type memFile struct {
	vfs.File
	data []byte
}

func (m memFile) ReadAt(b []byte, off int64) (int, error) {
	if off >= int64(len(m.data)) {
		return 0, io.EOF
	}
	n := copy(b, m.data[off:])
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return tcpPairFrom(t, ln)
}

// TestFrameSplicesFileRegionsBetweenBufferBytes writes a frame with three
// regions (one larger than the socket buffer) through sendfile and through
// the buffered copy, and checks the receiver sees exactly buf and regions
// interleaved at the splice points.
func TestFrameSplicesFileRegionsBetweenBufferBytes(t *testing.T) {
	data := make([]byte, 3<<20)
	rand.Read(data)
	path := filepath.Join(t.TempDir(), "seg.log")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	osf, err := vfs.Default.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer osf.Close()
	if _, ok := osf.(vfs.OSFile); !ok {
		t.Fatal("vfs.Default files are not OS files: sendfile would never run")
	}
	buf := []byte("AAAAbbbbbCCCCCCCdd")
	ats := []int{4, 9, 16}
	for _, tc := range []struct {
		name    string
		file    vfs.File
		regions [][2]int64
	}{
		{"sendfile", osf, [][2]int64{{10, 100}, {5000, 2 << 20}, {3<<20 - 7, 7}}},
		{"copy", memFile{data: data}, [][2]int64{{10, 100}, {5000, 2 << 20}, {3<<20 - 7, 7}}},
		// Frames up to coalesceMax go out in one write, the regions
		// read between the frame's bytes; one exactly at the limit too.
		{"coalesced", osf, [][2]int64{{10, 100}, {5000, 3000}, {3<<20 - 7, 7}}},
		{"coalesced-mem", memFile{data: data}, [][2]int64{{10, 100}, {5000, 3000}, {3<<20 - 7, 7}}},
		{"coalesced-limit", osf, [][2]int64{{10, 100}, {5000, coalesceMax - 100 - 7 - 18}, {3<<20 - 7, 7}}},
	} {
		regions := tc.regions
		t.Run(tc.name, func(t *testing.T) {
			f := &frame{buf: buf}
			var want []byte
			pos := 0
			for i, r := range regions {
				f.splices = append(f.splices, splice{at: ats[i], view: storage.ReadView{File: tc.file, Pos: r[0], Size: r[1]}})
				want = append(want, buf[pos:ats[i]]...)
				want = append(want, data[r[0]:r[0]+r[1]]...)
				pos = ats[i]
			}
			want = append(want, buf[pos:]...)
			if f.size() != int64(len(want)) {
				t.Fatalf("size %d, want %d", f.size(), len(want))
			}
			a, b := tcpPair(t)
			got := make(chan []byte, 1)
			go func() { g, _ := io.ReadAll(io.LimitReader(b, int64(len(want)))); got <- g }()
			if err := f.writeTo(a); err != nil {
				t.Fatal(err)
			}
			if g := <-got; !bytes.Equal(g, want) {
				t.Fatalf("received %d bytes differing from the %d expected", len(g), len(want))
			}
		})
	}
	// sendfile itself takes the OS file (done=true), not the fallback.
	a, b := tcpPair(t)
	go io.Copy(io.Discard, b)
	if done, err := sendfile(a, osf.(vfs.OSFile).OSFile(), 0, 1<<20); !done || err != nil {
		t.Fatalf("sendfile done=%v err=%v", done, err)
	}
	// A view past the end of the file is an error, not a hang, on both paths.
	if err := sendView(a, storage.ReadView{File: osf, Pos: 3<<20 - 10, Size: 100}); err == nil {
		t.Fatal("short file: no error")
	}
	short := &frame{buf: buf, splices: []splice{{at: 4, view: storage.ReadView{File: osf, Pos: 3<<20 - 10, Size: 100}}}}
	if err := short.writeTo(a); err == nil {
		t.Fatal("short file, coalesced frame: no error")
	}
}

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// tcpPairFrom connects to ln and returns both ends.
func tcpPairFrom(tb testing.TB, ln net.Listener) (*net.TCPConn, *net.TCPConn) {
	tb.Helper()
	acc := make(chan net.Conn, 1)
	go func() { c, _ := ln.Accept(); acc <- c }()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	b := <-acc
	if b == nil {
		tb.Fatal("accept failed")
	}
	tb.Cleanup(func() { a.Close(); b.Close() })
	return a.(*net.TCPConn), b.(*net.TCPConn)
}

// BenchmarkFrameWrite sends a fetch-like frame (a 100-byte head, one file
// region, a 10-byte tail) over loopback TCP both ways, at sizes around
// coalesceMax: one write of the region read into a buffer, or write,
// sendfile, write. It sets where the threshold lies on a machine.
func BenchmarkFrameWrite(b *testing.B) {
	data := make([]byte, 1<<20)
	rand.Read(data)
	path := filepath.Join(b.TempDir(), "seg.log")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	osf, err := vfs.Default.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer osf.Close()
	ln, err := netListen()
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	a, r := tcpPairFrom(b, ln)
	defer a.Close()
	defer r.Close()
	go io.Copy(io.Discard, r)
	buf := make([]byte, 110)
	for _, size := range []int64{1 << 10, 8 << 10, 32<<10 - 110, 128 << 10} {
		for _, way := range []string{"coalesced", "spliced"} {
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, way), func(b *testing.B) {
				f := &frame{buf: buf, splices: []splice{{at: 100, view: storage.ReadView{File: osf, Pos: 4096, Size: size}}}}
				b.SetBytes(f.size())
				b.ReportAllocs()
				for b.Loop() {
					var err error
					if way == "coalesced" && f.size() <= coalesceMax {
						err = f.writeCoalesced(a)
					} else if way == "coalesced" {
						b.Skip("above coalesceMax")
					} else {
						err = f.writeSpliced(a)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
