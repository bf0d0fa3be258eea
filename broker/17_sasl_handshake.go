package broker

// SaslHandshake (key 17), version 1.
//
// Behaviour, as Kafka's SaslServerAuthenticator: on a SASL_* listener the
// handshake names the mechanism of the SaslAuthenticate exchange that
// follows; the response lists the listener's enabled mechanisms. An
// unknown mechanism is UNSUPPORTED_SASL_MECHANISM and the connection
// closes once that is written. On an authenticated connection a handshake
// begins re-authentication (KIP-368), which must keep the mechanism
// (ILLEGAL_SASL_STATE and close otherwise). A handshake while an exchange
// is in progress closes the connection. On a listener without SASL the
// answer is ILLEGAL_SASL_STATE, as Kafka's KafkaApis.
//
// Version 0 (KIP-43, before SaslAuthenticate existed): after a successful
// v0 handshake the exchange's tokens come as bare size-prefixed frames
// without a Kafka header, answered the same way (sasl_conn.go's
// dispatchRawToken); a failure closes the connection without an answer,
// as Kafka. librdkafka needs v0 advertised to use SASL at all (it then
// uses v1 and SaslAuthenticate). Re-authentication needs v1.
//
// Differences from Kafka: none known.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

func init() { registerMax(saslHandshakeKey, 0, 1, handleSaslHandshake) }

func handleSaslHandshake(_ context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.SASLHandshakeRequest)
	resp := kmsg.NewPtrSASLHandshakeResponse()
	s := r.conn.sasl
	if s == nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return encodeResponse(r, resp), nil
	}
	if s.sess != nil {
		return nil, fmt.Errorf("%w: SaslHandshake during a SASL exchange", errSASLFailed)
	}
	resp.SupportedMechanisms = append([]string(nil), s.lis.s.Mechanisms...)
	m, ok := s.lis.mechs[req.Mechanism]
	switch {
	case !ok:
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
	case s.authed.Load() && (req.Mechanism != s.authMech || r.version == 0):
		resp.ErrorCode = kerr.IllegalSaslState.Code
	}
	if resp.ErrorCode != 0 {
		s.failed.Store(true)
		r.conn.logger.Info("broker: SASL handshake refused", "mechanism", req.Mechanism, "error", kerr.ErrorForCode(resp.ErrorCode))
		f := encodeResponse(r, resp)
		f.closeAfter = true
		return f, nil
	}
	s.mech, s.sess = req.Mechanism, m.Start()
	if r.version == 0 {
		s.rawTokens.Store(true)
	}
	return encodeResponse(r, resp), nil
}
