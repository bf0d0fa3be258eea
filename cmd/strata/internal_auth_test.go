package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/vfs"
)

// testPKI is a CA written to dir/ca.pem that issues key stores.
type testPKI struct {
	t      *testing.T
	dir    string
	caPath string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "strata test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	p := &testPKI{t: t, dir: t.TempDir(), cert: cert, key: key}
	p.caPath = filepath.Join(p.dir, "ca.pem")
	if err := os.WriteFile(p.caPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// keystore writes a key store (key and certificate, for 127.0.0.1, both
// server and client use) for CN=cn and returns its path.
func (p *testPKI) keystore(cn string) string {
	p.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		p.t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	path := filepath.Join(p.dir, cn+".pem")
	ks := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	if err := os.WriteFile(path, ks, 0o600); err != nil {
		p.t.Fatal(err)
	}
	return path
}

// clientConfig trusts the CA and presents keystore's certificate ("" none).
func (p *testPKI) clientConfig(keystore string) *tls.Config {
	p.t.Helper()
	pool := x509.NewCertPool()
	b, _ := os.ReadFile(p.caPath)
	pool.AppendCertsFromPEM(b)
	cfg := &tls.Config{RootCAs: pool}
	if keystore != "" {
		c, err := tls.LoadX509KeyPair(keystore, keystore)
		if err != nil {
			p.t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg
}

// metricSum is the sum of the samples of metric on a node's admin
// listener.
func metricSum(t *testing.T, admin, metric string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if name, _, _ := strings.Cut(line, "{"); name == metric || strings.HasPrefix(line, metric+" ") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

// TestProcControllerListenerRefusesStrangers: a `strata serve` node whose
// CONTROLLER listener speaks SSL with super.users naming the node
// principal refuses, and is not changed by, (1) a TLS client holding a
// certificate of the cluster's own CA for another principal, and (2) a
// broker of another cluster (its meta.properties confirms another
// cluster id) with a node's certificate, which exits refused; the node
// still serves, with itself the only broker and no topic.
func TestProcControllerListenerRefusesStrangers(t *testing.T) {
	pki := newTestPKI(t)
	nodeKS, strangerKS := pki.keystore("node"), pki.keystore("stranger")
	ctlPort := freePorts(t, 1)[0]
	tlsSettings := []string{
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
		"ssl.keystore.type=PEM", "ssl.keystore.location=" + nodeKS,
		"ssl.truststore.type=PEM", "ssl.truststore.location=" + pki.caPath,
		"super.users=User:CN=node",
	}
	a := launchProc(t, 1, append([]string{
		"node.id=1", "process.roles=broker,controller",
		fmt.Sprintf("listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:%d", ctlPort),
		fmt.Sprintf("controller.quorum.voters=1@127.0.0.1:%d", ctlPort),
		"admin.listener=127.0.0.1:0", "log.dirs=" + t.TempDir(),
	}, tlsSettings...)...)
	a.waitServing(t)
	ctlAddr, admin := a.listenerAddr(t, "CONTROLLER"), a.listenerAddr(t, "ADMIN")

	// (1) A certificate the truststore verifies, for a principal that is
	// not a node: refused in the handshake.
	conn, err := tls.Dial("tcp", ctlAddr, pki.clientConfig(strangerKS))
	if err == nil {
		conn.SetDeadline(time.Now().Add(procWait))
		_, err = conn.Read(make([]byte, 16)) // TLS 1.3: the verdict follows the client's Finished
		conn.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "bad certificate") {
		t.Fatalf("a stranger's certificate on the CONTROLLER listener: %v, want a bad certificate alert", err)
	}
	// The node's own certificate gets through the handshake.
	conn, err = tls.Dial("tcp", ctlAddr, pki.clientConfig(nodeKS))
	if err != nil {
		t.Fatalf("a node's certificate: %v", err)
	}
	conn.Close()

	// (2) A broker of another cluster, with a node's certificate.
	otherDir := t.TempDir()
	if err := storage.WriteMetaProperties(vfs.Default, otherDir, storage.MetaProperties{ClusterID: "AnotherClusterIdAAAAAA",
		NodeID: "2", IncarnationID: uuid.NewString(), ClusterIDSource: "quorum"}); err != nil {
		t.Fatal(err)
	}
	refusedBefore := metricSum(t, admin, "strata_controller_refused_clients_total")
	b := launchProc(t, 2, append([]string{
		"node.id=2", "process.roles=broker", "listeners=PLAINTEXT://127.0.0.1:0",
		fmt.Sprintf("controller.quorum.voters=1@127.0.0.1:%d", ctlPort),
		"admin.listener=", "log.dirs=" + otherDir,
	}, tlsSettings...)...)
	select {
	case <-b.done:
	case <-time.After(procWait):
		t.Fatalf("the broker of another cluster still runs after %v", procWait)
	}
	if b.cmd.ProcessState.Success() {
		t.Fatal("the broker of another cluster exited 0")
	}
	if errOut, _ := os.ReadFile(b.err); !bytes.Contains(errOut, []byte("INCONSISTENT_CLUSTER_ID")) {
		t.Fatalf("the broker of another cluster did not say INCONSISTENT_CLUSTER_ID:\n%s", errOut)
	}
	if got := metricSum(t, admin, "strata_controller_refused_clients_total"); got <= refusedBefore {
		t.Fatalf("strata_controller_refused_clients_total %v, was %v: the other cluster's client was not refused at its hello", got, refusedBefore)
	}

	// Nothing changed: node 1 still serves, alone, with no topic.
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	m, err := kadm.NewClient(cl).Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ids := m.Brokers.NodeIDs(); len(ids) != 1 || ids[0] != 1 {
		t.Fatalf("brokers %v, want [1]", ids)
	}
	if len(m.Topics) != 0 {
		t.Fatalf("topics %v, want none", m.Topics.Names())
	}
	resp, err := http.Get("http://" + admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz %d: %s", resp.StatusCode, body)
	}
}

// TestProcTierRestoreNeedsTheAdminToken: a `strata serve` node whose admin
// listener speaks https with admin.auth.token.file refuses `strata tier
// restore` without the token (exit 1, the 401 explained) and serves it
// with $STRATA_ADMIN_TOKEN (the restore itself then fails as it should:
// the bucket holds no such topic) or --admin-token-file; the https trust
// comes from --command-config.
func TestProcTierRestoreNeedsTheAdminToken(t *testing.T) {
	pki := newTestPKI(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "admin.token")
	if err := os.WriteFile(tokenFile, []byte("tier-token-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProcOn(t, t.TempDir(), 1, "127.0.0.1:0",
		"admin.listener.security.protocol=SSL", "listener.name.admin.ssl.keystore.type=PEM",
		"listener.name.admin.ssl.keystore.location="+pki.keystore("node"), "admin.auth.token.file="+tokenFile)
	admin := "https://" + p.listenerAddr(t, "ADMIN")
	cc := filepath.Join(dir, "client.properties")
	if err := os.WriteFile(cc, []byte("security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location="+pki.caPath+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STRATA_ADMIN_TOKEN", "")
	code, _, errOut := tierRun("restore", "--admin", admin, "--command-config", cc, "--topic", "nosuch")
	if code != 1 || !strings.Contains(errOut, "401") || !strings.Contains(errOut, "STRATA_ADMIN_TOKEN") {
		t.Fatalf("restore without the token: exit %d, stderr %q; want 1 and the 401 explained", code, errOut)
	}
	t.Setenv("STRATA_ADMIN_TOKEN", "wrong")
	if code, _, errOut := tierRun("restore", "--admin", admin, "--command-config", cc, "--topic", "nosuch"); code != 1 || !strings.Contains(errOut, "authentication required") {
		t.Fatalf("restore with a wrong token: exit %d, stderr %q", code, errOut)
	}
	t.Setenv("STRATA_ADMIN_TOKEN", "tier-token-123")
	code, _, errOut = tierRun("restore", "--admin", admin, "--command-config", cc, "--topic", "nosuch")
	if code != 1 || strings.Contains(errOut, "401") || strings.Contains(errOut, "authentication") || !strings.Contains(errOut, "nosuch") {
		t.Fatalf("restore with the token: exit %d, stderr %q; want the restore's own error about nosuch", code, errOut)
	}
	t.Setenv("STRATA_ADMIN_TOKEN", "")
	if code, _, errOut := tierRun("restore", "--admin", admin, "--command-config", cc, "--admin-token-file", tokenFile, "--topic", "nosuch"); code != 1 || strings.Contains(errOut, "401") {
		t.Fatalf("restore with --admin-token-file: exit %d, stderr %q", code, errOut)
	}
	// Without the trust store the https listener's certificate is not trusted.
	if code, _, errOut := tierRun("restore", "--admin", admin, "--topic", "nosuch"); code != 1 || !strings.Contains(errOut, "certificate") {
		t.Fatalf("restore without the CA: exit %d, stderr %q", code, errOut)
	}
}

// TestProcSecretsFromProvidersNeverLogged: `strata serve` with its admin
// token and S3-style secret behind config providers (a properties file
// and an environment variable) at debug level serves with the resolved
// token, and neither secret appears in its output; a bad inline key is
// reported without the key.
func TestProcSecretsFromProvidersNeverLogged(t *testing.T) {
	dir := t.TempDir()
	secrets := filepath.Join(dir, "secrets.properties")
	if err := os.WriteFile(secrets, []byte("admin.token=provided-admin-token-42\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STRATA_TEST_SECRET_KEY", "provided-secret-key-43")
	p := startProcOn(t, t.TempDir(), 1, "127.0.0.1:0",
		"strata.log.level=debug",
		"config.providers=file,env",
		"config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider",
		"config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider",
		"admin.auth.token=${file:"+secrets+":admin.token}",
		"remote.storage.s3.secret.key=${env:STRATA_TEST_SECRET_KEY}",
		"remote.storage.s3.access.key=AKID")
	admin := "http://" + p.listenerAddr(t, "ADMIN")
	req, _ := http.NewRequest("GET", admin+"/debug/pprof/", nil)
	req.Header.Set("Authorization", "Bearer provided-admin-token-42")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the provided token: %s", resp.Status)
	}
	if resp, err := http.Get(admin + "/debug/pprof/"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %v %v", resp, err)
	}
	p.stop(t)
	for _, f := range []string{p.out, p.err} {
		b, _ := os.ReadFile(f)
		for _, secret := range []string{"provided-admin-token-42", "provided-secret-key-43"} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds the secret %s", f, secret)
			}
		}
	}
	code, out := serveOnce(t, nil, "--set", "listeners=SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0", "--set", "ssl.keystore.type=PEM",
		"--set", "ssl.keystore.key=-----BEGIN PRIVATE KEY-----\nINLINEKEYBYTES\n-----END PRIVATE KEY-----", "--set", "log.dirs="+t.TempDir())
	if code == 0 || strings.Contains(out, "INLINEKEYBYTES") || !strings.Contains(out, "ssl.keystore.key") {
		t.Fatalf("a bad inline key: exit %d, output %q", code, out)
	}
}
