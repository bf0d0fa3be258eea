package broker

// Third-party conformance: segmentio/kafka-go's own tests against a node.
// kafka-go has its own protocol code (neither kmsg nor librdkafka), and its
// tests pin down corner cases of Kafka that the others do not: a Metadata
// request that auto-creates a deleted topic answers LEADER_NOT_AVAILABLE
// with no partitions (TestConn's delete-topics subtests), and a Reader with
// 200-byte fetches reads a compacted topic of 200-byte segments to the end
// (TestReaderReadCompactedMessage).
//
// Its tests dial localhost:9092 and expect Kafka's docker-compose settings
// (auto.create.topics.enable=true, message.max.bytes=200000000), so the
// node listens on 127.0.0.1:9092. The module comes from the Go module proxy
// (`go mod download`), is copied to a temporary directory and tested there
// with `go test`; nothing of it is kept in this repository. The test runs
// when CI=true or STRATA_TEST_KAFKAGO=1 and skips otherwise (it needs the
// module proxy, or a module cache holding kafka-go, and port 9092).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testutil"
)

const (
	kafkaGoModule  = "github.com/segmentio/kafka-go"
	kafkaGoVersion = "v0.4.51"
	// kafkaGoTests is the -run pattern: TestConn's two delete-topics
	// subtests and the compacted-topic reader test.
	kafkaGoTests = "^(TestConn|TestReaderReadCompactedMessage)$/^test_delete_topics"
	// kafkaGoTimeout bounds the download, the build and the tests together
	// (measured: about a minute on 2 busy cores with a warm module cache).
	kafkaGoTimeout = 5 * time.Minute
)

// kafkaGoDir downloads kafka-go through the module proxy and returns a
// writable copy of its source.
func kafkaGoDir(t *testing.T, ctx context.Context) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", kafkaGoModule+"@"+kafkaGoVersion)
	cmd.Dir = t.TempDir() // outside this module: nothing is added to go.mod or go.sum
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s@%s: %v\n%s%s", kafkaGoModule, kafkaGoVersion, err, out, stderr.Bytes())
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		t.Fatalf("go mod download: %v %q: %s", err, info.Error, out)
	}
	dst := filepath.Join(t.TempDir(), "kafka-go")
	if err := os.CopyFS(dst, os.DirFS(info.Dir)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestKafkaGoConformance(t *testing.T) {
	if os.Getenv("CI") != "true" && os.Getenv("STRATA_TEST_KAFKAGO") != "1" {
		t.Skip("set STRATA_TEST_KAFKAGO=1 (or CI=true) to run segmentio/kafka-go's tests against a node on 127.0.0.1:9092")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	runKafkaGo(t, nil, kafkaGoTests, []string{"TestConn/test_delete_topics", "TestConn/test_delete_topics_with_an_invalid_topic", "TestReaderReadCompactedMessage"})
}

// TestKafkaGoQuotaConformance runs kafka-go's client quota test
// (AlterClientQuotas then DescribeClientQuotas of client-id my-client-id,
// both answering throttle 0).
func TestKafkaGoQuotaConformance(t *testing.T) {
	if os.Getenv("CI") != "true" && os.Getenv("STRATA_TEST_KAFKAGO") != "1" {
		t.Skip("set STRATA_TEST_KAFKAGO=1 (or CI=true) to run segmentio/kafka-go's tests against a node on 127.0.0.1:9092")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	runKafkaGo(t, nil, "^TestClientAlterClientQuotas$", []string{"TestClientAlterClientQuotas"})
}

// TestKafkaGoACLConformance runs kafka-go's ACL tests (CreateAcls,
// DescribeAcls, DeleteAcls round trips) against a node with the
// StandardAuthorizer on: without one the ACL APIs answer
// SECURITY_DISABLED, as Kafka. kafka-go's compose file makes its SASL
// users super users; this PLAINTEXT node makes User:ANONYMOUS one.
func TestKafkaGoACLConformance(t *testing.T) {
	if os.Getenv("CI") != "true" && os.Getenv("STRATA_TEST_KAFKAGO") != "1" {
		t.Skip("set STRATA_TEST_KAFKAGO=1 (or CI=true) to run segmentio/kafka-go's tests against a node on 127.0.0.1:9092")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	runKafkaGo(t, map[string]string{
		"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":           "User:ANONYMOUS",
	}, "^(TestClientCreateACLs|TestClientDescribeACLs|TestClientDeleteACLs)$",
		[]string{"TestClientCreateACLs", "TestClientDescribeACLs", "TestClientDeleteACLs"})
}

// runKafkaGo runs kafka-go's tests matching pattern against a node on
// 127.0.0.1:9092 (extra over the compose settings) and insists on each of
// want having passed.
func runKafkaGo(t *testing.T, extra map[string]string, pattern string, want []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kafkaGoTimeout)
	defer cancel()
	dir := kafkaGoDir(t, ctx)

	// kafka-go's tests dial localhost:9092: that port must be ours. Another
	// test of the run may hold it for a while (a README walkthrough, a
	// process test on the default port): wait for it, within bounds.
	if err := testutil.Within(90*time.Second, func() error {
		ln, err := net.Listen("tcp", "127.0.0.1:9092")
		if err != nil {
			return fmt.Errorf("127.0.0.1:9092 is not free for the node kafka-go's tests dial: %v", err)
		}
		ln.Close()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	props := map[string]string{
		"listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:0",
		// kafka-go's docker-compose.yml (Kafka 3.7.0).
		"auto.create.topics.enable": "true",
		"message.max.bytes":         "200000000",
		// TestReaderReadCompactedMessage passes once every duplicate but
		// the newest is cleaned away. Kafka's defaults (15 s backoff,
		// min.cleanable.dirty.ratio 0.5) get there only when the first
		// cleaning comes after the last write: one in the middle leaves a
		// dirty ratio under 0.5 (measured: 0.44) and the duplicates stay.
		// Clean whatever is dirty, every half second, to make it certain.
		"log.cleaner.backoff.ms":          "500",
		"log.cleaner.min.cleanable.ratio": "0.01",
	}
	for k, v := range extra {
		props[k] = v
	}
	startNode(t, t.TempDir(), props)

	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-timeout", "4m", "-run", pattern, "-v", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "KAFKA_VERSION=3.7.0")
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("kafka-go %s tests (%s) took %v", kafkaGoVersion, pattern, time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("kafka-go tests failed: %v\n%s", err, out)
	}
	// A -run pattern that matched nothing passes silently: insist on the
	// tests having run.
	for _, name := range want {
		if !strings.Contains(string(out), "--- PASS: "+name+" ") {
			t.Errorf("kafka-go test %s did not pass:\n%s", name, out)
		}
	}
}
