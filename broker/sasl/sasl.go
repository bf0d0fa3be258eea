// Package sasl holds the server side of Kafka's SASL mechanisms (KIP-43,
// KIP-152): PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER. Each mechanism is a
// pure state machine over the bytes of SaslAuthenticate requests; the
// broker's connection drives it and owns the I/O, the timeouts and the
// principal it yields.
package sasl

import (
	"errors"
	"time"
)

// Mechanism is one SASL mechanism a listener offers.
type Mechanism interface {
	// Name is the mechanism's IANA name as SaslHandshake carries it,
	// e.g. "PLAIN" or "SCRAM-SHA-256".
	Name() string
	// Start begins one authentication exchange.
	Start() Session
}

// Session is one authentication exchange of a mechanism, fed the client's
// messages (SaslAuthenticate auth_bytes) in order.
type Session interface {
	// Step consumes the client's next message and returns the server's
	// reply. done reports the exchange succeeded; the reply of the last
	// step is sent too (SCRAM's server-final message). A non-nil error
	// fails the exchange: the broker answers SASL_AUTHENTICATION_FAILED
	// with the error's text, which must not tell which part was wrong.
	// An error may carry a reply the client must see first (OAUTHBEARER's
	// JSON challenge); the mechanism decides how it is framed.
	Step(in []byte) (out []byte, done bool, err error)
	// Principal is the authenticated user name, valid once done.
	Principal() string
	// Expiry is when the credential stops being valid (an OAUTHBEARER
	// token's exp), or the zero time when it has no end of its own; the
	// broker bounds connections.max.reauth.ms by it (KIP-368).
	Expiry() time.Time
}

// ErrAuthentication is the error every failed exchange wraps.
var ErrAuthentication = errors.New("authentication failed")
