package broker

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-io/strata/broker/sasl"
	"github.com/strata-io/strata/controller"
	"github.com/strata-io/strata/storage/vfs"
)

// The connection side of SASL (KIP-43/152/368) on SASL_PLAINTEXT and
// SASL_SSL listeners: what a connection may do before it authenticates,
// the exchange's state between SaslHandshake (17_sasl_handshake.go) and
// SaslAuthenticate (36_sasl_authenticate.go), and session expiry.
//
// Before authentication only ApiVersions, SaslHandshake and
// SaslAuthenticate are served; any other request closes the connection,
// as does a frame above sasl.server.max.receive.size or not having
// authenticated within strata.sasl.authentication.timeout.ms of opening.
// The check runs on the executor, in request order, so a request
// pipelined behind a SaslAuthenticate is judged after the exchange, not
// when read. A failed exchange is answered (SASL_AUTHENTICATION_FAILED)
// and the connection closed once the answer is written.
//
// Re-authentication (KIP-368): with connections.max.reauth.ms > 0 a
// session lasts min(that, the credential's expiry); SaslAuthenticate v1+
// tells the client. Past it, anything but SaslHandshake/SaslAuthenticate
// closes the connection; a new exchange must authenticate the same
// principal with the same mechanism.

// saslListener is one SASL listener at run time: its settings and
// mechanisms by name.
type saslListener struct {
	s     *saslSettings
	mechs map[string]sasl.Mechanism
}

// saslConn is a SASL listener connection's state. The exchange fields are
// the executor's alone (handlers run one at a time); the atomics are read
// by the reader too.
type saslConn struct {
	lis    *saslListener
	opened time.Time

	mech     string       // the handshake's mechanism, until its exchange ends
	sess     sasl.Session // the exchange in progress (nil: none)
	authMech string       // mechanism of the last successful exchange
	user     string       // principal name it authenticated

	// rawTokens: a v0 SaslHandshake succeeded, so the exchange's tokens
	// come as bare size-prefixed frames, without a Kafka header (KIP-43),
	// until it ends. Set by the executor before the handshake's answer is
	// written; read by the reader at each frame.
	rawTokens atomic.Bool
	authed    atomic.Bool  // authenticated at least once
	failed    atomic.Bool  // an exchange failed: the connection is closing
	expiry    atomic.Int64 // session end, unix nanoseconds (0: none)
}

var (
	errSASLRequired = errors.New("broker: request before SASL authentication")
	errSASLExpired  = errors.New("broker: SASL session expired without re-authentication (connections.max.reauth.ms)")
	errSASLFailed   = errors.New("broker: SASL authentication failed")
)

// saslGate says whether r may run now on c; an error closes the
// connection. Called on the executor.
func (c *conn) saslGate(r *request) error {
	s := c.sasl
	if s == nil {
		return nil
	}
	if s.failed.Load() {
		return errSASLFailed
	}
	sasl := r.key == saslHandshakeKey || r.key == saslAuthenticateKey
	if !s.authed.Load() {
		if sasl || r.key == apiVersionsKey {
			return nil
		}
		return fmt.Errorf("%w: %s", errSASLRequired, kmsg.NameForKey(r.key))
	}
	if exp := s.expiry.Load(); exp != 0 && !sasl && time.Now().UnixNano() > exp {
		return errSASLExpired
	}
	return nil
}

// saslStep feeds the exchange in progress the client's next message. It
// returns the mechanism's reply and, when the exchange succeeded, the
// session lifetime (KIP-368; 0 for none) after setting the connection's
// principal. An error is the failure's message for the client (the
// exchange failed, counted and logged; the caller closes the connection).
func (c *conn) saslStep(in []byte) (out []byte, life time.Duration, err error) {
	s := c.sasl
	mech := s.mech
	out, done, err := s.sess.Step(in)
	if err == nil && done {
		name := s.sess.Principal()
		if s.authed.Load() && name != s.user {
			err = errors.New("Cannot change principals during re-authentication from User:" + s.user + ": User:" + name)
		} else {
			now := time.Now()
			life = sessionLifetime(s.lis.s.Reauth, s.sess.Expiry(), now)
			if life > 0 {
				s.expiry.Store(now.Add(life).UnixNano())
			} else {
				s.expiry.Store(0)
			}
			p := Principal{Type: "User", Name: name}
			c.principal.Store(&p)
			s.user, s.authMech = name, mech
			s.mech, s.sess = "", nil
			s.rawTokens.Store(false)
			s.authed.Store(true)
			c.n.metrics.saslSuccess.WithLabelValues(c.listener, mech).Inc()
			return out, life, nil
		}
	}
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), sasl.ErrAuthentication.Error()+": ")
		s.failed.Store(true)
		s.sess = nil
		c.n.metrics.saslFailure.WithLabelValues(c.listener, mech).Inc()
		c.logger.Info("broker: SASL authentication failed", "mechanism", mech, "principal", s.user, "error", msg)
		return nil, 0, errors.New(msg)
	}
	return out, 0, nil // a challenge: the exchange goes on
}

// dispatchRawToken queues a bare token of a v0 exchange (rawTokens): the
// mechanism's reply goes back as a bare size-prefixed frame; a failure
// closes the connection without an answer, as Kafka does for v0.
func (c *conn) dispatchRawToken(b []byte) error {
	r := &request{conn: c, start: time.Now(), held: int64(len(b)), key: saslHandshakeKey}
	handled := make(chan struct{})
	defer func() { // the next frame is a token or a request depending on this one
		select {
		case <-handled:
		case <-c.ctx.Done():
		}
	}()
	return c.enqueue(r, func(context.Context) (*frame, error) {
		defer close(handled)
		if c.sasl.failed.Load() || c.sasl.sess == nil {
			return nil, errSASLFailed
		}
		out, _, err := c.saslStep(b)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errSASLFailed, err)
		}
		buf := binary.BigEndian.AppendUint32(make([]byte, 0, sizeLen+len(out)), uint32(len(out)))
		return &frame{buf: append(buf, out...)}, nil
	})
}

// saslRawTokens reports whether the next frame is a bare v0 token.
func (c *conn) saslRawTokens() bool { return c.sasl != nil && c.sasl.rawTokens.Load() }

// saslReadDeadline bounds the wait for the next frame of an
// unauthenticated connection by its authentication deadline.
func (c *conn) saslReadDeadline(d time.Time) (time.Time, bool) {
	s := c.sasl
	if s == nil || s.authed.Load() {
		return d, false
	}
	if ad := s.opened.Add(s.lis.s.AuthTimeout); ad.Before(d) {
		return ad, true
	}
	return d, true
}

// saslFrameCap is the largest frame c may send now: sasl.server.max.receive.size
// before authentication, else 0 (only socket.request.max.bytes).
func (c *conn) saslFrameCap() int32 {
	if s := c.sasl; s != nil && !s.authed.Load() {
		return s.lis.s.MaxReceive
	}
	return 0
}

// sessionLifetime is KIP-368's session lifetime of an exchange completed
// at now: min(connections.max.reauth.ms, expiry - now), 0 for none (off
// when connections.max.reauth.ms is 0). A credential already expired
// gets 1ms: the next request closes the connection.
func sessionLifetime(reauth time.Duration, expiry, now time.Time) time.Duration {
	if reauth <= 0 {
		return 0
	}
	life := reauth
	if !expiry.IsZero() {
		if left := expiry.Sub(now); left < life {
			life = left
		}
	}
	return max(life, time.Millisecond)
}

// openSASL builds every SASL listener's mechanisms: PLAIN's users, the
// OAUTHBEARER validator (fetching a JWKS once, then refreshed in the
// background until the node stops), SCRAM when it is built.
func (n *Node) openSASL() error {
	for name, s := range n.cfg.SASL {
		sl := &saslListener{s: s, mechs: map[string]sasl.Mechanism{}}
		for _, m := range s.Mechanisms {
			switch m {
			case mechPlain:
				sl.mechs[m] = sasl.NewPlain(s.JAAS[m].PlainUsers())
			case mechOAuthBearer:
				v, err := n.oauthValidator(name, s)
				if err != nil {
					return err
				}
				ob := sasl.NewOAuthBearer(v)
				lg := n.logger.With("listener", name)
				ob.Log = func(reason string) { lg.Info("broker: OAUTHBEARER token refused", "reason", reason) }
				sl.mechs[m] = ob
			case mechScram256, mechScram512:
				mech, err := scramMechanisms(n, m)
				if err != nil {
					return fmt.Errorf("%w: listener %s: %s: %v", ErrInvalidConfig, name, m, err)
				}
				sl.mechs[m] = mech
			}
		}
		if n.saslLns == nil {
			n.saslLns = map[string]*saslListener{}
		}
		n.saslLns[name] = sl
	}
	return nil
}

// controllerSASL is what a SASL_* controller listener accepts: its
// mechanisms (built by openSASL like any SASL listener's) and the nodes'
// principals, super.users (nil: the listener is not SASL).
func (n *Node) controllerSASL() *controller.SASLServer {
	sl := n.saslLns[n.cfg.ControllerListenerName]
	if sl == nil {
		return nil
	}
	if len(n.cfg.ControllerNodes) == 0 {
		n.logger.Warn("broker: super.users is empty: the SASL CONTROLLER listener lets in any user its jaas config knows; name the nodes' principals in super.users",
			"listener", n.cfg.ControllerListenerName)
	}
	return &controller.SASLServer{Mechanisms: sl.mechs, Nodes: n.cfg.ControllerNodes}
}

// oauthValidator is listener name's OAUTHBEARER validator: JWKS when
// sasl.oauthbearer.jwks.endpoint.url is set, else Kafka's unsecured one
// with the jaas config's unsecuredValidator* options.
func (n *Node) oauthValidator(name string, s *saslSettings) (sasl.TokenValidator, error) {
	o := s.OAuth
	if o.JWKSURL == "" {
		v, err := sasl.NewUnsecured(s.JAAS[mechOAuthBearer].Options)
		if err != nil {
			return nil, fmt.Errorf("%w: listener %s: OAUTHBEARER sasl.jaas.config: %v", ErrInvalidConfig, name, err)
		}
		return v, nil
	}
	fetch, err := jwksFetcher(o.JWKSURL)
	if err != nil {
		return nil, fmt.Errorf("%w: listener %s: sasl.oauthbearer.jwks.endpoint.url: %v", ErrInvalidConfig, name, err)
	}
	lg := n.logger.With("listener", name, "url", o.JWKSURL)
	ctx, cancel := context.WithTimeout(n.ctx, 30*time.Second)
	defer cancel()
	v, err := sasl.NewJWKS(ctx, sasl.JWKSConfig{
		Fetch: fetch, Refresh: o.Refresh, RetryBackoff: o.RetryBackoff, RetryBackoffMax: o.RetryMax, Audience: o.Audience, Issuer: o.Issuer, ClockSkew: o.ClockSkew,
		PrincipalClaim: o.PrincipalClaim, ScopeClaim: o.ScopeClaim,
		Log: func(err error) { lg.Warn("broker: JWKS refresh failed; keeping the old keys", "err", err) },
	})
	if err != nil {
		return nil, fmt.Errorf("%w: listener %s: %v", ErrInvalidConfig, name, err)
	}
	n.loops.Add(1)
	go func() { defer n.loops.Done(); v.Run(n.ctx) }()
	return v, nil
}

// maxJWKSBytes bounds a JWKS document.
const maxJWKSBytes = 1 << 20

// jwksFetcher reads a JWKS from a file: URL (through vfs) or an HTTP(S)
// GET.
func jwksFetcher(raw string) (func(context.Context) ([]byte, error), error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "file":
		path := u.Path
		if path == "" {
			path = u.Opaque
		}
		return func(context.Context) ([]byte, error) { return vfs.ReadFile(vfs.Default, path, maxJWKSBytes) }, nil
	case "http", "https":
		cl := &http.Client{Timeout: 30 * time.Second}
		return func(ctx context.Context) ([]byte, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
			if err != nil {
				return nil, err
			}
			req.Header.Set("Accept", "application/json")
			resp, err := cl.Do(req)
			if err != nil {
				return nil, err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return nil, fmt.Errorf("GET %s: %s", raw, resp.Status)
			}
			b, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
			if err != nil {
				return nil, err
			}
			if len(b) > maxJWKSBytes {
				return nil, fmt.Errorf("GET %s: JWKS larger than %d bytes", raw, maxJWKSBytes)
			}
			return b, nil
		}, nil
	}
	return nil, fmt.Errorf("scheme %q: want file, http or https", u.Scheme)
}

// interBrokerSASL is the kgo option of this node's inter-broker clients
// (replica fetchers, the marker sender, transaction verification): the
// mechanism of sasl.mechanism.inter.broker.protocol with the credentials
// of the inter-broker listener's jaas config when that listener is SASL_*,
// else no SASL (kgo.SASL of nothing adds nothing).
func (n *Node) interBrokerSASL() kgo.Opt {
	ib := n.cfg.InterBrokerSASL
	if ib == nil {
		return kgo.SASL()
	}
	user, pass := ib.Options["username"], ib.Options["password"]
	switch ib.Mechanism {
	case mechPlain:
		return kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism())
	case mechScram256:
		return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism())
	case mechScram512:
		return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism())
	case mechOAuthBearer:
		return kgo.SASL(oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			return oauth.Auth{Token: unsecuredLoginToken(ib.Options, time.Now())}, nil
		}))
	}
	return kgo.SASL()
}

// unsecuredLoginToken is the token of Kafka's
// OAuthBearerUnsecuredLoginCallbackHandler: an unsecured JWS (alg none)
// with the unsecuredLoginStringClaim_<name> claims, iat now and exp after
// unsecuredLoginLifetimeSeconds (3600).
func unsecuredLoginToken(opts map[string]string, now time.Time) string {
	claims := map[string]any{}
	for k, v := range opts {
		if name, ok := strings.CutPrefix(k, "unsecuredLoginStringClaim_"); ok && name != "" {
			claims[name] = v
		}
	}
	life := int64(3600)
	if v, err := strconv.ParseInt(strings.TrimSpace(opts["unsecuredLoginLifetimeSeconds"]), 10, 64); err == nil && v > 0 {
		life = v
	}
	claims["iat"] = now.Unix()
	claims["exp"] = now.Unix() + life
	b, _ := json.Marshal(claims)
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." + enc(b) + "."
}
