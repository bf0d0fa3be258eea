package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testutil"
)

// TestFranzGoSCRAM runs franz-go's own TestSCRAMAuth and
// TestSCRAMAuthBadCredentials (KGO_TEST_SCRAM_SEEDS, KGO_TEST_SCRAM) against
// a `strata serve` process with a SASL_PLAINTEXT listener offering
// SCRAM-SHA-256 and SCRAM-SHA-512, once per mechanism. Its users come from
// `strata format --add-scram` (kgo upstream's testuser/testpass, and
// testuser512), so this is also the format bootstrap end to end.
func TestFranzGoSCRAM(t *testing.T) {
	if os.Getenv("CI") != "true" && os.Getenv("STRATA_TEST_KGO") != "1" {
		t.Skip("set STRATA_TEST_KGO=1 (or CI=true) to run franz-go's SCRAM tests")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), kgoSuiteTimeout)
	defer cancel()
	src, version := franzGoDir(t, ctx)
	dir := t.TempDir()
	format := exec.CommandContext(ctx, binary, "format", "--set", "log.dirs="+dir, "--add-scram-file", "-")
	format.Stdin = strings.NewReader("SCRAM-SHA-256=[name=testuser,password=testpass]\nSCRAM-SHA-512=[name=testuser512,password=testpass512,iterations=8192]\n")
	if out, err := format.CombinedOutput(); err != nil {
		t.Fatalf("strata format: %v\n%s", err, out)
	}
	p := startProcOn(t, dir, 1, "127.0.0.1:0",
		"listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"inter.broker.listener.name=PLAINTEXT",
		"sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512")
	b, err := os.ReadFile(p.out)
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	var seeds string
	for _, f := range strings.Fields(string(line)) {
		if v, ok := strings.CutPrefix(f, "SASL_PLAINTEXT="); ok {
			seeds = v
		}
	}
	if seeds == "" {
		t.Fatalf("no SASL_PLAINTEXT in the address line %q", line)
	}
	for _, scram := range []string{"testuser:testpass", "testuser512:testpass512:512"} {
		start := time.Now()
		r, err := testutil.RunGoTest(ctx, filepath.Join(src, "pkg", "kgo"),
			append(os.Environ(), "GOFLAGS=-mod=mod", "KGO_SEEDS="+p.addr, "KGO_TEST_SCRAM_SEEDS="+seeds, "KGO_TEST_SCRAM="+scram, "KGO_LOG_LEVEL=none"),
			"-timeout", "3m", "-run", "^(TestSCRAMAuth|TestSCRAMAuthBadCredentials)$")
		t.Logf("franz-go %s SCRAM tests as %s: passed %v, failed %v, in %v", version, strings.SplitN(scram, ":", 2)[0], r.Pass, r.Fail, time.Since(start).Round(time.Second))
		if err != nil || !r.Passed("TestSCRAMAuth", "TestSCRAMAuthBadCredentials") {
			t.Fatalf("franz-go's SCRAM tests did not pass: %v\n%s", err, r.Report(t, "kgo-scram"))
		}
	}
}
