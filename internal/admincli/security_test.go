package admincli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// writePKI writes a CA (ca.pem) and a key store for 127.0.0.1 it signed
// (server.pem: key and certificate) into dir.
func writePKI(t *testing.T, dir string) (caPath, keystorePath string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cli test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "broker"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	caPath, keystorePath = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "server.pem")
	if err := os.WriteFile(caPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	ks := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	if err := os.WriteFile(keystorePath, ks, 0o600); err != nil {
		t.Fatal(err)
	}
	return caPath, keystorePath
}

// TestCommandConfigSASLAgainstKfake: --command-config (and, instead, the
// STRATA_COMMAND_CONFIG and STRATA_CLIENT_* variables) gives every client
// subcommand its SASL credentials: against a kfake cluster that requires
// SCRAM-SHA-512 or PLAIN, topic create, produce, consume and group list
// work with them and fail without.
func TestCommandConfigSASLAgainstKfake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-512", "ops", "ops-secret"), kfake.Superuser("PLAIN", "app", "app-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addr := c.ListenAddrs()[0]
	cc := filepath.Join(t.TempDir(), "admin.properties")
	if err := os.WriteFile(cc, []byte("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"+
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="ops" password="ops-secret";`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := cliAt(t, addr, "", "topic", "create", "secured", "-p", "1", "--command-config", cc); r.code != ExitOK {
		t.Fatalf("topic create over SASL: %v", r)
	}
	if r := cliAt(t, addr, "a\nb\n", "produce", "secured", "--command-config", cc); r.code != ExitOK {
		t.Fatalf("produce over SASL: %v", r)
	}
	if r := cliAt(t, addr, "", "consume", "secured", "-c", "2", "--command-config", cc); r.code != ExitOK || !strings.Contains(r.stdout, "b") {
		t.Fatalf("consume over SASL: %v", r)
	}
	// The environment alone: PLAIN through STRATA_CLIENT_* variables.
	t.Setenv("STRATA_CLIENT_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
	t.Setenv("STRATA_CLIENT_SASL_MECHANISM", "PLAIN")
	t.Setenv("STRATA_CLIENT_SASL_JAAS_CONFIG", `org.apache.kafka.common.security.plain.PlainLoginModule required username="app" password="app-secret";`)
	if r := cliAt(t, addr, "", "topic", "list"); r.code != ExitOK || !strings.Contains(r.stdout, "secured") {
		t.Fatalf("topic list with STRATA_CLIENT_*: %v", r)
	}
	t.Setenv("STRATA_CLIENT_SASL_JAAS_CONFIG", `org.apache.kafka.common.security.plain.PlainLoginModule required username="app" password="wrong";`)
	if r := cliAt(t, addr, "", "topic", "list"); r.code == ExitOK {
		t.Fatalf("topic list with a wrong password: %v", r)
	}
	t.Setenv("STRATA_CLIENT_SECURITY_PROTOCOL", "")
	t.Setenv("STRATA_CLIENT_SASL_MECHANISM", "")
	t.Setenv("STRATA_CLIENT_SASL_JAAS_CONFIG", "")
	os.Unsetenv("STRATA_CLIENT_SECURITY_PROTOCOL")
	os.Unsetenv("STRATA_CLIENT_SASL_MECHANISM")
	os.Unsetenv("STRATA_CLIENT_SASL_JAAS_CONFIG")
	if r := cliAt(t, addr, "", "group", "list", "--timeout", "2s"); r.code == ExitOK {
		t.Fatalf("group list without SASL against a SASL cluster: %v", r)
	}
	t.Setenv("STRATA_COMMAND_CONFIG", cc)
	if r := cliAt(t, addr, "", "group", "list"); r.code != ExitOK {
		t.Fatalf("group list with $STRATA_COMMAND_CONFIG: %v", r)
	}
	// A bad file is a usage error naming the setting, never echoing a secret.
	bad := filepath.Join(t.TempDir(), "bad.properties")
	os.WriteFile(bad, []byte("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.password=hunter2\n"), 0o600)
	if r := cliAt(t, addr, "", "topic", "list", "--command-config", bad); r.code != ExitUsage || strings.Contains(r.stderr, "hunter2") || !strings.Contains(r.stderr, "username and password") {
		t.Fatalf("a command config without a user: %v", r)
	}
}

// TestCommandConfigTLSAgainstAnSSLListener: a Strata node whose client
// listener speaks SSL serves the client subcommands given the CA in
// --command-config, and refuses a connection without it.
func TestCommandConfigTLSAgainstAnSSLListener(t *testing.T) {
	caPath, ks := writePKI(t, t.TempDir())
	n := openClusterNode(t, map[string]string{
		"listeners":                      "SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"controller.quorum.voters":       "1@127.0.0.1:0",
		"ssl.keystore.type":              "PEM",
		"ssl.keystore.location":          ks,
		"auto.create.topics.enable":      "true",
		"listener.security.protocol.map": "SSL:SSL,CONTROLLER:PLAINTEXT",
	})
	addr := n.Addrs()["SSL"]
	cc := filepath.Join(t.TempDir(), "ssl.properties")
	if err := os.WriteFile(cc, []byte("security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location="+caPath+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := cliAt(t, addr, "", "topic", "create", "overtls", "-p", "2", "--command-config", cc); r.code != ExitOK {
		t.Fatalf("topic create over TLS: %v", r)
	}
	if r := cliAt(t, addr, "x\ny\n", "produce", "overtls", "--command-config", cc); r.code != ExitOK {
		t.Fatalf("produce over TLS: %v", r)
	}
	if r := cliAt(t, addr, "", "consume", "overtls", "-c", "2", "--command-config", cc); r.code != ExitOK || len(lines(r.stdout)) != 2 {
		t.Fatalf("consume over TLS: %v", r)
	}
	if r := cliAt(t, addr, "", "cluster", "info", "--command-config", cc); r.code != ExitOK {
		t.Fatalf("cluster info over TLS: %v", r)
	}
	if r := cliAt(t, addr, "", "topic", "list", "--timeout", "2s"); r.code == ExitOK {
		t.Fatalf("topic list in plaintext against an SSL listener: %v", r)
	}
}

// TestCommandConfigSASLAgainstASASLListener: the CLI's SASL client against
// Strata's own SASL_PLAINTEXT listener with the authorizer on. An operator
// (PLAIN, a super user) creates a SCRAM user and grants it WRITE on one
// topic; that user's produce there succeeds with SCRAM-SHA-256 from a
// --command-config file, its produce to another topic is refused with
// TOPIC_AUTHORIZATION_FAILED, and a wrong password fails authentication
// without a record written.
func TestCommandConfigSASLAgainstASASLListener(t *testing.T) {
	n := openClusterNode(t, map[string]string{
		"listeners":                "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"controller.quorum.voters": "1@127.0.0.1:0",
		"sasl.enabled.mechanisms":  "PLAIN,SCRAM-SHA-256",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required user_ops="ops-secret";`,
		"authorizer.class.name":                               "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":                                         "User:ops;User:ANONYMOUS",
	})
	saslAddr := n.Addrs()["SASL_PLAINTEXT"]
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ops := write("ops.properties", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"+
		`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="ops" password="ops-secret";`+"\n")
	alice := write("alice.properties", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"+
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";`+"\n")
	wrong := write("wrong.properties", "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"+
		`sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="not-hers";`+"\n")
	pw := write("pw", "alice-secret\n")

	for _, args := range [][]string{
		{"topic", "create", "granted", "--command-config", ops},
		{"topic", "create", "other", "--command-config", ops},
		{"user", "create", "alice", "--password-file", pw, "--command-config", ops},
		{"acl", "create", "--principal", "User:alice", "--operation", "write,describe", "--topic", "granted", "--command-config", ops},
	} {
		if r := cliAt(t, saslAddr, "", args[0], args[1:]...); r.code != ExitOK {
			t.Fatalf("%q as ops over SASL PLAIN: %+v", args, r)
		}
	}
	if r := cliAt(t, saslAddr, "a\nb\n", "produce", "granted", "--command-config", alice); r.code != ExitOK {
		t.Fatalf("alice produces to granted over SCRAM: %+v", r)
	}
	if r := cliAt(t, saslAddr, "x\n", "produce", "other", "--command-config", alice, "--timeout", "5s"); r.code == ExitOK ||
		!strings.Contains(r.stderr, "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("alice produces to other without WRITE: %+v", r)
	}
	if r := cliAt(t, saslAddr, "y\n", "produce", "granted", "--command-config", wrong, "--timeout", "5s"); r.code == ExitOK ||
		!strings.Contains(strings.ToLower(r.stderr), "authentication") {
		t.Fatalf("a wrong SCRAM password: %+v", r)
	}
	if r := cliAt(t, n.Addrs()["PLAINTEXT"], "", "consume", "granted", "-c", "2", "--timeout", "10s"); r.code != ExitOK ||
		len(lines(r.stdout)) != 2 || strings.Contains(r.stdout, "y") {
		t.Fatalf("consume granted: %+v (want a and b only)", r)
	}
}
