package broker

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testutil"
)

// TestConsumerGroup848CoordinatorFailover: on three brokers with
// __consumer_offsets at RF=3, a franz-go KIP-848 consumer reads
// everything and commits; stopping the group's coordinator moves the
// group to the new leader of its partition, which loads it from the
// replicated log as it was (group epoch, member, assignment): the member
// goes on heartbeating at its epoch (no rebalance) and reads the records
// produced afterwards exactly once.
func TestConsumerGroup848CoordinatorFailover(t *testing.T) {
	settings := map[string]string{
		"offsets.commit.timeout.ms":                "5000",
		"group.consumer.session.timeout.ms":        "6000",
		"group.consumer.min.session.timeout.ms":    "100",
		"group.consumer.min.heartbeat.interval.ms": "50",
		"group.consumer.heartbeat.interval.ms":     "100",
	}
	for k, v := range replicatedGroupSettings {
		if _, ok := settings[k]; !ok {
			settings[k] = v
		}
	}
	c := startCluster(t, 3, settings)
	c.createTopicRF("t", 4, 3)
	g, idx, leaderID := groupOnFollowerLed(t, c)
	waitLoaded(t, c.node(leaderID), g)

	prod := c.client(kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if err := prod.ProduceSync(testCtx(t), &kgo.Record{Value: []byte(strconv.Itoa(i)), Partition: int32(i % 4)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(0, 40)
	cl := c.client(kgo.ConsumerGroup(g), kgo.ConsumeTopics("t"), kgo.ServerSideBalancer(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	p := startPoller(cl)
	defer p.halt()
	adm := kadm.NewClient(c.client())
	committed := func(want int64) error {
		offs, err := adm.FetchOffsets(testCtx(t), g)
		if err != nil {
			return err
		}
		var sum int64
		offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
		if sum != want {
			return fmt.Errorf("committed %d of %d", sum, want)
		}
		return nil
	}
	testutil.Eventually(t, testWait, func() error {
		if s, _ := p.snapshot(); len(s) != 40 {
			return fmt.Errorf("%d of 40 records", len(s))
		}
		return committed(40)
	}, "the member to read and commit everything")
	before := stableWith(t, c.client(), g, 4)

	c.stop(leaderID)
	testutil.Eventually(t, testWait, func() error {
		st, _ := c.partitionState(offsetsTopic, idx)
		if st.Leader < 1 || st.Leader == leaderID {
			return fmt.Errorf("partition %d: leader %d", idx, st.Leader)
		}
		return nil
	}, "a new leader of %s-%d", offsetsTopic, idx)
	produce(40, 80)
	testutil.Eventually(t, testWait, func() error {
		s, _ := p.snapshot()
		for i := range 80 {
			if s[strconv.Itoa(i)] != 1 {
				return fmt.Errorf("record %d read %d times", i, s[strconv.Itoa(i)])
			}
		}
		return nil
	}, "the member to read the records produced after the failover once")
	after := stableWith(t, c.client(), g, 4)
	if after.Epoch != before.Epoch || after.Members[0].MemberID != before.Members[0].MemberID ||
		after.Members[0].MemberEpoch != before.Members[0].MemberEpoch {
		t.Fatalf("after the failover: epoch %d member %s@%d, before: epoch %d member %s@%d (a rebalance)",
			after.Epoch, after.Members[0].MemberID, after.Members[0].MemberEpoch,
			before.Epoch, before.Members[0].MemberID, before.Members[0].MemberEpoch)
	}
}
