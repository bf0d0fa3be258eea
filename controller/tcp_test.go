package controller

import (
	"bufio"
	"net"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// acceptRaft serves inbound Raft streams on ln into t until ln closes.
func acceptRaft(ln net.Listener, t *TCPTransport, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			fr := &frameReader{conn: conn, br: bufio.NewReader(conn), timeout: time.Minute}
			kind, hello, err := fr.next(maxFirstFrame)
			if err != nil || kind != kindRaftHello {
				return
			}
			t.serveConn(conn, fr, hello)
		}()
	}
}

// TestTCPTransportDropsWhileDownAndReconnects: while the peer is down its
// bounded queue drops and reports unreachable (never blocks the sender);
// once it listens again the transport reconnects on its own and delivers.
func TestTCPTransportDropsWhileDownAndReconnects(t *testing.T) {
	addr, err := netListenClose()
	if err != nil {
		t.Fatal(err)
	}
	ra, rb := &recorder{}, &recorder{}
	a := NewTCPTransport(TCPTransportOptions{ID: 1, Peers: map[uint64]string{2: addr}, QueueLen: 8,
		DialTimeout: 200 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Logger: testLogger()})
	if err := a.Start(ra); err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	start := time.Now()
	for i := range 200 {
		a.Send([]*raftpb.Message{msg(1, 2, uint64(i), raftpb.MsgApp)})
	}
	a.Send([]*raftpb.Message{msg(1, 2, 999, raftpb.MsgSnap)})
	if el := time.Since(start); el > time.Second {
		t.Fatalf("Send blocked for %v with the peer down", el)
	}
	if !waitFor(testWait, func() bool {
		ra.mu.Lock()
		defer ra.mu.Unlock()
		return len(ra.unreachable) >= 190 && len(ra.snaps) == 1
	}) {
		t.Fatal("the down peer's messages were not all reported")
	}
	ra.mu.Lock()
	firstSnap := ra.snaps[0]
	ra.mu.Unlock()
	if !firstSnap {
		t.Fatal("a MsgSnap to a down peer reported delivered")
	}

	// The peer comes up on the same address.
	var ln net.Listener
	if !waitFor(testWait, func() bool { ln, err = net.Listen("tcp", addr); return err == nil }) {
		t.Fatal(err)
	}
	// b knows a as a voter (an inbound stream from a non-voter is refused);
	// a does not listen, so b's own dialing to it just fails.
	aAddr, err := netListenClose()
	if err != nil {
		t.Fatal(err)
	}
	b := NewTCPTransport(TCPTransportOptions{ID: 2, Peers: map[uint64]string{1: aAddr}, Logger: testLogger()})
	if err := b.Start(rb); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go acceptRaft(ln, b, &wg)
	defer func() {
		ln.Close()
		b.Stop()
		wg.Wait()
	}()
	// Keep sending (raft would retransmit) until one gets through.
	if !waitFor(testWait, func() bool {
		a.Send([]*raftpb.Message{msg(1, 2, 5000, raftpb.MsgHeartbeat)})
		return rb.count() > 0
	}) {
		t.Fatal("no delivery after the peer came back")
	}
	before := rb.count()
	a.Send([]*raftpb.Message{msg(1, 2, 6000, raftpb.MsgSnap)})
	if !waitFor(testWait, func() bool { return rb.count() > before }) {
		t.Fatal("snapshot not delivered")
	}
	if !waitFor(testWait, func() bool {
		ra.mu.Lock()
		defer ra.mu.Unlock()
		return len(ra.snaps) == 2 && !ra.snaps[1]
	}) {
		t.Fatal("snapshot reports are not [failed, finished]")
	}
	rb.mu.Lock()
	last := rb.got[len(rb.got)-1]
	rb.mu.Unlock()
	if last.GetFrom() != 1 || last.GetTo() != 2 || last.GetIndex() != 6000 {
		t.Fatalf("delivered %v", last)
	}
}
