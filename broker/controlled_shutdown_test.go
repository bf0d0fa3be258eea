package broker

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/vfs"
)

// TestControlledShutdownMovesLeadershipsBeforeStopping: on three brokers
// with a session timeout far longer than the test (so fencing by session
// expiry cannot be what moves anything), closing a broker that leads RF=3
// partitions first has the controller move its leaderships to other ISR
// members and take it out of every ISR (heartbeats with WantShutDown):
// when Close returns, the controller's image already shows it leading
// nothing and in no ISR, fenced and in controlled shutdown, and the
// records acknowledged with acks=all before are all readable from the new
// leaders.
func TestControlledShutdownMovesLeadershipsBeforeStopping(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"broker.session.timeout.ms": "120000", "broker.heartbeat.interval.ms": "200"})
	cl := c.client()
	createReplicatedTopic(t, cl, "cs", 6, 3, nil)
	produceN(t, cl, "cs", 0, 200)
	full := func() bool {
		for p := int32(0); p < 6; p++ {
			if st, _ := c.partitionState("cs", p); len(st.ISR) != 3 {
				return false
			}
		}
		return true
	}
	testutil.Eventually(t, testWait, full, "every ISR full")
	// The broker (2 or 3: 1 runs the controller) leading the most.
	victim, most := int32(0), -1
	for _, id := range []int32{2, 3} {
		n := 0
		for p := int32(0); p < 6; p++ {
			if st, _ := c.partitionState("cs", p); st.Leader == id {
				n++
			}
		}
		if n > most {
			victim, most = id, n
		}
	}
	if most == 0 {
		t.Fatal("neither broker 2 nor 3 leads a partition")
	}
	start := time.Now()
	c.stop(victim)
	took := time.Since(start)
	for p := int32(0); p < 6; p++ {
		st, _ := c.partitionState("cs", p)
		if st.Leader == victim || slices.Contains(st.ISR, victim) || st.Leader == metadata.NoLeader {
			t.Fatalf("after closing broker %d (%v): partition %d leader %d ISR %v", victim, took, p, st.Leader, st.ISR)
		}
	}
	var b metadata.BrokerInfo
	c.ctl.view(func(st *metadata.State) { b, _ = st.Broker(victim) })
	if !b.InControlledShutdown || !b.Fenced {
		t.Fatalf("broker %d after Close: %+v, want fenced and in controlled shutdown", victim, b)
	}
	t.Logf("broker %d led %d of 6 partitions; Close with controlled shutdown took %v", victim, most, took)
	got := map[string]bool{}
	rd := c.client(kgo.ConsumeTopics("cs"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := testCtx(t)
	for len(got) < 200 && ctx.Err() == nil {
		rd.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[string(r.Key)] = true })
	}
	if len(got) != 200 {
		t.Fatalf("read back %d of 200 acknowledged records from the new leaders", len(got))
	}
}

// TestCleanShutdownMarkerGivesThePreviousBrokerEpoch: a broker closed
// cleanly records its broker epoch in its clean-shutdown marker and sends
// it as PreviousBrokerEpoch when it registers again (KIP-966: the
// controller then knows it lost nothing); restarted without the marker
// (as after a crash) it sends -1, and the controller takes it out of the
// ISRs and ELRs it was in.
func TestCleanShutdownMarkerGivesThePreviousBrokerEpoch(t *testing.T) {
	c := startCluster(t, 3, nil)
	epoch := c.node(3).brokerEpoch.Load()
	c.stop(3)
	marker, ok, err := storage.ReadCleanShutdown(vfs.Default, c.dirs[3])
	if err != nil || !ok || marker != epoch {
		t.Fatalf("marker after a clean Close: epoch %d ok %t err %v, want %d", marker, ok, err, epoch)
	}
	n := c.start(3)
	if got := n.store.CleanShutdownBrokerEpoch(); got != epoch {
		t.Fatalf("restarted broker read epoch %d from its marker, want %d", got, epoch)
	}
	// A crash: the marker is gone when it starts again.
	epoch = n.brokerEpoch.Load()
	c.stop(3)
	if err := os.Remove(filepath.Join(c.dirs[3], storage.CleanShutdownFile)); err != nil {
		t.Fatal(err)
	}
	n = c.start(3)
	if got := n.store.CleanShutdownBrokerEpoch(); got != -1 {
		t.Fatalf("restarted after a crash: epoch %d from the marker, want -1", got)
	}
	if got := n.brokerEpoch.Load(); got <= epoch {
		t.Fatalf("registered again with epoch %d, not above %d", got, epoch)
	}
}

// TestBrokerRackIsRegistered: broker.rack reaches the controller's image
// with the registration, where rack-aware placement reads it.
func TestBrokerRackIsRegistered(t *testing.T) {
	c := startCluster(t, 2, map[string]string{"broker.rack": "rack-a"})
	var b metadata.BrokerInfo
	c.ctl.view(func(st *metadata.State) { b, _ = st.Broker(2) })
	if b.Rack != "rack-a" {
		t.Fatalf("broker 2 registered with rack %q, want rack-a", b.Rack)
	}
}

// TestDescribeConfigsShowsReplicationSettings: DescribeConfigs reports a
// topic's min.insync.replicas and unclean.leader.election.enable with
// their sources (the broker's static setting, Kafka's default, the
// topic's own), and a topic min.insync.replicas of 0 is INVALID_CONFIG.
func TestDescribeConfigsShowsReplicationSettings(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"min.insync.replicas": "2"})
	adm := newAdmin(t, n)
	ctx := testCtx(t)
	createTopic(t, adm, "plain", 1, nil)
	createTopic(t, adm, "own", 1, map[string]*string{"unclean.leader.election.enable": kmsgStr("true"), "min.insync.replicas": kmsgStr("1")})
	rcs, err := adm.DescribeTopicConfigs(ctx, "plain", "own")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string][2]string{
		"plain": {"min.insync.replicas": {"2", "STATIC_BROKER_CONFIG"}, "unclean.leader.election.enable": {"false", "DEFAULT_CONFIG"}},
		"own":   {"min.insync.replicas": {"1", "DYNAMIC_TOPIC_CONFIG"}, "unclean.leader.election.enable": {"true", "DYNAMIC_TOPIC_CONFIG"}},
	}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			w, ok := want[rc.Name][c.Key]
			if !ok {
				continue
			}
			if c.MaybeValue() != w[0] || c.Source.String() != w[1] {
				t.Errorf("%s %s = %q (%s), want %q (%s)", rc.Name, c.Key, c.MaybeValue(), c.Source, w[0], w[1])
			}
			delete(want[rc.Name], c.Key)
		}
	}
	for topic, left := range want {
		if len(left) > 0 {
			t.Errorf("%s: not described: %v", topic, left)
		}
	}
	resp, _ := adm.CreateTopic(ctx, 1, 1, map[string]*string{"min.insync.replicas": kmsgStr("0")}, "bad")
	if !errors.Is(resp.Err, kerr.InvalidConfig) {
		t.Fatalf("min.insync.replicas=0: %v, want INVALID_CONFIG", resp.Err)
	}
}

func kmsgStr(s string) *string { return &s }

// TestRollingRestartUnderAcksAllLoadLosesNothing: brokers 2 and 3 of a
// three-broker cluster restart one after the other (a clean Close:
// controlled shutdown first) while an idempotent producer keeps writing
// with acks=all to RF=3 partitions with min.insync.replicas=2. Every
// produce succeeds (the client retried only retriable errors), and every
// acknowledged record is read back exactly once.
func TestRollingRestartUnderAcksAllLoadLosesNothing(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"broker.heartbeat.interval.ms": "200", "broker.session.timeout.ms": "6000"})
	admin := c.client()
	createReplicatedTopic(t, admin, "roll", 6, 3, map[string]*string{"min.insync.replicas": kmsgStr("2")})
	full := func() bool {
		for p := int32(0); p < 6; p++ {
			if st, _ := c.partitionState("roll", p); len(st.ISR) != 3 {
				return false
			}
		}
		return true
	}
	testutil.Eventually(t, testWait, full, "every ISR full")
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1<<30))
	ctx := testCtx(t)
	stop := make(chan struct{})
	done := make(chan struct{})
	var mu sync.Mutex
	acked, failed := map[string]bool{}, []error{}
	go func() {
		defer close(done)
		// Ten records in flight at a time, spread over the partitions.
		for i := 0; ; i += 10 {
			select {
			case <-stop:
				return
			default:
			}
			var rs []*kgo.Record
			for j := i; j < i+10; j++ {
				key := strconv.Itoa(j)
				rs = append(rs, &kgo.Record{Topic: "roll", Key: []byte(key), Value: []byte("v" + key)})
			}
			results := cl.ProduceSync(ctx, rs...)
			mu.Lock()
			for _, r := range results {
				if r.Err != nil {
					failed = append(failed, r.Err)
				} else {
					acked[string(r.Record.Key)] = true
				}
			}
			mu.Unlock()
		}
	}()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	for _, id := range []int32{2, 3} {
		before := count()
		// Some records acknowledged since the last restart (a loaded
		// machine under -race may take a while per acks=all round).
		testutil.Eventually(t, 3*testWait, func() bool { return count() >= before+20 }, "load before restarting broker %d", id)
		c.stop(id)
		c.start(id)
		testutil.Eventually(t, testWait, full, "every ISR full after restarting broker %d", id)
	}
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(failed) > 0 {
		t.Fatalf("%d produces failed across the rolling restart, first: %v", len(failed), failed[0])
	}
	seen := map[string]int{}
	rd := c.client(kgo.ConsumeTopics("roll"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for len(seen) < len(acked) && ctx.Err() == nil {
		rd.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[string(r.Key)]++ })
	}
	for k := range acked {
		if seen[k] != 1 {
			t.Fatalf("acknowledged record %s read %d times", k, seen[k])
		}
	}
	t.Logf("rolling restart of brokers 2 and 3: %d records acknowledged with acks=all, all read back once", len(acked))
}
