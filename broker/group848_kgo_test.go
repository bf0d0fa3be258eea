package broker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"
)

// TestGroup848FranzGoOneNode runs franz-go's own group tests (TestGroupETL
// with its KIP-848 subtests range/848, sticky/848 and sticky/848/static,
// and TestGroupSimple/848) against one
// in-process node, which advertises ConsumerGroupHeartbeat v1, so the 848
// subtests run instead of skipping. As TestTxnFranzGoEtlOneNode, franz-go's
// source comes from the module proxy; it runs when CI=true or
// STRATA_TEST_KGO=1. Test848RegexBrokerResolves runs too: its regex names
// __consumer_offsets as a literal alternative, which picks an internal
// topic (a pattern that merely matches one does not).
func TestGroup848FranzGoOneNode(t *testing.T) {
	if os.Getenv("CI") != "true" && os.Getenv("STRATA_TEST_KGO") != "1" {
		t.Skip("set STRATA_TEST_KGO=1 (or CI=true) to run franz-go's KIP-848 group tests against a node")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	src := kgoSource(t, ctx)
	n := startNode(t, t.TempDir(), withSettings(map[string]string{"group.consumer.heartbeat.interval.ms": "500", "group.consumer.min.heartbeat.interval.ms": "500"}))
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-v", "-timeout", "4m",
		"-run", "^(TestGroupETL|TestGroupSimple|Test848RegexBrokerResolves)$", ".")
	cmd.Dir = filepath.Join(src, "pkg", "kgo")
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "KGO_SEEDS="+n.Addr(), "KGO_TEST_RF=1",
		"KGO_TEST_RECORDS=20000", "KGO_LOG_LEVEL=none")
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	re := regexp.MustCompile(`(?m)^\s*--- (PASS|FAIL|SKIP): (\S+) `)
	var pass, skip []string
	for _, m := range re.FindAllSubmatch(out, -1) {
		switch string(m[1]) {
		case "PASS":
			pass = append(pass, string(m[2]))
		case "SKIP":
			skip = append(skip, string(m[2]))
		}
	}
	t.Logf("franz-go group tests: passed %v, skipped %v, in %v", pass, skip, time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("franz-go group tests: %v\n%s", err, out[max(0, len(out)-16<<10):])
	}
	for _, want := range []string{"TestGroupETL/range/848", "TestGroupETL/sticky/848", "TestGroupETL/sticky/848/static",
		"TestGroupSimple/848", "TestGroupETL/range", "TestGroupETL/cooperative-sticky", "Test848RegexBrokerResolves"} {
		if !slices.Contains(pass, want) {
			t.Errorf("%s did not pass", want)
		}
	}
}
