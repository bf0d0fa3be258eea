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

	"github.com/strata-io/strata/controller/metadata"
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

// TestKafkaGoScramConformance runs kafka-go's KIP-554 tests: an
// AlterUserScramCredentials upsert (SHA-512, 15000 iterations, salt
// "my-salt") described immediately after (read-your-writes), then deleted
// and described as a per-user RESOURCE_NOT_FOUND. With the
// StandardAuthorizer on, as kafka-go's compose file runs them (this
// PLAINTEXT node makes User:ANONYMOUS a super user).
func TestKafkaGoScramConformance(t *testing.T) {
	if os.Getenv("CI") != "true" && os.Getenv("STRATA_TEST_KAFKAGO") != "1" {
		t.Skip("set STRATA_TEST_KAFKAGO=1 (or CI=true) to run segmentio/kafka-go's tests against a node on 127.0.0.1:9092")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	runKafkaGo(t, map[string]string{
		"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":           "User:ANONYMOUS",
	}, "^(TestAlterUserScramCredentials|TestDescribeUserScramCredentials)$",
		[]string{"TestAlterUserScramCredentials", "TestDescribeUserScramCredentials"})
}

// TestKafkaGoSASLConformance runs kafka-go's sasl.TestSASL: PLAIN,
// SCRAM-SHA-256 and SCRAM-SHA-512 logins (valid, invalid, the mechanism
// reused) to the leader of test-writer-0 through a SASL_PLAINTEXT listener
// on 127.0.0.1:9093, with its compose file's users for Kafka 3.7
// (adminplain; adminscram with both SCRAM credentials). The SCRAM users
// come from the format-time bootstrap (bootstrap.records in
// metadata.log.dir), as kafka-go's compose file provisions them before
// the broker starts.
func TestKafkaGoSASLConformance(t *testing.T) {
	if os.Getenv("CI") != "true" && os.Getenv("STRATA_TEST_KAFKAGO") != "1" {
		t.Skip("set STRATA_TEST_KAFKAGO=1 (or CI=true) to run segmentio/kafka-go's tests against a node on 127.0.0.1:9092")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	// Each subtest runs its own node (its ports are free again once a
	// subtest ends), formatted afresh.
	sasl := func(t *testing.T) map[string]string {
		boot := t.TempDir()
		var recs []metadata.Record
		for _, spec := range []string{"SCRAM-SHA-256=[name=adminscram,password=admin-secret-256]", "SCRAM-SHA-512=[name=adminscram,password=admin-secret-512]"} {
			r, err := ParseAddScram(spec, nil)
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, r)
		}
		if _, err := FormatBootstrap(nil, Config{LogDir: boot, MetadataLogDir: boot}, recs); err != nil {
			t.Fatal(err)
		}
		return map[string]string{
			"listeners":               "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093,CONTROLLER://127.0.0.1:0",
			"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
			"listener.name.sasl_plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required username="adminplain" password="admin-secret" user_adminplain="admin-secret";`,
			"metadata.log.dir": boot,
		}
	}
	t.Run("sasl", func(t *testing.T) {
		runKafkaGoIn(t, "./sasl", sasl(t), "^TestSASL$", []string{"TestSASL/PLAIN_success", "TestSASL/SCRAM-SHA-256_success",
			"TestSASL/SCRAM-SHA-256_failure", "TestSASL/SCRAM-SHA-512_success", "TestSASL/SCRAM-SHA-512_failure",
			"TestSASL/SCRAM-SHA-512_is_reusable"})
	})
	t.Run("root", func(t *testing.T) {
		runKafkaGoIn(t, ".", sasl(t), "^(TestUnsupportedSASLMechanism|TestWriter)$/^writing_a_message_with_SASL_Plain_authentication$",
			[]string{"TestUnsupportedSASLMechanism", "TestWriter/writing_a_message_with_SASL_Plain_authentication"})
	})
}

// runKafkaGo runs kafka-go's tests matching pattern against a node on
// 127.0.0.1:9092 (extra over the compose settings) and insists on each of
// want having passed.
func runKafkaGo(t *testing.T, extra map[string]string, pattern string, want []string) {
	t.Helper()
	runKafkaGoIn(t, ".", extra, pattern, want)
}

// runKafkaGoIn is runKafkaGo for the tests of kafka-go's package pkg
// ("." its root, "./sasl").
func runKafkaGoIn(t *testing.T, pkg string, extra map[string]string, pattern string, want []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kafkaGoTimeout)
	defer cancel()
	dir := kafkaGoDir(t, ctx)

	// kafka-go's tests dial localhost:9092 (and its SASL tests 9093):
	// those ports must be ours. Another test of the run may hold one for a
	// while (a README walkthrough, a process test on the default port):
	// wait for them, within bounds.
	ports := []string{"127.0.0.1:9092"}
	if strings.Contains(extra["listeners"], "127.0.0.1:9093") {
		ports = append(ports, "127.0.0.1:9093")
	}
	for _, addr := range ports {
		if err := testutil.Within(90*time.Second, func() error {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("%s is not free for the node kafka-go's tests dial: %v", addr, err)
			}
			ln.Close()
			return nil
		}); err != nil {
			t.Fatal(err)
		}
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

	cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-timeout", "4m", "-run", pattern, "-v", pkg)
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
