package broker

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/controller"
	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/loadgen"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t testing.TB, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue makes a leaf certificate for subject, valid for loopback
// 127.0.0.1-127.0.0.9 and localhost, usable by servers and clients. It
// returns the key's and the certificate's PEM.
func (ca *testCA) issue(t testing.TB, subject pkix.Name) (keyPEM, certPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"localhost"},
	}
	for i := 1; i <= 9; i++ {
		tmpl.IPAddresses = append(tmpl.IPAddresses, net.IPv4(127, 0, 0, byte(i)))
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// writeKeystore writes key and chain into one PEM file (ssl.keystore.location).
func writeKeystore(t testing.TB, path string, keyPEM, certPEM []byte) string {
	t.Helper()
	if err := os.WriteFile(path, append(append([]byte{}, keyPEM...), certPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// clientTLS is a client's tls.Config trusting ca, with a client
// certificate when keyPEM is set.
func clientTLS(t testing.TB, ca *testCA, keyPEM, certPEM []byte) *tls.Config {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.pem)
	cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	if keyPEM != nil {
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg
}

// sslNode starts a node with an SSL listener (and the PLAINTEXT one) whose
// server certificate ca issued; extra overrides.
func sslNode(t testing.TB, ca *testCA, extra map[string]string) *Node {
	t.Helper()
	dir := t.TempDir()
	k, c := ca.issue(t, pkix.Name{CommonName: "broker"})
	props := map[string]string{
		"listeners":                   "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"ssl.keystore.type":           "PEM",
		"ssl.keystore.location":       writeKeystore(t, filepath.Join(t.TempDir(), "broker.pem"), k, c),
		"ssl.truststore.type":         "PEM",
		"ssl.truststore.certificates": string(ca.pem),
	}
	for k, v := range extra {
		props[k] = v
	}
	return startNode(t, dir, props)
}

// produceConsume produces one record to a new topic on n's SSL listener
// and reads it back; the error of the first thing that failed. The
// client stays open until the test ends.
func produceConsume(t testing.TB, n *Node, opts ...kgo.Opt) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	topic := "tls-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, t.Name())
	opts = append([]kgo.Opt{kgo.SeedBrokers(n.Addrs()["SSL"]), kgo.RetryTimeout(5 * time.Second),
		kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	t.Cleanup(cl.Close)
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("over tls")}).FirstErr(); err != nil {
		return err
	}
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		for _, r := range fs.Records() {
			if string(r.Value) == "over tls" {
				return nil
			}
		}
	}
	return ctx.Err()
}

func TestTLSProduceConsume(t *testing.T) {
	ca := newTestCA(t, "test CA")
	n := sslNode(t, ca, nil)
	if err := produceConsume(t, n, kgo.DialTLSConfig(clientTLS(t, ca, nil, nil))); err != nil {
		t.Fatalf("franz-go over SSL: %v", err)
	}
	// Metadata names each listener's own address: SSL through SSL,
	// PLAINTEXT through PLAINTEXT (several listeners at once).
	for _, tc := range []struct {
		listener string
		opts     []kgo.Opt
	}{{"SSL", []kgo.Opt{kgo.DialTLSConfig(clientTLS(t, ca, nil, nil))}}, {"PLAINTEXT", nil}} {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.Addrs()[tc.listener])}, tc.opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		m, err := kadm.NewClient(cl).BrokerMetadata(testCtx(t))
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Brokers) != 1 || net.JoinHostPort(m.Brokers[0].Host, fmt.Sprint(m.Brokers[0].Port)) != n.Addrs()[tc.listener] {
			t.Fatalf("Metadata through %s: brokers %+v, want %s", tc.listener, m.Brokers, n.Addrs()[tc.listener])
		}
	}
}

func TestTLSUntrustedCARefused(t *testing.T) {
	ca := newTestCA(t, "test CA")
	n := sslNode(t, ca, nil)
	other := newTestCA(t, "other CA")
	if err := produceConsume(t, n, kgo.DialTLSConfig(clientTLS(t, other, nil, nil)), kgo.RetryTimeout(time.Second), kgo.RecordDeliveryTimeout(3*time.Second)); err == nil {
		t.Fatal("a client trusting another CA produced and consumed")
	}
	_, err := tls.Dial("tcp", n.Addrs()["SSL"], clientTLS(t, other, nil, nil))
	var uerr x509.UnknownAuthorityError
	if !errors.As(err, &uerr) {
		t.Fatalf("a client trusting another CA: %v, want x509.UnknownAuthorityError", err)
	}
	// A PLAINTEXT client on the SSL port gets no Kafka answer.
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addrs()["SSL"]), kgo.RetryTimeout(time.Second), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := cl.Ping(ctx); err == nil {
		t.Fatal("a PLAINTEXT client was answered on the SSL listener")
	}
}

func TestTLSClientAuth(t *testing.T) {
	ca := newTestCA(t, "test CA")
	k, c := ca.issue(t, pkix.Name{CommonName: "alice", Organization: []string{"Example"}})
	for i, tc := range []struct {
		auth       string
		withCert   bool
		ok         bool
		principal  string
		extraRules string
	}{
		{"required", true, true, "User:CN=alice,O=Example", ""},
		{"required", false, false, "", ""},
		{"requested", false, true, "User:ANONYMOUS", ""},
		{"requested", true, true, "User:CN=alice,O=Example", ""},
		{"none", true, true, "User:ANONYMOUS", ""},
		{"required", true, true, "User:alice", `RULE:^CN=([^,]*),.*$/$1/L`},
		{"required", true, false, "", `RULE:^CN=bob,.*$/bob/`}, // no rule applies: refused
	} {
		name := tc.auth + "-" + map[bool]string{true: "cert", false: "nocert"}[tc.withCert]
		if tc.extraRules != "" {
			name += fmt.Sprintf("-rules%d", i)
		}
		// The name holds nothing of the rules: it is part of TempDir's
		// paths, and log.dirs is a comma-separated list.
		t.Run(name, func(t *testing.T) {
			extra := map[string]string{"ssl.client.auth": tc.auth}
			if tc.extraRules != "" {
				extra["listener.name.ssl.ssl.principal.mapping.rules"] = tc.extraRules
			}
			n := sslNode(t, ca, extra)
			cfg := clientTLS(t, ca, nil, nil)
			if tc.withCert {
				cfg = clientTLS(t, ca, k, c)
			}
			err := produceConsume(t, n, kgo.DialTLSConfig(cfg), kgo.RetryTimeout(time.Second), kgo.RecordDeliveryTimeout(3*time.Second))
			if (err == nil) != tc.ok {
				t.Fatalf("produce/consume: %v, want ok=%v", err, tc.ok)
			}
			if tc.ok {
				if got := connPrincipals(n, "SSL"); !strings.Contains(got, tc.principal) {
					t.Fatalf("principals on SSL: %s, want %s", got, tc.principal)
				}
			}
		})
	}
}

// connPrincipals lists the principals of listener's open connections.
func connPrincipals(n *Node, listener string) string {
	n.connMu.Lock()
	defer n.connMu.Unlock()
	var out []string
	for c := range n.conns {
		if c.listener == listener {
			out = append(out, c.Principal().String())
		}
	}
	return strings.Join(out, " ")
}

// TestTLSInterBrokerReplication: three nodes whose INTERNAL listener is
// SSL with client certificates required, and inter.broker.listener.name
// INTERNAL; clients use the PLAINTEXT one. The followers' fetches go over
// TLS with the brokers' own key store as client certificate, and the
// replicas become identical.
func TestTLSInterBrokerReplication(t *testing.T) {
	ca := newTestCA(t, "cluster CA")
	k, c := ca.issue(t, pkix.Name{CommonName: "broker", OrganizationalUnit: []string{"strata"}})
	extra := map[string]string{
		"listener.security.protocol.map":         "PLAINTEXT:PLAINTEXT,INTERNAL:SSL,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name":             "INTERNAL",
		"ssl.keystore.type":                      "PEM",
		"ssl.keystore.key":                       string(k),
		"ssl.keystore.certificate.chain":         string(c),
		"ssl.truststore.type":                    "PEM",
		"ssl.truststore.certificates":            string(ca.pem),
		"listener.name.internal.ssl.client.auth": "required",
	}
	own := map[int32]map[string]string{1: {"listeners": "PLAINTEXT://127.0.0.2:0,INTERNAL://127.0.0.2:0,CONTROLLER://127.0.0.2:0"}}
	for id := int32(2); id <= 3; id++ {
		own[id] = map[string]string{"listeners": fmt.Sprintf("PLAINTEXT://127.0.0.%d:0,INTERNAL://127.0.0.%d:0", id+1, id+1)}
	}
	cl3 := startClusterWith(t, 3, extra, own)
	for id := int32(1); id <= 3; id++ {
		if cl3.node(id).interTLS == nil {
			t.Fatalf("node %d: no inter-broker TLS", id)
		}
	}
	cl := cl3.client()
	createReplicatedTopic(t, cl, "tlsrepl", 2, 3, nil)
	produceN(t, cl, "tlsrepl", 0, 100)
	for p := int32(0); p < 2; p++ {
		if b := cl3.waitReplicasIdentical("tlsrepl", p); len(b) == 0 {
			t.Fatalf("partition %d: empty", p)
		}
	}
	// The followers' connections are on INTERNAL, authenticated as the
	// brokers' certificate.
	want := "User:CN=broker,OU=strata"
	testutil.Eventually(t, testWait, func() bool {
		for id := int32(1); id <= 3; id++ {
			if strings.Contains(connPrincipals(cl3.node(id), "INTERNAL"), want) {
				return true
			}
		}
		return false
	}, "a connection on INTERNAL as %s", want)
}

// TestTLSKeystoreReload: replacing the key store file changes the
// certificate the listener presents, without a restart; a file that does
// not load keeps the old one.
func TestTLSKeystoreReload(t *testing.T) {
	ca := newTestCA(t, "test CA")
	path := filepath.Join(t.TempDir(), "ks.pem")
	k, c := ca.issue(t, pkix.Name{CommonName: "first"})
	writeKeystore(t, path, k, c)
	n := sslNode(t, ca, map[string]string{"ssl.keystore.location": path})
	served := func() string {
		conn, err := tls.Dial("tcp", n.Addrs()["SSL"], clientTLS(t, ca, nil, nil))
		if err != nil {
			return "dial: " + err.Error()
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if got := served(); got != "first" {
		t.Fatalf("served %q, want first", got)
	}
	k2, c2 := ca.issue(t, pkix.Name{CommonName: "second"})
	writeKeystore(t, path+".tmp", k2, c2)
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, testWait, func() bool { return served() == "second" }, "the new certificate served")
	if err := os.WriteFile(path, []byte("not a key store"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if got := served(); got != "second" {
			t.Fatalf("after a broken key store: served %q, want the old certificate", got)
		}
	}
	if err := produceConsume(t, n, kgo.DialTLSConfig(clientTLS(t, ca, nil, nil))); err != nil {
		t.Fatal(err)
	}
}

// TestTLSEncryptedKey: ssl.key.password decrypts the encrypted PKCS#8
// keys openssl writes (testdata/tls, made with openssl pkcs8 -topk8 -v2
// aes-256-cbc, aes-128-cbc -v2prf hmacWithSHA1, des3 -v2prf
// hmacWithSHA512, password s3cret); a wrong or missing password is an
// error naming the setting; a node serves with such a key.
func TestTLSEncryptedKey(t *testing.T) {
	chain, err := os.ReadFile("testdata/tls/cert.pem")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"aes256-sha256.key", "aes128-sha1.key", "des3-sha512.key"} {
		key, err := os.ReadFile(filepath.Join("testdata/tls", f))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := loadPEMKeyPair(key, chain, "s3cret"); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		if _, err := loadPEMKeyPair(key, chain, "wrong"); err == nil || !strings.Contains(err.Error(), "wrong ssl.key.password") {
			t.Errorf("%s with a wrong password: %v", f, err)
		}
		if _, err := loadPEMKeyPair(key, chain, ""); err == nil || !strings.Contains(err.Error(), "ssl.key.password is not set") {
			t.Errorf("%s without a password: %v", f, err)
		}
	}
	key, _ := os.ReadFile("testdata/tls/aes256-sha256.key")
	ks := writeKeystore(t, filepath.Join(t.TempDir(), "ks.pem"), key, chain)
	props := map[string]string{
		"listeners":             "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"ssl.keystore.type":     "PEM",
		"ssl.keystore.location": ks,
		"ssl.key.password":      "nope",
	}
	if _, err := Open(Options{Config: testConfig(t, t.TempDir(), props), Logger: testLogger(), StartTimeout: testWait}); err == nil ||
		!errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "ssl.keystore.location") {
		t.Fatalf("open with a wrong ssl.key.password: %v", err)
	}
	props["ssl.key.password"] = "s3cret"
	n := startNode(t, t.TempDir(), props)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(chain)
	conn, err := tls.Dial("tcp", n.Addrs()["SSL"], &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
}

// TestTLSCloseDuringHandshake: a connection stuck before its handshake
// does not hold the node's Close for the shutdown timeout.
func TestTLSCloseDuringHandshake(t *testing.T) {
	ca := newTestCA(t, "test CA")
	n := sslNode(t, ca, nil)
	raw, err := net.Dial("tcp", n.Addrs()["SSL"])
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	testutil.Eventually(t, testWait, func() bool { return connPrincipals(n, "SSL") != "" }, "the connection accepted")
	start := time.Now()
	n.Close()
	if took := time.Since(start); took > n.cfg.ShutdownTimeout/2 {
		t.Fatalf("Close took %v with a connection in its handshake (shutdown timeout %v)", took, n.cfg.ShutdownTimeout)
	}
}

// TestTLSKcat: kcat (librdkafka's own TLS and protocol code) produces and
// consumes over an SSL listener that requires client certificates.
func TestTLSKcat(t *testing.T) {
	kcat := needClient(t, "kcat", "-V")
	ca := newTestCA(t, "test CA")
	n := sslNode(t, ca, map[string]string{"ssl.client.auth": "required"})
	dir := t.TempDir()
	k, c := ca.issue(t, pkix.Name{CommonName: "kcat"})
	files := map[string][]byte{"ca.pem": ca.pem, "client.key": k, "client.pem": c}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sec := []string{"-b", n.Addrs()["SSL"], "-X", "security.protocol=ssl", "-X", "ssl.ca.location=" + filepath.Join(dir, "ca.pem"),
		"-X", "ssl.certificate.location=" + filepath.Join(dir, "client.pem"), "-X", "ssl.key.location=" + filepath.Join(dir, "client.key")}
	createTopic(t, newAdmin(t, n), "kc-tls", 1, nil)
	var in strings.Builder
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&in, "k%d:v%d\n", i, i)
	}
	runClient(t, []byte(in.String()), kcat, append(sec, "-P", "-t", "kc-tls", "-K:", "-X", "acks=all")...)
	out := runClient(t, nil, kcat, append(sec, "-C", "-t", "kc-tls", "-o", "beginning", "-c", "20", "-e", "-K:", "-f", "%k:%s\n")...)
	if string(out) != in.String() {
		t.Fatalf("kcat consumed over SSL:\n%s\nwant:\n%s", out, in.String())
	}
	// Without a client certificate the handshake is refused.
	ctx, cancel := context.WithTimeout(context.Background(), clientTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-b", n.Addrs()["SSL"], "-X", "security.protocol=ssl",
		"-X", "ssl.ca.location="+filepath.Join(dir, "ca.pem"), "-L", "-m", "3")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("kcat without a client certificate listed metadata:\n%s", out)
	}
}

// TestTLSControllerListener: the CONTROLLER listener over SSL with client
// certificates required and super.users naming the nodes. The broker-only nodes' quorum clients dial it
// with TLS and the brokers' certificate: they register, take replicas and
// replicate; a connection without TLS gets nothing from it.
func TestTLSControllerListener(t *testing.T) {
	ca := newTestCA(t, "cluster CA")
	k, c := ca.issue(t, pkix.Name{CommonName: "node"})
	extra := map[string]string{
		"listener.security.protocol.map":           "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
		"ssl.keystore.type":                        "PEM",
		"ssl.keystore.key":                         string(k),
		"ssl.keystore.certificate.chain":           string(c),
		"ssl.truststore.type":                      "PEM",
		"ssl.truststore.certificates":              string(ca.pem),
		"listener.name.controller.ssl.client.auth": "required",
		// The nodes' principal: only its certificates pass the CONTROLLER
		// listener's handshake (Raft between voters, the brokers' clients).
		"super.users": "User:CN=node",
	}
	cl3 := startClusterWith(t, 3, extra, nil)
	for id := int32(1); id <= 3; id++ {
		if cl3.node(id).ctlTLS == nil {
			t.Fatalf("node %d: controller connections without TLS", id)
		}
	}
	cl := cl3.client()
	createReplicatedTopic(t, cl, "ctltls", 1, 3, nil)
	produceN(t, cl, "ctltls", 0, 50)
	cl3.waitReplicasIdentical("ctltls", 0)

	// A plain TCP peer: its bytes are not a TLS ClientHello, so the
	// handshake fails and the connection closes without an answer.
	raw, err := net.Dial("tcp", cl3.node(1).Addrs()["CONTROLLER"])
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(testWait))
	raw.Write([]byte{0, 0, 0, 1, 0})
	var b [64]byte
	nr, err := raw.Read(b[:])
	if err == nil && nr > 0 && b[0] != 0x15 { // 0x15: a TLS alert record
		t.Fatalf("a non-TLS peer read %x from the SSL controller listener", b[:nr])
	}
	// A TLS client without a certificate is refused at the handshake.
	tc, err := tls.Dial("tcp", cl3.node(1).Addrs()["CONTROLLER"], clientTLS(t, ca, nil, nil))
	if err == nil {
		tc.SetDeadline(time.Now().Add(testWait))
		_, err = tc.Read(b[:]) // TLS 1.3: the refusal arrives after the client's Finished
		tc.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a TLS client without a certificate: %v, want a certificate error", err)
	}
}

// TestTLSInterBrokerHostnameCheck: the inter-broker client checks the
// peer certificate's name against the host it dials when
// ssl.endpoint.identification.algorithm is https (Kafka's default), and
// only the chain when it is empty; an untrusted chain is refused either
// way.
func TestTLSInterBrokerHostnameCheck(t *testing.T) {
	ca := newTestCA(t, "test CA")
	k, c := ca.issue(t, pkix.Name{CommonName: "peer"}) // SANs: 127.0.0.1-9, localhost
	other := newTestCA(t, "other CA")
	ok, oc := other.issue(t, pkix.Name{CommonName: "stranger"})
	serve := func(keyPEM, certPEM []byte) string {
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				conn.(*tls.Conn).Handshake()
				conn.Close()
			}
		}()
		return ln.Addr().String()
	}
	good, stranger := serve(k, c), serve(ok, oc)
	for _, tc := range []struct {
		algo, addr string
		ok         bool
	}{
		{"https", good, true},
		{"", good, true},
		{"https", stranger, false},
		{"", stranger, false},
	} {
		cfg := testConfig(t, t.TempDir(), map[string]string{
			"listeners": "SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "ssl.keystore.type": "PEM",
			"ssl.keystore.key": string(k), "ssl.keystore.certificate.chain": string(c),
			"ssl.truststore.type": "PEM", "ssl.truststore.certificates": string(ca.pem),
			"ssl.endpoint.identification.algorithm": tc.algo,
		})
		ts, err := newTLSSource(cfg.TLS["SSL"], testLogger())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), testWait)
		conn, err := ts.dial(ctx, &net.Dialer{}, "tcp", tc.addr)
		cancel()
		if conn != nil {
			conn.Close()
		}
		if (err == nil) != tc.ok {
			t.Errorf("algorithm %q to %s: %v, want ok=%v", tc.algo, tc.addr, err, tc.ok)
		}
	}
	// A name mismatch: the peer's certificate is for 127.0.0.1-9 and
	// localhost; dialed as another name it is refused with https only.
	for _, tc := range []struct {
		algo string
		ok   bool
	}{{"https", false}, {"", true}} {
		cfg := testConfig(t, t.TempDir(), map[string]string{
			"listeners": "SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "ssl.keystore.type": "PEM",
			"ssl.keystore.key": string(k), "ssl.keystore.certificate.chain": string(c),
			"ssl.truststore.type": "PEM", "ssl.truststore.certificates": string(ca.pem),
			"ssl.endpoint.identification.algorithm": tc.algo,
		})
		ts, err := newTLSSource(cfg.TLS["SSL"], testLogger())
		if err != nil {
			t.Fatal(err)
		}
		tcfg := ts.clientConfig("broker.example") // not a name the certificate has
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: testWait}, "tcp", good, tcfg)
		if conn != nil {
			conn.Close()
		}
		if (err == nil) != tc.ok {
			t.Errorf("algorithm %q, certificate not for the dialed name: %v, want ok=%v", tc.algo, err, tc.ok)
		}
	}
}

// TestTLSLoadgen: `strata loadgen run --tls-ca` produces and consumes
// over an SSL listener (the PLAINTEXT one of the same node is not given).
func TestTLSLoadgen(t *testing.T) {
	ca := newTestCA(t, "test CA")
	n := sslNode(t, ca, nil)
	dir := t.TempDir()
	caFile, out := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "run.json")
	if err := os.WriteFile(caFile, ca.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	code := loadgen.CLI{}.Main([]string{"run", "--brokers", n.Addrs()["SSL"], "--tls-ca", caFile, "--consumers", "1", "--duration", "1s", "--warmup", "0s",
		"--quiet", "--out", out}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("loadgen run over TLS: exit %d\n%s", code, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res loadgen.Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if res.Produce.Records == 0 || res.Consume.Records == 0 || res.Produce.Errors != 0 {
		t.Fatalf("loadgen over TLS: produced %d (%d errors), consumed %d", res.Produce.Records, res.Produce.Errors, res.Consume.Records)
	}
	t.Logf("loadgen over TLS: produced %d, consumed %d records in 1s", res.Produce.Records, res.Consume.Records)
	// Without --tls-ca the same address is not reachable.
	code = loadgen.CLI{}.Main([]string{"run", "--brokers", n.Addrs()["SSL"], "--duration", "1s", "--warmup", "0s", "--quiet"}, &stdout, &stderr)
	if code == 0 {
		t.Fatal("loadgen run without TLS succeeded against the SSL listener")
	}
	// verify too: its producers, group and partition readers and its
	// final read all over TLS, a clean verdict.
	stdout.Reset()
	stderr.Reset()
	vout := filepath.Join(dir, "verify.json")
	code = loadgen.CLI{}.Main([]string{"verify", "--brokers", n.Addrs()["SSL"], "--tls-ca", caFile, "--duration", "1s", "--rate", "300",
		"--partitions", "2", "--replication-factor", "1", "--quiet", "--out", vout}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("loadgen verify over TLS: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	var vr loadgen.VerifyResult
	if b, err := os.ReadFile(vout); err != nil || json.Unmarshal(b, &vr) != nil || !vr.Clean() || vr.Report.Acked < 250 {
		t.Fatalf("loadgen verify over TLS: %v %s", err, stdout.String())
	}
	if code := (loadgen.CLI{}).Main([]string{"verify", "--brokers", n.Addrs()["SSL"], "--tls-cert", caFile, "--quiet"}, &stdout, &stderr); code != 2 {
		t.Fatalf("verify --tls-cert without --tls-key: exit %d, want 2", code)
	}
}

// TestTLSControllerListenerOnlyNodes: an SSL CONTROLLER listener requires
// a client certificate whatever ssl.client.auth says, and with super.users
// set takes only certificates whose principal is one of them: a
// certificate of the cluster's own CA for another principal is refused at
// the handshake and its RPC changes nothing; a node's is served.
func TestTLSControllerListenerOnlyNodes(t *testing.T) {
	ca := newTestCA(t, "cluster CA")
	nk, nc := ca.issue(t, pkix.Name{CommonName: "node"})
	n := startNode(t, t.TempDir(), map[string]string{
		"listeners":                      "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
		"ssl.keystore.type":              "PEM",
		"ssl.keystore.key":               string(nk),
		"ssl.keystore.certificate.chain": string(nc),
		"ssl.truststore.type":            "PEM",
		"ssl.truststore.certificates":    string(ca.pem),
		"ssl.client.auth":                "none", // forced to required on the CONTROLLER listener
		"super.users":                    "User:CN=node;User:CN=admin",
	})
	addr := n.Addrs()["CONTROLLER"]
	rpc := func(keyPEM, certPEM []byte, topic string) error {
		cfg := clientTLS(t, ca, keyPEM, certPEM)
		cl := controller.NewClient(controller.ClientOptions{Addrs: []string{addr}, Dial: func(ctx context.Context, network, a string) (net.Conn, error) {
			d := tls.Dialer{Config: cfg}
			return d.DialContext(ctx, network, a)
		}})
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		res, err := cl.CreateTopics(ctx, metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: topic, NumPartitions: 1, ReplicationFactor: 1}}})
		if err == nil && res[0].Err != nil {
			err = res[0].Err
		}
		return err
	}
	sk, sc := ca.issue(t, pkix.Name{CommonName: "stranger"})
	for _, tc := range []struct {
		name       string
		key, cert  []byte
		topic      string
		wantServed bool
	}{
		{"no certificate", nil, nil, "nocert", false},
		{"a certificate of the cluster CA, not a node's", sk, sc, "stranger", false},
		{"a node's certificate", nk, nc, "node", true},
	} {
		err := rpc(tc.key, tc.cert, tc.topic)
		if (err == nil) != tc.wantServed {
			t.Errorf("%s: CreateTopics: %v, want served=%v", tc.name, err, tc.wantServed)
		}
		_, exists := n.ctl.State().TopicByName(tc.topic)
		if !tc.wantServed && exists {
			t.Errorf("%s: created topic %s", tc.name, tc.topic)
		}
	}
	// The refusal is the handshake's: a raw TLS client with the
	// stranger's certificate reads an alert, never a frame.
	tc, err := tls.Dial("tcp", addr, clientTLS(t, ca, sk, sc))
	if err == nil {
		tc.SetDeadline(time.Now().Add(testWait))
		var b [16]byte
		_, err = tc.Read(b[:]) // TLS 1.3: the server's verdict follows the client's Finished
		tc.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "bad certificate") {
		t.Fatalf("a stranger's certificate: %v, want a bad certificate alert", err)
	}
	if got := n.ctlTLS.refused.Load(); got < 2 {
		t.Fatalf("refused %d connections, want at least 2", got)
	}
}

// TestInterBrokerAPIsNeedANodeCertificate: with the authorizer on and
// super.users naming the nodes' certificate principal, the broker-to-broker
// APIs (a follower Fetch, WriteTxnMarkers) sent over mTLS with another
// principal's certificate of the same CA are refused with Kafka's errors
// (CLUSTER_ACTION missing), and with a node's certificate are not.
func TestInterBrokerAPIsNeedANodeCertificate(t *testing.T) {
	ca := newTestCA(t, "cluster CA")
	n := sslNode(t, ca, authzOn(map[string]string{"ssl.client.auth": "required", "super.users": "User:CN=node"}))
	cases := map[string]authzCase{}
	for _, tc := range authzCases(t, n) {
		if tc.name == "Fetch follower" || tc.name == "WriteTxnMarkers" {
			cases[tc.name] = tc
		}
	}
	if len(cases) != 2 {
		t.Fatalf("cases %v", cases)
	}
	dial := func(cn string) *rawConn {
		k, c := ca.issue(t, pkix.Name{CommonName: cn})
		tc, err := tls.DialWithDialer(&net.Dialer{Timeout: testWait}, "tcp", n.Addrs()["SSL"], clientTLS(t, ca, k, c))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tc.Close() })
		tc.SetDeadline(time.Now().Add(testWait))
		return &rawConn{t: t, nc: tc}
	}
	for _, who := range []struct {
		cn      string
		refused bool
	}{{"stranger", true}, {"node", false}} {
		c := dial(who.cn)
		for name, tc := range cases {
			tc.req.SetVersion(apis[tc.req.Key()].max)
			var codes []int16
			errorCodes(reflect.ValueOf(c.roundTrip(tc.req)), &codes)
			refused := slices.Contains(codes, tc.want)
			if refused != who.refused {
				t.Errorf("%s as CN=%s: codes %v, refused with %d: %v, want %v", name, who.cn, codes, tc.want, refused, who.refused)
			}
		}
	}
}
