package loadgen

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/broker"
)

// testWait bounds every wait in these tests.
const testWait = 60 * time.Second

// startNode opens a one-node Strata cluster on loopback port 0 (tests may
// import the broker; the loadgen package itself never does) and closes it
// at the end of the test. It returns the client and admin addresses.
func startNode(t *testing.T) (addr, admin string) {
	t.Helper()
	props := map[string]string{
		"listeners":                             "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"controller.quorum.voters":              "1@127.0.0.1:0",
		"log.dirs":                              t.TempDir(),
		"admin.listener":                        "127.0.0.1:0",
		"controller.quorum.election.timeout.ms": "300",
	}
	cfg, err := broker.ParseConfig(broker.MergeProperties(props, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	n, err := broker.Open(broker.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), StartTimeout: testWait})
	if err != nil {
		t.Fatalf("open node: %v", err)
	}
	t.Cleanup(func() { n.Close() })
	return n.Addr(), n.Addrs()["ADMIN"]
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	t.Cleanup(cancel)
	return ctx
}

// heldRecords is what the cluster holds in topic: the sum over partitions
// of end offset minus start offset.
func heldRecords(t *testing.T, addr, topic string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(testCtx(t), topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offsets: %v", err)
	}
	starts, err := adm.ListStartOffsets(testCtx(t), topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		t.Fatalf("start offsets: %v", err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(o.Topic, o.Partition)
		n += o.Offset - s.Offset
	})
	return n
}
