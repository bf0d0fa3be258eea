package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/controller/metadata"
)

func createTopic(t testing.TB, s Service, name string, parts int32, rf int16) metadata.CreateTopicResult {
	t.Helper()
	res, err := s.CreateTopics(ctx(t), metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: name, NumPartitions: parts, ReplicationFactor: rf}}})
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	if len(res) != 1 {
		t.Fatalf("create topic %s: %d results", name, len(res))
	}
	return res[0]
}

func TestControllerSingleVoterRegistersBrokersAndCreatesTopics(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 1})
	ctl := c.leader()
	registerBrokers(t, ctl, 3, 0)
	r := createTopic(t, ctl, "orders", 6, 1)
	if r.Err != nil {
		t.Fatalf("create: %v", r.Err)
	}
	st := ctl.State()
	ti, ok := st.TopicByName("orders")
	if !ok || ti.ID != r.TopicID || ti.NumPartitions != 6 {
		t.Fatalf("topic in image: %+v %v", ti, ok)
	}
	leaders := map[int32]bool{}
	for _, p := range st.Partitions(ti.ID) {
		if len(p.Replicas) != 1 || !slices.Equal(p.ISR, p.Replicas) || p.Leader != p.Replicas[0] {
			t.Fatalf("partition %+v", p)
		}
		leaders[p.Leader] = true
	}
	if len(leaders) != 3 {
		t.Fatalf("6 partitions led by %d of 3 brokers", len(leaders))
	}
	// Three replicas over three brokers, all in the ISR; a fourth cannot
	// be placed.
	r = createTopic(t, ctl, "wide-3", 2, 3)
	if r.Err != nil {
		t.Fatalf("rf 3: %v", r.Err)
	}
	for _, p := range ctl.State().Partitions(r.TopicID) {
		if len(p.Replicas) != 3 || !slices.Equal(p.ISR, p.Replicas) || p.Leader != p.Replicas[0] {
			t.Fatalf("rf 3 partition %+v", p)
		}
	}
	r = createTopic(t, ctl, "wide-4", 1, 4)
	if !errors.Is(r.Err, kerr.InvalidReplicationFactor) {
		t.Fatalf("rf 4: %v", r.Err)
	}
	if _, ok := ctl.State().TopicByName("wide-4"); ok {
		t.Fatal("refused topic exists")
	}
}

func TestControllerFiveVotersSurviveTwoLossesNotThree(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 5})
	lead := c.leader()
	registerBrokers(t, lead, 2, 0)
	off, err := lead.Propose(ctx(t), []metadata.Record{&metadata.NoOpRecord{}})
	if err != nil {
		t.Fatal(err)
	}
	c.waitApplied(off)
	// Lose the leader and one follower: three of five still decide.
	c.stop(lead.ID())
	c.stop(c.follower().ID())
	lead = c.leader()
	if r := createTopic(t, lead, "three-of-five", 1, 1); r.Err != nil {
		t.Fatal(r.Err)
	}
	// Lose a third: two of five cannot.
	c.stop(c.follower().ID())
	cx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := lead.CreateTopics(cx, metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: "two-of-five", NumPartitions: 1, ReplicationFactor: 1}}}); err == nil {
		t.Fatal("two of five voters committed")
	}
	for _, ctl := range c.ctrls {
		if _, ok := ctl.State().TopicByName("two-of-five"); ok {
			t.Fatal("two of five voters applied a decision")
		}
	}
}

func TestControllerFollowerForwardsToLeader(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 3})
	lead := c.leader()
	f := c.follower()
	// In-process call on a follower: forwarded over its CONTROLLER link.
	registerBrokers(t, f, 3, 0)
	if r := createTopic(t, f, "via-follower", 2, 1); r.Err != nil {
		t.Fatalf("create via follower: %v", r.Err)
	}
	// A network client pointed at the follower only.
	cl := NewClient(ClientOptions{Addrs: []string{f.Addr()}})
	defer cl.Close()
	if r := createTopic(t, cl, "via-client", 1, 1); r.Err != nil {
		t.Fatalf("create via client: %v", r.Err)
	}
	r := createTopic(t, cl, "via-client", 1, 1)
	if !errors.Is(r.Err, kerr.TopicAlreadyExists) {
		t.Fatalf("second create: %v, want TOPIC_ALREADY_EXISTS across the wire", r.Err)
	}
	// A request that was already forwarded once is answered NOT_CONTROLLER
	// with the leader's address, never forwarded again.
	fw := NewClient(ClientOptions{Addrs: []string{f.Addr()}, forwarding: true})
	defer fw.Close()
	_, err := fw.CreateTopics(ctx(t), metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: "loop", NumPartitions: 1, ReplicationFactor: 1}}})
	var nc *NotControllerError
	if !errors.As(err, &nc) || nc.LeaderID != lead.ID() || nc.LeaderAddr != lead.Addr() || !errors.Is(err, kerr.NotController) {
		t.Fatalf("forwarded request to follower: %v, want NOT_CONTROLLER naming %d", err, lead.ID())
	}
	// Every controller applied what the leader decided.
	off := lead.State().Offset()
	c.waitApplied(off)
	// A broker can follow the log from a follower.
	w, err := cl.Watch(ctx(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	st, _ := follow(t, w, off)
	want, _ := lead.State().Marshal()
	if got, _ := st.Marshal(); !bytes.Equal(got, want) {
		t.Fatal("image rebuilt by watching a follower differs from the leader's")
	}
	for _, ctl := range c.ctrls {
		if _, ok := ctl.State().TopicByName("via-client"); !ok {
			t.Fatalf("controller %d lacks the topic", ctl.ID())
		}
	}
}

// heartbeater keeps brokers' sessions alive until stopped.
type heartbeater struct {
	stop chan struct{}
	wg   sync.WaitGroup
}

func startHeartbeats(t *testing.T, s Service, epochs map[int32]int64, every time.Duration) *heartbeater {
	h := &heartbeater{stop: make(chan struct{})}
	for id, ep := range epochs {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			tk := time.NewTicker(every)
			defer tk.Stop()
			for {
				select {
				case <-h.stop:
					return
				case <-tk.C:
				}
				cx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err := s.BrokerHeartbeat(cx, metadata.BrokerHeartbeatRequest{BrokerID: id, BrokerEpoch: ep, CurrentMetadataOffset: 1 << 40})
				cancel()
				if err != nil {
					t.Logf("heartbeat of broker %d: %v", id, err)
				}
			}
		}()
	}
	t.Cleanup(h.halt)
	return h
}

func (h *heartbeater) halt() {
	select {
	case <-h.stop:
	default:
		close(h.stop)
	}
	h.wg.Wait()
}

// TestControllerSessionExpiryFencesBrokerAndTakesItsPartitionsOffline: a
// broker whose session expires is fenced; the partitions it led hold their
// records on it alone (replication is not built yet), so they go offline
// (leader -1, ISR just that broker, leader epoch bumped) instead of moving
// to a broker without the data, and it leads them again once it heartbeats.
func TestControllerSessionExpiryFencesBrokerAndTakesItsPartitionsOffline(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 3, tune: func(cfg *Config) {
		cfg.BrokerSessionTimeout = time.Second
		cfg.BrokerHeartbeatInterval = 50 * time.Millisecond
	}})
	lead := c.leader()
	epochs := registerBrokers(t, lead, 3, 0)
	silent := int32(101)
	alive := map[int32]int64{}
	for id, ep := range epochs {
		if id != silent {
			alive[id] = ep
		}
	}
	h := startHeartbeats(t, lead, alive, 50*time.Millisecond)
	defer h.halt()
	r := createTopic(t, lead, "events", 6, 1)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	before := lead.State().Partitions(r.TopicID)
	led := 0
	for _, p := range before {
		if p.Leader == silent {
			led++
		}
	}
	if led == 0 {
		t.Fatalf("placement gave broker %d no leadership: %+v", silent, before)
	}
	start := time.Now()
	if !waitFor(testWait, func() bool {
		b, _ := lead.State().Broker(silent)
		return b.Fenced
	}) {
		t.Fatalf("broker %d not fenced", silent)
	}
	if el := time.Since(start); el < 750*time.Millisecond {
		t.Fatalf("fenced after %v, before its session could expire", el)
	}
	st := lead.State()
	for i, p := range st.Partitions(r.TopicID) {
		old := before[i]
		if old.Leader != silent {
			if p.Leader != old.Leader || p.LeaderEpoch != old.LeaderEpoch {
				t.Fatalf("partition %d of a live broker changed: %+v, was %+v", i, p, old)
			}
			continue
		}
		if p.Leader != metadata.NoLeader || !slices.Equal(p.ISR, []int32{silent}) || p.LeaderEpoch != old.LeaderEpoch+1 {
			t.Fatalf("partition %d of the fenced broker: %+v, want leader -1, ISR [%d], leader epoch %d", i, p, silent, old.LeaderEpoch+1)
		}
	}
	for id := range alive {
		if b, _ := st.Broker(id); b.Fenced {
			t.Fatalf("heartbeating broker %d fenced", id)
		}
	}
	// The broker comes back: unfenced, it leads its partitions again.
	back := startHeartbeats(t, lead, map[int32]int64{silent: epochs[silent]}, 50*time.Millisecond)
	defer back.halt()
	if !waitFor(testWait, func() bool {
		for i, p := range lead.State().Partitions(r.TopicID) {
			if p.Leader != before[i].Leader {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("broker %d back, partitions %+v", silent, lead.State().Partitions(r.TopicID))
	}
}

func TestControllerStaleAlterPartitionRefused(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 1})
	ctl := c.leader()
	epochs := registerBrokers(t, ctl, 3, 0)
	// A partition with three replicas in its ISR, as versions before the
	// one-replica limit created them (proposed raw: the planners refuse
	// it). Planned after the term's start (registerBrokers' decisions), so
	// the ISR correction of the start of the term does not touch it.
	id := uuid.MustParse("00000000-0000-4000-8000-00000000015a")
	if _, err := ctl.Propose(ctx(t), []metadata.Record{
		&metadata.TopicRecord{Name: "isr", TopicID: id},
		&metadata.PartitionRecord{TopicID: id, Replicas: []int32{101, 102, 103}, ISR: []int32{101, 102, 103}, Leader: 101},
	}); err != nil {
		t.Fatal(err)
	}
	r := metadata.CreateTopicResult{TopicID: id}
	p, _ := ctl.State().Partition(r.TopicID, 0)
	cl := NewClient(ClientOptions{Addrs: []string{ctl.Addr()}})
	defer cl.Close()
	shrunk := []int32{p.Leader, p.Replicas[1]}
	res, err := cl.AlterPartition(ctx(t), metadata.AlterPartitionRequest{
		BrokerID: p.Leader, BrokerEpoch: epochs[p.Leader], TopicID: r.TopicID, Partition: 0,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: shrunk,
	})
	if err != nil || res.Err != nil || res.PartitionEpoch != p.PartitionEpoch+1 {
		t.Fatalf("alter partition: %v %+v", err, res)
	}
	// The same leader acting on its old partition epoch is refused.
	res, err = cl.AlterPartition(ctx(t), metadata.AlterPartitionRequest{
		BrokerID: p.Leader, BrokerEpoch: epochs[p.Leader], TopicID: r.TopicID, Partition: 0,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: p.Replicas,
	})
	if err != nil || !errors.Is(res.Err, kerr.InvalidUpdateVersion) {
		t.Fatalf("stale alter partition: %v %+v, want INVALID_UPDATE_VERSION", err, res)
	}
	// Growing the ISR back with a member's stale broker epoch (a fetch
	// from its previous incarnation, KIP-903) is INELIGIBLE_REPLICA;
	// with the current epochs it is accepted.
	third := p.Replicas[2]
	res, err = cl.AlterPartition(ctx(t), metadata.AlterPartitionRequest{
		BrokerID: p.Leader, BrokerEpoch: epochs[p.Leader], TopicID: r.TopicID, Partition: 0,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch + 1,
		NewISRWithEpochs: []metadata.ISRMember{{BrokerID: shrunk[0], BrokerEpoch: -1}, {BrokerID: shrunk[1], BrokerEpoch: -1}, {BrokerID: third, BrokerEpoch: epochs[third] - 1}},
	})
	if err != nil || !errors.Is(res.Err, kerr.IneligibleReplica) {
		t.Fatalf("growing alter partition with a stale member epoch: %v %+v, want INELIGIBLE_REPLICA", err, res)
	}
	if q, _ := ctl.State().Partition(r.TopicID, 0); !slices.Equal(q.ISR, shrunk) {
		t.Fatalf("ISR now %v, want %v", q.ISR, shrunk)
	}
	res, err = cl.AlterPartition(ctx(t), metadata.AlterPartitionRequest{
		BrokerID: p.Leader, BrokerEpoch: epochs[p.Leader], TopicID: r.TopicID, Partition: 0,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch + 1,
		NewISRWithEpochs: []metadata.ISRMember{{BrokerID: shrunk[0], BrokerEpoch: epochs[shrunk[0]]}, {BrokerID: shrunk[1], BrokerEpoch: epochs[shrunk[1]]}, {BrokerID: third, BrokerEpoch: epochs[third]}},
	})
	want := append(slices.Clone(shrunk), third)
	if err != nil || res.Err != nil || !slices.Equal(res.ISR, want) || res.PartitionEpoch != p.PartitionEpoch+2 {
		t.Fatalf("growing alter partition: %v %+v", err, res)
	}
	if q, _ := ctl.State().Partition(r.TopicID, 0); !slices.Equal(q.ISR, want) {
		t.Fatalf("ISR now %v, want %v", q.ISR, want)
	}
}

func TestControllerMinorityCannotCommit(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 3})
	lead := c.leader()
	registerBrokers(t, lead, 1, 0)
	var others []int32
	var otherIDs []uint64
	for id := range c.ctrls {
		if id != lead.ID() {
			others = append(others, id)
			otherIDs = append(otherIDs, uint64(id))
		}
	}
	c.sim.Partition([]uint64{uint64(lead.ID())}, otherIDs)
	cx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
	res, err := lead.CreateTopics(cx, metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: "minority", NumPartitions: 1, ReplicationFactor: 1}}})
	cancel()
	if err == nil {
		t.Fatalf("minority side committed: %+v", res)
	}
	newLead := c.leader(others...)
	if r := createTopic(t, newLead, "majority", 1, 1); r.Err != nil {
		t.Fatal(r.Err)
	}
	c.sim.Heal()
	off := newLead.State().Offset()
	c.waitApplied(off)
	for _, ctl := range c.ctrls {
		st := ctl.State()
		if _, ok := st.TopicByName("minority"); ok {
			t.Fatalf("controller %d has the minority's topic", ctl.ID())
		}
		if _, ok := st.TopicByName("majority"); !ok {
			t.Fatalf("controller %d lacks the majority's topic", ctl.ID())
		}
	}
}

func TestControllerKillLeaderOverTCPKeepsCommitted(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 3, tcp: true, disk: true})
	lead := c.leader()
	registerBrokers(t, lead, 3, 0)
	var want []string
	for i := range 5 {
		name := fmt.Sprint("t", i)
		if r := createTopic(t, lead, name, 2, 1); r.Err != nil {
			t.Fatal(r.Err)
		}
		want = append(want, name)
	}
	old := lead.ID()
	start := time.Now()
	c.stop(old)
	var others []int32
	for id := range c.ctrls {
		others = append(others, id)
	}
	lead = c.leader(others...)
	if el := time.Since(start); el > 10*testElectionTicks*testTick {
		t.Fatalf("new leader after %v (election timeout %v)", el, testElectionTicks*testTick)
	}
	if r := createTopic(t, lead, "after", 1, 1); r.Err != nil {
		t.Fatal(r.Err)
	}
	want = append(want, "after")
	c.start(old)
	c.waitApplied(lead.State().Offset())
	for _, ctl := range c.ctrls {
		var got []string
		for _, ti := range ctl.State().Topics() {
			got = append(got, ti.Name)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("controller %d topics %v, want %v", ctl.ID(), got, want)
		}
	}
}

func TestControllerRestartAllFromDiskIdenticalState(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 3, disk: true, tune: func(cfg *Config) {
		cfg.SnapshotEntries = 8
		cfg.SnapshotCatchUpEntries = 4
	}})
	lead := c.leader()
	registerBrokers(t, lead, 4, 2)
	for i := range 6 {
		if r := createTopic(t, lead, fmt.Sprint("topic-", i), 3, 1); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	off := lead.State().Offset()
	c.waitApplied(off)
	before := lead.State()
	for id := range c.ctrls {
		c.stop(id)
	}
	for _, v := range c.voters {
		c.start(v.ID)
	}
	lead = c.leader()
	// The new leader's empty entry moves every offset past off.
	cur := lead.State().Offset()
	c.waitApplied(cur)
	var images [][]byte
	for _, ctl := range c.ctrls {
		if ctl.Status().SnapshotIndex == 0 {
			t.Fatalf("controller %d restarted without a snapshot", ctl.ID())
		}
		st := ctl.State()
		if st.Offset() != cur {
			t.Fatalf("controller %d at offset %d, want %d", ctl.ID(), st.Offset(), cur)
		}
		b, err := st.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		images = append(images, b)
		if !slices.EqualFunc(st.Topics(), before.Topics(), topicEq) || !slices.EqualFunc(st.Brokers(), before.Brokers(), brokerEq) {
			t.Fatalf("controller %d image differs after restart", ctl.ID())
		}
	}
	for i := 1; i < len(images); i++ {
		if !bytes.Equal(images[0], images[i]) {
			t.Fatal("controllers disagree on the image after restart")
		}
	}
}

func topicEq(a, b metadata.TopicInfo) bool {
	return a.Name == b.Name && a.ID == b.ID && a.NumPartitions == b.NumPartitions
}
func brokerEq(a, b metadata.BrokerInfo) bool {
	return a.ID == b.ID && a.Epoch == b.Epoch && a.Fenced == b.Fenced && a.Rack == b.Rack
}

func TestControllerLaggingFollowerCatchesUpFromSnapshot(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 3, disk: true, tune: func(cfg *Config) {
		cfg.SnapshotEntries = 10
		cfg.SnapshotCatchUpEntries = 2
	}})
	lead := c.leader()
	f := c.follower().ID()
	c.stop(f)
	registerBrokers(t, lead, 3, 0)
	for i := range 15 {
		if r := createTopic(t, lead, fmt.Sprint("lag-", i), 1, 1); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	c.start(f)
	c.waitApplied(lead.State().Offset())
	if c.ctrls[f].Status().SnapshotIndex == 0 {
		t.Fatal("follower caught up without a snapshot")
	}
	a, _ := lead.State().Marshal()
	b, _ := c.ctrls[f].State().Marshal()
	if !bytes.Equal(a, b) {
		t.Fatal("follower image differs from the leader's")
	}
}

// follow applies a watch's deltas to a fresh image until it reaches off.
func follow(t *testing.T, w Watcher, off int64) (*metadata.State, []Delta) {
	t.Helper()
	st := metadata.NewState()
	var ds []Delta
	for st.Offset() < off {
		d, err := w.Next(ctx(t))
		if err != nil {
			t.Fatalf("watch at %d: %v", st.Offset(), err)
		}
		ds = append(ds, d)
		if d.Image != nil {
			st = d.Image
			continue
		}
		if err := st.ApplyBatch(d.Offset, d.Records); err != nil {
			t.Fatalf("apply delta at %d: %v", d.Offset, err)
		}
	}
	return st, ds
}

func TestControllerWatchFromZeroAndFromMidOffsetAfterSnapshot(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 1, tune: func(cfg *Config) {
		cfg.SnapshotEntries = 10
		cfg.SnapshotCatchUpEntries = 3
	}})
	ctl := c.leader()
	registerBrokers(t, ctl, 2, 0)
	for i := range 20 {
		if r := createTopic(t, ctl, fmt.Sprint("w", i), 1, 1); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	off := ctl.State().Offset()
	first, _ := ctl.storage.FirstIndex()
	if first <= 1 {
		t.Fatalf("log not compacted (first index %d)", first)
	}
	want, _ := ctl.State().Marshal()
	cl := NewClient(ClientOptions{Addrs: []string{ctl.Addr()}})
	defer cl.Close()
	for _, svc := range []Service{ctl, cl} {
		// From 0: the log no longer holds it, so the image comes first.
		w, err := svc.Watch(ctx(t), 0)
		if err != nil {
			t.Fatal(err)
		}
		st, ds := follow(t, w, off)
		w.Close()
		if ds[0].Image == nil {
			t.Fatalf("%T: first delta from 0 is not an image", svc)
		}
		if got, _ := st.Marshal(); !bytes.Equal(got, want) {
			t.Fatalf("%T: image rebuilt from the watch differs", svc)
		}
		// From an offset the log still holds: deltas only, starting there.
		mid := int64(first) + 1
		w, err = svc.Watch(ctx(t), mid)
		if err != nil {
			t.Fatal(err)
		}
		d, err := w.Next(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if d.Image != nil || d.Offset < mid {
			t.Fatalf("%T: first delta from %d: offset %d image %v", svc, mid, d.Offset, d.Image != nil)
		}
		w.Close()
	}
	// A watch waits for new entries.
	w, err := cl.Watch(ctx(t), off+1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	done := make(chan error, 1)
	go func() {
		_, err := ctl.CreateTopics(context.Background(), metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: "later", NumPartitions: 1, ReplicationFactor: 1}}})
		done <- err
	}()
	d, err := w.Next(ctx(t))
	if cerr := <-done; cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Records) == 0 || d.Records[0].Type() != metadata.TypeTopic {
		t.Fatalf("live delta %+v", d)
	}
}

func TestControllerMetricsExported(t *testing.T) {
	reg := prometheus.NewRegistry()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := Open(Options{
		Config: Config{NodeID: 1, Voters: []Voter{{1, ln.Addr().String()}}, TickInterval: testTick,
			SnapshotEntries: 5, SnapshotCatchUpEntries: 1, Logger: testLogger()},
		Storage: NewMemoryStorage(), Listener: ln, Registry: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	for range 8 {
		if _, err := ctl.Propose(ctx(t), []metadata.Record{&metadata.NoOpRecord{}}); err != nil {
			if !waitFor(testWait, ctl.IsLeader) {
				t.Fatal(err)
			}
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		switch {
		case m.GetGauge() != nil:
			got[mf.GetName()] = m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			got[mf.GetName()] = m.GetCounter().GetValue()
		}
	}
	for name, min := range map[string]float64{
		"strata_controller_raft_term": 1, "strata_controller_raft_leader_id": 1,
		"strata_controller_raft_commit_index": 5, "strata_controller_raft_applied_index": 5,
		"strata_controller_snapshot_size_bytes": 1, "strata_controller_proposals_total": 5,
		"strata_controller_leader_changes_total": 1, "strata_controller_snapshot_timestamp_seconds": 1,
		"strata_controller_unclean_leader_elections_total": 0, "strata_controller_preferred_replica_imbalance_partitions": 0,
	} {
		if v, ok := got[name]; !ok || v < min {
			t.Errorf("%s = %v (present %v), want >= %v", name, v, ok, min)
		}
	}
	if _, ok := got["strata_controller_snapshot_age_seconds"]; !ok {
		t.Error("snapshot age missing")
	}
}

// TestClientWatchFailsOverWithoutGapOrRepeat: a broker's watch on a
// controller that stops resumes on another one right after the last delta
// it saw: the view rebuilt from the stream equals the leader's image.
func TestClientWatchFailsOverWithoutGapOrRepeat(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 3})
	lead := c.leader()
	f := c.follower()
	addrs := []string{f.Addr()}
	for _, ctl := range c.ctrls {
		if ctl != f {
			addrs = append(addrs, ctl.Addr())
		}
	}
	cl := NewClient(ClientOptions{Addrs: addrs, RetryBackoff: 5 * time.Millisecond})
	defer cl.Close()
	registerBrokers(t, lead, 2, 0)
	w, err := cl.Watch(ctx(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	st, _ := follow(t, w, lead.State().Offset())
	c.stop(f.ID())
	for i := range 5 {
		if r := createTopic(t, lead, fmt.Sprint("after-failover-", i), 1, 1); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	off := lead.State().Offset()
	for st.Offset() < off {
		d, err := w.Next(ctx(t))
		if err != nil {
			t.Fatalf("watch after failover: %v", err)
		}
		if d.Image != nil {
			st = d.Image
			continue
		}
		if err := st.ApplyBatch(d.Offset, d.Records); err != nil {
			t.Fatalf("delta at %d after %d: %v", d.Offset, st.Offset(), err)
		}
	}
	want, _ := lead.State().Marshal()
	if got, _ := st.Marshal(); !bytes.Equal(got, want) {
		t.Fatal("view rebuilt across the failover differs from the leader's image")
	}
}

// TestBrokerSessionSurvivesControllerFailover: a broker heartbeating
// through a Client that knows every voter keeps its session through the
// loss of the controller leader: it is never fenced, and its watch keeps
// following the log.
func TestBrokerSessionSurvivesControllerFailover(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 3, tcp: true, tune: func(cfg *Config) {
		cfg.BrokerSessionTimeout = 1500 * time.Millisecond
		cfg.BrokerHeartbeatInterval = 100 * time.Millisecond
	}})
	cl := NewClient(ClientOptions{Addrs: VoterAddrs(c.voters), RetryBackoff: 10 * time.Millisecond})
	defer cl.Close()
	epochs := registerBrokers(t, cl, 1, 0)
	h := startHeartbeats(t, cl, epochs, 100*time.Millisecond)
	defer h.halt()
	lead := c.leader()
	old := lead.ID()
	c.stop(old)
	var others []int32
	for id := range c.ctrls {
		others = append(others, id)
	}
	lead = c.leader(others...)
	if r := createTopic(t, cl, "after-failover", 1, 1); r.Err != nil {
		t.Fatal(r.Err)
	}
	// Two sessions' worth of time on the new leader.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if b, _ := lead.State().Broker(101); b.Fenced {
			t.Fatal("a heartbeating broker was fenced across the failover")
		}
		time.Sleep(50 * time.Millisecond)
	}
	w, err := cl.Watch(ctx(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	st, _ := follow(t, w, lead.State().Offset())
	if _, ok := st.TopicByName("after-failover"); !ok {
		t.Fatal("watch after failover misses the new topic")
	}
}

// TestControllerNewLeaderCorrectsLegacyISRs: an image written by a version
// before replication (no strata.replication.version feature; every replica
// listed in the ISR although only the leader ever held records) is
// corrected by the next leader at the start of its term, with no request
// to prompt it: the ISR becomes the leader alone, and the feature is
// recorded. An ISR of several members in an image that has the feature
// (what leaders reported) survives every later leader change.
func TestControllerNewLeaderCorrectsLegacyISRs(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 3})
	lead := c.leader()
	registerBrokers(t, lead, 3, 0)
	if lead.State().Feature(metadata.FeatureReplication) != metadata.ReplicationVersion {
		t.Fatal("the first leader did not record strata.replication.version")
	}
	id := uuid.MustParse("00000000-0000-4000-8000-0000000001e9")
	// The image as an old version left it: the feature absent (level 0
	// removes it), a partition with every replica in its ISR.
	if _, err := lead.Propose(ctx(t), []metadata.Record{
		&metadata.FeatureLevelRecord{Name: metadata.FeatureReplication, Level: 0},
		&metadata.TopicRecord{Name: "legacy", TopicID: id},
		&metadata.PartitionRecord{TopicID: id, Replicas: []int32{102, 101, 103}, ISR: []int32{102, 101, 103}, Leader: 102},
	}); err != nil {
		t.Fatal(err)
	}
	old := lead.ID()
	c.stop(old)
	var others []int32
	for id := range c.ctrls {
		others = append(others, id)
	}
	next := c.leader(others...)
	if !waitFor(testWait, func() bool {
		p, _ := next.State().Partition(id, 0)
		return slices.Equal(p.ISR, []int32{102}) && next.State().Feature(metadata.FeatureReplication) == metadata.ReplicationVersion
	}) {
		p, _ := next.State().Partition(id, 0)
		t.Fatalf("new leader %d left the legacy ISR or recorded no feature: %+v", next.ID(), p)
	}
	if p, _ := next.State().Partition(id, 0); p.Leader != 102 || !slices.Equal(p.Replicas, []int32{102, 101, 103}) {
		t.Fatalf("correction changed more than the ISR: %+v", p)
	}
	// Now an ISR of three, as a leader reports it once its followers
	// caught up; the next leaders leave it alone.
	p, _ := next.State().Partition(id, 0)
	res, err := next.AlterPartition(ctx(t), metadata.AlterPartitionRequest{BrokerID: 102, BrokerEpoch: next.State().BrokerEpoch(102), TopicID: id,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, NewISR: []int32{102, 101, 103}})
	if err != nil || res.Err != nil {
		t.Fatalf("expand: %v %+v", err, res)
	}
	c.start(old)
	c.waitApplied(next.State().Offset())
	c.stop(next.ID())
	others = others[:0]
	for id := range c.ctrls {
		others = append(others, id)
	}
	third := c.leader(others...)
	if _, err := third.CreateTopics(ctx(t), metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: "after", NumPartitions: 1, ReplicationFactor: 1}}}); err != nil {
		t.Fatal(err) // a decision of the third leader's term: its start-of-term records are in
	}
	if p, _ := third.State().Partition(id, 0); !slices.Equal(p.ISR, []int32{102, 101, 103}) {
		t.Fatalf("leader %d rewrote a reported ISR: %+v", third.ID(), p)
	}
}

// TestControllerClusterIDIsTheQuorums: the first leader records one cluster
// id before its first decision; every voter reports it, a broker
// registering without one (a fresh node) learns it, through a follower or
// a network Client too, and one whose meta.properties names another
// cluster is refused with INCONSISTENT_CLUSTER_ID and registers nothing.
func TestControllerClusterIDIsTheQuorums(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 3})
	lead := c.leader()
	f := c.follower()
	resp, err := f.RegisterBroker(ctx(t), metadata.RegisterBrokerRequest{BrokerID: 101, IncarnationID: uuid.New()})
	if err != nil || resp.ClusterID == "" {
		t.Fatalf("fresh broker's registration: %v, cluster id %q", err, resp.ClusterID)
	}
	id := resp.ClusterID
	c.waitApplied(lead.State().Offset())
	for _, ctl := range c.ctrls {
		if got := ctl.ClusterID(); got != id {
			t.Fatalf("controller %d reports cluster id %q, the quorum recorded %q", ctl.ID(), got, id)
		}
	}
	cl := NewClient(ClientOptions{Addrs: []string{f.Addr()}})
	defer cl.Close()
	if resp, err := cl.RegisterBroker(ctx(t), metadata.RegisterBrokerRequest{BrokerID: 102, IncarnationID: uuid.New(), ClusterID: id}); err != nil || resp.ClusterID != id {
		t.Fatalf("registration with the cluster's id over a Client: %v, %q", err, resp.ClusterID)
	}
	_, err = cl.RegisterBroker(ctx(t), metadata.RegisterBrokerRequest{BrokerID: 103, IncarnationID: uuid.New(), ClusterID: "ForeignCluster00000000"})
	if !errors.Is(err, kerr.InconsistentClusterID) || !strings.Contains(err.Error(), "another cluster") {
		t.Fatalf("foreign broker's registration: %v, want INCONSISTENT_CLUSTER_ID", err)
	}
	if _, ok := lead.State().Broker(103); ok {
		t.Fatal("foreign broker registered")
	}
}

// TestControllerRecordsItsMetaPropertiesClusterID: an image without a
// cluster id (a new cluster, or one from a version before the record) gets
// the id of its first leader's meta.properties, so a cluster keeps the id
// its node always had.
func TestControllerRecordsItsMetaPropertiesClusterID(t *testing.T) {
	const mine = "MkU3OEVBNTcwNTJENDM2Qk"
	c := newCtrlCluster(t, clusterOpts{n: 1, clusterIDs: map[int32]string{1: mine}})
	lead := c.leader()
	if !waitFor(testWait, func() bool { return lead.ClusterID() == mine }) {
		t.Fatalf("cluster id %q, want the node's own %q (recorded with no request)", lead.ClusterID(), mine)
	}
}

// TestControllerCommitsBootstrapRecordsOnce: the first leader of a new
// cluster commits Options.Bootstrap (the format-time SCRAM credentials)
// with its cluster id, before any decision; a later leader of the same
// image does not again (a credential deleted since stays deleted).
func TestControllerCommitsBootstrapRecordsOnce(t *testing.T) {
	rec, err := metadata.ScramRecordFromPassword("alice", metadata.ScramSHA256, "alice-secret", []byte("salt"), 4096)
	if err != nil {
		t.Fatal(err)
	}
	c := newCtrlCluster(t, clusterOpts{n: 3, bootstrap: []metadata.Record{rec}})
	lead := c.leader()
	if !waitFor(testWait, func() bool { return lead.ClusterID() != "" }) {
		t.Fatal("no cluster id recorded")
	}
	if _, ok := lead.State().ScramCredential("alice", metadata.ScramSHA256); !ok {
		t.Fatal("the bootstrap credential is not in the image of the first term")
	}
	res, err := lead.AlterUserScramCredentials(ctx(t), AlterScramRequest{Deletions: []metadata.ScramDeletion{{Name: "alice", Mechanism: metadata.ScramSHA256}}})
	if err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("delete alice: %v %+v", err, res)
	}
	c.stop(lead.ID())
	next := c.leader()
	if _, err := next.CreateTopics(ctx(t), metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: "after", NumPartitions: 1, ReplicationFactor: 1}}}); err != nil {
		t.Fatal(err) // a decision of the next leader's term: its start-of-term records are in
	}
	if _, ok := next.State().ScramCredential("alice", metadata.ScramSHA256); ok {
		t.Fatal("a later leader committed the bootstrap records again")
	}
}
