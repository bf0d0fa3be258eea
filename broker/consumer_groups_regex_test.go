package broker

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testutil"
)

// TestConsumerGroup848RegexFollowsTopics: a franz-go KIP-848 consumer
// subscribed by regex (resolved on the broker) consumes every matching
// topic; when one of them is deleted the group epoch moves, the member
// releases the deleted topic's partitions (its target and its current
// assignment lose them) and keeps consuming the others; a matching topic
// created afterwards is picked up. Topic creation and deletion reach the
// group through the same path (reconcile → consumerGroups.imageChanged).
func TestConsumerGroup848RegexFollowsTopics(t *testing.T) {
	n := startNode(t, t.TempDir(), consumerGroupSettings)
	adm := newAdmin(t, n)
	createTopic(t, adm, "rx-keep", 2, nil)
	createTopic(t, adm, "rx-gone", 2, nil)
	createTopic(t, adm, "other", 1, nil) // not matched

	produce := func(topic string, from, to int) {
		t.Helper()
		prod := newClient(t, n, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
		defer prod.Close()
		for i := from; i < to; i++ {
			if err := prod.ProduceSync(testCtx(t), &kgo.Record{Value: []byte(topic + "/" + strconv.Itoa(i))}).FirstErr(); err != nil {
				t.Fatalf("produce to %s: %v", topic, err)
			}
		}
	}
	produce("rx-keep", 0, 10)
	produce("rx-gone", 0, 10)
	produce("other", 0, 10)

	cl := newClient(t, n, kgo.ConsumerGroup("g"), kgo.ConsumeRegex(), kgo.ConsumeTopics("^rx-.*"),
		kgo.ServerSideBalancer(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	var mu sync.Mutex
	seen := map[string]int{} // value -> times
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
			mu.Unlock()
		}
	}()
	defer func() { cancel(); <-done }()
	waitSeen := func(what string, want ...string) {
		t.Helper()
		testutil.Eventually(t, testWait, func() error {
			mu.Lock()
			defer mu.Unlock()
			for _, v := range want {
				if seen[v] == 0 {
					return fmt.Errorf("%s not consumed", v)
				}
			}
			return nil
		}, "%s", what)
	}
	values := func(topic string, from, to int) []string {
		var vs []string
		for i := from; i < to; i++ {
			vs = append(vs, topic+"/"+strconv.Itoa(i))
		}
		return vs
	}

	desc := newClient(t, n)
	// owns waits until the group is Stable with its one member at the
	// group epoch, owning and targeted exactly the partitions of want
	// ("topic:count" each), and returns the group epoch.
	owns := func(what string, want ...string) int32 {
		t.Helper()
		slices.Sort(want)
		var epoch int32
		testutil.Eventually(t, testWait, func() error {
			d := describe848(t, desc, "g")
			if d.ErrorCode != 0 {
				return kerr.ErrorForCode(d.ErrorCode)
			}
			if len(d.Members) != 1 {
				return fmt.Errorf("%d members", len(d.Members))
			}
			m := d.Members[0]
			count := func(a kmsg.Assignment) []string {
				var got []string
				for _, tp := range a.TopicPartitions {
					got = append(got, tp.Topic+":"+strconv.Itoa(len(tp.Partitions)))
				}
				slices.Sort(got)
				return got
			}
			cur, target := count(m.Assignment), count(m.TargetAssignment)
			if d.State != "Stable" || m.MemberEpoch != d.Epoch || !slices.Equal(cur, want) || !slices.Equal(target, want) {
				return fmt.Errorf("state %s, group epoch %d, member epoch %d, owns %v, target %v; want Stable owning %v",
					d.State, d.Epoch, m.MemberEpoch, cur, target, want)
			}
			epoch = d.Epoch
			return nil
		}, "%s", what)
		return epoch
	}

	before := owns("both rx topics assigned", "rx-gone:2", "rx-keep:2")
	waitSeen("the rx topics consumed", append(values("rx-keep", 0, 10), values("rx-gone", 0, 10)...)...)

	if resp, err := adm.DeleteTopics(testCtx(t), "rx-gone"); err != nil || resp["rx-gone"].Err != nil {
		t.Fatalf("delete rx-gone: %v / %v", err, resp["rx-gone"].Err)
	}
	after := owns("rx-gone released after its deletion", "rx-keep:2")
	if after <= before {
		t.Errorf("group epoch %d after the deletion, was %d", after, before)
	}
	produce("rx-keep", 10, 20)
	waitSeen("rx-keep consumed after the deletion", values("rx-keep", 10, 20)...)

	createTopic(t, adm, "rx-new", 1, nil)
	owns("rx-new picked up", "rx-keep:2", "rx-new:1")
	produce("rx-new", 0, 5)
	waitSeen("rx-new consumed", values("rx-new", 0, 5)...)

	mu.Lock()
	defer mu.Unlock()
	for v, k := range seen {
		if strings.HasPrefix(v, "other/") {
			t.Errorf("consumed %s from a topic the regex does not match", v)
		}
		if k > 1 {
			t.Errorf("%s consumed %d times", v, k)
		}
	}
}
