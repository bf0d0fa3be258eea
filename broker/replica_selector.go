package broker

import (
	"cmp"

	"github.com/strata-io/strata/controller/metadata"
)

// Fetch from the closest replica (KIP-392). A consumer that names its rack
// (client.rack: Fetch v11+ RackID) and fetches from a leader configured
// with replica.selector.class = RackAwareReplicaSelector is told, per
// partition, the in-sync replica of its rack that holds its fetch offset
// (PreferredReadReplica, no records); it then fetches from that follower,
// which serves consumers of Fetch v11+ up to its own high watermark (kept
// current by the leader completing parked follower fetches when the HW
// moves). Only the leader selects, as in Kafka.

const rackAwareSelector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

// readReplica is a replica as the selector weighs it.
type readReplica struct {
	id             int32
	rack           string
	leo, logStart  int64
	lastCaughtUpMs int64
}

// selectReadReplica is Kafka's RackAwareReplicaSelector over the leader
// and the candidates (in-sync followers): with no client rack, or no
// replica in it, or the leader in it, the leader; otherwise the most
// caught-up replica of the client's rack (largest LEO, then latest caught
// up) among those holding fetchOffset (KAFKA-14372: a follower without
// the offset would answer OFFSET_OUT_OF_RANGE).
func selectReadReplica(clientRack string, leader readReplica, candidates []readReplica, fetchOffset int64) int32 {
	if clientRack == "" || leader.rack == clientRack {
		return leader.id
	}
	best := -1
	for i, c := range candidates {
		if c.rack != clientRack || c.leo < fetchOffset || c.logStart > fetchOffset {
			continue
		}
		if best < 0 || cmp.Or(cmp.Compare(c.leo, candidates[best].leo), cmp.Compare(c.lastCaughtUpMs, candidates[best].lastCaughtUpMs)) > 0 {
			best = i
		}
	}
	if best < 0 {
		return leader.id
	}
	return candidates[best].id
}

// preferredReadReplica is the replica a consumer of rack clientRack
// fetching p (which this broker leads) at fetchOffset should read from;
// this broker's id when it is itself. The caller checked leadership.
func (n *Node) preferredReadReplica(p *partition, clientRack string, fetchOffset int64) int32 {
	self := n.cfg.NodeID
	if !n.cfg.RackAwareReads || clientRack == "" {
		return self
	}
	racks := map[int32]string{}
	p.repMu.Lock()
	rep := p.rep
	var cands []readReplica
	if rep != nil {
		for _, id := range rep.isr {
			f := rep.followers[id]
			if id == self || f == nil || f.leo < 0 {
				continue
			}
			cands = append(cands, readReplica{id: id, leo: f.leo, logStart: f.logStart, lastCaughtUpMs: f.lastCaughtUpMs})
		}
	}
	p.repMu.Unlock()
	n.view(func(st *metadata.State) {
		for _, id := range append([]int32{self}, idsOf(cands)...) {
			if b, ok := st.Broker(id); ok && !b.Fenced && !b.InControlledShutdown {
				racks[id] = b.Rack
			} else if id != self {
				racks[id] = "" // not a candidate: no rack matches ""
			}
		}
	})
	for i := range cands {
		cands[i].rack = racks[cands[i].id]
	}
	return selectReadReplica(clientRack, readReplica{id: self, rack: n.cfg.Rack}, cands, fetchOffset)
}

func idsOf(rs []readReplica) []int32 {
	out := make([]int32, len(rs))
	for i, r := range rs {
		out[i] = r.id
	}
	return out
}
