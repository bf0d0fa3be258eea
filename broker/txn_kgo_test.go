package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testutil"
)

// TestTxnFranzGoEtlOneNode runs franz-go's own transaction test
// (TestTxnEtl in pkg/kgo: a transactional producer, then a chain of
// consume-transform-produce group members in GroupTransactSession,
// read_committed, checking that every record arrives exactly once)
// against one in-process node, so that `go test -race` checks the broker
// while it runs (cmd/strata's TestCluster3FranzGoSuite runs it on three
// processes at RF=3). franz-go's source comes from the module proxy at
// the version go.mod requires, copied to a temporary directory; nothing
// of it is kept here. It runs when CI=true or STRATA_TEST_KGO=1.
func TestTxnFranzGoEtlOneNode(t *testing.T) {
	if os.Getenv("CI") != "true" && os.Getenv("STRATA_TEST_KGO") != "1" {
		t.Skip("set STRATA_TEST_KGO=1 (or CI=true) to run franz-go's TestTxnEtl against a node")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	src := kgoSource(t, ctx)
	n := startNode(t, t.TempDir(), nil)
	// 20000 records: the producer also ends and begins a transaction
	// mid-stream (every 10000).
	start := time.Now()
	r, err := testutil.RunGoTest(ctx, filepath.Join(src, "pkg", "kgo"),
		append(os.Environ(), "GOFLAGS=-mod=mod", "KGO_SEEDS="+n.Addr(), "KGO_TEST_RF=1", "KGO_TEST_RECORDS=20000", "KGO_LOG_LEVEL=none"),
		"-timeout", "4m", "-run", "^TestTxnEtl$")
	t.Logf("franz-go TestTxnEtl: passed %v in %v", r.Pass, time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("franz-go TestTxnEtl: %v\n%s", err, r.Report(t, "kgo-txnetl"))
	}
	// Every subtest must have run: classic groups and, since the node
	// advertises ConsumerGroupHeartbeat, the KIP-848 ones (TxnOffsetCommit
	// checked against the member epoch).
	for _, want := range []string{"TestTxnEtl", "TestTxnEtl/range", "TestTxnEtl/cooperative-sticky", "TestTxnEtl/cooperative-sticky/static",
		"TestTxnEtl/range/848", "TestTxnEtl/sticky/848", "TestTxnEtl/sticky/848/static"} {
		if !r.Passed(want) {
			t.Errorf("%s did not pass", want)
		}
	}
}

// kgoSource downloads the franz-go module go.mod requires through the
// module proxy and returns a writable copy of its source.
func kgoSource(t *testing.T, ctx context.Context) string {
	t.Helper()
	const module = "github.com/twmb/franz-go"
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Version}}", module).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", module, err)
	}
	version := strings.TrimSpace(string(out))
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = t.TempDir() // outside this module: go.mod and go.sum stay as they are
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if out, err = cmd.Output(); err != nil {
		t.Fatalf("go mod download %s@%s: %v\n%s%s", module, version, err, out, stderr.Bytes())
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		t.Fatalf("go mod download: %v %q: %s", err, info.Error, out)
	}
	dir := filepath.Join(t.TempDir(), "franz-go")
	if err := os.CopyFS(dir, os.DirFS(info.Dir)); err != nil {
		t.Fatal(err)
	}
	return dir
}
