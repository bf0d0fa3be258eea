package broker

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// sendfile copies f[off:off+n] to the socket with sendfile(2), at an
// explicit offset (the file's own position is never used, so concurrent
// fetches share one descriptor). It waits on Go's poller when the socket
// buffer is full, so write deadlines apply. done is false when sendfile is
// unavailable before any byte moved (the caller copies instead).
func sendfile(tc *net.TCPConn, f *os.File, off, n int64) (done bool, err error) {
	rc, err := tc.SyscallConn()
	if err != nil {
		return false, nil
	}
	fc, err := f.SyscallConn()
	if err != nil {
		return false, nil
	}
	sent := int64(0)
	var serr error
	cerr := fc.Control(func(sfd uintptr) {
		werr := rc.Write(func(dfd uintptr) bool {
			for sent < n {
				chunk := int(min(n-sent, 1<<30))
				w, err := unix.Sendfile(int(dfd), int(sfd), &off, chunk)
				if w > 0 {
					sent += int64(w)
				}
				switch {
				case errors.Is(err, unix.EAGAIN):
					return false // wait until writable
				case errors.Is(err, unix.EINTR):
					continue
				case err != nil:
					serr = err
					return true
				case w == 0:
					serr = io.ErrUnexpectedEOF // the file is shorter than the view
					return true
				}
			}
			return true
		})
		if serr == nil {
			serr = werr
		}
	})
	if cerr != nil && serr == nil {
		serr = cerr
	}
	if serr != nil {
		if sent == 0 && (errors.Is(serr, unix.EINVAL) || errors.Is(serr, unix.ENOSYS)) {
			return false, nil
		}
		return true, fmt.Errorf("broker: sendfile: %w", serr)
	}
	return true, nil
}
