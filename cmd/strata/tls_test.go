package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testutil"
)

// writeTestPKI writes, into dir, a CA (ca.pem) and a key store
// (node.pem: key and certificate for 127.0.0.1) that CA signed.
func writeTestPKI(t *testing.T, dir string) (caPath, keystorePath string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "strata test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "node"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	caPath, keystorePath = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "node.pem")
	ks := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	if err := os.WriteFile(caPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keystorePath, ks, 0o600); err != nil {
		t.Fatal(err)
	}
	return caPath, keystorePath
}

// TestCluster3FranzGoSuiteTLS runs franz-go's own kgo suite
// (KGO_TEST_TLS=ca:...) against three `strata serve` processes whose only
// client listener speaks SSL (listener.security.protocol.map
// PLAINTEXT:SSL, Kafka-legal: a listener's name is not its protocol), so
// the replica fetchers and marker senders between them use TLS too; the
// same suite over PLAINTEXT (with a chaos run) is TestCluster3FranzGoSuite.
func TestCluster3FranzGoSuiteTLS(t *testing.T) {
	if os.Getenv("CI") != "true" && os.Getenv("STRATA_TEST_KGO") != "1" {
		t.Skip("set STRATA_TEST_KGO=1 (or CI=true) to run franz-go's kgo integration tests against three nodes over TLS")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), kgoSuiteTimeout)
	defer cancel()
	src, version := franzGoDir(t, ctx)
	caPath, ks := writeTestPKI(t, t.TempDir())
	c := startProcCluster(t, 3, append(slices.Clone(cluster3Settings),
		"listener.security.protocol.map=PLAINTEXT:SSL,CONTROLLER:PLAINTEXT",
		"ssl.keystore.type=PEM", "ssl.keystore.location="+ks,
		"ssl.truststore.type=PEM", "ssl.truststore.location="+caPath)...)
	caPEM, _ := os.ReadFile(caPath)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...), kgo.DialTLSConfig(&tls.Config{RootCAs: pool}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if err := testutil.Within(procWait, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m, err := adm.BrokerMetadata(ctx)
		if err != nil {
			return err
		}
		if len(m.Brokers) != 3 {
			return fmt.Errorf("brokers %v, want 3", m.Brokers.NodeIDs())
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The whole suite, as TestCluster3FranzGoSuite runs it in plaintext
	// (measured: 550 tests and subtests in 1m30s, against 1m08s for the
	// four tests that ran here before), but TestIssue769: it sets its own
	// Dialer, which franz-go refuses beside the DialTLSConfig KGO_TEST_TLS
	// adds (the client is nil, the test panics): a harness conflict, not
	// the broker's.
	//
	// kgoFirst (Test848RegexBrokerResolves) runs before, alone, on the
	// unused cluster: see kgoFirst for why.
	tests := slices.DeleteFunc(slices.Clone(kgoMustPass), func(s string) bool { return s == "TestIssue769" })
	args, records := []string{"-timeout", "5m", "-skip", kgoSkipFirst("TestIssue769")}, "2000"
	dir := filepath.Join(src, "pkg", "kgo")
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "KGO_SEEDS="+strings.Join(c.addrs(), ","),
		"KGO_TEST_TLS=ca:"+caPath, "KGO_TEST_RF=3", "KGO_TEST_RECORDS="+records, "KGO_LOG_LEVEL=none")
	runKgoFirst(t, ctx, dir, env, version, "kgo-tls-first")
	start := time.Now()
	r, err := testutil.RunGoTest(ctx, dir, env, args...)
	t.Logf("franz-go %s kgo tests over TLS: %d passed, failed %v, in %v", version, len(r.Pass), r.Fail, time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("franz-go kgo tests over TLS failed: %v\n%s", err, r.Report(t, "kgo-tls"))
	}
	for _, name := range tests {
		if !r.Passed(name) {
			t.Errorf("franz-go test %s did not pass over TLS", name)
		}
	}
}
