package controller

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/strata-io/strata/internal/netbuf"
)

// ClientOptions configure a [Client].
type ClientOptions struct {
	// Addrs are CONTROLLER listener addresses (any controllers of the
	// quorum; followers forward to the leader).
	Addrs []string
	// DialTimeout bounds a connection attempt (default 1s).
	DialTimeout time.Duration
	// RetryBackoff is the pause before trying again after a connection
	// failure or NOT_CONTROLLER (default 50ms).
	RetryBackoff time.Duration
	// LocalAddr, if set, is the address connections are dialed from (a
	// node on its own loopback IP, so a fault-injecting proxy between
	// nodes sees which node connects); nil lets the system choose.
	LocalAddr net.Addr
	// Dial, if set, opens connections instead of a net.Dialer with
	// DialTimeout and LocalAddr: a CONTROLLER listener over SSL (the
	// broker's TLS dialer, which dials from its own address too).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// WatchTimeout is how long a [Client.Watch] stream may bring nothing,
	// neither a delta nor a keepalive, before it is taken as dead and
	// reopened on a new connection (default 2s; a broker sets it from
	// controller.quorum.request.timeout.ms, as KRaft bounds a broker's
	// metadata fetch by it). The stream asks its controller for a
	// keepalive after WatchTimeout/4 of silence, so an idle live stream
	// is never taken for a dead one; a stream whose TCP connection died
	// silently (a partition, a lost NAT or firewall entry, a peer gone
	// without a reset) is noticed within WatchTimeout instead of never.
	WatchTimeout time.Duration
	// ClusterID, if set, returns the cluster id this client's node
	// belongs to ("" while it does not know), sent in the hello of every
	// new connection: a controller of another cluster answers
	// INCONSISTENT_CLUSTER_ID (not retried) instead of serving it.
	ClusterID func() string
	// Logger, nil means slog.Default().
	Logger *slog.Logger

	forwarding bool // set by a Controller forwarding to its leader
}

// Client is the [Service] over the network: a broker in another process
// registers, heartbeats, changes metadata and watches the metadata log
// through it. Calls retry on connection failures and NOT_CONTROLLER until
// their context expires, following the leader hint. Safe for concurrent
// use; connections are pooled. Close closes the idle ones.
type Client struct {
	o ClientOptions

	// mu guards idle, next, hint and closed.
	mu     sync.Mutex
	idle   map[string][]*clientConn
	next   int
	hint   string
	closed bool
}

type clientConn struct {
	addr string
	conn net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
}

// NewClient returns a client; it connects lazily.
func NewClient(o ClientOptions) *Client {
	if o.DialTimeout == 0 {
		o.DialTimeout = time.Second
	}
	if o.RetryBackoff == 0 {
		o.RetryBackoff = 50 * time.Millisecond
	}
	if o.WatchTimeout <= 0 {
		o.WatchTimeout = DefaultWatchTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Client{o: o, idle: map[string][]*clientConn{}}
}

// Close closes idle connections; calls after Close fail with ErrStopped.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, cs := range c.idle {
		for _, cc := range cs {
			cc.conn.Close()
		}
	}
	c.idle = map[string][]*clientConn{}
	return nil
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// pick chooses the address for the next attempt: the leader hint, else
// the configured addresses round robin.
func (c *Client) pick() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hint != "" {
		return c.hint
	}
	if len(c.o.Addrs) == 0 {
		return ""
	}
	a := c.o.Addrs[c.next%len(c.o.Addrs)]
	c.next++
	return a
}

func (c *Client) conn(ctx context.Context, addr string) (*clientConn, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrStopped
	}
	if cs := c.idle[addr]; len(cs) > 0 {
		cc := cs[len(cs)-1]
		c.idle[addr] = cs[:len(cs)-1]
		c.mu.Unlock()
		return cc, nil
	}
	c.mu.Unlock()
	var conn net.Conn
	var err error
	if c.o.Dial != nil {
		dctx, cancel := context.WithTimeout(ctx, c.o.DialTimeout)
		conn, err = c.o.Dial(dctx, "tcp", addr)
		cancel()
	} else {
		d := net.Dialer{Timeout: c.o.DialTimeout, LocalAddr: c.o.LocalAddr}
		conn, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	cc := &clientConn{addr: addr, conn: conn, br: bufio.NewReader(conn), bw: bufio.NewWriter(conn)}
	// Say what this connection is before any request, so a request larger
	// than maxFirstFrame is accepted; buffered, it leaves with the first
	// request.
	var clusterID string
	if c.o.ClusterID != nil {
		clusterID = c.o.ClusterID()
	}
	if err := writeFrame(cc.bw, kindClientHello, appendClientHello(nil, clusterID)); err != nil {
		conn.Close()
		return nil, err
	}
	return cc, nil
}

func (c *Client) release(cc *clientConn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || len(c.idle[cc.addr]) >= 4 {
		cc.conn.Close()
		return
	}
	c.idle[cc.addr] = append(c.idle[cc.addr], cc)
}

// roundTrip sends one request on one connection and reads its response.
func (c *Client) roundTrip(ctx context.Context, addr string, method byte, req any, out any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	cc, err := c.conn(ctx, addr)
	if err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok {
		cc.conn.SetDeadline(dl)
	} else {
		cc.conn.SetDeadline(time.Time{})
	}
	// A cancelled context interrupts the blocking read.
	stop := context.AfterFunc(ctx, func() { cc.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	var flags byte
	if c.o.forwarding {
		flags |= flagForwarded
	}
	if err := writeFrame(cc.bw, kindRequest, []byte{method, flags}, body); err != nil {
		cc.conn.Close()
		return err
	}
	if err := cc.bw.Flush(); err != nil {
		cc.conn.Close()
		return err
	}
	kind, payload, err := readFrame(cc.br)
	if err != nil {
		cc.conn.Close()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	if kind != kindResponse {
		cc.conn.Close()
		return fmt.Errorf("%w: frame kind %d in reply", ErrProtocol, kind)
	}
	if !stop() {
		cc.conn.Close() // the deadline was poisoned
	} else {
		c.release(cc)
	}
	var env struct {
		Err  *wireErr        `json:"err"`
		Body json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(payload, &env); err != nil {
		return fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	if env.Err != nil {
		return fromWireErr(env.Err)
	}
	if out != nil && len(env.Body) > 0 {
		if err := json.Unmarshal(env.Body, out); err != nil {
			return fmt.Errorf("%w: %v", ErrProtocol, err)
		}
	}
	return nil
}

// call retries roundTrip on connection failures and NOT_CONTROLLER until
// ctx expires. A forwarding client makes exactly one attempt: its
// Controller does the retrying.
func (c *Client) call(ctx context.Context, method byte, req any, out any) error {
	for {
		addr := c.pick()
		if addr == "" {
			return fmt.Errorf("controller: client has no addresses")
		}
		err := c.roundTrip(ctx, addr, method, req, out)
		if err == nil || c.o.forwarding {
			return err
		}
		var nc *NotControllerError
		switch {
		case errors.As(err, &nc):
			c.mu.Lock()
			c.hint = nc.LeaderAddr // "" when unknown: back to round robin
			c.mu.Unlock()
		case isNetErr(err), errors.Is(err, ErrStopped) && !c.isClosed():
			// Unreachable, or that controller is shutting down: another
			// one will answer.
			c.mu.Lock()
			c.hint = ""
			c.mu.Unlock()
		default:
			return err
		}
		if ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(c.o.RetryBackoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// DefaultWatchTimeout is [ClientOptions.WatchTimeout]'s default, Kafka's
// controller.quorum.request.timeout.ms.
const DefaultWatchTimeout = 2 * time.Second

// watchPayloadTimeout bounds the arrival of a watch frame's payload once
// its header came (an image may be large; the listener's
// DefaultFrameReadTimeout bounds it the same way on the other side).
const watchPayloadTimeout = DefaultFrameReadTimeout

// Watch implements [Service]: a dedicated connection to one controller
// streams deltas from fromOffset. When that connection breaks (the
// controller stopped, the network failed) or brings nothing for
// [ClientOptions.WatchTimeout] (not even the keepalive the controller
// sends on an idle stream), Next reconnects — to the next address, with
// backoff — and resumes after the last delta it returned, so a broker's
// view never skips or repeats an entry. Next fails only when its ctx ends
// or the Client is closed.
func (c *Client) Watch(ctx context.Context, fromOffset int64) (Watcher, error) {
	w := &remoteWatcher{c: c, next: max(fromOffset, 0)}
	for {
		err := w.connect(ctx)
		if err == nil {
			return w, nil
		}
		if ctx.Err() != nil || errors.Is(err, ErrStopped) {
			return nil, err
		}
		// That controller is unreachable: try the next address.
		if perr := w.pause(ctx); perr != nil {
			return nil, err
		}
	}
}

type remoteWatcher struct {
	c    *Client
	next int64 // the first offset not yet returned
	// cc is the current stream; nil between a failure and a reconnect.
	cc     *clientConn
	closed bool

	// dlMu guards poisoned: once read's ctx is done its AfterFunc sets a
	// past read deadline, which no later deadline of read may undo.
	dlMu     sync.Mutex
	poisoned bool
}

// connect opens a stream from w.next on the next address.
func (w *remoteWatcher) connect(ctx context.Context) error {
	addr := w.c.pick()
	cc, err := w.c.conn(ctx, addr)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(watchReq{From: w.next, KeepaliveMs: w.keepalive().Milliseconds()})
	cc.conn.SetWriteDeadline(time.Now().Add(w.c.o.DialTimeout))
	if err := writeFrame(cc.bw, kindRequest, []byte{methodWatch, 0}, body); err != nil {
		cc.conn.Close()
		return err
	}
	if err := cc.bw.Flush(); err != nil {
		cc.conn.Close()
		return err
	}
	cc.conn.SetWriteDeadline(time.Time{})
	w.cc = cc
	return nil
}

func (w *remoteWatcher) Next(ctx context.Context) (Delta, error) {
	for {
		if w.closed {
			return Delta{}, ErrStopped
		}
		if w.cc == nil {
			if err := w.connect(ctx); err != nil {
				if ctx.Err() != nil || errors.Is(err, ErrStopped) {
					return Delta{}, err
				}
				if err := w.pause(ctx); err != nil {
					return Delta{}, err
				}
				continue
			}
		}
		d, err := w.read(ctx)
		if err == nil {
			w.next = d.Offset + 1
			return d, nil
		}
		w.drop()
		if ctx.Err() != nil {
			return Delta{}, ctx.Err()
		}
		if errors.Is(err, ErrProtocol) {
			return Delta{}, err
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			w.c.o.Logger.Info("controller: metadata watch stream silent, reopening it", "silent_for", w.c.o.WatchTimeout, "from", w.next)
		}
		// The stream ended (controller stopped, connection lost or
		// silent): resume elsewhere after the last delta returned.
		w.c.mu.Lock()
		w.c.hint = ""
		w.c.mu.Unlock()
		if err := w.pause(ctx); err != nil {
			return Delta{}, err
		}
	}
}

func (w *remoteWatcher) pause(ctx context.Context) error {
	t := time.NewTimer(w.c.o.RetryBackoff)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// keepalive is how long a stream may be idle before its controller sends
// a keepalive: a quarter of the watch timeout, so three may be lost or
// late before the stream is taken as dead.
func (w *remoteWatcher) keepalive() time.Duration {
	return max(w.c.o.WatchTimeout/4, time.Millisecond)
}

// setReadDeadline sets the stream's read deadline to d from now, unless
// read's ctx is done (its deadline stays in the past).
func (w *remoteWatcher) setReadDeadline(conn net.Conn, d time.Duration) {
	w.dlMu.Lock()
	defer w.dlMu.Unlock()
	if !w.poisoned {
		conn.SetReadDeadline(time.Now().Add(d))
	}
}

// read reads one delta from the current stream, skipping keepalives. Each
// frame must start within WatchTimeout (a keepalive comes after a quarter
// of it on an idle stream): a silent stream fails with a timeout, and Next
// reconnects.
func (w *remoteWatcher) read(ctx context.Context) (Delta, error) {
	conn := w.cc.conn
	w.dlMu.Lock()
	w.poisoned = false
	w.dlMu.Unlock()
	stop := context.AfterFunc(ctx, func() {
		w.dlMu.Lock()
		w.poisoned = true
		conn.SetReadDeadline(time.Unix(1, 0))
		w.dlMu.Unlock()
	})
	defer stop()
	for {
		w.setReadDeadline(conn, w.c.o.WatchTimeout)
		kind, n, err := readHeader(w.cc.br, maxFrame)
		if err != nil {
			return Delta{}, err
		}
		w.setReadDeadline(conn, max(w.c.o.WatchTimeout, watchPayloadTimeout))
		payload, err := netbuf.ReadFrame(w.cc.br, n)
		if err != nil {
			return Delta{}, err
		}
		switch kind {
		case kindKeepalive:
			continue // the stream is alive; its payload is informative only
		case kindDelta:
			var dw deltaW
			if err := json.Unmarshal(payload, &dw); err != nil {
				return Delta{}, fmt.Errorf("%w: %v", ErrProtocol, err)
			}
			d, err := deltaFromW(dw)
			if err != nil {
				return Delta{}, fmt.Errorf("%w: %v", ErrProtocol, err)
			}
			return d, nil
		case kindResponse:
			var env struct {
				Err *wireErr `json:"err"`
			}
			if err := json.Unmarshal(payload, &env); err != nil || env.Err == nil {
				return Delta{}, fmt.Errorf("%w: bad watch end", ErrProtocol)
			}
			return Delta{}, fromWireErr(env.Err)
		}
		return Delta{}, fmt.Errorf("%w: frame kind %d in watch", ErrProtocol, kind)
	}
}

func (w *remoteWatcher) drop() {
	if w.cc != nil {
		w.cc.conn.Close()
		w.cc = nil
	}
}

func (w *remoteWatcher) Close() error {
	w.closed = true
	w.drop()
	return nil
}
