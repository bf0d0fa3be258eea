package tiering

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/strata-io/strata/storage/vfs"
	"github.com/strata-io/strata/tiering/objstore"
)

// A view's file regions sendfile(2)d to a socket reach the peer as they
// were when sent, even when the peer reads them only after the view is
// released and the next chunk has taken the chunk's place in the cache.
// sendfile hands the socket references to the file's page-cache pages,
// not a copy: on loopback they wait in the peer's receive queue until it
// reads, so a chunk file written over in place afterwards (as the cache
// once reused the files of removed chunks) sends the new chunk's bytes in
// the old one's place: the consumer of TestTieringEndToEnd skipped whole
// segments.
func TestReaderViewSentWithSendfileKeepsItsBytes(t *testing.T) {
	const chunk = 16 << 10 // a view of one chunk fits in the socket buffers
	l := rdNewLog(t)
	l.fillFixed(2, chunk-2000, 1000) // segments of one chunk each
	mem := objstore.NewMemStore()
	segs := l.upload(mem, "p")
	a, b := segs[0], segs[1]
	if a.SizeBytes > chunk || b.SizeBytes > chunk {
		t.Fatalf("segments of %d and %d bytes, want at most one %d-byte chunk", a.SizeBytes, b.SizeBytes, chunk)
	}
	// One chunk of cache: b's chunk takes the file a's chunk leaves.
	r := rdReader(t, mem, func(c *ReaderConfig) { c.ChunkBytes = chunk; c.CacheBytes = chunk; c.ReadAheadChunks = -1 })
	r.cache.memMax = 0 // views hold the chunks' files
	ctx := rdCtx(t, 30*time.Second)
	want, _, _ := l.localRead(a.BaseOffset, chunk, a)

	if _, err := r.Read(ctx, a, a.BaseOffset, chunk); err != nil {
		t.Fatal(err)
	}
	r.wg.Wait() // a's chunk file is written
	v, err := r.ReadView(ctx, a, a.BaseOffset, chunk)
	if err != nil {
		t.Fatal(err)
	}
	if v.Size != int64(len(want)) {
		t.Fatalf("view of %d bytes, local read %d", v.Size, len(want))
	}

	snd, rcv := rdTCPPair(t)
	files := 0
	err = v.sp.Regions(0, v.Size, func(f vfs.File, m []byte, at, n int64) error {
		if f == nil {
			_, err := snd.Write(m)
			return err
		}
		files++
		return rdSendfile(snd, f.(vfs.OSFile).OSFile().Fd(), at, n)
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("the view holds no chunk file: nothing went through sendfile")
	}
	v.Release() // as the broker does once the response is written

	// b's chunk takes a's place in the one-chunk cache.
	if _, err := r.Read(ctx, b, b.BaseOffset, chunk); err != nil {
		t.Fatal(err)
	}
	r.wg.Wait()
	if r.cache.contains(chunkKey{a.Key("p", ExtLog), 0}) || !r.cache.contains(chunkKey{b.Key("p", ExtLog), 0}) {
		t.Fatal("b's chunk did not take a's place in the cache")
	}

	got := make([]byte, len(want))
	if err := rcv.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(rcv, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the peer read other bytes than were sent: the chunk's file was written over under the socket's pages (first batch's base offset %d, want %d)",
			rdBaseOffsetOf(got), rdBaseOffsetOf(want))
	}
}

// rdTCPPair returns both ends of a loopback TCP connection.
func rdTCPPair(t *testing.T) (snd, rcv *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		ch <- res{c, err}
	}()
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := ln.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	a := <-ch
	if a.err != nil {
		t.Fatal(a.err)
	}
	t.Cleanup(func() { a.c.Close() })
	return c.(*net.TCPConn), a.c.(*net.TCPConn)
}

// rdSendfile sends n bytes of the file fd from off to c with sendfile(2),
// as the broker's frame writer does, within a deadline.
func rdSendfile(c *net.TCPConn, fd uintptr, off, n int64) error {
	if err := c.SetWriteDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	werr := rc.Write(func(sock uintptr) bool {
		for n > 0 {
			k, err := unix.Sendfile(int(sock), int(fd), &off, int(n))
			if k > 0 {
				n -= int64(k)
			}
			switch {
			case errors.Is(err, unix.EAGAIN):
				return false // wait until writable
			case err != nil:
				serr = err
				return true
			case k == 0:
				serr = io.ErrUnexpectedEOF
				return true
			}
		}
		return true
	})
	if werr != nil {
		return werr
	}
	return serr
}

// rdBaseOffsetOf is the base offset of the batch at the start of b (-1:
// too short).
func rdBaseOffsetOf(b []byte) int64 {
	if len(b) < 8 {
		return -1
	}
	var o int64
	for _, x := range b[:8] {
		o = o<<8 | int64(x)
	}
	return o
}
