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
// Differences from Kafka: version 0 (whose tokens follow as raw frames
// without SaslAuthenticate framing, KIP-152's predecessor) is not served:
// ApiVersions advertises v1 only, and a v0 handshake is refused like any
// unsupported version (the connection closes). Every client in use
// (franz-go, librdkafka, kafka-go, the Java client) sends v1.

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

func init() { registerMax(saslHandshakeKey, 1, 1, handleSaslHandshake) }

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
	case s.authed.Load() && req.Mechanism != s.authMech:
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
	return encodeResponse(r, resp), nil
}
