package controller

import "go.etcd.io/raft/v3/raftpb"

// Receiver is what a [Transport] delivers to: the node's Raft goroutine
// behind bounded queues. Its methods never block.
type Receiver interface {
	// Receive hands over a message from a peer. The receiver owns it.
	Receive(m *raftpb.Message)
	// ReportUnreachable tells raft that a message to id could not be sent.
	ReportUnreachable(id uint64)
	// ReportSnapshot tells raft whether a MsgSnap to id was delivered.
	ReportSnapshot(id uint64, failed bool)
}

// Transport moves Raft messages between controllers. The TCP transport
// ([TCPTransport]) and the simulated network ([SimNetwork]) implement it.
//
// Thread-safety: all methods are safe for concurrent use.
// Buffers: Send takes ownership of nothing; messages are serialised or
// cloned before Send returns or are immutable (raft never mutates a
// message after emitting it).
// Errors: Start returns [ErrStopped] after Stop. Send never fails: a message
// that cannot be queued is dropped and reported unreachable (raft retries).
// Idempotence: Stop may be called more than once.
type Transport interface {
	// Start begins delivering inbound messages to r.
	Start(r Receiver) error
	// Send queues msgs for their destinations without blocking.
	Send(msgs []*raftpb.Message)
	// Stop closes connections and waits for every goroutine it started.
	Stop()
}
