// Package clientsec is the security of Strata's own Kafka clients (the
// `strata` client subcommands, `strata tier`, loadgen): Kafka's client
// properties, as kafka-topics.sh --command-config reads them, turned into
// franz-go options.
//
// Properties come from a properties file (--command-config FILE, or
// $STRATA_COMMAND_CONFIG), each overridden by the environment variable
// STRATA_CLIENT_<NAME> (the name upper-cased, dots as underscores:
// STRATA_CLIENT_SECURITY_PROTOCOL, STRATA_CLIENT_SASL_JAAS_CONFIG). A
// secret is never taken from the command line: it lives in the file or the
// environment. Understood:
//
//	security.protocol        PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL
//	ssl.truststore.type      PEM (JKS and PKCS12 refused)
//	ssl.truststore.location  PEM file of CA certificates (default: the system's)
//	ssl.truststore.certificates  the same, inline
//	ssl.keystore.type        PEM
//	ssl.keystore.location    PEM file of the client key and certificate chain
//	ssl.keystore.key, ssl.keystore.certificate.chain  the same, inline
//	ssl.key.password         password of an encrypted (PKCS#8) key
//	ssl.endpoint.identification.algorithm  https (default: check the host) or empty
//	sasl.mechanism           PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER
//	sasl.jaas.config         PlainLoginModule / ScramLoginModule required
//	                         username="..." password="..."; OAuthBearerLoginModule
//	                         required unsecuredLoginStringClaim_sub="..." (an
//	                         unsecured JWT, Kafka's default login for tests)
//	sasl.username, sasl.password  librdkafka's names, instead of the JAAS line
//
// Other names (client.id, request.timeout.ms, ...) are accepted and ignored,
// as one properties file often serves several tools.
package clientsec

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/strata-io/strata/internal/pemkey"
	"github.com/strata-io/strata/internal/props"
)

// EnvCommandConfig names the properties file when --command-config is not
// given; EnvPrefix prefixes the per-property variables.
const (
	EnvCommandConfig = "STRATA_COMMAND_CONFIG"
	EnvPrefix        = "STRATA_CLIENT_"
)

// known are the properties this package reads; EnvName(name) of each may
// override the file.
var known = []string{
	"security.protocol", "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates",
	"ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.key", "ssl.keystore.certificate.chain",
	"ssl.key.password", "ssl.endpoint.identification.algorithm", "sasl.mechanism", "sasl.jaas.config",
	"sasl.username", "sasl.password",
}

// EnvName is the variable that overrides property name.
func EnvName(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, ".", "_"))
}

// Config is one client's security, parsed and checked. The zero value is
// PLAINTEXT without SASL.
type Config struct {
	Protocol  string      // security.protocol, upper-cased
	TLS       *tls.Config // nil unless SSL or SASL_SSL
	Mechanism sasl.Mechanism
	// Source says where the settings came from, for error messages.
	Source string
}

// Load reads path (or, when it is "", the file $STRATA_COMMAND_CONFIG
// names, if set) and the STRATA_CLIENT_* variables of environ, and parses
// them. No file and no variable is PLAINTEXT.
func Load(path string, environ []string) (*Config, error) {
	env := map[string]string{}
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	p := map[string]string{}
	if path == "" {
		path = env[EnvCommandConfig]
	}
	source := "the environment"
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("command config: %v", err)
		}
		p, err = props.Parse(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("command config %s: %v", path, err)
		}
		source = path
	}
	for _, name := range known {
		if v, ok := env[EnvName(name)]; ok {
			p[name] = v
		}
	}
	c, err := Parse(p)
	if err != nil {
		return nil, fmt.Errorf("command config %s: %w", source, err)
	}
	c.Source = source
	return c, nil
}

// Parse checks client properties and builds the TLS configuration and the
// SASL mechanism they ask for. Errors never quote a secret.
func Parse(p map[string]string) (*Config, error) {
	get := func(name string) string { return strings.TrimSpace(p[name]) }
	c := &Config{Protocol: strings.ToUpper(get("security.protocol"))}
	if c.Protocol == "" {
		c.Protocol = "PLAINTEXT"
	}
	var useTLS, useSASL bool
	switch c.Protocol {
	case "PLAINTEXT":
	case "SSL":
		useTLS = true
	case "SASL_PLAINTEXT":
		useSASL = true
	case "SASL_SSL":
		useTLS, useSASL = true, true
	default:
		return nil, fmt.Errorf("security.protocol=%q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", c.Protocol)
	}
	if useTLS {
		v, set := p["ssl.endpoint.identification.algorithm"]
		t, err := tlsConfig(get, set && strings.TrimSpace(v) == "")
		if err != nil {
			return nil, err
		}
		c.TLS = t
	}
	if useSASL {
		m, err := mechanism(get)
		if err != nil {
			return nil, err
		}
		c.Mechanism = m
	} else if get("sasl.mechanism") != "" || get("sasl.jaas.config") != "" {
		return nil, fmt.Errorf("sasl.* set but security.protocol=%s: use SASL_PLAINTEXT or SASL_SSL", c.Protocol)
	}
	return c, nil
}

// KgoOpts are the franz-go options of c: the TLS dialer and the SASL
// mechanism, none for PLAINTEXT.
func (c *Config) KgoOpts() []kgo.Opt {
	if c == nil {
		return nil
	}
	var opts []kgo.Opt
	if c.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(c.TLS.Clone()))
	}
	if c.Mechanism != nil {
		opts = append(opts, kgo.SASL(c.Mechanism))
	}
	return opts
}

func tlsConfig(get func(string) string, explicitNoHostCheck bool) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if t := get("ssl.truststore.type"); t != "" && !strings.EqualFold(t, "PEM") {
		return nil, fmt.Errorf("ssl.truststore.type=%s: only PEM trust stores are supported", t)
	}
	trust := []byte(get("ssl.truststore.certificates"))
	if loc := get("ssl.truststore.location"); loc != "" {
		if len(trust) > 0 {
			return nil, errors.New("set ssl.truststore.location or ssl.truststore.certificates, not both")
		}
		b, err := os.ReadFile(loc)
		if err != nil {
			return nil, fmt.Errorf("ssl.truststore.location: %v", err)
		}
		trust = b
	}
	if len(trust) > 0 {
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(trust) {
			return nil, errors.New("the trust store holds no PEM certificate")
		}
	}
	if t := get("ssl.keystore.type"); t != "" && !strings.EqualFold(t, "PEM") {
		return nil, fmt.Errorf("ssl.keystore.type=%s: only PEM key stores are supported", t)
	}
	keyPEM, chainPEM := []byte(get("ssl.keystore.key")), []byte(get("ssl.keystore.certificate.chain"))
	if loc := get("ssl.keystore.location"); loc != "" {
		if len(keyPEM) > 0 || len(chainPEM) > 0 {
			return nil, errors.New("set ssl.keystore.location or ssl.keystore.key with ssl.keystore.certificate.chain, not both")
		}
		b, err := os.ReadFile(loc)
		if err != nil {
			return nil, fmt.Errorf("ssl.keystore.location: %v", err)
		}
		keyPEM, chainPEM = b, b
	}
	if (len(keyPEM) > 0) != (len(chainPEM) > 0) {
		return nil, errors.New("ssl.keystore.key and ssl.keystore.certificate.chain go together")
	}
	if len(keyPEM) > 0 {
		cert, err := pemkey.LoadKeyPair(keyPEM, chainPEM, get("ssl.key.password"))
		if err != nil {
			return nil, fmt.Errorf("the key store does not load: %v", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	} else if get("ssl.key.password") != "" {
		return nil, errors.New("ssl.key.password is set but there is no key store (ssl.keystore.location)")
	}
	switch a := strings.ToLower(get("ssl.endpoint.identification.algorithm")); {
	case a == "https" || !explicitNoHostCheck:
		if a != "https" && a != "" {
			return nil, fmt.Errorf("ssl.endpoint.identification.algorithm=%s: want https or empty", a)
		}
	case a == "":
		// Set to empty, as Kafka allows: the chain is still verified
		// against the trust store, only the host name is not.
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the server sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		}
	}
	return cfg, nil
}

// mechanism builds the SASL mechanism sasl.mechanism names with the
// credentials of sasl.jaas.config (or sasl.username / sasl.password).
func mechanism(get func(string) string) (sasl.Mechanism, error) {
	mech := strings.ToUpper(get("sasl.mechanism"))
	if mech == "" {
		mech = "PLAIN" // Kafka's default, GSSAPI, is not supported here
	}
	opts := map[string]string{}
	if j := get("sasl.jaas.config"); j != "" {
		module, o, err := ParseJAAS(j)
		if err != nil {
			return nil, fmt.Errorf("sasl.jaas.config: %v", err)
		}
		want := map[string]string{
			"PLAIN":         "org.apache.kafka.common.security.plain.PlainLoginModule",
			"SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
			"SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
			"OAUTHBEARER":   "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
		}[mech]
		if want != "" && module != want && !strings.HasSuffix(want, "."+module) {
			return nil, fmt.Errorf("sasl.jaas.config: login module %s does not go with sasl.mechanism=%s (want %s)", module, mech, want)
		}
		opts = o
	}
	if u := get("sasl.username"); u != "" {
		opts["username"] = u
	}
	if pw := get("sasl.password"); pw != "" {
		opts["password"] = pw
	}
	user, pass := opts["username"], opts["password"]
	switch mech {
	case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
		if user == "" || pass == "" {
			return nil, fmt.Errorf("sasl.mechanism=%s needs username and password (sasl.jaas.config, or sasl.username and sasl.password)", mech)
		}
	}
	switch mech {
	case "PLAIN":
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case "SCRAM-SHA-256":
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case "SCRAM-SHA-512":
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	case "OAUTHBEARER":
		sub := opts["unsecuredLoginStringClaim_sub"]
		if sub == "" {
			return nil, errors.New("sasl.mechanism=OAUTHBEARER: sasl.jaas.config needs unsecuredLoginStringClaim_sub (the only login this client has: an unsecured JWT)")
		}
		life := 3600 * time.Second
		if v := opts["unsecuredLoginLifetimeSeconds"]; v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("sasl.jaas.config: unsecuredLoginLifetimeSeconds=%q: want a positive integer", v)
			}
			life = time.Duration(n) * time.Second
		}
		scope := opts["unsecuredLoginListClaim_scope"]
		return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			return oauth.Auth{Token: UnsecuredJWT(sub, scope, time.Now(), life)}, nil
		}), nil
	default:
		return nil, fmt.Errorf("sasl.mechanism=%s: want PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", mech)
	}
}

// UnsecuredJWT is the token Kafka's OAuthBearerUnsecuredLoginCallbackHandler
// makes: header {"alg":"none"}, claims sub, iat, exp (and scope, a list,
// when scope is set: names separated by commas or spaces), no signature.
func UnsecuredJWT(sub, scope string, now time.Time, life time.Duration) string {
	enc := base64.RawURLEncoding
	claims := map[string]any{"sub": sub, "iat": now.Unix(), "exp": now.Add(life).Unix()}
	if scope != "" {
		claims["scope"] = strings.FieldsFunc(scope, func(r rune) bool { return r == ',' || r == ' ' })
	}
	b, _ := json.Marshal(claims)
	return enc.EncodeToString([]byte(`{"alg":"none"}`)) + "." + enc.EncodeToString(b) + "."
}

// ParseJAAS parses one JAAS login-module entry as Kafka's sasl.jaas.config
// holds it: `<module class> <flag> key="value" key2=value2;` (flag
// required, requisite, sufficient or optional; values quoted with \" and
// \\ escapes, or bare). It returns the module's class and its options.
func ParseJAAS(s string) (module string, opts map[string]string, err error) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, isSpace)
	if i <= 0 {
		return "", nil, errors.New("want `<LoginModule class> required key=\"value\" ...;`")
	}
	module, s = s[:i], strings.TrimSpace(s[i:])
	i = strings.IndexFunc(s, func(r rune) bool { return isSpace(r) || r == ';' })
	if i < 0 {
		i = len(s)
	}
	switch flag := strings.ToLower(s[:i]); flag {
	case "required", "requisite", "sufficient", "optional":
	default:
		return "", nil, fmt.Errorf("login module %s: control flag %q: want required", module, flag)
	}
	s = s[i:]
	opts = map[string]string{}
	for {
		s = strings.TrimLeftFunc(s, isSpace)
		if s == "" {
			return "", nil, errors.New("missing the final ';'")
		}
		if s[0] == ';' {
			if rest := strings.TrimSpace(s[1:]); rest != "" {
				return "", nil, errors.New("more than one login module (one entry only)")
			}
			return module, opts, nil
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return "", nil, fmt.Errorf("option at %q: want key=value", clip(s))
		}
		key := strings.TrimSpace(s[:eq])
		if strings.ContainsFunc(key, isSpace) {
			return "", nil, fmt.Errorf("option key %q has a space", key)
		}
		s = strings.TrimLeftFunc(s[eq+1:], isSpace)
		var val strings.Builder
		if strings.HasPrefix(s, `"`) {
			j := 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				val.WriteByte(s[j])
			}
			if j >= len(s) {
				return "", nil, fmt.Errorf("option %s: unterminated quoted value", key)
			}
			s = s[j+1:]
		} else {
			j := strings.IndexFunc(s, func(r rune) bool { return isSpace(r) || r == ';' })
			if j < 0 {
				j = len(s)
			}
			val.WriteString(s[:j])
			s = s[j:]
		}
		opts[key] = val.String()
	}
}

func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' }

// clip shortens s for an error message (never a whole value: it may be a
// secret's neighbour).
func clip(s string) string {
	if len(s) > 12 {
		return s[:12] + "..."
	}
	return s
}

// HTTPTransportTLS is c's TLS configuration for an https admin listener:
// the trust store and the client certificate, nil for PLAINTEXT settings.
func (c *Config) HTTPTransportTLS() *tls.Config {
	if c == nil || c.TLS == nil {
		return nil
	}
	return c.TLS.Clone()
}

// Dialer returns a dial function opening TLS connections with c (plain
// ones without TLS), for clients that dial themselves.
func (c *Config) Dialer(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if c == nil || c.TLS == nil {
		return d.DialContext
	}
	td := &tls.Dialer{NetDialer: d, Config: c.TLS.Clone()}
	return td.DialContext
}
