package controller

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/strata-io/strata/broker/sasl"
)

// SASL on the CONTROLLER listener (SASL_PLAINTEXT, SASL_SSL): when
// Options.SASL is set, every connection authenticates before its first
// frame of Strata's protocol (hello or request) is read, so one exchange
// guards Raft streams, RPC clients and forwarding alike, and nothing of an
// unauthenticated connection, not even its hello, is interpreted.
//
//	client → server  kindSASL  name length u8 | mechanism name | token
//	                           (first frame), then token only
//	server → client  kindSASL  status u8 | token, or the failure's text
//	                           status 0 = done, 1 = continue, 2 = failed
//
// Frames before success are at most maxFirstFrame bytes and must arrive
// within Config.FrameReadTimeout; any other kind, an unknown mechanism, a
// failed step or a principal that is not a node closes the connection
// (after a failed status, so the client can tell a wrong password from a
// network error); the reason is logged without the token.
const kindSASL byte = 8

const (
	saslDone     byte = 0
	saslContinue byte = 1
	saslFailed   byte = 2
)

// SASLServer is what a SASL CONTROLLER listener accepts.
type SASLServer struct {
	// Mechanisms are the enabled mechanisms by name (PLAIN,
	// OAUTHBEARER).
	Mechanisms map[string]sasl.Mechanism
	// Nodes, when not empty, are the principals ("User:<name>") allowed
	// in: super.users, as for certificates on an SSL CONTROLLER listener.
	Nodes []string
}

// SASLClient is how this node's connections to a SASL CONTROLLER
// listener authenticate: Mechanism and its client-first messages (PLAIN
// and OAUTHBEARER need one; Next is called again on a continue).
type SASLClient struct {
	Mechanism string
	// Next returns the client's next token given the server's last
	// (nil before the first).
	Next func(server []byte) ([]byte, error)
}

// PlainSASLClient is PLAIN's client (RFC 4616: authzid NUL user NUL
// password, no authzid).
func PlainSASLClient(user, pass string) SASLClient {
	return SASLClient{Mechanism: "PLAIN", Next: func([]byte) ([]byte, error) {
		return []byte("\x00" + user + "\x00" + pass), nil
	}}
}

// OAuthBearerSASLClient is OAUTHBEARER's client (RFC 7628's initial
// response with the token from token(); a challenge, the server's refusal
// of the token, is answered with RFC 7628's lone ^A so the server ends the
// exchange with its reason).
func OAuthBearerSASLClient(token func() (string, error)) SASLClient {
	return SASLClient{Mechanism: "OAUTHBEARER", Next: func(server []byte) ([]byte, error) {
		if server != nil {
			return []byte{1}, nil
		}
		tok, err := token()
		if err != nil {
			return nil, err
		}
		return []byte("n,,\x01auth=Bearer " + tok + "\x01\x01"), nil
	}}
}

// ErrSASLFailed is what a dial returns when the controller refused the
// credentials.
var ErrSASLFailed = errors.New("controller: SASL authentication failed")

// maxSASLSteps bounds an exchange's round trips.
const maxSASLSteps = 8

// AuthenticateSASL runs the client side of the exchange on a fresh
// connection, bounded by ctx's deadline (else timeout). It reads exactly
// the server's frames, so conn is ready for the hello afterwards.
func AuthenticateSASL(ctx context.Context, conn net.Conn, c SASLClient, timeout time.Duration) error {
	dl := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok {
		dl = d
	}
	conn.SetDeadline(dl)
	defer conn.SetDeadline(time.Time{})
	bw := bufio.NewWriter(conn)
	var server []byte
	for step := 0; step < maxSASLSteps; step++ {
		tok, err := c.Next(server)
		if err != nil {
			return err
		}
		var payload []byte
		if step == 0 {
			payload = append([]byte{byte(len(c.Mechanism))}, c.Mechanism...)
		}
		if err := writeFrame(bw, kindSASL, payload, tok); err != nil {
			return err
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		var hdr [5]byte
		if _, err := io.ReadFull(conn, hdr[:]); err != nil {
			return fmt.Errorf("controller: SASL: reading the answer: %w", err)
		}
		n := binary.BigEndian.Uint32(hdr[:4])
		if hdr[4] != kindSASL || n < 2 || n > maxFirstFrame {
			return fmt.Errorf("%w: SASL answer of kind %d, %d bytes", ErrProtocol, hdr[4], n)
		}
		b := make([]byte, n-1)
		if _, err := io.ReadFull(conn, b); err != nil {
			return fmt.Errorf("controller: SASL: reading the answer: %w", err)
		}
		switch b[0] {
		case saslDone:
			return nil
		case saslContinue:
			server = b[1:]
		default:
			return fmt.Errorf("%w: %s", ErrSASLFailed, b[1:])
		}
	}
	return fmt.Errorf("%w: more than %d steps", ErrSASLFailed, maxSASLSteps)
}

// SASLDialer wraps dial (nil: a net.Dialer from localAddr) so every
// connection it opens authenticates with c first.
func SASLDialer(dial func(ctx context.Context, network, addr string) (net.Conn, error), localAddr net.Addr, c SASLClient) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if dial == nil {
		d := &net.Dialer{LocalAddr: localAddr}
		dial = d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if err := AuthenticateSASL(ctx, conn, c, 10*time.Second); err != nil {
			conn.Close()
			return nil, err
		}
		return conn, nil
	}
}

// authenticate runs the server side of the exchange on a new connection;
// false means refused (the connection is to be closed).
func (s *server) authenticate(conn net.Conn, fr *frameReader) bool {
	sc := s.c.sasl
	var sess sasl.Session
	var mech string
	bw := bufio.NewWriter(conn)
	reply := func(status byte, b []byte) {
		conn.SetWriteDeadline(time.Now().Add(s.c.cfg.FrameReadTimeout))
		if writeFrame(bw, kindSASL, []byte{status}, b) == nil {
			bw.Flush()
		}
		conn.SetWriteDeadline(time.Time{})
	}
	refuse := func(why string, kv ...any) bool {
		s.c.metrics.saslFailures.Inc()
		s.refuseSASL(conn, why, kv...)
		return false
	}
	for step := 0; step < maxSASLSteps; step++ {
		conn.SetReadDeadline(time.Now().Add(s.c.cfg.FrameReadTimeout))
		kind, payload, err := fr.next(maxFirstFrame)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				return false
			}
			return refuse("reading the exchange", "err", err)
		}
		if kind != kindSASL {
			return refuse("the listener is SASL: a frame before authentication", "kind", kind)
		}
		if sess == nil {
			if len(payload) < 1 || len(payload) < 1+int(payload[0]) {
				return refuse("bad first SASL frame")
			}
			mech = string(payload[1 : 1+payload[0]])
			m := sc.Mechanisms[mech]
			if m == nil {
				reply(saslFailed, []byte("Unsupported SASL mechanism "+mech))
				return refuse("mechanism not enabled", "mechanism", mech)
			}
			sess, payload = m.Start(), payload[1+payload[0]:]
		}
		out, done, err := sess.Step(payload)
		fr.release()
		if err != nil {
			reply(saslFailed, []byte(err.Error()))
			return refuse("authentication failed", "mechanism", mech, "err", err)
		}
		if !done {
			reply(saslContinue, out)
			continue
		}
		p := "User:" + sess.Principal()
		if len(sc.Nodes) > 0 {
			ok := false
			for _, n := range sc.Nodes {
				ok = ok || n == p
			}
			if !ok {
				reply(saslFailed, []byte("principal is not a node of this cluster"))
				return refuse("principal is not a node of this cluster (not in super.users)", "principal", p)
			}
		}
		reply(saslDone, out)
		return true
	}
	return refuse("too many steps")
}

// refuseSASL logs a refused exchange, at most once a second.
func (s *server) refuseSASL(conn net.Conn, why string, kv ...any) {
	now := time.Now().UnixNano()
	if last := s.saslLog.Load(); now-last >= int64(time.Second) && s.saslLog.CompareAndSwap(last, now) {
		args := append([]any{"reason", why, "remote", conn.RemoteAddr().String()}, kv...)
		s.c.cfg.Logger.Warn("controller: refused a connection: SASL", args...)
	}
}
