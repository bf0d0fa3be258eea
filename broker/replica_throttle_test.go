package broker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testutil"
)

// TestReplicationQuotaIsATokenBucket: a second's worth of bytes up front,
// refilled at the rate, exceeded while empty; math.MaxInt64 is no limit
// and 0 copies nothing (as Kafka's quota of 0).
func TestReplicationQuotaIsATokenBucket(t *testing.T) {
	now := time.Unix(1000, 0)
	q := newReplicationQuota()
	q.now = func() time.Time { return now }
	if q.limited() || q.exceeded() {
		t.Fatal("a new quota limits")
	}
	q.setRate(1000)
	if !q.limited() || q.exceeded() {
		t.Fatal("rate 1000: limited and not yet exceeded")
	}
	q.record(1500)
	if !q.exceeded() {
		t.Fatal("1500 bytes of a 1000 bytes/s bucket: not exceeded")
	}
	now = now.Add(400 * time.Millisecond) // -500 + 400
	if !q.exceeded() {
		t.Fatal("after 0.4 s: not exceeded")
	}
	now = now.Add(200 * time.Millisecond) // -100 + 200
	if q.exceeded() {
		t.Fatal("after 0.6 s: still exceeded")
	}
	now = now.Add(10 * time.Second) // saves up a second's worth at most
	q.record(1001)
	if !q.exceeded() {
		t.Fatal("more than a second saved up")
	}
	q.setRate(0)
	if !q.exceeded() {
		t.Fatal("rate 0 lets bytes through")
	}
	q.setRate(1<<63 - 1)
	if q.limited() || q.exceeded() {
		t.Fatal("MaxInt64 limits")
	}
}

// TestReplicationThrottleHoldsTheCopyRate (KIP-73): a follower catching up
// a backlog out of the ISR, its replica throttled on the leader side (then
// on the follower side), copies at the throttled rate, not faster; back in
// the ISR it is not throttled.
func TestReplicationThrottleHoldsTheCopyRate(t *testing.T) {
	for _, side := range []string{"leader", "follower"} {
		t.Run(side, func(t *testing.T) {
			c := startCluster(t, 3, nil)
			topic := "throttle-" + side
			createAssigned(t, c.client(), topic, map[string]string{side + ".replication.throttled.replicas": "*"}, []int32{2, 3})
			c.waitFullISR(topic, 0)
			c.stop(3)
			prod := c.client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
				kgo.ProducerBatchCompression(kgo.NoCompression()))
			val := strings.Repeat("x", 10<<10)
			const records = 600 // ~6 MB
			for range records {
				prod.Produce(context.Background(), kgo.StringRecord(val), nil)
			}
			if err := prod.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			leader := c.node(2).partition(topic, 0)
			backlog := leader.log.Size()
			const rate = 2_000_000
			// The rate is the throttled broker's: the leader's or the
			// follower's, set before the follower comes back.
			target := map[string]int32{"leader": 2, "follower": 3}[side]
			adm := kadm.NewClient(c.client())
			if side == "leader" {
				rs, err := adm.AlterBrokerConfigs(testCtx(t), []kadm.AlterConfig{{Name: "leader.replication.throttled.rate", Value: kmsg.StringPtr(fmt.Sprint(rate))}}, target)
				if err != nil || rs[0].Err != nil {
					t.Fatalf("alter broker %d: %v %v", target, err, rs)
				}
				testutil.Eventually(t, testWait, c.node(2).leaderQuota.limited, "leader quota set")
			} else {
				rs, err := adm.AlterBrokerConfigs(testCtx(t), []kadm.AlterConfig{{Name: "follower.replication.throttled.rate", Value: kmsg.StringPtr(fmt.Sprint(rate))}})
				if err != nil || rs[0].Err != nil {
					t.Fatalf("alter cluster default: %v %v", err, rs)
				}
			}
			c.start(3)
			// The rate over the second half of the backlog: past the
			// follower's start and the bucket's first second's worth.
			end := leader.log.LogEndOffset()
			var half time.Time
			testutil.Eventually(t, 3*testWait, func() bool {
				p := c.node(3).partition(topic, 0)
				if p == nil {
					return false
				}
				if half.IsZero() && p.log.Size() >= backlog/2 {
					half = time.Now()
				}
				return p.log.LogEndOffset() >= end
			}, "follower caught up")
			took := time.Since(half)
			got := float64(backlog/2) / took.Seconds()
			t.Logf("%s throttle: the second half of %d bytes in %v: %.2f MB/s, limit %.2f MB/s", side, backlog, took, got/1e6, float64(rate)/1e6)
			if got > 1.1*rate {
				t.Fatalf("copied at %.2f MB/s, limit %.2f MB/s", got/1e6, float64(rate)/1e6)
			}
			if got < 0.5*rate {
				t.Fatalf("copied at %.2f MB/s, far below the limit %.2f MB/s", got/1e6, float64(rate)/1e6)
			}
			c.waitFullISR(topic, 0) // and in sync, nothing holds it back
		})
	}
}
