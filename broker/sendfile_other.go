//go:build !linux

package broker

import (
	"net"
	"os"
)

// sendfile is Linux-only; elsewhere responses copy through a buffer.
func sendfile(*net.TCPConn, *os.File, int64, int64) (bool, error) { return false, nil }
