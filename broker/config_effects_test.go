package broker

import (
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testutil"
)

// eventually polls cond until it holds or testWait passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, testWait, cond, "%s", what)
}

// produceEach produces count random 1 KiB records one request at a time (one
// batch each), to partition 0 of topic.
func produceEach(t *testing.T, cl *kgo.Client, topic string, from, count int) {
	t.Helper()
	for i := from; i < from+count; i++ {
		v := make([]byte, 1024)
		rand.Read(v) // incompressible: kgo compresses by default
		r := &kgo.Record{Topic: topic, Partition: 0, Value: v, Key: []byte(fmt.Sprint(i))}
		if err := cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
}

// TestAlterConfigsReachTheLog: lowering segment.bytes through
// IncrementalAlterConfigs makes the open log roll sooner, and lowering
// retention.ms makes retention delete its old segments; consumers then
// start at the new log start offset.
func TestAlterConfigsReachTheLog(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"log.retention.check.interval.ms": "20"})
	adm := newAdmin(t, n)
	createTopic(t, adm, "effects", 1, nil)
	cl := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceEach(t, cl, "effects", 0, 10)
	log := n.partition("effects", 0).log
	if segs := log.NumSegments(); segs != 1 {
		t.Fatalf("%d segments before the change", segs)
	}

	rs, err := adm.AlterTopicConfigs(testCtx(t), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.bytes", Value: kmsg.StringPtr("4096")}}, "effects")
	if err != nil || rs[0].Err != nil {
		t.Fatalf("alter segment.bytes: %v %+v", err, rs)
	}
	if got := log.Config().SegmentBytes; got != 4096 {
		t.Fatalf("log runs with segment.bytes %d after the alter answered", got)
	}
	produceEach(t, cl, "effects", 10, 12)
	segs := log.NumSegments()
	if segs < 4 {
		t.Fatalf("segment.bytes=4096 and 12 more 1 KiB batches but only %d segments", segs)
	}

	time.Sleep(5 * time.Millisecond) // every record is now older than retention.ms=1
	rs, err = adm.AlterTopicConfigs(testCtx(t), []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kmsg.StringPtr("1")}}, "effects")
	if err != nil || rs[0].Err != nil {
		t.Fatalf("alter retention.ms: %v %+v", err, rs)
	}
	eventually(t, "retention to delete old segments", func() bool { return log.LogStartOffset() > 0 && log.NumSegments() < segs })
	start := log.LogStartOffset()
	lo, err := adm.ListStartOffsets(testCtx(t), "effects")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := lo.Lookup("effects", 0); !ok || o.Offset < start {
		t.Fatalf("earliest offset %+v, log start %d", o, start)
	}
	// Back to the default: nothing more is deleted from here.
	rs, err = adm.AlterTopicConfigs(testCtx(t), []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "retention.ms"}}, "effects")
	if err != nil || rs[0].Err != nil {
		t.Fatalf("delete retention.ms: %v %+v", err, rs)
	}
	if got := log.Config().RetentionMs; got != n.cfg.Storage.RetentionMs {
		t.Fatalf("retention.ms %d after DELETE, want the broker default %d", got, n.cfg.Storage.RetentionMs)
	}
}

// TestDynamicBrokerConfigsReachTheLog: a cluster-wide dynamic default
// (broker resource "") and a per-broker one reach the logs of topics that
// do not set the config, in Kafka's precedence, and a topic's own value
// still wins.
func TestDynamicBrokerConfigsReachTheLog(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	createTopic(t, adm, "inherits", 1, nil)
	createTopic(t, adm, "own", 1, map[string]*string{"segment.bytes": kmsg.StringPtr("100000")})
	inherits, own := n.partition("inherits", 0).log, n.partition("own", 0).log

	alter := func(value *string, brokers ...int32) {
		t.Helper()
		op := kadm.SetConfig
		if value == nil {
			op = kadm.DeleteConfig
		}
		rs, err := adm.AlterBrokerConfigs(testCtx(t), []kadm.AlterConfig{{Op: op, Name: "log.segment.bytes", Value: value}}, brokers...)
		if err != nil || rs[0].Err != nil {
			t.Fatalf("alter log.segment.bytes=%v on %v: %v %+v", value, brokers, err, rs)
		}
	}
	check := func(want int64, source kmsg.ConfigSource) {
		t.Helper()
		if got := inherits.Config().SegmentBytes; got != want {
			t.Fatalf("inheriting log: segment.bytes %d, want %d", got, want)
		}
		if got := own.Config().SegmentBytes; got != 100000 {
			t.Fatalf("topic with its own segment.bytes now has %d", got)
		}
		rcs, err := adm.DescribeTopicConfigs(testCtx(t), "inherits")
		if err != nil {
			t.Fatal(err)
		}
		c, err := rcs.On("inherits", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, cfg := range c.Configs {
			if cfg.Key == "segment.bytes" && (cfg.MaybeValue() != fmt.Sprint(want) || cfg.Source != source) {
				t.Fatalf("described segment.bytes %s (%s), want %d (%s)", cfg.MaybeValue(), cfg.Source, want, source)
			}
		}
	}
	alter(kmsg.StringPtr("200000"))
	check(200000, kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	alter(kmsg.StringPtr("300000"), 1)
	check(300000, kmsg.ConfigSourceDynamicBrokerConfig)
	alter(nil, 1)
	check(200000, kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	alter(nil)
	check(n.cfg.Storage.SegmentBytes, kmsg.ConfigSourceDefaultConfig)
}
