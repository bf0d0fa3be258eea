package broker

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// testWait bounds every wait in these tests.
const testWait = 20 * time.Second

func testLogger() *slog.Logger {
	if os.Getenv("STRATA_TEST_VERBOSE") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testConfig is a one-node configuration on loopback port 0 with data in
// dir; extra overrides settings by name.
func testConfig(t testing.TB, dir string, extra map[string]string) Config {
	t.Helper()
	props := map[string]string{
		"listeners":                "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"controller.quorum.voters": "1@127.0.0.1:0",
		"log.dirs":                 dir,
	}
	for k, v := range extra {
		props[k] = v
	}
	cfg, err := ParseConfig(MergeProperties(props, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startNode opens a node on dir and closes it at the end of the test.
func startNode(t testing.TB, dir string, extra map[string]string) *Node {
	t.Helper()
	n, err := Open(Options{Config: testConfig(t, dir, extra), Logger: testLogger(), StartTimeout: testWait})
	if err != nil {
		t.Fatalf("open node: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// newClient returns a kgo client of n. Idempotent writes are off until
// InitProducerId and producer state exist.
func newClient(t testing.TB, n *Node, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{
		kgo.SeedBrokers(n.Addr()),
		kgo.DisableIdempotentWrite(),
		kgo.RetryTimeout(testWait),
	}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func newAdmin(t testing.TB, n *Node) *kadm.Client {
	return kadm.NewClient(newClient(t, n))
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	t.Cleanup(cancel)
	return ctx
}

// createTopic creates a topic and fails the test on any error.
func createTopic(t testing.TB, adm *kadm.Client, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	resp, err := adm.CreateTopic(testCtx(t), partitions, 1, configs, name)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic %s: %v / %v", name, err, resp.Err)
	}
}
