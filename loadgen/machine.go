package loadgen

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"
)

// MeasureMachine measures the machine's raw limits with size bytes: a
// sequential write to a file in dir with one fsync at the end, and
// sendfile(2) of that file to a loopback TCP socket drained by a reader
// (io.Copy from *os.File to *net.TCPConn uses sendfile on Linux). The
// file is removed afterwards.
func MeasureMachine(ctx context.Context, dir string, size int64) (*Machine, error) {
	if size < 1<<20 {
		return nil, fmt.Errorf("loadgen: machine: size %d, want at least 1 MiB", size)
	}
	f, err := os.CreateTemp(dir, "loadgen-machine-*")
	if err != nil {
		return nil, fmt.Errorf("loadgen: machine: %w", err)
	}
	name := f.Name()
	defer os.Remove(name)
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	start := time.Now()
	for n := int64(0); n < size; n += int64(len(buf)) {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if _, err := f.Write(buf[:min(int64(len(buf)), size-n)]); err != nil {
			return nil, fmt.Errorf("loadgen: machine: write %s: %w", filepath.Dir(name), err)
		}
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("loadgen: machine: fsync: %w", err)
	}
	m := &Machine{SeqWriteMBPerSec: float64(size) / 1e6 / time.Since(start).Seconds()}
	sent, secs, err := sendfileLoopback(ctx, f, size)
	if err != nil {
		return nil, err
	}
	if sent != size {
		return nil, fmt.Errorf("loadgen: machine: sendfile delivered %d of %d bytes", sent, size)
	}
	m.LoopbackSendfileMBs = float64(size) / 1e6 / secs
	return m, nil
}

// sendfileLoopback sends f's first size bytes to a 127.0.0.1 socket and
// returns how many bytes the reader received and the seconds it took.
func sendfileLoopback(ctx context.Context, f *os.File, size int64) (int64, float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, 0, fmt.Errorf("loadgen: machine: %w", err)
	}
	defer ln.Close()
	type got struct {
		n   int64
		err error
	}
	recv := make(chan got, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			recv <- got{0, err}
			return
		}
		defer c.Close()
		n, err := io.Copy(io.Discard, c)
		recv <- got{n, err}
	}()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		return 0, 0, fmt.Errorf("loadgen: machine: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		c.Close()
		return 0, 0, err
	}
	start := time.Now()
	_, err = io.Copy(c.(*net.TCPConn), io.LimitReader(f, size))
	c.Close()
	if err != nil {
		return 0, 0, fmt.Errorf("loadgen: machine: sendfile: %w", err)
	}
	g := <-recv
	secs := time.Since(start).Seconds()
	if g.err != nil {
		return 0, 0, fmt.Errorf("loadgen: machine: reader: %w", g.err)
	}
	return g.n, secs, nil
}
