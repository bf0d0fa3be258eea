package controller

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// server is the CONTROLLER listener's accept loop. Each connection gets a
// goroutine that reads the first frame and becomes either a Raft inbound
// stream (handed to the TCP transport) or an RPC connection serving the
// [Service] methods one request at a time. closeConns closes them all;
// wait waits for their goroutines.
type server struct {
	c   *Controller
	tcp *TCPTransport // nil when Raft uses another transport

	// mu guards conns and closed.
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
	ctx    context.Context // cancelled by closeConns: ends watches
	cancel context.CancelFunc

	saslLog atomic.Int64 // unix nanos of the last SASL refusal logged
}

func newServer(c *Controller, tcp *TCPTransport) *server {
	ctx, cancel := context.WithCancel(context.Background())
	return &server{c: c, tcp: tcp, conns: map[net.Conn]struct{}{}, ctx: ctx, cancel: cancel}
}

func (s *server) serve(ln net.Listener) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return // listener closed
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			conn.Close()
			return
		}
		s.conns[conn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.handle(conn)
	}
}

func (s *server) closeConns() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.cancel()
}

func (s *server) wait() { s.wg.Wait() }

func (s *server) handle(conn net.Conn) {
	defer s.wg.Done()
	defer func() {
		conn.Close()
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
	}()
	// Until the peer has identified itself it gets maxFirstFrame and
	// FrameReadTimeout: a connection that sends nothing, or claims a large
	// first frame, costs a few KiB and is closed. The read buffer stays
	// small afterwards too: payloads larger than it are read straight into
	// their own buffers.
	br := bufio.NewReaderSize(conn, maxFirstFrame)
	fr := &frameReader{conn: conn, br: br, budget: s.c.reqMem, ctx: s.ctx, timeout: s.c.cfg.FrameReadTimeout}
	defer fr.release()
	if s.c.sasl != nil && !s.authenticate(conn, fr) { // sasl.go
		return
	}
	conn.SetReadDeadline(time.Now().Add(s.c.cfg.FrameReadTimeout))
	kind, payload, err := fr.next(maxFirstFrame)
	if err != nil {
		if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
			s.c.cfg.Logger.Debug("controller: closing connection before its first frame", "remote", conn.RemoteAddr().String(), "err", err)
		}
		return
	}
	switch kind {
	case kindRaftHello:
		if s.tcp != nil {
			s.tcp.serveConn(conn, fr, payload)
		}
		return
	case kindClientHello:
		theirs, err := decodeClientHello(payload)
		if err != nil {
			return
		}
		if kind, payload, err = fr.next(maxFrame); err != nil || kind != kindRequest {
			return
		}
		if ours := s.c.ClusterID(); ours != "" && theirs != "" && theirs != ours {
			s.refuseClient(conn, theirs, ours)
			return
		}
	case kindRequest:
	default:
		return
	}
	bw := bufio.NewWriterSize(conn, 16<<10) // larger writes go straight to the socket
	for {
		if len(payload) < 2 {
			return
		}
		method, fwd, body := payload[0], payload[1]&flagForwarded != 0, payload[2:]
		if method == methodWatch {
			s.watch(conn, bw, body)
			return
		}
		resp := s.dispatch(method, fwd, body)
		b, err := json.Marshal(resp)
		if err != nil {
			b, _ = json.Marshal(response{Err: toWireErr(err)})
		}
		if err := writeFrame(bw, kindResponse, b); err != nil {
			return
		}
		if err := bw.Flush(); err != nil {
			return
		}
		kind, payload, err = fr.next(maxFrame)
		if err != nil || kind != kindRequest {
			return
		}
	}
}

// refuseClient answers the first request of a client of another cluster
// with INCONSISTENT_CLUSTER_ID (what Kafka's controller answers a broker
// registering with another cluster's id), without looking at it.
func (s *server) refuseClient(conn net.Conn, theirs, ours string) {
	s.c.metrics.refusedClients.Inc()
	s.c.cfg.Logger.Warn("controller: refused a client of another cluster", "remote", conn.RemoteAddr().String(), "cluster.id", theirs, "ours", ours)
	err := fmt.Errorf("%w: the client belongs to cluster %s, this controller to %s", kerr.InconsistentClusterID, theirs, ours)
	b, _ := json.Marshal(response{Err: toWireErr(err)})
	conn.SetWriteDeadline(time.Now().Add(s.c.cfg.FrameReadTimeout))
	bw := bufio.NewWriter(conn)
	if writeFrame(bw, kindResponse, b) == nil {
		bw.Flush()
	}
}

// dispatch answers one request through its entry in the rpc table (the
// entry calls the Controller, which forwards to the leader unless the
// request was itself forwarded).
func (s *server) dispatch(method byte, fwd bool, body []byte) response {
	r, ok := rpcsByMethod[method]
	if !ok {
		return badRequest(fmt.Errorf("unknown method %d", method))
	}
	return r.serve(s.ctx, s.c, fwd, body)
}

// watch streams deltas until the connection or the controller closes. A
// client that asked for keepalives (watchReq.KeepaliveMs) gets one after
// every such interval without a delta. Every frame must leave within
// FrameReadTimeout: a client that vanished silently costs that long, not
// the TCP retransmission timeout.
func (s *server) watch(conn net.Conn, bw *bufio.Writer, body []byte) {
	var req watchReq
	if err := json.Unmarshal(body, &req); err != nil {
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	// The client sends nothing more; a read returning means it hung up.
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		var b [1]byte
		conn.Read(b[:])
		cancel()
	}()
	defer func() {
		conn.Close()
		<-readerDone
	}()
	send := func(kind byte, payload []byte) error {
		conn.SetWriteDeadline(time.Now().Add(s.c.cfg.FrameReadTimeout))
		if err := writeFrame(bw, kind, payload); err != nil {
			return err
		}
		return bw.Flush()
	}
	w, err := s.c.Watch(ctx, req.From)
	if err != nil {
		b, _ := json.Marshal(response{Err: toWireErr(err)})
		send(kindResponse, b)
		return
	}
	defer w.Close()
	keepalive := time.Duration(req.KeepaliveMs) * time.Millisecond
	for {
		d, err := s.nextOrIdle(ctx, w, keepalive)
		if errors.Is(err, errWatchIdle) {
			b, _ := json.Marshal(keepaliveW{Offset: int64(s.c.node.applied.Load())})
			if err := send(kindKeepalive, b); err != nil {
				return
			}
			continue
		}
		if err != nil {
			b, _ := json.Marshal(response{Err: toWireErr(err)})
			send(kindResponse, b)
			return
		}
		dw, err := deltaToW(d)
		if err != nil {
			return
		}
		b, err := json.Marshal(dw)
		if err != nil {
			return
		}
		if err := send(kindDelta, b); err != nil {
			return
		}
	}
}

// errWatchIdle is nextOrIdle's answer when keepalive passed without a
// delta.
var errWatchIdle = errors.New("controller: watch idle")

// nextOrIdle is w.Next(ctx), or errWatchIdle once keepalive (> 0) has
// passed without a delta. A localWatcher's Next only waits when it has
// nothing pending, so ending that wait early loses nothing.
func (s *server) nextOrIdle(ctx context.Context, w Watcher, keepalive time.Duration) (Delta, error) {
	if keepalive <= 0 {
		return w.Next(ctx)
	}
	wctx, cancel := context.WithTimeout(ctx, keepalive)
	defer cancel()
	d, err := w.Next(wctx)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return Delta{}, errWatchIdle
	}
	return d, err
}
