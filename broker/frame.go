package broker

import (
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/vfs"
)

// frame is one encoded response: buf holds every byte the broker builds
// (size prefix, header, body), and splices say where record bytes from
// segment files go between them. writeTo sends buf[:s0.at], then s0's file
// region, then buf[s0.at:s1.at], then s1's region, and so on: record data
// never enters the Go heap on the sendfile path.
type frame struct {
	buf     []byte
	splices []splice // ascending at
	// later, if set, is a response still being completed (an acks=-1
	// produce waiting for the high watermark): the writer waits for it, in
	// the connection's order, and sends its frame instead; buf and
	// splices are empty.
	later *deferred
	// closeAfter closes the connection once the frame is written (a
	// failed SASL exchange's answer).
	closeAfter bool
}

// deferred is a response completed after its handler returned: f or err
// is set before done is closed. Whoever completes it watches the
// connection's context, so a dying connection's writer is not held.
type deferred struct {
	done chan struct{}
	f    *frame
	err  error
}

// splice is a file region sent at position at of the frame's buf.
type splice struct {
	at   int
	view storage.ReadView
}

// size is the number of bytes the frame puts on the wire.
func (f *frame) size() int64 {
	n := int64(len(f.buf))
	for _, s := range f.splices {
		n += s.view.Size
	}
	return n
}

func (f *frame) release() {
	for _, s := range f.splices {
		s.view.Release()
	}
	f.splices = nil
}

func (f *frame) writeTo(nc net.Conn) error {
	if len(f.splices) > 0 && f.size() <= coalesceMax {
		return f.writeCoalesced(nc)
	}
	return f.writeSpliced(nc)
}

// writeSpliced sends the frame's bytes with write and its regions with
// sendfile (or through a pooled buffer when either side is not an OS
// file or a TCP socket).
func (f *frame) writeSpliced(nc net.Conn) error {
	pos := 0
	for _, s := range f.splices {
		if _, err := nc.Write(f.buf[pos:s.at]); err != nil {
			return err
		}
		pos = s.at
		if err := sendView(nc, s.view); err != nil {
			return err
		}
	}
	_, err := nc.Write(f.buf[pos:])
	return err
}

// coalesceMax is the largest frame with file regions sent as one write:
// its regions are read into a pooled buffer between the frame's own bytes.
// A frame of a few small regions (a fetch at the log's tail: a follower's
// or a tailing consumer's, the replication path's common case) otherwise
// costs two syscalls per region plus one, and reaches the reader as as many
// packets, each a wakeup there. Copying up to 32 KiB from the page cache
// costs less than the calls it saves; larger frames keep sendfile's
// zero-copy (BenchmarkFrameWrite measures both sides of the threshold).
const coalesceMax = 32 << 10

var coalescePool = sync.Pool{New: func() any { b := make([]byte, 0, coalesceMax); return &b }}

// writeCoalesced sends a frame of at most coalesceMax bytes with one write.
func (f *frame) writeCoalesced(nc net.Conn) error {
	bp := coalescePool.Get().(*[]byte)
	defer coalescePool.Put(bp)
	out := (*bp)[:0]
	pos := 0
	for _, s := range f.splices {
		out = append(out, f.buf[pos:s.at]...)
		pos = s.at
		n, sz := len(out), int(s.view.Size)
		out = out[:n+sz] // fits: the whole frame is at most coalesceMax
		if got, err := s.view.File.ReadAt(out[n:], s.view.Pos); got < sz {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("broker: read segment: %w", err)
		}
	}
	out = append(out, f.buf[pos:]...)
	_, err := nc.Write(out)
	return err
}

// sentfileBytes counts the bytes the frame writer sent with sendfile(2)
// (tests check that remote data takes that path too).
var sentfileBytes atomic.Int64

var copyBufPool = sync.Pool{New: func() any { b := make([]byte, 128<<10); return &b }}

// regionFile is a view's file made of regions of other files and of
// buffers (the remote tier's chunk cache, tiering.RemoteView): each file
// region is sent like a local segment's, each buffer written as it is.
type regionFile interface {
	Regions(off, n int64, fn func(f vfs.File, mem []byte, at, length int64) error) error
}

// sendView sends a view's file region: with sendfile(2) when the file is an
// OS file and the connection a TCP socket, else through a pooled buffer
// (MemFS, errfs, TLS later).
func sendView(nc net.Conn, v storage.ReadView) error {
	if v.Size == 0 {
		return nil
	}
	if rf, ok := v.File.(regionFile); ok {
		return rf.Regions(v.Pos, v.Size, func(f vfs.File, mem []byte, at, length int64) error {
			if f == nil {
				_, err := nc.Write(mem)
				return err
			}
			return sendView(nc, storage.ReadView{File: f, Pos: at, Size: length})
		})
	}
	if of, ok := v.File.(vfs.OSFile); ok {
		if tc, ok := nc.(*net.TCPConn); ok {
			if done, err := sendfile(tc, of.OSFile(), v.Pos, v.Size); done {
				if err == nil {
					sentfileBytes.Add(v.Size)
				}
				return err
			}
		}
	}
	return copyView(nc, v)
}

func copyView(w io.Writer, v storage.ReadView) error {
	bp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bp)
	buf := *bp
	for off, end := v.Pos, v.Pos+v.Size; off < end; {
		n := int(min(int64(len(buf)), end-off))
		got, err := v.File.ReadAt(buf[:n], off)
		if got < n {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("broker: read segment: %w", err)
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}
