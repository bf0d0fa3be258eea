package broker

import (
	"fmt"
	"testing"

	"github.com/strata-io/strata/controller/metadata"
)

func TestReplicationCountsFollowKafkasDefinitions(t *testing.T) {
	for _, tc := range []struct {
		isr, rf, minISR     int
		under, underMin, at int
	}{
		{isr: 3, rf: 3, minISR: 2},
		{isr: 2, rf: 3, minISR: 2, under: 1, at: 1},
		{isr: 1, rf: 3, minISR: 2, under: 1, underMin: 1},
		{isr: 1, rf: 1, minISR: 1, at: 1},
		{isr: 1, rf: 1, minISR: 2, at: 1}, // effective minimum capped at RF (KIP-966)
		{isr: 3, rf: 3, minISR: 3, at: 1},
		{isr: 0, rf: 3, minISR: 1, under: 1, underMin: 1},
	} {
		var c replicationCounts
		c.add(tc.isr, tc.rf, tc.minISR)
		if c != (replicationCounts{tc.under, tc.underMin, tc.at}) {
			t.Errorf("ISR %d RF %d min.insync %d: %+v, want under-replicated %d, under-min %d, at-min %d",
				tc.isr, tc.rf, tc.minISR, c, tc.under, tc.underMin, tc.at)
		}
	}
	if topicMinISR(nil, 1) != 1 || topicMinISR(nil, 2) != 2 || topicMinISR(map[string]string{metadata.ConfigMinInsyncReplicas: "3"}, 2) != 3 {
		t.Fatal("topicMinISR")
	}
}

// TestReplicationGaugesOnThreeBrokers stops one broker of three: the
// leaders of partitions it was an ISR member of count them under
// replicated, at or under min ISR by each topic's min.insync.replicas,
// with their ISR sizes; the controller's node counts the partitions left
// without a leader.
func TestReplicationGaugesOnThreeBrokers(t *testing.T) {
	c := startCluster(t, 3, fastFencing)
	two, three := "2", "3"
	c.createTopicRF("min2", 3, 3, map[string]*string{"min.insync.replicas": &two})
	c.createTopicRF("min3", 3, 3, map[string]*string{"min.insync.replicas": &three})
	c.createTopicAssigned("gone", [][]int32{{3}}) // offline once 3 stops
	sum := func(name string, labels ...string) float64 {
		var total float64
		for _, id := range []int32{1, 2, 3} {
			if n := c.node(id); n != nil {
				v, _ := scrapeMetrics(t, n).value(name, labels...)
				total += v
			}
		}
		return total
	}
	if u, at := sum("strata_broker_under_replicated_partitions"), sum("strata_broker_at_min_isr_partitions"); u != 0 || at != 4 {
		t.Fatalf("all replicas in sync: under-replicated %v, at-min-ISR %v (want 0, 4: the min3 partitions and RF=1 gone-0)", u, at)
	}
	if v, _ := scrapeMetrics(t, c.node(1)).value("strata_controller_offline_partitions"); v != 0 {
		t.Fatalf("offline partitions %v before any loss", v)
	}

	c.stop(3)
	c.waitFenced(3)
	c.waitCaughtUp(2)
	var wantUnder, wantUnderMin, wantAt, wantOffline float64
	isr := map[string]float64{}
	for _, topic := range []string{"min2", "min3", "gone"} {
		for i := int32(0); i < 3; i++ {
			if topic == "gone" && i > 0 {
				break
			}
			st, _ := c.partitionState(topic, i)
			if st.Leader == metadata.NoLeader {
				wantOffline++
				continue
			}
			isr[fmt.Sprintf("%s-%d", topic, i)] = float64(len(st.ISR))
			var rc replicationCounts
			rc.add(len(st.ISR), len(st.Replicas), map[string]int{"min2": 2, "min3": 3}[topic])
			wantUnder += float64(rc.underReplicated)
			wantUnderMin += float64(rc.underMinISR)
			wantAt += float64(rc.atMinISR)
		}
	}
	if wantUnder == 0 || wantUnderMin == 0 || wantAt == 0 || wantOffline != 1 {
		t.Fatalf("the loss left under-replicated %v, under min ISR %v, at it %v, offline %v (want each > 0, offline 1)", wantUnder, wantUnderMin, wantAt, wantOffline)
	}
	got := [3]float64{sum("strata_broker_under_replicated_partitions"), sum("strata_broker_under_min_isr_partitions"), sum("strata_broker_at_min_isr_partitions")}
	if got != [3]float64{wantUnder, wantUnderMin, wantAt} {
		t.Errorf("under-replicated, under-min-ISR, at-min-ISR = %v, want %v", got, [3]float64{wantUnder, wantUnderMin, wantAt})
	}
	for tp, want := range isr {
		var topic string
		var part int
		fmt.Sscanf(tp[:4]+" "+tp[5:], "%s %d", &topic, &part)
		if v := sum("strata_partition_isr_size", "topic", topic, "partition", fmt.Sprint(part)); v != want {
			t.Errorf("%s: ISR size gauge %v, want %v", tp, v, want)
		}
	}
	if v, _ := scrapeMetrics(t, c.node(1)).value("strata_controller_offline_partitions"); v != wantOffline {
		t.Errorf("offline partitions %v, want %v", v, wantOffline)
	}
	if _, ok := scrapeMetrics(t, c.node(2)).value("strata_controller_offline_partitions"); ok {
		t.Errorf("a broker-only node exports strata_controller_offline_partitions")
	}
}
