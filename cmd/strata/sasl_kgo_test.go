package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testutil"
)

// listenerAddr reads listener name's address from p's address line
// (NAME=host:port fields).
func (p *proc) listenerAddr(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(p.out)
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	for _, f := range strings.Fields(string(line)) {
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v
		}
	}
	t.Fatalf("no %s in the address line %q", name, line)
	return ""
}

// TestFranzGoOAuth runs franz-go's own TestOAuthAuth (KGO_TEST_OAUTH_SEEDS)
// against a `strata serve` process with a SASL_PLAINTEXT listener offering
// OAUTHBEARER with Kafka's default unsecured-JWS validator: an unsecured
// token for sub admin authenticates; an expired one fails with
// SASL_AUTHENTICATION_FAILED carrying invalid_token.
func TestFranzGoOAuth(t *testing.T) {
	if os.Getenv("CI") != "true" && os.Getenv("STRATA_TEST_KGO") != "1" {
		t.Skip("set STRATA_TEST_KGO=1 (or CI=true) to run franz-go's OAUTHBEARER test")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), kgoSuiteTimeout)
	defer cancel()
	src, version := franzGoDir(t, ctx)
	p := startProcWith(t, t.TempDir(), 1, "127.0.0.1:0", 0,
		"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"inter.broker.listener.name=PLAINTEXT",
		"sasl.enabled.mechanisms=OAUTHBEARER",
		"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;")
	oauthSeeds := p.listenerAddr(t, "SASL_PLAINTEXT")
	start := time.Now()
	r, err := testutil.RunGoTest(ctx, filepath.Join(src, "pkg", "kgo"),
		append(os.Environ(), "GOFLAGS=-mod=mod", "KGO_SEEDS="+p.addr, "KGO_TEST_OAUTH_SEEDS="+oauthSeeds, "KGO_LOG_LEVEL=none"),
		"-timeout", "3m", "-run", "^TestOAuthAuth$")
	t.Logf("franz-go %s TestOAuthAuth: passed %v, failed %v, in %v", version, r.Pass, r.Fail, time.Since(start).Round(time.Second))
	if err != nil || !r.Passed("TestOAuthAuth") {
		t.Fatalf("franz-go TestOAuthAuth did not pass: %v\n%s", err, r.Report(t, "kgo-oauth"))
	}
}
