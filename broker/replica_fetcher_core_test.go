package broker

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/storage/checkpoint"
)

// endOffsetFor is a leader-epoch cache's EndOffsetFor over entries, as
// storage/checkpoint answers it.
func endOffsetFor(es []checkpoint.EpochEntry) func(int32, int64) (int32, int64) {
	return func(epoch int32, leo int64) (int32, int64) {
		if len(es) == 0 || epoch < 0 {
			return checkpoint.UndefinedEpoch, checkpoint.UndefinedEpochOffset
		}
		if es[len(es)-1].Epoch == epoch {
			return epoch, leo
		}
		for i, e := range es {
			if e.Epoch > epoch {
				if i == 0 {
					return epoch, e.StartOffset
				}
				return es[i-1].Epoch, e.StartOffset
			}
		}
		return checkpoint.UndefinedEpoch, checkpoint.UndefinedEpochOffset
	}
}

// TestDivergenceTruncation is Kafka's getOffsetTruncationState table.
func TestDivergenceTruncation(t *testing.T) {
	ours := []checkpoint.EpochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 1, StartOffset: 3}, {Epoch: 3, StartOffset: 6}}
	for _, tc := range []struct {
		name        string
		epochs      []checkpoint.EpochEntry
		leaderEpoch int32
		leaderEnd   int64
		leo         int64
		want        int64
		complete    bool
	}{
		{"same epoch, leader ends first", ours, 1, 5, 9, 5, true},
		{"same epoch, ours ends first", ours, 1, 8, 9, 6, true},
		{"same epoch, latest: capped by the LEO", ours, 3, 20, 9, 9, true},
		{"unknown epoch: our end of the largest smaller one, another round", ours, 2, 8, 9, 6, false},
		{"below every epoch of ours: our first start", ours[1:], 0, 5, 9, 3, true},
		{"empty cache: the leader's end", nil, 2, 4, 9, 4, true},
		{"empty cache, leader ahead: the LEO", nil, 2, 40, 9, 9, true},
		{"undefined leader epoch: the leader's end", ours, -1, 4, 9, 4, true},
		{"undefined leader end: never truncate (never to the HW)", ours, 1, -1, 9, 9, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, complete := divergenceTruncation(tc.leaderEpoch, tc.leaderEnd, tc.leo, endOffsetFor(tc.epochs))
			if got != tc.want || complete != tc.complete {
				t.Fatalf("got (%d, %v), want (%d, %v)", got, complete, tc.want, tc.complete)
			}
		})
	}
}

// TestDivergenceTruncationMatchesTheCache: the helper above answers as
// storage's cache does, so the table means what it says.
func TestDivergenceTruncationMatchesTheCache(t *testing.T) {
	h := newFetcherHarness(t)
	p := h.follower("c", nil)
	appendLocal(t, p, 0, recordBatch(1, vals("a", 3)...))
	appendLocal(t, p, 1, recordBatch(1, vals("a", 3)...))
	appendLocal(t, p, 3, recordBatch(1, vals("a", 3)...))
	es := p.log.LeaderEpochs().Entries()
	for e := int32(-1); e <= 5; e++ {
		ge, go_ := p.log.LeaderEpochs().EndOffsetFor(e, 9)
		we, wo := endOffsetFor(es)(e, 9)
		if ge != we || go_ != wo {
			t.Fatalf("epoch %d: cache (%d, %d), helper (%d, %d)", e, ge, go_, we, wo)
		}
	}
}

func TestOutOfRangePlan(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		leo, leaderEnd, leStart int64
		want                    oorPlan
	}{
		{"leader shorter (unclean): truncate to its end", 10, 7, 0, oorPlan{truncateTo: 7, startAt: -1}},
		{"leader starts above our end: start over there", 2, 10, 5, oorPlan{truncateTo: -1, startAt: 5}},
		{"in range after all: fetch again", 5, 10, 0, oorPlan{truncateTo: -1, startAt: -1}},
		{"equal end: fetch again", 10, 10, 0, oorPlan{truncateTo: -1, startAt: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := outOfRangePlan(tc.leo, tc.leaderEnd, tc.leStart); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestFollowerBatches(t *testing.T) {
	b0, b1, b2 := recordBatch(1, vals("a", 3)...), recordBatch(1, vals("b", 3)...), recordBatch(1, vals("c", 3)...)
	// As stored by a leader: offsets 0-2, 3-5, 6-8.
	h := newFetcherHarness(t)
	p := h.follower("fb", nil)
	appendLocal(t, p, 0, b0, b1, b2)
	all := readLog(t, p.log)
	n0, n1 := len(b0), len(b1)
	for _, tc := range []struct {
		name    string
		records []byte
		offset  int64
		want    []byte
		err     error
	}{
		{"whole batches", all, 0, all, nil},
		{"a partial trailing batch is left", all[:n0+n1+10], 0, all[:n0+n1], nil},
		{"a partial header is left", all[:n0+5], 0, all[:n0], nil},
		{"only a partial batch: nothing", all[:n0-1], 0, all[:0], nil},
		{"batches below the fetch offset are skipped", all, 3, all[n0:], nil},
		{"a batch holding the fetch offset in its middle", all, 4, nil, errStraddle},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := followerBatches(tc.records, tc.offset)
			if !errors.Is(err, tc.err) || (tc.err == nil && !slices.Equal(got, tc.want)) {
				t.Fatalf("got %d bytes, %v; want %d bytes, %v", len(got), err, len(tc.want), tc.err)
			}
		})
	}
	bad := slices.Clone(all)
	bad[8+3] = 0 // batch length below a header
	bad[8], bad[9], bad[10] = 0, 0, 0
	if _, err := followerBatches(bad, 0); err == nil {
		t.Fatal("a batch that does not frame was accepted")
	}
}

// TestInterBrokerAddr: followers fetch from the leader's registered
// listener named inter.broker.listener.name, else its first one that is
// not the controller's; a broker unknown or without one gives "".
func TestInterBrokerAddr(t *testing.T) {
	st := metadata.NewState()
	if err := st.Apply(1, &metadata.RegisterBrokerRecord{BrokerID: 2, BrokerEpoch: 1, Listeners: []metadata.Listener{
		{Name: "CONTROLLER", Host: "127.0.0.3", Port: 1},
		{Name: "PLAINTEXT", Host: "127.0.0.3", Port: 2},
		{Name: "REPLICATION", Host: "127.0.0.3", Port: 3},
	}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Apply(2, &metadata.RegisterBrokerRecord{BrokerID: 3, BrokerEpoch: 1, Listeners: []metadata.Listener{
		{Name: "CONTROLLER", Host: "127.0.0.4", Port: 1},
	}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		listener string
		broker   int32
		want     string
	}{
		{"", 2, "127.0.0.3:2"},
		{"REPLICATION", 2, "127.0.0.3:3"},
		{"", 3, ""},
		{"", 9, ""},
	} {
		cfg := DefaultConfig()
		cfg.InterBrokerListenerName = tc.listener
		n := &Node{cfg: cfg, meta: st}
		if got := n.interBrokerAddr(tc.broker); got != tc.want {
			t.Errorf("listener %q, broker %d: %q, want %q", tc.listener, tc.broker, got, tc.want)
		}
	}
}

// TestReplicaFetchSettings: Kafka's names and defaults, parsed.
func TestReplicaFetchSettings(t *testing.T) {
	c := DefaultConfig()
	want := ReplicaFetchSettings{Fetchers: 1, MaxBytes: 1048576, ResponseMaxBytes: 10485760, MaxWait: 500 * time.Millisecond, MinBytes: 1, Backoff: time.Second}
	if c.ReplicaFetch != want || c.InterBrokerListenerName != "" {
		t.Fatalf("defaults %+v %q, want %+v", c.ReplicaFetch, c.InterBrokerListenerName, want)
	}
	c, err := ParseConfig(MergeProperties(map[string]string{
		"num.replica.fetchers": "3", "replica.fetch.max.bytes": "2048", "replica.fetch.response.max.bytes": "4096",
		"replica.fetch.wait.max.ms": "100", "replica.fetch.min.bytes": "10", "replica.fetch.backoff.ms": "50",
		"inter.broker.listener.name": "replication",
	}, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	want = ReplicaFetchSettings{Fetchers: 3, MaxBytes: 2048, ResponseMaxBytes: 4096, MaxWait: 100 * time.Millisecond, MinBytes: 10, Backoff: 50 * time.Millisecond}
	if c.ReplicaFetch != want || c.InterBrokerListenerName != "REPLICATION" {
		t.Fatalf("parsed %+v %q, want %+v", c.ReplicaFetch, c.InterBrokerListenerName, want)
	}
	if _, err := ParseConfig(MergeProperties(map[string]string{"inter.broker.listener.name": "CONTROLLER"}, nil, nil)); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("inter.broker.listener.name=CONTROLLER: %v", err)
	}
}

// TestFetcherIndexSpreadsPartitions: num.replica.fetchers spreads a
// topic's partitions over every fetcher, deterministically.
func TestFetcherIndexSpreadsPartitions(t *testing.T) {
	seen := map[int]bool{}
	for p := int32(0); p < 16; p++ {
		i := fetcherIndex("orders", p, 4)
		if i < 0 || i >= 4 || i != fetcherIndex("orders", p, 4) {
			t.Fatalf("partition %d: fetcher %d", p, i)
		}
		seen[i] = true
	}
	if len(seen) != 4 {
		t.Fatalf("16 partitions on fetchers %v, want all 4", seen)
	}
}
