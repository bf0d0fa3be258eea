package admincli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/broker"
)

// testWait bounds every wait in these tests.
const testWait = 30 * time.Second

// Each test gets its own real node (on 127.0.0.1:0, data in the test's
// temporary directory), started on first use and closed when the test
// ends, so tests never see one another's topics and groups, also under
// -count=N.
var (
	nodesMu sync.Mutex
	nodes   = map[testing.TB]*broker.Node{}
)

func testNode(t testing.TB) *broker.Node {
	t.Helper()
	nodesMu.Lock()
	defer nodesMu.Unlock()
	if n, ok := nodes[t]; ok {
		return n
	}
	props := map[string]string{
		"listeners":                             "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"controller.quorum.voters":              "1@127.0.0.1:0",
		"log.dirs":                              t.TempDir(),
		"admin.listener":                        "",
		"controller.quorum.election.timeout.ms": "300",
		"group.initial.rebalance.delay.ms":      "0",
		"auto.create.topics.enable":             "false",
		"group.coordinator.rebalance.protocols": "classic,consumer,share",
	}
	cfg, err := broker.ParseConfig(broker.MergeProperties(props, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if os.Getenv("STRATA_TEST_VERBOSE") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	n, err := broker.Open(broker.Options{Config: cfg, Logger: logger, StartTimeout: testWait})
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	nodes[t] = n
	t.Cleanup(func() {
		nodesMu.Lock()
		delete(nodes, t)
		nodesMu.Unlock()
		n.Close()
	})
	return n
}

// openClusterNode starts one node of a multi-node test cluster: fast
// elections and heartbeats, no admin listener, no auto-created topics,
// its own data dir; props go over those. The test stops it.
func openClusterNode(t *testing.T, props map[string]string) *broker.Node {
	t.Helper()
	base := map[string]string{
		"admin.listener": "", "controller.quorum.election.timeout.ms": "300", "auto.create.topics.enable": "false",
		"broker.heartbeat.interval.ms": "200", "log.dirs": t.TempDir(),
	}
	for k, v := range props {
		base[k] = v
	}
	cfg, err := broker.ParseConfig(broker.MergeProperties(base, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	n, err := broker.Open(broker.Options{Config: cfg, Logger: testLogger(), StartTimeout: testWait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// result is one CLI invocation's outcome.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// cli runs `strata <cmd> args...` against the test node with stdin, and
// fails the test if it does not return within testWait.
func cli(t testing.TB, stdin string, cmd string, args ...string) result {
	t.Helper()
	n := testNode(t)
	return cliAt(t, n.Addr(), stdin, cmd, args...)
}

// cliAt is cli against brokers (no --brokers flag when brokers is "").
func cliAt(t testing.TB, brokers, stdin string, cmd string, args ...string) result {
	t.Helper()
	if brokers != "" {
		args = append(args, "--brokers", brokers)
	}
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- RunStdin(cmd, args, strings.NewReader(stdin), &stdout, &stderr) }()
	select {
	case code := <-done:
		return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
	case <-time.After(testWait):
		t.Fatalf("strata %s %q did not return within %v", cmd, args, testWait)
		return result{}
	}
}

// mustOK runs cli and fails the test unless it exits 0.
func mustOK(t testing.TB, stdin string, cmd string, args ...string) result {
	t.Helper()
	r := cli(t, stdin, cmd, args...)
	if r.code != ExitOK {
		t.Fatalf("strata %s %q: %v", cmd, args, r)
	}
	return r
}

// wantFail checks an invocation failed with code and a one-line stderr
// starting "strata: " and containing every want.
func wantFail(t testing.TB, r result, code int, want ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d, got %v", code, r)
	}
	first := strings.SplitN(r.stderr, "\n", 2)[0]
	if !strings.HasPrefix(first, "strata: ") {
		t.Errorf("stderr does not start with `strata: `: %q", r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(first, w) {
			t.Errorf("first stderr line %q lacks %q", first, w)
		}
	}
	if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") {
		t.Errorf("stderr looks like a crash: %s", r.stderr)
	}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	t.Cleanup(cancel)
	return ctx
}

func newClient(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(testNode(t).Addr()), kgo.RetryTimeout(testWait)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func newAdmin(t testing.TB) *kadm.Client { return kadm.NewClient(newClient(t)) }

func createTopic(t testing.TB, name string, partitions int32) {
	t.Helper()
	resp, err := newAdmin(t).CreateTopic(testCtx(t), partitions, 1, nil, name)
	if err != nil || resp.Err != nil {
		t.Fatalf("create topic %s: %v / %v", name, err, resp.Err)
	}
}

// produceN produces n records "v0".."v<n-1>" with keys "k<i>" to one
// partition and fails the test on any error.
func produceN(t testing.TB, topic string, partition int32, n int) {
	t.Helper()
	cl := newClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: partition, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
	}
	if err := cl.ProduceSync(testCtx(t), rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// lines splits output into non-empty lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// tableRow reports whether some line of a table has exactly these
// whitespace-separated fields.
func tableRow(table string, fields ...string) bool {
	want := strings.Join(fields, " ")
	for _, l := range strings.Split(table, "\n") {
		if strings.Join(strings.Fields(l), " ") == want {
			return true
		}
	}
	return false
}
