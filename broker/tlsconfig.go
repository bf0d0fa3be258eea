package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-io/strata/controller"
	"github.com/strata-io/strata/internal/pemkey"
	"github.com/strata-io/strata/storage/vfs"
)

// This file is TLS for SSL listeners and for the inter-broker clients,
// with Kafka's ssl.* settings and PEM key material (ssl.keystore.type=PEM,
// the format Go reads natively). Each SSL listener has its own
// [sslSettings]: listener.name.<listener>.ssl.<x> overrides ssl.<x> key by
// key, as Kafka's valuesWithPrefixOverride does. The key material is read
// when the node opens and again, without a restart, whenever a keystore or
// truststore file changes on disk (checked at each handshake: a stat).

// sslSettingNames are the ssl.* settings a listener reads, with Kafka's
// names; listener.name.<l>.<name> overrides each one.
var sslSettingNames = []string{
	"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.key", "ssl.keystore.certificate.chain",
	"ssl.key.password", "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates",
	"ssl.client.auth", "ssl.enabled.protocols", "ssl.cipher.suites", "ssl.principal.mapping.rules",
	"ssl.endpoint.identification.algorithm",
}

func isSSLSettingName(name string) bool {
	for _, s := range sslSettingNames {
		if s == name {
			return true
		}
	}
	return false
}

// listenerOverrideName splits listener.name.<l>.<ssl setting>: the
// setting's name and the listener (upper-cased), or false.
func listenerOverrideName(name string) (setting, listener string, ok bool) {
	rest, ok := strings.CutPrefix(name, "listener.name.")
	if !ok {
		return "", "", false
	}
	l, setting, ok := strings.Cut(rest, ".")
	if !ok || l == "" || !isSSLSettingName(setting) {
		return "", "", false
	}
	return setting, strings.ToUpper(l), true
}

// sslSettings are one listener's TLS settings, checked at parse time;
// the files are read by newTLSSource.
type sslSettings struct {
	Listener       string
	KeystoreFile   string // ssl.keystore.location: key and chain in one PEM
	KeystoreKey    string // ssl.keystore.key (inline PEM)
	KeystoreChain  string // ssl.keystore.certificate.chain (inline PEM)
	KeyPassword    string // ssl.key.password: decrypts an encrypted PKCS#8 key
	TruststoreFile string // ssl.truststore.location
	TruststoreCert string // ssl.truststore.certificates (inline PEM)
	ClientAuth     tls.ClientAuthType
	MinVersion     uint16
	MaxVersion     uint16
	CipherSuites   []uint16 // nil: Go's defaults
	Mapper         principalMapper
	VerifyHostname bool // ssl.endpoint.identification.algorithm=https
	// Nodes, on the CONTROLLER listener, are the principals
	// (Type:Name, from super.users) a client certificate must map to;
	// empty: any the truststore verifies (see controllerListenerTLS).
	Nodes []string
}

// parseSSLSettings reads listener l's ssl.* settings from props; get
// returns a setting's value (props, else the table's default).
func parseSSLSettings(l string, props map[string]string, get func(string) string) (*sslSettings, error) {
	val := func(name string) string {
		if v, ok := props["listener.name."+strings.ToLower(l)+"."+name]; ok {
			return strings.TrimSpace(v)
		}
		return get(name)
	}
	bad := func(name, why string) error {
		return fmt.Errorf("%w: listener %s: %s=%s: %s", ErrInvalidConfig, l, name, shownValue(name, val(name)), why)
	}
	s := &sslSettings{Listener: l, KeystoreFile: val("ssl.keystore.location"), KeystoreKey: val("ssl.keystore.key"),
		KeystoreChain: val("ssl.keystore.certificate.chain"), KeyPassword: val("ssl.key.password"),
		TruststoreFile: val("ssl.truststore.location"), TruststoreCert: val("ssl.truststore.certificates")}
	if t := val("ssl.keystore.type"); !strings.EqualFold(t, "PEM") {
		return nil, bad("ssl.keystore.type", "only PEM key stores are supported (convert a JKS or PKCS12 one with keytool and openssl)")
	}
	switch {
	case s.KeystoreFile != "" && (s.KeystoreKey != "" || s.KeystoreChain != ""):
		return nil, bad("ssl.keystore.location", "set either ssl.keystore.location or ssl.keystore.key with ssl.keystore.certificate.chain, not both")
	case s.KeystoreFile == "" && (s.KeystoreKey == "") != (s.KeystoreChain == ""):
		return nil, bad("ssl.keystore.key", "ssl.keystore.key and ssl.keystore.certificate.chain go together")
	case s.KeystoreFile == "" && s.KeystoreKey == "":
		return nil, bad("ssl.keystore.location", "an SSL listener needs a key store (ssl.keystore.location, or ssl.keystore.key and ssl.keystore.certificate.chain)")
	}
	if s.TruststoreFile != "" || s.TruststoreCert != "" {
		if t := val("ssl.truststore.type"); !strings.EqualFold(t, "PEM") {
			return nil, bad("ssl.truststore.type", "only PEM trust stores are supported")
		}
		if s.TruststoreFile != "" && s.TruststoreCert != "" {
			return nil, bad("ssl.truststore.location", "set either ssl.truststore.location or ssl.truststore.certificates, not both")
		}
	}
	switch strings.ToLower(val("ssl.client.auth")) {
	case "none", "":
		s.ClientAuth = tls.NoClientCert
	case "requested":
		s.ClientAuth = tls.VerifyClientCertIfGiven
	case "required":
		s.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, bad("ssl.client.auth", "want none, requested or required")
	}
	for _, p := range strings.Split(val("ssl.enabled.protocols"), ",") {
		var v uint16
		switch strings.TrimSpace(p) {
		case "":
			continue
		case "TLSv1.2":
			v = tls.VersionTLS12
		case "TLSv1.3":
			v = tls.VersionTLS13
		default:
			return nil, bad("ssl.enabled.protocols", fmt.Sprintf("protocol %q: want TLSv1.2 and/or TLSv1.3", strings.TrimSpace(p)))
		}
		if s.MinVersion == 0 || v < s.MinVersion {
			s.MinVersion = v
		}
		s.MaxVersion = max(s.MaxVersion, v)
	}
	if s.MinVersion == 0 {
		return nil, bad("ssl.enabled.protocols", "no protocol enabled")
	}
	if v := val("ssl.cipher.suites"); v != "" {
		ids := map[string]uint16{}
		for _, cs := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
			ids[cs.Name] = cs.ID
		}
		for _, name := range strings.Split(v, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			id, ok := ids[name]
			if !ok {
				return nil, bad("ssl.cipher.suites", fmt.Sprintf("unknown cipher suite %s (IANA names, as TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)", name))
			}
			s.CipherSuites = append(s.CipherSuites, id)
		}
	}
	var err error
	if s.Mapper, err = parsePrincipalRules(val("ssl.principal.mapping.rules")); err != nil {
		return nil, bad("ssl.principal.mapping.rules", err.Error())
	}
	switch strings.ToLower(val("ssl.endpoint.identification.algorithm")) {
	case "https":
		s.VerifyHostname = true
	case "":
	default:
		return nil, bad("ssl.endpoint.identification.algorithm", "want https or empty")
	}
	return s, nil
}

// tlsMaterial is one load of a listener's key and trust stores.
type tlsMaterial struct {
	cert   tls.Certificate
	pool   *x509.CertPool // nil: the system's roots
	server *tls.Config
}

// tlsSource serves a listener's current TLS material, reloading it when
// a keystore or truststore file changes. Safe for concurrent use.
type tlsSource struct {
	s      *sslSettings
	logger *slog.Logger

	mu    sync.Mutex
	stamp string
	cur   *tlsMaterial

	refused    atomic.Int64 // peers verifyNode refused
	refusedLog atomic.Int64 // unix nanos of the last refusal logged
}

func newTLSSource(s *sslSettings, logger *slog.Logger) (*tlsSource, error) {
	ts := &tlsSource{s: s, logger: logger}
	m, err := ts.load()
	if err != nil {
		return nil, err
	}
	ts.cur, ts.stamp = m, ts.fileStamp()
	return ts, nil
}

// fileStamp identifies the files' versions: size and mtime of each.
func (ts *tlsSource) fileStamp() string {
	var b strings.Builder
	for _, f := range []string{ts.s.KeystoreFile, ts.s.TruststoreFile} {
		if f == "" {
			continue
		}
		if fi, err := os.Stat(f); err == nil {
			fmt.Fprintf(&b, "%d/%d;", fi.Size(), fi.ModTime().UnixNano())
		} else {
			b.WriteString("missing;")
		}
	}
	return b.String()
}

// material returns the current material, first reloading it when a file
// changed; a reload that fails keeps the old material (and says so).
func (ts *tlsSource) material() *tlsMaterial {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if st := ts.fileStamp(); st != ts.stamp {
		m, err := ts.load()
		if err != nil {
			ts.logger.Warn("broker: TLS key material changed but does not load; keeping the old", "listener", ts.s.Listener, "err", err)
		} else {
			ts.cur = m
			ts.logger.Info("broker: TLS key material reloaded", "listener", ts.s.Listener)
		}
		ts.stamp = st
	}
	return ts.cur
}

// maxPEMFile bounds a key or trust store file read (a PEM bundle of a few
// hundred certificates is well below it).
const maxPEMFile = 16 << 20

func (ts *tlsSource) load() (*tlsMaterial, error) {
	s := ts.s
	keyPEM, chainPEM := []byte(s.KeystoreKey), []byte(s.KeystoreChain)
	what := "ssl.keystore.key"
	if s.KeystoreFile != "" {
		b, err := vfs.ReadFile(vfs.Default, s.KeystoreFile, maxPEMFile)
		if err != nil {
			return nil, fmt.Errorf("%w: listener %s: ssl.keystore.location: %v", ErrInvalidConfig, s.Listener, err)
		}
		keyPEM, chainPEM, what = b, b, "ssl.keystore.location "+s.KeystoreFile
	}
	cert, err := loadPEMKeyPair(keyPEM, chainPEM, s.KeyPassword)
	if err != nil {
		return nil, fmt.Errorf("%w: listener %s: %s: %v", ErrInvalidConfig, s.Listener, what, err)
	}
	m := &tlsMaterial{cert: cert}
	trust, what := []byte(s.TruststoreCert), "ssl.truststore.certificates"
	if s.TruststoreFile != "" {
		if trust, err = vfs.ReadFile(vfs.Default, s.TruststoreFile, maxPEMFile); err != nil {
			return nil, fmt.Errorf("%w: listener %s: ssl.truststore.location: %v", ErrInvalidConfig, s.Listener, err)
		}
		what = "ssl.truststore.location " + s.TruststoreFile
	}
	if len(trust) > 0 {
		m.pool = x509.NewCertPool()
		if !m.pool.AppendCertsFromPEM(trust) {
			return nil, fmt.Errorf("%w: listener %s: %s holds no PEM certificate", ErrInvalidConfig, s.Listener, what)
		}
	}
	m.server = &tls.Config{
		Certificates: []tls.Certificate{m.cert},
		ClientCAs:    m.pool,
		ClientAuth:   s.ClientAuth,
		MinVersion:   s.MinVersion,
		MaxVersion:   s.MaxVersion,
		CipherSuites: s.CipherSuites,
	}
	if len(s.Nodes) > 0 {
		m.server.VerifyConnection = ts.verifyNode
	}
	return m, nil
}

// verifyNode refuses, during the handshake (before any frame is read),
// a CONTROLLER listener peer whose certificate does not map to one of the
// cluster's nodes.
func (ts *tlsSource) verifyNode(cs tls.ConnectionState) error {
	p, err := ts.principalOf(cs)
	if err == nil {
		for _, n := range ts.s.Nodes {
			if n == p.String() {
				return nil
			}
		}
		err = fmt.Errorf("principal %s is not a node of this cluster (not in super.users)", p)
	}
	ts.refused.Add(1)
	now := time.Now().UnixNano()
	if last := ts.refusedLog.Load(); now-last >= int64(time.Second) && ts.refusedLog.CompareAndSwap(last, now) {
		ts.logger.Warn("broker: refused a connection to the CONTROLLER listener", "listener", ts.s.Listener, "err", err)
	}
	return err
}

// serverConfig is the listener's tls.Config: each handshake takes the
// current material.
func (ts *tlsSource) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion: ts.s.MinVersion,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return ts.material().server, nil
		},
	}
}

// clientConfig is the inter-broker client's tls.Config for a peer at
// host: the keystore as client certificate, the truststore as roots, and
// the host checked against the peer's certificate when
// ssl.endpoint.identification.algorithm is https.
func (ts *tlsSource) clientConfig(host string) *tls.Config {
	m := ts.material()
	cfg := &tls.Config{
		RootCAs:      m.pool,
		ServerName:   host,
		MinVersion:   ts.s.MinVersion,
		MaxVersion:   ts.s.MaxVersion,
		CipherSuites: ts.s.CipherSuites,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			c := ts.material().cert
			return &c, nil
		},
	}
	if !ts.s.VerifyHostname {
		// The chain is still verified, against the truststore; only the
		// name is not.
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("peer sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: m.pool, Intermediates: inter})
			return err
		}
	}
	return cfg
}

// dial opens a TLS connection to addr over d, handshaken.
func (ts *tlsSource) dial(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	td := tls.Dialer{NetDialer: d, Config: ts.clientConfig(host)}
	return td.DialContext(ctx, network, addr)
}

// principalOf maps a handshaken connection's client certificate to its
// principal: Anonymous without one; an error when no mapping rule applies
// (the connection is then refused, as Kafka's NoMatchingRule).
func (ts *tlsSource) principalOf(cs tls.ConnectionState) (Principal, error) {
	if len(cs.PeerCertificates) == 0 {
		return Anonymous, nil
	}
	dn := cs.PeerCertificates[0].Subject.ToRDNSequence().String()
	name, ok := ts.s.Mapper.name(dn)
	if !ok {
		return Principal{}, fmt.Errorf("no ssl.principal.mapping.rules rule applies to %q", dn)
	}
	return Principal{Type: "User", Name: name}, nil
}

// handshake runs the server side of a TLS handshake within timeout and
// returns the client's principal.
func (ts *tlsSource) handshake(ctx context.Context, tc *tls.Conn, timeout time.Duration) (Principal, error) {
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		return Principal{}, err
	}
	return ts.principalOf(tc.ConnectionState())
}

// loadPEMKeyPair reads a private key (PKCS#8, PKCS#1 or SEC 1; an
// ENCRYPTED PRIVATE KEY decrypted with password) from keyPEM and the
// certificate chain from chainPEM (internal/pemkey, which the CLI's client
// security shares).
func loadPEMKeyPair(keyPEM, chainPEM []byte, password string) (tls.Certificate, error) {
	return pemkey.LoadKeyPair(keyPEM, chainPEM, password)
}

// tlsHandshakeTimeout bounds a client's TLS handshake on an SSL listener.
const tlsHandshakeTimeout = 10 * time.Second

// openTLS reads every SSL listener's key material, and picks the
// inter-broker clients' when the inter-broker listener is SSL.
func (n *Node) openTLS() error {
	for name, s := range n.cfg.TLS {
		ts, err := newTLSSource(s, n.logger)
		if err != nil {
			return err
		}
		if n.tlsSrcs == nil {
			n.tlsSrcs = map[string]*tlsSource{}
		}
		n.tlsSrcs[name] = ts
	}
	if p := n.cfg.ControllerProtocol; p == protoSSL || p == protoSASLSSL {
		n.ctlTLS = n.tlsSrcs[n.cfg.ControllerListenerName]
		if p == protoSSL && n.cfg.hasRole(controller.RoleController) && len(n.ctlTLS.s.Nodes) == 0 {
			n.logger.Warn("broker: super.users is empty: the CONTROLLER listener takes any certificate its truststore verifies for a node; name the nodes' principals in super.users",
				"listener", n.cfg.ControllerListenerName)
		}
	}
	if l, ok := n.cfg.interBrokerListener(); ok && (l.Protocol == protoSSL || l.Protocol == protoSASLSSL) {
		n.interTLS = n.tlsSrcs[l.Name]
	}
	return nil
}

// listenerProtocol is l's security protocol (PLAINTEXT for a Listener
// built by hand, without one).
func listenerProtocol(l Listener) string {
	if l.Protocol == "" {
		return protoPlaintext
	}
	return l.Protocol
}

// protocolOf is the security protocol of this node's listener name.
func (n *Node) protocolOf(name string) string {
	for _, l := range n.cfg.Listeners {
		if l.Name == name {
			return listenerProtocol(l)
		}
	}
	return protoPlaintext
}

// authenticateTLS runs the TLS handshake of a connection on an SSL
// listener and sets its principal from the client certificate. False
// (the connection closed) when the handshake fails or no mapping rule
// applies; no request is read before it returns true.
func (c *conn) authenticateTLS(ts *tlsSource) bool {
	p, err := ts.handshake(c.ctx, c.nc.(*tls.Conn), tlsHandshakeTimeout)
	if err != nil {
		c.logger.Info("broker: TLS authentication failed", "err", err)
		c.nc.Close()
		c.cancel()
		close(c.done) // no writer ran: Close must not wait for one
		return false
	}
	c.principal.Store(&p)
	return true
}

// controllerDial is the dialer of this node's connections to the
// controller listener (the quorum client, the Raft transport, forwarding):
// TLS with the controller listener's material when it is SSL, from this
// node's own address; nil (the controller's plain dialer) otherwise.
//
// On a SASL_* controller listener every connection then authenticates
// with sasl.mechanism.controller.protocol (controller.SASLDialer).
func (n *Node) controllerDial() func(ctx context.Context, network, addr string) (net.Conn, error) {
	var dial func(ctx context.Context, network, addr string) (net.Conn, error)
	if n.ctlTLS != nil {
		dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return n.ctlTLS.dial(ctx, &net.Dialer{LocalAddr: n.localAddr()}, network, addr)
		}
	}
	if cs := n.cfg.ControllerSASL; cs != nil {
		var cl controller.SASLClient
		switch cs.Mechanism {
		case mechPlain:
			cl = controller.PlainSASLClient(cs.Options["username"], cs.Options["password"])
		case mechOAuthBearer:
			cl = controller.OAuthBearerSASLClient(func() (string, error) { return unsecuredLoginToken(cs.Options, time.Now()), nil })
		}
		return controller.SASLDialer(dial, n.localAddr(), cl)
	}
	return dial
}
