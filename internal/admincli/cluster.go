package admincli

import (
	"flag"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
)

func clusterActions() []*action {
	return []*action{
		{name: "info", summary: "cluster id, controller, brokers (id, address, rack) and topic count", define: defineClusterInfo},
		{name: "under-replicated", summary: "partitions with a short ISR, below or (--at-min-isr) at min.insync.replicas, or without a leader", define: defineClusterUnderReplicated},
		{name: "reassign", summary: "move partitions' replicas (KIP-455): --generate a balanced plan, --execute, --status or --cancel a plan file", define: defineClusterReassign},
		{name: "drain", summary: "move every replica off broker NODE (through reassignment); --wait reports progress", define: defineClusterDrain},
		{name: "unregister", summary: "remove broker NODE's registration (decommission: drain, stop, unregister); refused while it holds replicas or runs, unless --force", define: defineClusterUnregister},
		{name: "elect-leaders", summary: "elect preferred (or, --type unclean, any live) leaders for --topic [--partition] or --all partitions", define: defineElectLeaders},
	}
}

// clusterInfo is the JSON of cluster info.
type clusterInfo struct {
	ClusterID      string         `json:"cluster_id"`
	ControllerID   int32          `json:"controller_id"`
	Brokers        []brokerListed `json:"brokers"`
	Topics         int            `json:"topics"`          // not counting internal topics
	InternalTopics int            `json:"internal_topics"` // __consumer_offsets, ...
}

type brokerListed struct {
	ID   int32   `json:"id"`
	Host string  `json:"host"`
	Port int32   `json:"port"`
	Addr string  `json:"addr"`
	Rack *string `json:"rack"`
}

func defineClusterInfo(fs *flag.FlagSet) runFunc {
	return func(e *env, pos []string) error {
		if len(pos) != 0 {
			return usagef("cluster info takes no arguments, got %q", pos)
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		m, err := e.adm.Metadata(ctx)
		if err != nil {
			return fail("describe cluster", err, "")
		}
		out := clusterInfo{ClusterID: m.Cluster, ControllerID: m.Controller, Brokers: []brokerListed{}}
		for _, b := range m.Brokers {
			out.Brokers = append(out.Brokers, brokerListed{ID: b.NodeID, Host: b.Host, Port: b.Port, Addr: net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), Rack: b.Rack})
		}
		sort.Slice(out.Brokers, func(i, j int) bool { return out.Brokers[i].ID < out.Brokers[j].ID })
		for _, t := range m.Topics {
			if t.IsInternal {
				out.InternalTopics++
			} else {
				out.Topics++
			}
		}
		return e.emit(out, func(w io.Writer) {
			row(w, "CLUSTER-ID", "CONTROLLER", "BROKERS", "TOPICS", "INTERNAL-TOPICS")
			row(w, dash(out.ClusterID), out.ControllerID, len(out.Brokers), out.Topics, out.InternalTopics)
			row(w)
			row(w, "BROKER", "ADDRESS", "RACK")
			for _, b := range out.Brokers {
				rack := "-"
				if b.Rack != nil {
					rack = *b.Rack
				}
				id := fmt.Sprint(b.ID)
				if b.ID == out.ControllerID {
					id += "*"
				}
				row(w, id, b.Addr, rack)
			}
		})
	}
}
