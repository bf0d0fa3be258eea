package broker

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/netbuf"
)

// Request framing, as read by conn.readLoop (all integers big endian):
//
//	+------------+---------+-------------+----------------+-----------------------+--------------+------+
//	| size int32 | key i16 | version i16 | correlation i32| client id (i16 len,   | tagged fields| body |
//	| (excludes  |         |             |                | -1 = null) | uvarint | (header v2:  |      |
//	|  itself)   |         |             |                |                       |  flexible)   |      |
//	+------------+---------+-------------+----------------+-----------------------+--------------+------+
//
// Response framing, as built by encodeResponse:
//
//	+------------+----------------+------------------------------+------+
//	| size int32 | correlation i32| tagged fields (header v1:    | body |
//	|            |                | flexible, except ApiVersions)|      |
//	+------------+----------------+------------------------------+------+
const (
	sizeLen         = 4
	minRequestBytes = 2 + 2 + 4 + 2 // key, version, correlation id, client id length
	writeTimeout    = 30 * time.Second
)

// request is one decoded request as a handler sees it.
type request struct {
	key, version  int16
	correlationID int32
	clientID      string
	msg           kmsg.Request
	conn          *conn
	start         time.Time // when its frame was read: request_duration_seconds
	held          int64     // its frame's bytes in the node's request budget, given back once handled
	size          int       // its frame's bytes (producer_byte_rate counts them)
	pooled        []byte    // a Produce frame's buffer, recycled (netbuf.PutFrame) once handled
	respCode      int16     // the response's top-level error code, set by encodeResponse
	// Quotas (quotas.go): the largest throttle decided for the request,
	// when its handler began, how long it waited (a long poll, acks=-1;
	// not counted as handler time) and whether it is exempt from
	// request_percentage (a follower's fetch).
	throttle  time.Duration
	execStart time.Time
	waited    time.Duration
	exempt    bool
}

// slot is one request's place in the connection's order. The executor
// runs run, fills f (or err) and closes done. A handler may return a
// deferred frame (frame.later, acks=-1 produces): the executor goes on
// with the next request and the writer, in order, waits for it.
type slot struct {
	done chan struct{}
	run  func(context.Context) (*frame, error)
	f    *frame
	err  error
	r    *request // for the metrics, read once done is closed
}

// conn is one client connection: a reader goroutine that decodes
// requests, an executor goroutine that runs their handlers one at a time in
// arrival order, and a writer goroutine that sends the responses in the
// same order.
//
// One request at a time, as Kafka's network layer (it mutes a connection
// until its request is answered): a connection's requests take effect in
// the order sent (a commit is not overtaken by the next commit or by an
// OffsetFetch; pipelined produces append in order), and a request that
// waits (a long poll, a JoinGroup) holds back the ones after it. Unlike
// Kafka, the reader does not wait for the answer: it reads and decodes
// ahead while a handler runs, and the writer sends one response while the
// next handler runs, so a pipelining producer keeps its throughput.
//
// The in-flight bound is a token per request: the reader takes one before
// reading a frame and the writer returns it once the response is written
// (or skipped, for acks=0), so at most queued.max.requests requests are
// read and not yet answered; at the bound the reader stops reading and TCP
// pushes back on the client. The reader pushes each slot on queue (the
// writer's order) and exec (the executor's), both in request order.
//
// Memory: before reading a frame's body the reader takes its size from the
// node's request budget (queued.max.request.bytes, shared by every client
// connection); the writer gives it back once the request's handler is done.
// The body's buffer grows as its bytes arrive (the budget's ReadFrame), and the
// whole frame must arrive within strata.socket.request.read.timeout.ms of
// its size prefix, so a peer that claims a large frame and stalls holds
// neither memory nor budget for long.
type conn struct {
	n        *Node
	nc       net.Conn
	listener string
	logger   *slog.Logger

	ctx    context.Context // cancelled when the connection dies
	cancel context.CancelFunc
	queue  chan *slot    // slots in request order, for the writer
	exec   chan *slot    // the same slots, for the executor
	tokens chan struct{} // in-flight bound: one per request read and not answered
	stopc  chan struct{} // closed by shutdown
	// pending counts slots pushed and not yet written, for idle detection.
	pending  atomic.Int32
	stopRead atomic.Bool // shutdown: the reader stops at the next frame boundary
	handlers sync.WaitGroup
	killOnce sync.Once
	done     chan struct{} // closed when the writer has finished
	// readCtx is ctx, also cancelled by shutdown: it ends the reader's
	// wait for request budget.
	readCtx    context.Context
	readCancel context.CancelFunc
	// held is the budget taken by frames read and not yet handled.
	held atomic.Int64
	// mutedUntil is when a quota throttle ends (unix nanoseconds; KIP-219):
	// until then the reader reads no frame and the executor runs no
	// request (quotas.go).
	mutedUntil atomic.Int64
	// principal is who the connection speaks for: Anonymous until TLS or
	// SASL authenticates it (issue 17); read by the authorizer.
	principal atomic.Pointer[Principal]
	// sasl is the SASL state of a SASL_* listener's connection (nil on
	// other listeners; sasl_conn.go).
	sasl *saslConn
}

// Principal returns who c speaks for (Anonymous when unauthenticated).
func (c *conn) Principal() Principal {
	if p := c.principal.Load(); p != nil {
		return *p
	}
	return Anonymous
}

func newConn(n *Node, nc net.Conn, listener string) *conn {
	ctx, cancel := context.WithCancel(n.ctx)
	readCtx, readCancel := context.WithCancel(ctx)
	var sc *saslConn
	if sl := n.saslLns[listener]; sl != nil {
		sc = &saslConn{lis: sl, opened: time.Now()}
	}
	return &conn{
		sasl: sc,
		n:    n, nc: nc, listener: listener,
		logger: n.logger.With("remote", nc.RemoteAddr().String(), "listener", listener),
		ctx:    ctx, cancel: cancel, readCtx: readCtx, readCancel: readCancel,
		queue:  make(chan *slot, n.cfg.QueuedMaxRequests),
		exec:   make(chan *slot, n.cfg.QueuedMaxRequests),
		tokens: make(chan struct{}, n.cfg.QueuedMaxRequests),
		stopc:  make(chan struct{}),
		done:   make(chan struct{}),
	}
}

func (c *conn) serve() {
	c.handlers.Add(1)
	go c.execLoop()
	go c.writeLoop()
	c.readLoop()
}

// kill closes the socket at once: for malformed input, write errors and
// forced shutdown. Queued responses are dropped.
func (c *conn) kill(reason error) {
	c.killOnce.Do(func() {
		if reason != nil && !errors.Is(reason, io.EOF) && !errors.Is(reason, net.ErrClosed) {
			c.logger.Info("broker: closing connection", "reason", reason)
		}
		c.cancel()
		c.nc.Close()
	})
}

// shutdown asks the reader to stop at the next frame boundary; in-flight
// requests are still answered, then the connection closes.
func (c *conn) shutdown() {
	if !c.stopRead.Swap(true) {
		close(c.stopc)
	}
	c.readCancel()
	c.nc.SetReadDeadline(time.Now())
}

func (c *conn) readLoop() {
	defer close(c.queue)
	defer close(c.exec)
	br := bufio.NewReaderSize(c.nc, 32<<10)
	var sizeBuf [sizeLen]byte
	idle := c.n.cfg.ConnectionsMaxIdle
	for {
		if !c.waitMuted(c.stopc) { // a quota throttle (quotas.go)
			return
		}
		select {
		case c.tokens <- struct{}{}:
		case <-c.stopc:
			return
		case <-c.ctx.Done():
			return
		}
		deadline, preAuth := c.saslReadDeadline(time.Now().Add(idle))
		c.nc.SetReadDeadline(deadline)
		// Checked after setting the deadline: a shutdown that set its own
		// (immediate) deadline before ours is seen here.
		if c.stopRead.Load() {
			return
		}
		got, err := io.ReadFull(br, sizeBuf[:])
		if err != nil {
			var ne net.Error
			if got == 0 && errors.As(err, &ne) && ne.Timeout() && !c.stopRead.Load() {
				if preAuth && !c.sasl.authed.Load() && !time.Now().Before(c.sasl.opened.Add(c.sasl.lis.s.AuthTimeout)) {
					c.kill(fmt.Errorf("not SASL-authenticated within strata.sasl.authentication.timeout.ms (%v)", c.sasl.lis.s.AuthTimeout))
					return
				}
				if c.pending.Load() > 0 {
					<-c.tokens // not used: no frame was read
					continue   // a long poll or a slow handler: not idle
				}
				c.kill(fmt.Errorf("idle for %v", idle))
				return
			}
			if got > 0 {
				c.kill(fmt.Errorf("%w: truncated size prefix: %v", ErrMalformedRequest, err))
			}
			return
		}
		size := int32(binary.BigEndian.Uint32(sizeBuf[:]))
		// Enforce the limit before allocating anything for the body.
		if size > c.n.cfg.SocketRequestMaxBytes {
			c.kill(fmt.Errorf("%w: %d bytes > socket.request.max.bytes %d", ErrRequestTooLarge, size, c.n.cfg.SocketRequestMaxBytes))
			return
		}
		if limit := c.saslFrameCap(); limit > 0 && size > limit {
			c.kill(fmt.Errorf("%w: %d bytes before SASL authentication > sasl.server.max.receive.size %d", ErrRequestTooLarge, size, limit))
			return
		}
		if c.saslRawTokens() { // a v0 SASL exchange's bare token (sasl_conn.go)
			if size < 0 {
				c.kill(fmt.Errorf("%w: SASL token size %d", ErrMalformedRequest, size))
				return
			}
			body, err := c.readBody(br, size)
			if err == nil {
				err = c.dispatchRawToken(body)
			}
			if err != nil {
				c.kill(err)
				return
			}
			continue
		}
		if size < minRequestBytes {
			c.kill(fmt.Errorf("%w: size %d", ErrMalformedRequest, size))
			return
		}
		body, err := c.readBody(br, size)
		if err != nil {
			if !c.stopRead.Load() {
				c.kill(err)
			}
			return // shutdown: the writer answers what is in flight, then closes
		}
		if err := c.dispatch(body); err != nil {
			c.kill(err)
			return
		}
	}
}

// readBody reads the size bytes of a frame's body once the node's request
// budget has them (waiting, without reading, while it does not), within
// the request read timeout. The bytes stay held (c.held) until the writer
// releases the request.
func (c *conn) readBody(br *bufio.Reader, size int32) ([]byte, error) {
	if err := c.n.reqMem.Acquire(c.readCtx, int64(size)); err != nil {
		return nil, err
	}
	c.held.Add(int64(size))
	timeout := c.n.cfg.RequestReadTimeout
	c.nc.SetReadDeadline(time.Now().Add(timeout))
	if c.stopRead.Load() { // as in readLoop: a shutdown's deadline may predate ours
		return nil, net.ErrClosed
	}
	body, err := c.n.reqMem.ReadFramePooled(br, int(size))
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, fmt.Errorf("%w: request of %d bytes not received within strata.socket.request.read.timeout.ms (%v)", ErrMalformedRequest, size, timeout)
		}
		return nil, fmt.Errorf("%w: truncated frame: %v", ErrMalformedRequest, err)
	}
	return body, nil
}

// release gives back the request budget r's frame held.
func (c *conn) release(r *request) {
	if r != nil && r.held > 0 {
		c.held.Add(-r.held)
		c.n.reqMem.Release(r.held)
		r.held = 0
	}
	if r != nil && r.pooled != nil {
		netbuf.PutFrame(r.pooled)
		r.pooled = nil
	}
}

// dispatch decodes one frame and runs its handler. An error closes the
// connection.
func (c *conn) dispatch(b []byte) error {
	r := &request{conn: c, start: time.Now(), held: int64(len(b)), size: len(b)}
	r.key = int16(binary.BigEndian.Uint16(b[0:]))
	r.version = int16(binary.BigEndian.Uint16(b[2:]))
	r.correlationID = int32(binary.BigEndian.Uint32(b[4:]))
	if r.key == 0 {
		// Only a Produce frame's buffer is recycled: nothing keeps its
		// bytes past the handler (storage copies the records to the
		// segment file), while other requests' byte fields, which kmsg
		// decodes as views of the frame, may outlive it (a group
		// member's metadata, for one).
		r.pooled = b
	}
	a := apis[r.key]
	if a == nil {
		return fmt.Errorf("%w: %d", ErrUnknownAPI, r.key)
	}
	rest := b[8:]
	idLen := int16(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	if idLen > 0 {
		if int(idLen) > len(rest) {
			return fmt.Errorf("%w: client id length %d", ErrMalformedRequest, idLen)
		}
		r.clientID = string(rest[:idLen])
		rest = rest[idLen:]
	}
	if r.version < a.min || r.version > a.max {
		if r.key == apiVersionsKey {
			// KIP-511: answer an unknown ApiVersions version with v0.
			return c.enqueue(r, func(context.Context) (*frame, error) {
				r.respCode = kerr.UnsupportedVersion.Code
				return apiVersionsFallback(r), nil
			})
		}
		return fmt.Errorf("%w: %s v%d not in [%d, %d]", ErrMalformedRequest, kmsg.NameForKey(r.key), r.version, a.min, a.max)
	}
	r.msg = kmsg.RequestForKey(r.key)
	r.msg.SetVersion(r.version)
	if r.msg.IsFlexible() {
		var err error
		if rest, err = skipTags(rest); err != nil {
			return err
		}
	}
	if err := decodeBody(r.msg, rest); err != nil {
		return fmt.Errorf("%w: %s v%d: %v", ErrMalformedRequest, kmsg.NameForKey(r.key), r.version, err)
	}
	var handled chan struct{}
	if r.key == saslHandshakeKey && r.version == 0 && c.sasl != nil {
		// What follows a v0 handshake is bare SASL tokens or Kafka
		// frames, depending on its outcome: read on once it is handled.
		handled = make(chan struct{})
		defer func() {
			select {
			case <-handled:
			case <-c.ctx.Done():
			}
		}()
	}
	return c.enqueue(r, func(ctx context.Context) (*frame, error) {
		if handled != nil {
			defer close(handled)
		}
		if err := c.saslGate(r); err != nil {
			return nil, err
		}
		return a.fn(ctx, c.n, r)
	})
}

// enqueue takes the request's place in the connection's order; the
// executor runs fn when the requests before it are done. The bound on
// requests in flight (tokens) keeps both channels from filling up.
func (c *conn) enqueue(r *request, fn func(context.Context) (*frame, error)) error {
	s := &slot{done: make(chan struct{}), run: fn, r: r}
	c.pending.Add(1)
	select {
	case c.queue <- s:
	case <-c.ctx.Done():
		c.pending.Add(-1)
		return c.ctx.Err()
	}
	c.exec <- s
	return nil
}

// errConnFailed is the error of requests read after one whose handler
// failed: the connection closes at that one, so they never run.
var errConnFailed = errors.New("broker: an earlier request on the connection failed")

// execLoop runs the connection's handlers one at a time, in request order.
// After a handler error (which closes the connection once the writer
// reaches it) or the connection's death, later requests are not run.
func (c *conn) execLoop() {
	defer c.handlers.Done()
	failed := false
	for s := range c.exec {
		if !failed {
			c.waitMuted(nil) // a quota throttle: nothing runs until it passes
		}
		if failed || c.ctx.Err() != nil {
			s.err = errConnFailed
			if !failed {
				s.err = c.ctx.Err()
			}
			close(s.done)
			continue
		}
		failed = c.runSlot(s)
	}
}

// runSlot runs one handler; a panic is recovered into an error that
// closes the connection. It reports whether the handler failed, read
// before s.done closes: after that the writer owns s (a deferred acks=-1
// response writes its outcome into s.f and s.err).
func (c *conn) runSlot(s *slot) (failed bool) {
	r := s.r
	defer close(s.done)
	defer func() {
		if p := recover(); p != nil {
			s.f, s.err = nil, fmt.Errorf("broker: panic in %s v%d handler: %v", kmsg.NameForKey(r.key), r.version, p)
			c.logger.Error("broker: handler panicked", "api", kmsg.NameForKey(r.key), "version", r.version, "panic", p)
		}
		failed = s.err != nil
	}()
	r.execStart = time.Now()
	s.f, s.err = s.run(c.ctx)
	return false
}

// writeLoop sends responses in request order. After a write error it keeps
// draining (so every frame's views are released) without writing.
func (c *conn) writeLoop() {
	defer close(c.done)
	defer c.nc.Close()
	dead := false
	for s := range c.queue {
		select {
		case <-s.done:
		case <-c.ctx.Done():
			<-s.done // handlers watch ctx; they finish promptly, and the executor skips the rest
		}
		// The slot's f and err are the executor's (it reads err after
		// done); the writer works on its own copies.
		f, serr := s.f, s.err
		if f != nil && f.later != nil {
			// A deferred response (acks=-1): the executor has moved on;
			// its completer watches ctx too.
			d := f.later
			<-d.done
			f, serr = d.f, d.err
		}
		c.pending.Add(-1)
		<-c.tokens
		c.release(s.r)
		if serr != nil && !dead {
			if errors.Is(serr, errSASLFailed) && c.sasl != nil && c.sasl.lis.s.FailDelay > 0 {
				// A v0 exchange's failure closes without an answer, as
				// late as a v1 one is answered.
				t := time.NewTimer(c.sasl.lis.s.FailDelay)
				select {
				case <-t.C:
				case <-c.ctx.Done():
				}
				t.Stop()
			}
			dead = true
			c.kill(serr)
		}
		if f != nil {
			if !dead && f.closeAfter && c.sasl != nil && c.sasl.lis.s.FailDelay > 0 {
				// connection.failed.authentication.delay.ms: a failed
				// authentication's answer waits (the connection is
				// closing: nothing else of it is served meanwhile).
				t := time.NewTimer(c.sasl.lis.s.FailDelay)
				select {
				case <-t.C:
				case <-c.ctx.Done():
					dead = true
				}
				t.Stop()
			}
			if !dead {
				c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
				if err := f.writeTo(c.nc); err != nil {
					dead = true
					c.kill(fmt.Errorf("broker: write response: %w", err))
				} else if f.closeAfter {
					dead = true
					c.kill(errSASLFailed)
				}
			}
			f.release()
		}
		code := s.r.respCode
		if serr != nil {
			code = errCode(serr)
		}
		c.n.metrics.observeRequest(s.r.key, s.r.version, code, s.r.start)
		if s.r.key == 0 && c.n.tier != nil {
			// Remote reads yield to producers (tiering/budget_share.go).
			c.n.tier.rd.NoteProduce(time.Since(s.r.start))
		}
	}
	c.handlers.Wait()
	// Frames read but never queued (the connection died while dispatching
	// them): the reader has returned, so nothing adds to held any more.
	c.n.reqMem.Release(c.held.Swap(0))
}

// decodeBody decodes a request body; a panic in the decoder (kmsg is
// meant never to panic, but this is the network edge) is an error that
// closes the connection, never a crash.
func decodeBody(req kmsg.Request, b []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("decoder panicked: %v", p)
		}
	}()
	return req.ReadFrom(b)
}

// skipTags skips a tagged-field section (KIP-482): a uvarint count, then
// per field a uvarint tag, a uvarint size and the bytes.
func skipTags(b []byte) ([]byte, error) {
	n, l := binary.Uvarint(b)
	if l <= 0 {
		return nil, fmt.Errorf("%w: bad tag count", ErrMalformedRequest)
	}
	b = b[l:]
	for range n {
		_, l = binary.Uvarint(b)
		if l <= 0 {
			return nil, fmt.Errorf("%w: bad tag", ErrMalformedRequest)
		}
		b = b[l:]
		size, l := binary.Uvarint(b)
		if l <= 0 || size > uint64(len(b)-l) {
			return nil, fmt.Errorf("%w: bad tag size", ErrMalformedRequest)
		}
		b = b[l+int(size):]
	}
	return b, nil
}

// responseHeaderFlexible reports whether the response to r uses header v1
// (with tagged fields): flexible versions, except ApiVersions, whose
// response header is always v0 so a client can read it before knowing the
// broker's versions.
func responseHeaderFlexible(r *request) bool {
	return r.key != apiVersionsKey && r.msg != nil && r.msg.IsFlexible()
}

// throttleMillis is a response's throttle_time_ms (0 without the field).
func throttleMillis(resp kmsg.Response) int32 {
	if t, ok := resp.(kmsg.ThrottleResponse); ok {
		ms, _ := t.Throttle()
		return ms
	}
	return 0
}

// encodeResponse builds the frame of a kmsg response to r.
func encodeResponse(r *request, resp kmsg.Response) *frame {
	resp.SetVersion(r.version)
	if r.conn != nil {
		r.respCode = r.conn.n.metrics.responseErrorCode(r.key, resp)
		r.conn.n.recordRequestQuota(r)
		if tr, ok := resp.(kmsg.SetThrottleResponse); ok && r.throttle > 0 {
			if ms := int32(min(r.throttle.Milliseconds(), math.MaxInt32)); ms > throttleMillis(resp) {
				tr.SetThrottle(ms)
			}
		}
	}
	buf := make([]byte, sizeLen, 256)
	buf = binary.BigEndian.AppendUint32(buf, uint32(r.correlationID))
	if responseHeaderFlexible(r) {
		buf = append(buf, 0)
	}
	buf = resp.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-sizeLen))
	return &frame{buf: buf}
}
