package broker

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testutil"
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
	start := time.Now()
	r, err := testutil.RunGoTest(ctx, filepath.Join(src, "pkg", "kgo"),
		append(os.Environ(), "GOFLAGS=-mod=mod", "KGO_SEEDS="+n.Addr(), "KGO_TEST_RF=1", "KGO_TEST_RECORDS=20000", "KGO_LOG_LEVEL=none"),
		"-timeout", "4m", "-run", "^(TestGroupETL|TestGroupSimple|Test848RegexBrokerResolves)$")
	t.Logf("franz-go group tests: passed %v, skipped %v, in %v", r.Pass, r.Skip, time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("franz-go group tests: %v\n%s", err, r.Report(t, "kgo-group848"))
	}
	for _, want := range []string{"TestGroupETL/range/848", "TestGroupETL/sticky/848", "TestGroupETL/sticky/848/static",
		"TestGroupSimple/848", "TestGroupETL/range", "TestGroupETL/cooperative-sticky", "Test848RegexBrokerResolves"} {
		if !r.Passed(want) {
			t.Errorf("%s did not pass", want)
		}
	}
}
