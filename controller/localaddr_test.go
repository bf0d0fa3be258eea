package controller

import (
	"context"
	"net"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/strata-io/strata/controller/metadata"
)

type nopReceiver struct{}

func (nopReceiver) Receive(*raftpb.Message)     {}
func (nopReceiver) ReportUnreachable(uint64)    {}
func (nopReceiver) ReportSnapshot(uint64, bool) {}

// acceptFrom accepts one connection on ln and returns its source IP.
func acceptFrom(t *testing.T, ln net.Listener) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		got <- c.RemoteAddr().(*net.TCPAddr).IP.String()
		c.Close()
	}()
	select {
	case ip := <-got:
		return ip
	case <-time.After(10 * time.Second):
		t.Fatal("no connection")
		return ""
	}
}

// TestDialsFromLocalAddr: the client and the Raft transport dial from
// LocalAddr, so a fault-injecting proxy between nodes on loopback sees
// which node connects (issue 14 fault tests).
func TestDialsFromLocalAddr(t *testing.T) {
	local := &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	cl := NewClient(ClientOptions{Addrs: []string{ln.Addr().String()}, LocalAddr: local})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	go cl.BrokerHeartbeat(ctx, metadata.BrokerHeartbeatRequest{})
	if ip := acceptFrom(t, ln); ip != "127.0.0.3" {
		t.Fatalf("client dialed from %s, want 127.0.0.3", ip)
	}
	cancel()

	tr := NewTCPTransport(TCPTransportOptions{ID: 1, Peers: map[uint64]string{2: ln.Addr().String()}, LocalAddr: local})
	if err := tr.Start(nopReceiver{}); err != nil {
		t.Fatal(err)
	}
	defer tr.Stop()
	if ip := acceptFrom(t, ln); ip != "127.0.0.3" {
		t.Fatalf("transport dialed from %s, want 127.0.0.3", ip)
	}
}
