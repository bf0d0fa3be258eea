package testutil

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// ClosedWithin reads from c, discarding what arrives, until the peer
// closes it (or the read fails otherwise) and returns nil, or returns an
// error once d has passed with c still open. It sets c's read deadline and
// uses no testing.TB, so a test may call it on goroutines of its own.
func ClosedWithin(c net.Conn, d time.Duration) error {
	c.SetReadDeadline(time.Now().Add(d))
	var b [512]byte
	for {
		if _, err := c.Read(b[:]); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return fmt.Errorf("connection still open after %v", d)
			}
			return nil
		}
	}
}
