package testutil

import (
	"net"
	"testing"
	"time"
)

func TestClosedWithin(t *testing.T) {
	// The peer writes, then closes: what it wrote is read past.
	a, b := net.Pipe()
	go func() { b.Write([]byte("bye")); b.Close() }()
	if err := ClosedWithin(a, 5*time.Second); err != nil {
		t.Fatalf("closed peer: %v", err)
	}
	a.Close()

	// A silent peer that keeps the connection open is reported.
	a, b = net.Pipe()
	defer a.Close()
	defer b.Close()
	start := time.Now()
	if err := ClosedWithin(a, 50*time.Millisecond); err == nil {
		t.Fatal("open connection reported closed")
	}
	if el := time.Since(start); el < 50*time.Millisecond {
		t.Fatalf("gave up after %v, before the deadline", el)
	}
}
