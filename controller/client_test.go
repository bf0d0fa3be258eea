package controller

import (
	"bufio"
	"context"
	"errors"
	"net"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/netfault"
)

// watchDeltas runs w.Next in the background, as a broker's metadata
// follower does, and returns the deltas it delivers; the test's cleanup
// stops it and waits for it.
func watchDeltas(t *testing.T, w Watcher) <-chan Delta {
	t.Helper()
	rctx, cancel := context.WithCancel(context.Background())
	out := make(chan Delta, 1024)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(out)
		for {
			d, err := w.Next(rctx)
			if err != nil {
				return
			}
			out <- d
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return out
}

// waitTopicDelta waits up to d for a delta carrying topic's TopicRecord
// and returns how long it took.
func waitTopicDelta(t *testing.T, deltas <-chan Delta, topic string, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.After(d)
	for {
		select {
		case dl, ok := <-deltas:
			if !ok {
				t.Fatalf("watch ended before topic %q", topic)
			}
			for _, r := range dl.Records {
				if tr, ok := r.(*metadata.TopicRecord); ok && tr.Name == topic {
					return time.Since(start)
				}
			}
		case <-deadline:
			t.Fatalf("no delta with topic %q within %v", topic, d)
		}
	}
}

// TestClientWatchReopensASilentStream: a watch stream whose connection
// dies silently (netfault's Stall: open at both ends, nothing delivered
// ever again, no FIN, no reset: a partition, or a lost NAT entry) is
// noticed within WatchTimeout — the controller's keepalives stop — and
// reopened on a new connection, which delivers the deltas committed
// meanwhile. Before the read deadline and keepalives, Next waited on the
// dead connection forever and the broker never learnt of the new
// leaders (issue 14: ISR recovery after a cut).
func TestClientWatchReopensASilentStream(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 1})
	ctl := c.leader()
	registerBrokers(t, ctl, 1, 0)
	nw := netfault.New(netfault.Blackhole)
	t.Cleanup(func() { nw.Close() })
	p, err := nw.Proxy("127.0.0.2:0", ctl.Addr())
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 400 * time.Millisecond
	cl := NewClient(ClientOptions{Addrs: []string{p.Addr()}, LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")},
		WatchTimeout: timeout, Logger: testLogger()})
	t.Cleanup(func() { cl.Close() })
	w, err := cl.Watch(ctx(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	deltas := watchDeltas(t, w)
	if r := createTopic(t, ctl, "before", 1, 1); r.Err != nil {
		t.Fatal(r.Err)
	}
	waitTopicDelta(t, deltas, "before", testWait)

	nw.Stall("127.0.0.3", "127.0.0.1") // the link is named by the target's IP
	if r := createTopic(t, ctl, "after", 1, 1); r.Err != nil {
		t.Fatal(r.Err)
	}
	// Detection takes WatchTimeout, the reconnect a RetryBackoff: allow
	// a few times that, far below the test's own bound.
	took := waitTopicDelta(t, deltas, "after", 4*timeout+time.Second)
	if st := p.Stats(); st.Forwarded != 2 {
		t.Fatalf("proxy stats %+v: want the stalled stream and one new one", st)
	}
	t.Logf("delta committed after the stall delivered in %v (WatchTimeout %v)", took, timeout)
}

// TestClientWatchIdleStreamStaysOpen: an idle stream is kept alive by the
// server's keepalives (a quarter of WatchTimeout apart): it is not
// reopened while nothing happens, and the next delta comes on it.
func TestClientWatchIdleStreamStaysOpen(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 1})
	ctl := c.leader()
	registerBrokers(t, ctl, 1, 0)
	nw := netfault.New(netfault.Blackhole)
	t.Cleanup(func() { nw.Close() })
	p, err := nw.Proxy("127.0.0.2:0", ctl.Addr())
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 200 * time.Millisecond
	cl := NewClient(ClientOptions{Addrs: []string{p.Addr()}, WatchTimeout: timeout, Logger: testLogger()})
	t.Cleanup(func() { cl.Close() })
	w, err := cl.Watch(ctx(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	deltas := watchDeltas(t, w)
	if r := createTopic(t, ctl, "first", 1, 1); r.Err != nil {
		t.Fatal(r.Err)
	}
	waitTopicDelta(t, deltas, "first", testWait)
	// Idle for several timeouts, observed on the wire: a raw watch of our
	// own receives keepalives at the pace the client's stream gets them.
	conn, err := net.Dial("tcp", ctl.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(testWait))
	br, bw := bufio.NewReader(conn), bufio.NewWriter(conn)
	writeFrame(bw, kindRequest, []byte{methodWatch, 0}, []byte(`{"from":1000000,"keepalive_ms":50}`))
	bw.Flush()
	for i := 0; i < 4*int(timeout/(50*time.Millisecond)); i++ {
		kind, payload, err := readFrame(br)
		if err != nil || kind != kindKeepalive || !regexp.MustCompile(`^\{"offset":[0-9]+\}$`).Match(payload) {
			t.Fatalf("frame %d: kind %d %q %v, want a keepalive {\"offset\":applied}", i, kind, payload, err)
		}
	}
	if r := createTopic(t, ctl, "second", 1, 1); r.Err != nil {
		t.Fatal(r.Err)
	}
	waitTopicDelta(t, deltas, "second", testWait)
	if st := p.Stats(); st.Forwarded != 1 {
		t.Fatalf("proxy stats %+v: the idle stream was reopened", st)
	}
}

// TestHeartbeatAnswersTheLeadersMetadataOffset: a heartbeat's answer
// carries the offset of the leader's last entry with records, the offset
// of the last delta a caught-up watcher has (entries without records, as
// a new leader's empty one, advance the log but reach no watcher), in
// process and over the wire: a broker whose view stays below it knows its
// stream is behind.
func TestHeartbeatAnswersTheLeadersMetadataOffset(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 1})
	ctl := c.leader()
	epochs := registerBrokers(t, ctl, 1, 0)
	if r := createTopic(t, ctl, "t", 1, 1); r.Err != nil {
		t.Fatal(r.Err)
	}
	// The last delta a watcher gets: read until one more would block.
	w, err := ctl.Watch(ctx(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var last int64
	for {
		wctx, cancel := context.WithTimeout(ctx(t), 200*time.Millisecond)
		d, err := w.Next(wctx)
		cancel()
		if err != nil {
			break
		}
		last = d.Offset
	}
	cl := NewClient(ClientOptions{Addrs: []string{ctl.Addr()}})
	defer cl.Close()
	for name, s := range map[string]Service{"in process": ctl, "over the wire": cl} {
		hb, err := s.BrokerHeartbeat(ctx(t), metadata.BrokerHeartbeatRequest{BrokerID: 101, BrokerEpoch: epochs[101], CurrentMetadataOffset: 1 << 40})
		if err != nil {
			t.Fatal(err)
		}
		if last == 0 || hb.MetadataOffset != last {
			t.Errorf("%s: heartbeat answered metadata offset %d, the last delta is at %d", name, hb.MetadataOffset, last)
		}
	}
}

// TestClientOfAnotherClusterRefused: an RPC client whose hello names
// another cluster gets INCONSISTENT_CLUSTER_ID (not retried) for any
// request, and the request changes nothing; one naming this cluster, or
// none (a node that does not know its cluster yet), is served.
func TestClientOfAnotherClusterRefused(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 1, clusterID: "cluster-ours"})
	ctl := c.leader()
	if !waitFor(testWait, func() bool { return ctl.ClusterID() == "cluster-ours" }) {
		t.Fatalf("cluster id %q, want cluster-ours", ctl.ClusterID())
	}
	registerBrokers(t, ctl, 1, 0)
	before := ctl.State().Offset()

	other := NewClient(ClientOptions{Addrs: []string{ctl.Addr()}, ClusterID: func() string { return "cluster-theirs" }})
	defer other.Close()
	cctx, cancel := context.WithTimeout(ctx(t), testWait)
	defer cancel()
	_, err := other.CreateTopics(cctx, metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: "stranger", NumPartitions: 1, ReplicationFactor: 1}}})
	if !errors.Is(err, kerr.InconsistentClusterID) {
		t.Fatalf("CreateTopics from another cluster: %v, want INCONSISTENT_CLUSTER_ID", err)
	}
	if cctx.Err() != nil {
		t.Fatal("the refusal was retried until the deadline")
	}
	_, err = other.RegisterBroker(ctx(t), metadata.RegisterBrokerRequest{BrokerID: 7, IncarnationID: uuid.New()})
	if !errors.Is(err, kerr.InconsistentClusterID) {
		t.Fatalf("RegisterBroker from another cluster: %v, want INCONSISTENT_CLUSTER_ID", err)
	}
	if _, ok := ctl.State().TopicByName("stranger"); ok {
		t.Fatal("a client of another cluster created a topic")
	}
	if _, ok := ctl.State().Broker(7); ok {
		t.Fatal("a client of another cluster registered a broker")
	}
	if after := ctl.State().Offset(); after != before {
		t.Fatalf("metadata offset moved from %d to %d", before, after)
	}

	for _, id := range []string{"cluster-ours", ""} {
		cl := NewClient(ClientOptions{Addrs: []string{ctl.Addr()}, ClusterID: func() string { return id }})
		if r, err := cl.CreateTopics(ctx(t), metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: "ours" + id, NumPartitions: 1, ReplicationFactor: 1}}}); err != nil || r[0].Err != nil {
			t.Fatalf("hello %q: %v %v", id, err, r)
		}
		cl.Close()
	}
}
