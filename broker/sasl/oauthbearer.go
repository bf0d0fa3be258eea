package sasl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// OAUTHBEARER (RFC 7628, KIP-255) over a TokenValidator.
//
// The client's first message is a GS2 header and key=value pairs, each
// ended by ^A:
//
//	n,[a=authzid],^Aauth=Bearer <token>^A[key=value^A...]^A
//
// A valid token ends the exchange at once (the server sends nothing). An
// invalid one is answered, as Kafka's OAuthBearerSaslServer does, with a
// JSON challenge ({"status":"invalid_token"}); the client replies with a
// lone ^A and the exchange fails with that JSON as the error text, which is
// what clients (kgo's TestOAuthAuth) look for.

// Token is what a validator learnt from a valid token.
type Token struct {
	Principal string
	Expiry    time.Time
	Scope     []string
}

// TokenError is a validator's refusal: Status is RFC 7628's error status
// (invalid_token, insufficient_scope), Scope the scope required; Reason is
// for the broker's log only, never sent to the client.
type TokenError struct {
	Status string
	Scope  []string
	Reason string
}

func (e *TokenError) Error() string { return e.Status + ": " + e.Reason }

// challenge is the JSON the client is sent, in Kafka's field names.
func (e *TokenError) challenge() []byte {
	m := map[string]string{"status": e.Status}
	if len(e.Scope) > 0 {
		m["scope"] = strings.Join(e.Scope, " ")
	}
	b, _ := json.Marshal(m)
	return b
}

// TokenValidator checks one bearer token. Safe for concurrent use.
// Errors should be *TokenError; any other error is reported as
// invalid_token.
type TokenValidator interface {
	Validate(token string) (Token, error)
}

// OAuthBearer is the OAUTHBEARER mechanism.
type OAuthBearer struct {
	v TokenValidator
	// Log, when set, is told why a token was refused (never the client).
	Log func(reason string)
}

// NewOAuthBearer returns OAUTHBEARER checking tokens with v.
func NewOAuthBearer(v TokenValidator) *OAuthBearer { return &OAuthBearer{v: v} }

func (*OAuthBearer) Name() string { return "OAUTHBEARER" }

func (o *OAuthBearer) Start() Session { return &oauthSession{o: o} }

type oauthSession struct {
	o       *OAuthBearer
	state   int // 0: initial response expected; 1: error sent, ^A expected; 2: done
	errJSON []byte
	tok     Token
}

func (s *oauthSession) Step(in []byte) ([]byte, bool, error) {
	switch s.state {
	case 1:
		// The client's ^A (anything else fails the same way).
		s.state = 2
		return nil, false, fmt.Errorf("%w: %s", ErrAuthentication, s.errJSON)
	case 2:
		return nil, false, fmt.Errorf("%w: OAUTHBEARER exchange already complete", ErrAuthentication)
	}
	authzid, token, err := parseOAuthInitial(in)
	if err != nil {
		s.state = 2
		return nil, false, fmt.Errorf("%w: %v", ErrAuthentication, err)
	}
	t, err := s.o.v.Validate(token)
	if err == nil && authzid != "" && authzid != t.Principal {
		err = &TokenError{Status: "invalid_token", Reason: "authorization id differs from the token's principal"}
	}
	if err != nil {
		te := (*TokenError)(nil)
		if !errors.As(err, &te) {
			te = &TokenError{Status: "invalid_token", Reason: err.Error()}
		}
		if s.o.Log != nil {
			s.o.Log(te.Reason)
		}
		s.errJSON = te.challenge()
		s.state = 1
		return bytes.Clone(s.errJSON), false, nil
	}
	s.tok, s.state = t, 2
	return nil, true, nil
}

func (s *oauthSession) Principal() string { return s.tok.Principal }
func (s *oauthSession) Expiry() time.Time { return s.tok.Expiry }

// parseOAuthInitial parses the client's initial response: the
// authorization id (may be empty) and the bearer token.
func parseOAuthInitial(in []byte) (authzid, token string, err error) {
	msg := string(in)
	gs2, rest, ok := strings.Cut(msg, "\x01")
	if !ok {
		return "", "", errors.New("invalid OAUTHBEARER initial response: no ^A after the GS2 header")
	}
	// GS2 header: n or y (no channel binding: OAUTHBEARER has none), an
	// optional a=authzid, and a ','.
	fields := strings.Split(gs2, ",")
	if len(fields) != 3 || (fields[0] != "n" && fields[0] != "y") || fields[2] != "" {
		return "", "", errors.New("invalid OAUTHBEARER initial response: bad GS2 header")
	}
	if fields[1] != "" {
		z, ok := strings.CutPrefix(fields[1], "a=")
		if !ok {
			return "", "", errors.New("invalid OAUTHBEARER initial response: bad GS2 header")
		}
		authzid = strings.NewReplacer("=2C", ",", "=3D", "=").Replace(z)
	}
	body, ok := strings.CutSuffix(rest, "\x01\x01")
	if !ok {
		return "", "", errors.New("invalid OAUTHBEARER initial response: not ended by ^A^A")
	}
	for _, kv := range strings.Split(body, "\x01") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return "", "", errors.New("invalid OAUTHBEARER initial response: bad key=value")
		}
		if k == "auth" {
			if token != "" {
				return "", "", errors.New("invalid OAUTHBEARER initial response: auth given twice")
			}
			scheme, t, ok := strings.Cut(v, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(t) == "" {
				return "", "", errors.New("invalid OAUTHBEARER initial response: auth is not a Bearer token")
			}
			token = strings.TrimSpace(t)
		}
	}
	if token == "" {
		return "", "", errors.New("invalid OAUTHBEARER initial response: no auth")
	}
	return authzid, token, nil
}
