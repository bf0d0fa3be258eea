package clientsec

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestParseJAAS(t *testing.T) {
	for _, tc := range []struct {
		in      string
		module  string
		opts    map[string]string
		wantErr string
	}{
		{`org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="x";`,
			"org.apache.kafka.common.security.plain.PlainLoginModule", map[string]string{"username": "admin", "password": "x"}, ""},
		{"org.apache.kafka.common.security.scram.ScramLoginModule required\n  username=\"al ice\"\n  password=\"p\\\"w;=\\\\\";",
			"org.apache.kafka.common.security.scram.ScramLoginModule", map[string]string{"username": "al ice", "password": `p"w;=\`}, ""},
		{`PlainLoginModule required username=bare password = "y" ;`, "PlainLoginModule", map[string]string{"username": "bare", "password": "y"}, ""},
		{`x.OAuthBearerLoginModule required;`, "x.OAuthBearerLoginModule", map[string]string{}, ""},
		{`PlainLoginModule required username="a"`, "", nil, "final ';'"},
		{`PlainLoginModule mandatory username="a";`, "", nil, "control flag"},
		{`PlainLoginModule required username="a;`, "", nil, "unterminated"},
		{`PlainLoginModule required username="a"; Other required;`, "", nil, "one entry only"},
		{`PlainLoginModule`, "", nil, "want"},
	} {
		m, o, err := ParseJAAS(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: %v, want an error with %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || m != tc.module || len(o) != len(tc.opts) {
			t.Errorf("%q: %q %v %v", tc.in, m, o, err)
			continue
		}
		for k, v := range tc.opts {
			if o[k] != v {
				t.Errorf("%q: %s=%q, want %q", tc.in, k, o[k], v)
			}
		}
	}
}

func TestParseRefusesAndNeverQuotesSecrets(t *testing.T) {
	for _, tc := range []struct {
		props   map[string]string
		wantErr string
	}{
		{map[string]string{"security.protocol": "TLS"}, "want PLAINTEXT, SSL"},
		{map[string]string{"sasl.mechanism": "PLAIN"}, "use SASL_PLAINTEXT or SASL_SSL"},
		{map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.username": "u", "sasl.password": "hunter2"}, "want PLAIN, SCRAM"},
		{map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="u";`}, "needs username and password"},
		{map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
			"sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="hunter2";`}, "does not go with"},
		{map[string]string{"security.protocol": "SSL", "ssl.truststore.type": "JKS"}, "only PEM"},
		{map[string]string{"security.protocol": "SSL", "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----hunter2"}, "go together"},
		{map[string]string{"security.protocol": "SSL", "ssl.keystore.key": "hunter2", "ssl.keystore.certificate.chain": "x"}, "does not load"},
		{map[string]string{"security.protocol": "SSL", "ssl.key.password": "hunter2"}, "no key store"},
		{map[string]string{"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "dns"}, "want https or empty"},
	} {
		_, err := Parse(tc.props)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%v: %v, want an error with %q", tc.props, err, tc.wantErr)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%v: the error quotes a secret: %v", tc.props, err)
		}
	}
	c, err := Parse(nil)
	if err != nil || c.Protocol != "PLAINTEXT" || c.TLS != nil || c.Mechanism != nil || len(c.KgoOpts()) != 0 {
		t.Fatalf("no properties: %+v %v", c, err)
	}
}

func TestUnsecuredJWT(t *testing.T) {
	now := time.Unix(1700000000, 0)
	tok := UnsecuredJWT("alice", "read,write", now, time.Minute)
	parts := strings.Split(tok, ".")
	if len(parts) != 3 || parts[2] != "" {
		t.Fatalf("token %q: want header.claims. (no signature)", tok)
	}
	h, _ := base64.RawURLEncoding.DecodeString(parts[0])
	b, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims struct {
		Sub   string   `json:"sub"`
		Iat   int64    `json:"iat"`
		Exp   int64    `json:"exp"`
		Scope []string `json:"scope"`
	}
	if string(h) != `{"alg":"none"}` || json.Unmarshal(b, &claims) != nil || claims.Sub != "alice" || claims.Iat != now.Unix() ||
		claims.Exp != now.Unix()+60 || len(claims.Scope) != 2 {
		t.Fatalf("header %s claims %s", h, b)
	}
}

// writeFile writes content to a new file in dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// ping connects a client with opts to addrs and pings it.
func ping(t *testing.T, addrs []string, opts []kgo.Opt) error {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.RetryTimeout(2 * time.Second), kgo.RequestRetries(1)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return cl.Ping(ctx)
}

// testCert makes a CA and a server certificate for 127.0.0.1 it signed;
// it returns the CA's PEM and the server's tls.Certificate.
func testCert(t *testing.T) ([]byte, tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "server"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestSASLAgainstKfake: a --command-config file (or the STRATA_CLIENT_*
// variables alone) with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
// credentials authenticates to a kfake cluster with SASL on; a wrong
// password is refused; SASL_SSL trusts the CA of the trust store and
// refuses a server it does not sign.
func TestSASLAgainstKfake(t *testing.T) {
	caPEM, serverCert := testCert(t)
	dir := t.TempDir()
	caPath := writeFile(t, dir, "ca.pem", string(caPEM))
	otherCA, _ := testCert(t)
	otherCAPath := writeFile(t, dir, "other-ca.pem", string(otherCA))
	newCluster := func(extra ...kfake.Opt) []string {
		c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.EnableSASL(),
			kfake.Superuser("PLAIN", "alice", "alice-secret"),
			kfake.Superuser("SCRAM-SHA-256", "bob", "bob-secret"),
			kfake.Superuser("SCRAM-SHA-512", "carol", "carol-secret")}, extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c.ListenAddrs()
	}
	plainAddrs := newCluster()
	tlsAddrs := newCluster(kfake.TLS(&tls.Config{Certificates: []tls.Certificate{serverCert}}))
	jaas := func(module, user, pass string) string {
		return "org.apache.kafka.common.security." + module + " required username=\"" + user + "\" password=\"" + pass + "\";"
	}
	for _, tc := range []struct {
		name   string
		file   string // command config content ("" none)
		env    []string
		addrs  []string
		wantOK bool
	}{
		{"PLAIN", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=" + jaas("plain.PlainLoginModule", "alice", "alice-secret"), nil, plainAddrs, true},
		{"PLAIN wrong password", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config=" + jaas("plain.PlainLoginModule", "alice", "nope"), nil, plainAddrs, false},
		{"SCRAM-SHA-256", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config=" + jaas("scram.ScramLoginModule", "bob", "bob-secret"), nil, plainAddrs, true},
		{"SCRAM-SHA-256 wrong password", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config=" + jaas("scram.ScramLoginModule", "bob", "x"), nil, plainAddrs, false},
		{"SCRAM-SHA-512", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config=" + jaas("scram.ScramLoginModule", "carol", "carol-secret"), nil, plainAddrs, true},
		{"environment only, librdkafka names", "", []string{"STRATA_CLIENT_SECURITY_PROTOCOL=SASL_PLAINTEXT", "STRATA_CLIENT_SASL_MECHANISM=SCRAM-SHA-256",
			"STRATA_CLIENT_SASL_USERNAME=bob", "STRATA_CLIENT_SASL_PASSWORD=bob-secret"}, plainAddrs, true},
		{"environment overrides the file's password", "security.protocol=SASL_PLAINTEXT\nsasl.jaas.config=" + jaas("plain.PlainLoginModule", "alice", "stale"),
			[]string{"STRATA_CLIENT_SASL_JAAS_CONFIG=" + jaas("plain.PlainLoginModule", "alice", "alice-secret")}, plainAddrs, true},
		{"SASL_SSL", "security.protocol=SASL_SSL\nssl.truststore.type=PEM\nssl.truststore.location=" + caPath + "\nsasl.jaas.config=" + jaas("plain.PlainLoginModule", "alice", "alice-secret"), nil, tlsAddrs, true},
		{"SASL_SSL, untrusted server", "security.protocol=SASL_SSL\nssl.truststore.location=" + otherCAPath + "\nsasl.jaas.config=" + jaas("plain.PlainLoginModule", "alice", "alice-secret"), nil, tlsAddrs, false},
		{"SASL_PLAINTEXT without credentials in config: no SASL", "", nil, plainAddrs, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := ""
			if tc.file != "" {
				path = writeFile(t, t.TempDir(), "client.properties", tc.file)
			}
			c, err := Load(path, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			err = ping(t, tc.addrs, c.KgoOpts())
			if (err == nil) != tc.wantOK {
				t.Fatalf("ping: %v, want ok=%v", err, tc.wantOK)
			}
		})
	}
	// $STRATA_COMMAND_CONFIG names the file when no flag does.
	path := writeFile(t, dir, "env.properties", "security.protocol=SASL_PLAINTEXT\nsasl.jaas.config="+jaas("plain.PlainLoginModule", "alice", "alice-secret"))
	c, err := Load("", []string{EnvCommandConfig + "=" + path})
	if err != nil || c.Source != path || ping(t, plainAddrs, c.KgoOpts()) != nil {
		t.Fatalf("$%s: %+v %v", EnvCommandConfig, c, err)
	}
}

// TestEncryptedClientKey: ssl.key.password decrypts an encrypted PKCS#8
// client key (the broker's openssl-made test key, password s3cret); a
// wrong one is an error that does not show it.
func TestEncryptedClientKey(t *testing.T) {
	key, err := os.ReadFile("../../broker/testdata/tls/aes256-sha256.key")
	if err != nil {
		t.Fatal(err)
	}
	chain, err := os.ReadFile("../../broker/testdata/tls/cert.pem")
	if err != nil {
		t.Fatal(err)
	}
	p := map[string]string{"security.protocol": "SSL", "ssl.keystore.key": string(key), "ssl.keystore.certificate.chain": string(chain), "ssl.key.password": "s3cret"}
	c, err := Parse(p)
	if err != nil || len(c.TLS.Certificates) != 1 {
		t.Fatalf("encrypted key: %v", err)
	}
	p["ssl.key.password"] = "not-the-password"
	if _, err := Parse(p); err == nil || !strings.Contains(err.Error(), "wrong ssl.key.password") || strings.Contains(err.Error(), "not-the-password") {
		t.Fatalf("wrong password: %v", err)
	}
}
