package main

// Client suites on three nodes at replication factor 3: franz-go's own
// kgo integration tests (its pkg/kgo tests, KGO_SEEDS and KGO_TEST_RF=3,
// then a short KGO_TEST_CHAOS=1 run of its group ETL test), and the two
// librdkafka clients — kcat and python3-confluent-kafka — producing with
// acks=all (idempotent) and consuming on the same kind of cluster:
// startProcCluster's three combined-mode processes (a controller quorum
// of three) with scripts/cluster3's defaults (default.replication.factor
// and offsets.topic.replication.factor 3, min.insync.replicas 2).
//
// franz-go's suite comes from the Go module proxy (`go mod download`) at
// the version go.mod requires, is copied to a temporary directory and run
// there with `go test`; nothing of it is kept in this repository. It runs
// when CI=true or STRATA_TEST_KGO=1 and skips otherwise (it needs the
// module proxy or a module cache holding franz-go). kcat and confluent-
// kafka skip without the tools, and fail under CI=true (.ci/run installs
// them).

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testutil"
)

// cluster3Settings are scripts/cluster3's topic defaults, plus fencing a
// dead broker within about two seconds.
var cluster3Settings = append([]string{
	"default.replication.factor=3", "offsets.topic.replication.factor=3", "min.insync.replicas=2",
}, clusterSettings...)

// startCluster3 starts three nodes with cluster3Settings and waits until
// Metadata lists all three brokers (a topic of three replicas needs them).
func startCluster3(t *testing.T) *procCluster {
	t.Helper()
	c := startProcCluster(t, 3, cluster3Settings...)
	_, adm := c.client()
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
	return c
}

// needExternal returns the path of an external client; when it is
// missing (or probe fails) the test skips, or fails under CI=true.
func needExternal(t *testing.T, name string, probe ...string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil && len(probe) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, perr := exec.CommandContext(ctx, p, probe...).CombinedOutput(); perr != nil {
			err = fmt.Errorf("%v: %s", perr, out)
		}
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s missing under CI (.ci/run installs it): %v", name, err)
		}
		t.Skipf("%s not available: %v", name, err)
	}
	return p
}

// runExternal runs a client with stdin, bounded, and returns its stdout;
// a non-zero exit fails the test with its stderr.
func runExternal(t *testing.T, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstderr:\n%s\nstdout (last 2000 bytes):\n%s", name, strings.Join(args, " "), err,
			stderr.Bytes(), stdout.Bytes()[max(0, stdout.Len()-2000):])
	}
	return stdout.Bytes()
}

// createTopic3 creates topic with partitions and the broker's default
// replication factor (-1: cluster3Settings' 3), and checks each partition
// got three replicas, all in sync, leaders on more than one node.
func createTopic3(t *testing.T, adm *kadm.Client, topic string, partitions int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	if resp, err := adm.CreateTopic(ctx, partitions, -1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v / %v %s", topic, err, resp.Err, resp.ErrMessage)
	}
	if err := testutil.Within(procWait, func() error {
		m, err := adm.Metadata(ctx, topic)
		if err != nil {
			return err
		}
		td := m.Topics[topic]
		if td.Err != nil || len(td.Partitions) != int(partitions) {
			return fmt.Errorf("topic %s: %v, %d partitions", topic, td.Err, len(td.Partitions))
		}
		leaders := map[int32]bool{}
		for _, p := range td.Partitions {
			if len(p.Replicas) != 3 || len(p.ISR) != 3 || p.Leader < 0 {
				return fmt.Errorf("%s-%d: leader %d replicas %v ISR %v, want 3 replicas all in sync", topic, p.Partition, p.Leader, p.Replicas, p.ISR)
			}
			leaders[p.Leader] = true
		}
		if len(leaders) < 2 {
			return fmt.Errorf("%s: every partition led by %v", topic, leaders)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// readAll reads every record of topic from the start through franz-go,
// until count records or procWait, and returns key → value, failing on a
// key read twice.
func readAll(t *testing.T, c *procCluster, topic string, count int) map[string]string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	got := map[string]string{}
	for len(got) < count {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: read %d of %d records: %v", topic, len(got), count, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if _, dup := got[string(r.Key)]; dup {
				t.Errorf("%s: key %q read twice (offset %d)", topic, r.Key, r.Offset)
			}
			got[string(r.Key)] = string(r.Value)
		})
	}
	return got
}

// TestCluster3Kcat: kcat (librdkafka) produces 2000 keyed records with
// acks=all and idempotence to a 6-partition topic created with the
// cluster's default replication factor (3), its partitions' leaders on
// several nodes; kcat reads every one back from all partitions and so
// does franz-go, byte for byte, none twice.
func TestCluster3Kcat(t *testing.T) {
	kcat := needExternal(t, "kcat", "-V")
	c := startCluster3(t)
	_, adm := c.client()
	const topic, n = "kc3", 2000
	createTopic3(t, adm, topic, 6)
	var in bytes.Buffer
	want := map[string]string{}
	for i := range n {
		k, v := fmt.Sprintf("k%04d", i), fmt.Sprintf("v%04d-%s", i, strings.Repeat("x", i%300))
		want[k] = v
		fmt.Fprintf(&in, "%s:%s\n", k, v)
	}
	seeds := strings.Join(c.addrs(), ",")
	runExternal(t, in.Bytes(), kcat, "-b", seeds, "-P", "-t", topic, "-K:",
		"-X", "acks=all", "-X", "enable.idempotence=true", "-X", "linger.ms=5", "-X", "message.timeout.ms=60000")

	out := runExternal(t, nil, kcat, "-b", seeds, "-C", "-t", topic, "-o", "beginning", "-e", "-J", "-q")
	got := map[string]string{}
	parts := map[int32]int{}
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var m struct {
			Partition int32   `json:"partition"`
			Key       *string `json:"key"`
			Payload   *string `json:"payload"`
		}
		if err := json.Unmarshal(line, &m); err != nil || m.Key == nil || m.Payload == nil {
			t.Fatalf("kcat -J line %q: %v", line, err)
		}
		if _, dup := got[*m.Key]; dup {
			t.Errorf("kcat read key %s twice", *m.Key)
		}
		got[*m.Key] = *m.Payload
		parts[m.Partition]++
	}
	if len(parts) < 2 {
		t.Errorf("records on partitions %v, want several", parts)
	}
	for name, read := range map[string]map[string]string{"kcat": got, "franz-go": readAll(t, c, topic, n)} {
		if len(read) != n {
			t.Errorf("%s read %d records, want %d", name, len(read), n)
		}
		for k, v := range want {
			if read[k] != v {
				t.Fatalf("%s: key %s holds %q, produced %q", name, k, read[k], v)
			}
		}
	}
}

// TestCluster3ConfluentKafka: librdkafka through python3-confluent-kafka
// (broker/testdata/compat/client.py) produces records with arbitrary
// bytes to every partition with acks=all and idempotence; it reads each
// partition back byte for byte, a group member subscribed to the topic
// reads them all through a coordinator on __consumer_offsets (three
// replicas here), and franz-go reads the same.
func TestCluster3ConfluentKafka(t *testing.T) {
	py := needExternal(t, "/usr/bin/python3", "-c", "import confluent_kafka")
	script, err := filepath.Abs("../../broker/testdata/compat/client.py")
	if err != nil {
		t.Fatal(err)
	}
	c := startCluster3(t)
	_, adm := c.client()
	const topic, partitions, n = "py3", 4, 800
	createTopic3(t, adm, topic, partitions)
	type rec struct {
		Partition int32   `json:"partition"`
		Offset    int64   `json:"offset,omitempty"`
		Key       *string `json:"key"`
		Value     *string `json:"value"`
	}
	b64 := func(b []byte) *string { s := base64.StdEncoding.EncodeToString(b); return &s }
	var in bytes.Buffer
	want := map[int32][]rec{}
	keys := map[string]string{}
	for i := range n {
		val := make([]byte, (i*37)%1500)
		for j := range val {
			val[j] = byte(i*7 + j)
		}
		key := []byte(fmt.Sprintf("py\x00\xff%04d", i))
		r := rec{Partition: int32(i % partitions), Key: b64(key), Value: b64(val)}
		want[r.Partition] = append(want[r.Partition], r)
		keys[string(key)] = string(val)
		line, _ := json.Marshal(r)
		in.Write(append(line, '\n'))
	}
	seeds := strings.Join(c.addrs(), ",")
	out := runExternal(t, in.Bytes(), py, script, "produce", seeds, topic, "none", "1")
	var reports []struct {
		Partition int32   `json:"partition"`
		Offset    int64   `json:"offset"`
		Error     *string `json:"error"`
	}
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var r struct {
			Partition int32   `json:"partition"`
			Offset    int64   `json:"offset"`
			Error     *string `json:"error"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("client.py produce line %q: %v", line, err)
		}
		reports = append(reports, r)
	}
	if len(reports) != n {
		t.Fatalf("%d delivery reports for %d records", len(reports), n)
	}
	for p := range int32(partitions) {
		out := runExternal(t, nil, py, script, "consume", seeds, topic, fmt.Sprint(p), "0", fmt.Sprint(len(want[p])+1))
		var got []rec
		for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
			var r rec
			if err := json.Unmarshal(line, &r); err != nil {
				t.Fatalf("client.py consume line %q: %v", line, err)
			}
			got = append(got, r)
		}
		if len(got) != len(want[p]) {
			t.Fatalf("partition %d: read %d records, produced %d", p, len(got), len(want[p]))
		}
		for i, r := range got {
			if r.Offset != int64(i) || *r.Key != *want[p][i].Key || *r.Value != *want[p][i].Value {
				t.Fatalf("partition %d record %d: offset %d key %s, want offset %d key %s (or the value differs)", p, i, r.Offset, *r.Key, i, *want[p][i].Key)
			}
		}
	}
	var sub struct {
		Records int      `json:"records"`
		Errors  []string `json:"errors"`
	}
	if err := json.Unmarshal(runExternal(t, nil, py, script, "subscribe", seeds, "py3-group", fmt.Sprint(n), topic), &sub); err != nil {
		t.Fatal(err)
	}
	if sub.Records != n {
		t.Errorf("group member read %d records, want %d (errors %v)", sub.Records, n, sub.Errors)
	}
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	m, err := adm.Metadata(ctx, "__consumer_offsets")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Topics["__consumer_offsets"].Partitions {
		if len(p.Replicas) != 3 {
			t.Fatalf("__consumer_offsets-%d has replicas %v, want 3 (offsets.topic.replication.factor=3)", p.Partition, p.Replicas)
		}
	}
	got := readAll(t, c, topic, n)
	for k, v := range keys {
		if got[k] != v {
			t.Fatalf("franz-go: key %q holds %d bytes, produced %d", k, len(got[k]), len(v))
		}
	}
}

const (
	franzGoModule = "github.com/twmb/franz-go"
	// kgoSuiteTimeout bounds the download, the build and both runs
	// (measured: 76 s on 2 busy cores with a warm module cache: 58 s for
	// the suite, its build included, 16 s for the chaos run).
	kgoSuiteTimeout = 8 * time.Minute
)

// kgoMustPass are tests of franz-go's suite that talk to the cluster and
// must have passed (a -run or -skip that matched nothing passes silently).
var kgoMustPass = []string{
	"TestGroupETL", "TestClient_Produce", "TestClient_ProduceLargeMessages", "TestIssue434",
	"TestIssue337", "TestDirectPartitionPurge", "TestConsumeMaxDecompressBatchBytes", "TestIssue769",
	"TestPauseIssueOct2023", "TestUnknownGroupOffsetFetchPinned",
	// Transactions (issue 16): its classic-group subtests (range,
	// cooperative-sticky, static).
	"TestTxnEtl", "TestTxnEtl/range", "TestTxnEtl/cooperative-sticky", "TestTxnEtl/cooperative-sticky/static",
	// KIP-848 consumer groups (issue 18): ConsumerGroupHeartbeat is
	// advertised, so these run instead of skipping.
	"TestGroupETL/range/848", "TestGroupETL/sticky/848", "TestGroupETL/sticky/848/static", "TestGroupSimple/848",
	"TestTxnEtl/range/848", "TestTxnEtl/sticky/848", "TestTxnEtl/sticky/848/static",
	// KIP-932 share groups (issue 19): ShareFetch/ShareAcknowledge v2 are
	// advertised by default, so these run instead of skipping.
	"TestShareGroup", "TestShareGroupETL", "TestShareGroupAckOnClose", "TestShareGroupOffsetsAdmin", "TestConsumeRegexShareSkipsInternal",
}

// kgoFirst are franz-go tests that assume an unused cluster: a 3-node
// suite runs them first, on their own, then the rest of the suite without
// them (kgoSkipFirst).
//
// Test848RegexBrokerResolves subscribes through a regex that names
// __consumer_offsets and polls until it has seen records from as many
// topics as it wants (the two regular ones, the internal one being
// unproducible here), the internal topic counted too. In the whole suite
// __consumer_offsets holds every other group's records: the broker
// resolves the regex in the first heartbeat, franz-go adopts the internal
// topic and resolves it at its next heartbeat (sent at once), so those
// records can be polled before one of the two wanted topics, and the loop
// ends without it ("did not consume from <pfx>-orders-v2" within 0.5 s).
// Measured on the TLS cluster with the suite running beside: 6 and 8 of
// 40 runs; alone, on a cluster whose __consumer_offsets held only the test's
// own earlier runs' records, 2 of 40, the 25th and the 40th: never in
// its first 24.
var kgoFirst = []string{"Test848RegexBrokerResolves"}

// runKgoFirst runs kgoFirst in dir (franz-go's pkg/kgo) against the
// cluster env names, before anything else has used it. Its tests race by
// their own design (above: 2 of 40 runs alone), so they get three tries:
// a broker that breaks one fails all three; a clean-clone CI run failed
// on a single try (3 nodes).
func runKgoFirst(t *testing.T, ctx context.Context, dir string, env []string, version, label string) {
	t.Helper()
	for try := 1; ; try++ {
		r, err := testutil.RunGoTest(ctx, dir, slices.Clone(env), "-timeout", "2m", "-run", "^("+strings.Join(kgoFirst, "|")+")$")
		t.Logf("franz-go %s %v (%s, try %d): passed %v, failed %v", version, kgoFirst, label, try, r.Pass, r.Fail)
		if err == nil && r.Passed(kgoFirst...) {
			return
		}
		if try == 3 {
			t.Fatalf("franz-go %v (%s) did not pass on the unused cluster in 3 tries (%v):\n%s", kgoFirst, label, err, r.Report(t, label))
		}
	}
}

// kgoSkipFirst is the -skip pattern of the suite's run after kgoFirst,
// with others (regular expressions) skipped too.
func kgoSkipFirst(others ...string) string {
	return "^(" + strings.Join(append(slices.Clone(kgoFirst), others...), "|") + ")$"
}

// franzGoDir downloads the franz-go module go.mod requires through the
// module proxy and returns a writable copy of its source.
func franzGoDir(t *testing.T, ctx context.Context) (dir, version string) {
	t.Helper()
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Version}}", franzGoModule).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", franzGoModule, err)
	}
	version = strings.TrimSpace(string(out))
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", franzGoModule+"@"+version)
	cmd.Dir = t.TempDir() // outside this module: nothing is added to go.mod or go.sum
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s@%s: %v\n%s%s", franzGoModule, version, err, out, stderr.Bytes())
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		t.Fatalf("go mod download: %v %q: %s", err, info.Error, out)
	}
	dir = filepath.Join(t.TempDir(), "franz-go")
	if err := os.CopyFS(dir, os.DirFS(info.Dir)); err != nil {
		t.Fatal(err)
	}
	return dir, version
}

// TestCluster3FranzGoSuite runs franz-go's own kgo integration tests
// against three nodes with KGO_TEST_RF=3 (their default: every topic they
// create has three replicas), the transactional ETL included (kgoFirst
// before the rest, on the unused cluster), then its group ETL test again
// with KGO_TEST_CHAOS=1 (every client connection
// dies after 0.5-1.5 s: reconnects, produce retries, sequence rewinds,
// idempotent ordering).
func TestCluster3FranzGoSuite(t *testing.T) {
	if os.Getenv("CI") != "true" && os.Getenv("STRATA_TEST_KGO") != "1" {
		t.Skip("set STRATA_TEST_KGO=1 (or CI=true) to run franz-go's kgo integration tests against three nodes")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), kgoSuiteTimeout)
	defer cancel()
	src, version := franzGoDir(t, ctx)
	c := startCluster3(t)
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "KGO_SEEDS="+strings.Join(c.addrs(), ","),
		"KGO_TEST_RF=3", "KGO_LOG_LEVEL=none")
	run := func(name string, extraEnv []string, args ...string) *testutil.GoTestRun {
		t.Helper()
		start := time.Now()
		r, err := testutil.RunGoTest(ctx, filepath.Join(src, "pkg", "kgo"), append(slices.Clone(env), extraEnv...), args...)
		t.Logf("franz-go %s kgo tests, %s: %d passed, failed %v, in %v", version, name, len(r.Pass), r.Fail, time.Since(start).Round(time.Second))
		if err != nil {
			t.Fatalf("franz-go kgo tests (%s) failed: %v\n%s", name, err, r.Report(t, "kgo-"+name))
		}
		return r
	}
	runKgoFirst(t, ctx, filepath.Join(src, "pkg", "kgo"), env, version, "kgo-first")
	r := run("suite", []string{"KGO_TEST_RECORDS=5000"}, "-timeout", "4m", "-skip", kgoSkipFirst())
	for _, name := range kgoMustPass {
		if !r.Passed(name) {
			t.Errorf("franz-go test %s did not pass", name)
		}
	}
	if r = run("chaos", []string{"KGO_TEST_RECORDS=2000", "KGO_TEST_CHAOS=1"}, "-timeout", "2m", "-run", "^TestGroupETL$"); !r.Passed("TestGroupETL") {
		t.Errorf("franz-go TestGroupETL under KGO_TEST_CHAOS=1 did not pass:\n%s", r.Report(t, "kgo-chaos"))
	}
}

// TestCluster3ConfluentKafkaTransactions: librdkafka's transactional
// producer commits and aborts on three nodes at RF=3 (the coordinator's
// __transaction_state and the partition replicated, min ISR 2), and
// librdkafka's consumer (read_committed by default) reads exactly the
// committed records, in order.
func TestCluster3ConfluentKafkaTransactions(t *testing.T) {
	py := needExternal(t, "/usr/bin/python3", "-c", "import confluent_kafka")
	script, err := filepath.Abs("../../broker/testdata/compat/client.py")
	if err != nil {
		t.Fatal(err)
	}
	c := startCluster3(t)
	_, adm := c.client()
	const topic = "py3-txn"
	createTopic3(t, adm, topic, 2) // the transactions write partition 0
	seeds := strings.Join(c.addrs(), ",")
	var res struct{ Committed, Aborted []string }
	out := runExternal(t, nil, py, script, "transact", seeds, topic, "py3-tx", "20:commit,10:abort,30:commit,5:abort,15:commit")
	if err := json.Unmarshal(out, &res); err != nil || len(res.Committed) != 65 || len(res.Aborted) != 15 {
		t.Fatalf("transact: %v %q", err, out)
	}
	out = runExternal(t, nil, py, script, "consume", seeds, topic, "0", "0", "1000")
	var got []string
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var r struct{ Value *string }
		if err := json.Unmarshal(line, &r); err != nil || r.Value == nil {
			t.Fatalf("client.py consume line %q: %v", line, err)
		}
		v, err := base64.StdEncoding.DecodeString(*r.Value)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(v))
	}
	if !slices.Equal(got, res.Committed) {
		t.Fatalf("librdkafka read_committed on three nodes: %d records %q, want the %d committed", len(got), got, len(res.Committed))
	}
}
