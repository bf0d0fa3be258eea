package broker

// SaslAuthenticate (key 36), versions 0 through 2.
//
// Behaviour, as Kafka's SaslServerAuthenticator: each request carries the
// client's next message of the exchange SaslHandshake began; the reply is
// the mechanism's. Success sets the connection's principal (User:<name>),
// which the authorizer sees from the next request on; v1+ answers the
// session lifetime (KIP-368: min(connections.max.reauth.ms, the
// credential's expiry), 0 for none). A failed exchange answers
// SASL_AUTHENTICATION_FAILED with the mechanism's message (never saying
// which part of the credentials was wrong), is counted
// (strata_sasl_authentication_failures_total) and closes the connection
// once written. Re-authentication must yield the same principal.
// Without a handshake first, or on a listener without SASL, the answer is
// ILLEGAL_SASL_STATE (and, on a SASL listener, the connection closes).
//
// Differences from Kafka: none known (connection.failed.authentication.delay.ms
// is not applied: the failure is answered at once).

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/sasl"
)

func init() { register(saslAuthenticateKey, 0, handleSaslAuthenticate) }

func handleSaslAuthenticate(_ context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.SASLAuthenticateRequest)
	resp := kmsg.NewPtrSASLAuthenticateResponse()
	s := r.conn.sasl
	if s == nil || s.sess == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate without a SaslHandshake naming the mechanism first")
		if s == nil {
			resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate on a listener without SASL")
			return encodeResponse(r, resp), nil
		}
		s.failed.Store(true)
		f := encodeResponse(r, resp)
		f.closeAfter = true
		return f, nil
	}
	lis, mech := r.conn.listener, s.mech
	out, done, err := s.sess.Step(req.SASLAuthBytes)
	resp.SASLAuthBytes = out
	if err == nil && done {
		name := s.sess.Principal()
		if s.authed.Load() && name != s.user {
			err = errors.New("Cannot change principals during re-authentication from User:" + s.user + ": User:" + name)
		} else {
			now := time.Now()
			life := sessionLifetime(s.lis.s.Reauth, s.sess.Expiry(), now)
			if life > 0 {
				s.expiry.Store(now.Add(life).UnixNano())
			} else {
				s.expiry.Store(0)
			}
			resp.SessionLifetimeMillis = int64(life / time.Millisecond)
			p := Principal{Type: "User", Name: name}
			r.conn.principal.Store(&p)
			s.user, s.authMech = name, mech
			s.mech, s.sess = "", nil
			s.authed.Store(true)
			n.metrics.saslSuccess.WithLabelValues(lis, mech).Inc()
			return encodeResponse(r, resp), nil
		}
	}
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), sasl.ErrAuthentication.Error()+": ")
		resp.ErrorCode, resp.ErrorMessage = kerr.SaslAuthenticationFailed.Code, kmsg.StringPtr(msg)
		resp.SASLAuthBytes = nil
		s.failed.Store(true)
		s.sess = nil
		n.metrics.saslFailure.WithLabelValues(lis, mech).Inc()
		r.conn.logger.Info("broker: SASL authentication failed", "mechanism", mech, "principal", s.user, "error", msg)
		f := encodeResponse(r, resp)
		f.closeAfter = true
		return f, nil
	}
	return encodeResponse(r, resp), nil // a challenge: the exchange goes on
}
