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

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestShareGroupFranzGoOneNode runs franz-go's own share group tests
// (TestShareGroup, TestShareGroupETL, TestShareGroupAckOnClose,
// TestShareGroupOffsetsAdmin, TestConsumeRegexShareSkipsInternal) against
// one in-process node with share groups on. franz-go runs them only when
// ShareFetch (78) and ShareAcknowledge (79) v2 are advertised, so this
// test skips while the node does not advertise them (it asks the node,
// never a constant): membership (76, 77) alone cannot consume. As
// TestGroup848FranzGoOneNode, franz-go's source comes from the module
// proxy; it runs when CI=true or STRATA_TEST_KGO=1.
func TestShareGroupFranzGoOneNode(t *testing.T) {
	if os.Getenv("CI") != "true" && os.Getenv("STRATA_TEST_KGO") != "1" {
		t.Skip("set STRATA_TEST_KGO=1 (or CI=true) to run franz-go's share group tests against a node")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	settings := withSettings(map[string]string{
		"group.coordinator.rebalance.protocols": "classic,consumer,share",
		"group.share.heartbeat.interval.ms":     "1000",
		"group.share.min.heartbeat.interval.ms": "1000",
	})
	if _, ok := lookupSetting("group.share.enable"); ok {
		settings["group.share.enable"] = "true" // the share-partition leader's switch
	}
	n := startNode(t, t.TempDir(), settings)
	vresp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(testCtx(t), newClient(t, n))
	if err != nil {
		t.Fatal(err)
	}
	advertised := map[int16]int16{}
	for _, k := range vresp.ApiKeys {
		advertised[k.ApiKey] = k.MaxVersion
	}
	for _, key := range []int16{shareGroupHeartbeatKey, shareGroupDescribeKey} {
		if _, ok := advertised[key]; !ok {
			t.Fatalf("key %d not advertised with share groups on", key)
		}
	}
	if v, ok := advertised[78]; !ok || v < 2 {
		t.Skip("needs ShareFetch: key 78 v2 not advertised (franz-go's share tests would skip)")
	}
	if v, ok := advertised[79]; !ok || v < 2 {
		t.Skip("needs ShareAcknowledge: key 79 v2 not advertised (franz-go's share tests would skip)")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	src := kgoSource(t, ctx)
	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-v", "-timeout", "6m",
		"-run", "^(TestShareGroup|TestShareGroupETL|TestShareGroupAckOnClose|TestShareGroupOffsetsAdmin|TestConsumeRegexShareSkipsInternal)$", ".")
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
	t.Logf("franz-go share tests: passed %v, skipped %v, in %v", pass, skip, time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("franz-go share tests: %v\n%s", err, out[max(0, len(out)-16<<10):])
	}
	for _, want := range []string{"TestShareGroup", "TestShareGroupETL", "TestShareGroupAckOnClose", "TestShareGroupOffsetsAdmin", "TestConsumeRegexShareSkipsInternal"} {
		if !slices.Contains(pass, want) {
			t.Errorf("%s did not pass (skipped: %v)", want, skip)
		}
	}
}
