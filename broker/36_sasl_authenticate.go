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
// The failure's answer and the close wait
// connection.failed.authentication.delay.ms (100 ms), as Kafka's delayed
// close does. Differences from Kafka: none known.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
	out, life, err := r.conn.saslStep(req.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.SaslAuthenticationFailed.Code, kmsg.StringPtr(err.Error())
		f := encodeResponse(r, resp)
		f.closeAfter = true
		return f, nil
	}
	resp.SASLAuthBytes = out
	resp.SessionLifetimeMillis = int64(life / time.Millisecond)
	return encodeResponse(r, resp), nil
}
