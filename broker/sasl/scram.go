package sasl

// SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677; Kafka KIP-84), the
// server side as a pure state machine:
//
//	client-first   n,[a=authzid],n=user,r=cnonce[,ext...]      -> server-first r=cnonce+snonce,s=salt,i=iter
//	client-final   c=base64(gs2 header),r=cnonce+snonce,p=proof -> server-final v=ServerSignature
//
// Only the gs2 headers "n,," (the client does not use channel binding) and
// "n,a=<user>," are accepted, as Kafka's ScramMessages: "p=" (channel
// binding required) and "y," are refused.
// Extensions in client-first are ignored except tokenauth=true (Kafka's
// delegation tokens), which is refused: Strata has no delegation tokens.
//
// The proof check is constant time. An unknown user gets a server-first
// message with a salt derived from the user name and a per-mechanism secret
// (HMAC), so it cannot be told from a known user with a wrong password; the
// exchange then fails at client-final with the same error.
//
// As Kafka, the client-final nonce need only end with the combined nonce
// (librdkafka repeats its client nonce in front).
//
// Differences from Kafka: Kafka fails an unknown user already at
// client-first; the RFC's e= server-error replies are not sent (Kafka does
// not either: the failure is SASL_AUTHENTICATION_FAILED).

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
	"time"
)

// The SCRAM mechanism names as SaslHandshake carries them.
const (
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// Kafka's bounds on SCRAM iterations: ScramMechanism's minimum, and the
// maximum ScramControlManager accepts in AlterUserScramCredentials.
const (
	ScramMinIterations = 4096
	ScramMaxIterations = 16384
)

// ScramCredential is what the broker stores per user and mechanism: never
// the password, only what RFC 5802 §3 derives from it.
type ScramCredential struct {
	Salt       []byte
	StoredKey  []byte // H(ClientKey)
	ServerKey  []byte // HMAC(SaltedPassword, "Server Key")
	Iterations int
}

// ScramCredentials looks up a user's credential for a mechanism. It must be
// safe for concurrent use; the returned slices are only read.
type ScramCredentials interface {
	ScramCredential(user, mechanism string) (ScramCredential, bool)
}

// ScramCredentialsFunc adapts a function to ScramCredentials.
type ScramCredentialsFunc func(user, mechanism string) (ScramCredential, bool)

// ScramCredential implements ScramCredentials.
func (f ScramCredentialsFunc) ScramCredential(user, mechanism string) (ScramCredential, bool) {
	return f(user, mechanism)
}

// ScramHash returns the hash of a SCRAM mechanism, or false for a name that
// is not one.
func ScramHash(mechanism string) (func() hash.Hash, bool) {
	switch mechanism {
	case ScramSHA256:
		return sha256.New, true
	case ScramSHA512:
		return sha512.New, true
	}
	return nil, false
}

// ScramCredentialFromSalted derives the stored credential from a salted
// password (Hi(password, salt, i)), which is what AlterUserScramCredentials
// carries (KIP-554).
func ScramCredentialFromSalted(mechanism string, salted, salt []byte, iterations int) (ScramCredential, error) {
	h, ok := ScramHash(mechanism)
	if !ok {
		return ScramCredential{}, fmt.Errorf("sasl: unknown SCRAM mechanism %q", mechanism)
	}
	clientKey := hmacSum(h, salted, []byte("Client Key"))
	stored := h()
	stored.Write(clientKey)
	return ScramCredential{
		Salt:       append([]byte(nil), salt...),
		StoredKey:  stored.Sum(nil),
		ServerKey:  hmacSum(h, salted, []byte("Server Key")),
		Iterations: iterations,
	}, nil
}

// ScramSaltedPassword is Hi(password, salt, iterations) of RFC 5802 §2.2
// (PBKDF2 with the mechanism's HMAC).
func ScramSaltedPassword(mechanism, password string, salt []byte, iterations int) ([]byte, error) {
	h, ok := ScramHash(mechanism)
	if !ok {
		return nil, fmt.Errorf("sasl: unknown SCRAM mechanism %q", mechanism)
	}
	return pbkdf2.Key(h, password, salt, iterations, h().Size())
}

// ScramCredentialFromPassword derives the stored credential from a password
// (the bootstrap path, `strata format --add-scram`).
func ScramCredentialFromPassword(mechanism, password string, salt []byte, iterations int) (ScramCredential, error) {
	salted, err := ScramSaltedPassword(mechanism, password, salt, iterations)
	if err != nil {
		return ScramCredential{}, err
	}
	return ScramCredentialFromSalted(mechanism, salted, salt, iterations)
}

func hmacSum(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

// ScramOption configures NewScram.
type ScramOption func(*scramMech)

// WithScramRand sets the source of server nonces and of the unknown-user
// secret (tests make them fixed); crypto/rand by default.
func WithScramRand(r io.Reader) ScramOption { return func(m *scramMech) { m.rand = r } }

// WithScramFakeSecret sets the secret unknown users' salts derive from
// (nodes of a cluster may share one so that an unknown user's salt does not
// differ between brokers); random per mechanism by default.
func WithScramFakeSecret(secret []byte) ScramOption {
	return func(m *scramMech) { m.fakeSecret = append([]byte(nil), secret...) }
}

type scramMech struct {
	name       string
	h          func() hash.Hash
	creds      ScramCredentials
	rand       io.Reader
	fakeSecret []byte
	// serverNonce makes the server's half of the nonce; tests replace it
	// to replay RFC 7677's vector.
	serverNonce func() (string, error)
}

// NewScram returns the SCRAM-SHA-256 or SCRAM-SHA-512 mechanism over creds.
func NewScram(mechanism string, creds ScramCredentials, opts ...ScramOption) (Mechanism, error) {
	h, ok := ScramHash(mechanism)
	if !ok {
		return nil, fmt.Errorf("sasl: unknown SCRAM mechanism %q", mechanism)
	}
	m := &scramMech{name: mechanism, h: h, creds: creds, rand: rand.Reader}
	for _, o := range opts {
		o(m)
	}
	m.serverNonce = func() (string, error) {
		b := make([]byte, 24)
		if _, err := io.ReadFull(m.rand, b); err != nil {
			return "", err
		}
		return base64.RawStdEncoding.EncodeToString(b), nil
	}
	if m.fakeSecret == nil {
		m.fakeSecret = make([]byte, 32)
		if _, err := io.ReadFull(m.rand, m.fakeSecret); err != nil {
			return nil, fmt.Errorf("sasl: scram secret: %w", err)
		}
	}
	return m, nil
}

func (m *scramMech) Name() string { return m.name }

func (m *scramMech) Start() Session { return &scramSession{m: m} }

type scramState int

const (
	scramWantClientFirst scramState = iota
	scramWantClientFinal
	scramDone
	scramFailed
)

type scramSession struct {
	m     *scramMech
	state scramState

	user        string
	known       bool
	cred        ScramCredential
	gs2Header   string
	nonce       string // client nonce + server nonce
	clientFirst string // client-first-message-bare
	serverFirst string
}

// failure is the one error every failed SCRAM exchange returns: its text
// is Kafka's (ScramSaslServer's) and tells nothing of which part was wrong.
func (s *scramSession) failure() error {
	s.state = scramFailed
	return scramAuthError("Authentication failed during authentication due to invalid credentials with SASL mechanism " + s.m.name)
}

// scramAuthError is an error with Kafka's text that wraps ErrAuthentication.
type scramAuthError string

func (e scramAuthError) Error() string { return string(e) }
func (e scramAuthError) Unwrap() error { return ErrAuthentication }

// malformed fails the exchange on a message that does not parse. The text
// names the message, not the credential, so it reveals nothing about users.
func (s *scramSession) malformed(what string) error {
	s.state = scramFailed
	return fmt.Errorf("%w: invalid SCRAM %s", ErrAuthentication, what)
}

func (s *scramSession) Step(in []byte) ([]byte, bool, error) {
	switch s.state {
	case scramWantClientFirst:
		out, err := s.clientFirstMessage(string(in))
		if err != nil {
			return nil, false, err
		}
		s.state = scramWantClientFinal
		return out, false, nil
	case scramWantClientFinal:
		out, err := s.clientFinalMessage(string(in))
		if err != nil {
			return nil, false, err
		}
		s.state = scramDone
		return out, true, nil
	default:
		s.state = scramFailed
		return nil, false, fmt.Errorf("%w: SCRAM exchange already finished", ErrAuthentication)
	}
}

func (s *scramSession) Principal() string {
	if s.state != scramDone {
		return ""
	}
	return s.user
}

func (s *scramSession) Expiry() time.Time { return time.Time{} }

// scramUnescape decodes a saslname (RFC 5802 §5.1): "=2C" is ',' and "=3D"
// is '='; any other '=' is malformed.
func scramUnescape(v string) (string, bool) {
	if !strings.Contains(v, "=") {
		return v, true
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '=' {
			b.WriteByte(v[i])
			continue
		}
		if i+2 >= len(v) {
			return "", false
		}
		switch v[i+1 : i+3] {
		case "2C":
			b.WriteByte(',')
		case "3D":
			b.WriteByte('=')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

// printableNonce reports whether v is a valid RFC 5802 nonce: printable
// ASCII except ','.
func printableNonce(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < 0x21 || c > 0x7e || c == ',' {
			return false
		}
	}
	return true
}

func (s *scramSession) clientFirstMessage(msg string) ([]byte, error) {
	// gs2-header = gs2-cbind-flag "," [ authzid ] ","
	parts := strings.SplitN(msg, ",", 3)
	if len(parts) != 3 {
		return nil, s.malformed("client-first message")
	}
	switch {
	case parts[0] == "n":
	case strings.HasPrefix(parts[0], "p="):
		s.state = scramFailed
		return nil, fmt.Errorf("%w: SCRAM channel binding is not supported", ErrAuthentication)
	default:
		return nil, s.malformed("client-first message")
	}
	authzid := ""
	if parts[1] != "" {
		if !strings.HasPrefix(parts[1], "a=") {
			return nil, s.malformed("client-first message")
		}
		var ok bool
		if authzid, ok = scramUnescape(parts[1][2:]); !ok {
			return nil, s.malformed("client-first message")
		}
	}
	s.gs2Header = parts[0] + "," + parts[1] + ","
	s.clientFirst = parts[2]

	// client-first-message-bare = [reserved-mext ","] username "," nonce ["," extensions]
	attrs := strings.Split(parts[2], ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, s.malformed("client-first message")
	}
	user, ok := scramUnescape(attrs[0][2:])
	if !ok || user == "" {
		return nil, s.malformed("client-first message")
	}
	cnonce := attrs[1][2:]
	if !printableNonce(cnonce) {
		return nil, s.malformed("client-first message")
	}
	for _, ext := range attrs[2:] {
		k, v, _ := strings.Cut(ext, "=")
		if k == "tokenauth" && strings.EqualFold(v, "true") {
			s.state = scramFailed
			return nil, fmt.Errorf("%w: delegation tokens are not supported", ErrAuthentication)
		}
	}
	if authzid != "" && authzid != user {
		s.state = scramFailed
		return nil, fmt.Errorf("%w: authorization id differs from the user name", ErrAuthentication)
	}
	s.user = user

	s.cred, s.known = s.m.creds.ScramCredential(user, s.m.name)
	if !s.known || s.cred.Iterations <= 0 || len(s.cred.StoredKey) == 0 {
		s.known = false
		s.cred = ScramCredential{
			Salt:       hmacSum(s.m.h, s.m.fakeSecret, []byte("salt\x00"+s.m.name+"\x00"+user))[:16],
			Iterations: ScramMinIterations,
		}
	}

	snonce, err := s.m.serverNonce()
	if err != nil {
		s.state = scramFailed
		return nil, fmt.Errorf("%w: server nonce: %v", ErrAuthentication, err)
	}
	s.nonce = cnonce + snonce
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(s.cred.Salt) +
		",i=" + strconv.Itoa(s.cred.Iterations)
	return []byte(s.serverFirst), nil
}

func (s *scramSession) clientFinalMessage(msg string) ([]byte, error) {
	// client-final-message = channel-binding "," nonce ["," extensions] "," proof
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return nil, s.malformed("client-final message")
	}
	withoutProof, proofB64 := msg[:i], msg[i+3:]
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, s.malformed("client-final message")
	}
	cbind, err := base64.StdEncoding.DecodeString(attrs[0][2:])
	if err != nil {
		return nil, s.malformed("client-final message")
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil {
		return nil, s.malformed("client-final message")
	}
	// The channel binding must repeat the gs2 header and the nonce must end
	// with the combined one (Kafka's ScramSaslServer checks endsWith:
	// librdkafka sends its client nonce again in front of it); both are
	// checked without short-circuiting on the credential so that timing
	// tells nothing. The proof covers the nonce as sent.
	okBind := string(cbind) == s.gs2Header
	okNonce := strings.HasSuffix(attrs[1][2:], s.nonce)

	authMessage := s.clientFirst + "," + s.serverFirst + "," + withoutProof
	h := s.m.h
	okProof := false
	if len(proof) == h().Size() && s.known {
		clientSig := hmacSum(h, s.cred.StoredKey, []byte(authMessage))
		clientKey := make([]byte, len(proof))
		for j := range proof {
			clientKey[j] = proof[j] ^ clientSig[j]
		}
		sum := h()
		sum.Write(clientKey)
		okProof = subtle.ConstantTimeCompare(sum.Sum(nil), s.cred.StoredKey) == 1
	}
	if !okBind || !okNonce || !okProof {
		return nil, s.failure()
	}
	serverSig := hmacSum(h, s.cred.ServerKey, []byte(authMessage))
	return []byte("v=" + base64.StdEncoding.EncodeToString(serverSig)), nil
}

// ParseScramMechanism is a convenience for callers naming a mechanism in any
// case ("scram-sha-256").
func ParseScramMechanism(name string) (string, error) {
	u := strings.ToUpper(name)
	if _, ok := ScramHash(u); !ok {
		return "", errors.New("sasl: unknown SCRAM mechanism " + strconv.Quote(name))
	}
	return u, nil
}
