package controller

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the controller's Prometheus metrics, registered on the
// Registry passed in Options (never the global one). Names are listed once
// here; dashboards/ reads them from this block.
type metrics struct {
	term          prometheus.GaugeFunc
	leader        prometheus.GaugeFunc
	commit        prometheus.GaugeFunc
	applied       prometheus.Gauge
	snapshotBytes prometheus.Gauge
	snapshotTime  prometheus.Gauge
	snapshotAge   prometheus.GaugeFunc
	proposals     prometheus.Counter
	leaderChanges prometheus.Counter
	// uncleanElections counts the partition leaders this node, as
	// controller leader, elected uncleanly (metadata.IsUncleanElection).
	uncleanElections prometheus.Counter
	// imbalance is Kafka's PreferredReplicaImbalanceCount: partitions
	// whose leader is not their preferred replica, offline ones included,
	// in the applied image; reported by the active controller, 0
	// elsewhere (as strata_controller_offline_partitions), so a sum over
	// the quorum is the cluster's count.
	imbalance prometheus.GaugeFunc
	// refusedClients counts RPC connections refused on the CONTROLLER
	// listener because their hello named another cluster.
	refusedClients prometheus.Counter
	// saslFailures counts connections a SASL CONTROLLER listener refused
	// before their first frame of Strata's protocol.
	saslFailures prometheus.Counter
}

// newMetrics builds the metrics; the gauge functions read status and
// imbalance (metadata.State.PreferredReplicaImbalance of the applied
// image), which must be safe to call once register has been called.
func newMetrics(nodeID int32, status func() Status, imbalance func() int) *metrics {
	labels := prometheus.Labels{"node_id": itoa(nodeID)}
	gf := func(name, help string, f func(Status) float64) prometheus.GaugeFunc {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "strata", Subsystem: "controller", Name: name, Help: help, ConstLabels: labels,
		}, func() float64 { return f(status()) })
	}
	m := &metrics{
		term:   gf("raft_term", "Current Raft term.", func(s Status) float64 { return float64(s.Term) }),
		leader: gf("raft_leader_id", "Node id of the known Raft leader (0 = none).", func(s Status) float64 { return float64(s.Leader) }),
		commit: gf("raft_commit_index", "Raft commit index.", func(s Status) float64 { return float64(s.Commit) }),
		applied: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "strata", Subsystem: "controller",
			Name: "raft_applied_index", Help: "Last log index applied to the metadata state.", ConstLabels: labels}),
		snapshotBytes: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "strata", Subsystem: "controller",
			Name: "snapshot_size_bytes", Help: "Size of the last metadata snapshot.", ConstLabels: labels}),
		snapshotTime: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "strata", Subsystem: "controller",
			Name: "snapshot_timestamp_seconds", Help: "Unix time of the last metadata snapshot.", ConstLabels: labels}),
		proposals: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "strata", Subsystem: "controller",
			Name: "proposals_total", Help: "Entries proposed by this node as leader (rate() gives proposals/s).", ConstLabels: labels}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "strata", Subsystem: "controller",
			Name: "leader_changes_total", Help: "Times the known Raft leader changed.", ConstLabels: labels}),
		uncleanElections: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "strata", Subsystem: "controller",
			Name: "unclean_leader_elections_total", Help: "Partition leaders elected uncleanly (unclean.leader.election.enable, or the last known ELR member after an unclean shutdown): the partition may have lost acknowledged records and is RECOVERING.", ConstLabels: labels}),
		refusedClients: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "strata", Subsystem: "controller",
			Name: "refused_clients_total", Help: "RPC connections on the CONTROLLER listener refused because the client named another cluster id (a node of another cluster, or a data directory moved between clusters).", ConstLabels: labels}),
		saslFailures: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "strata", Subsystem: "controller",
			Name: "sasl_authentication_failures_total", Help: "Connections a SASL CONTROLLER listener closed before they authenticated: a wrong credential, an unknown mechanism, a principal not in super.users, or a frame of the quorum protocol sent first.", ConstLabels: labels}),
	}
	m.imbalance = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "strata", Subsystem: "controller",
		Name: "preferred_replica_imbalance_partitions", Help: "Partitions whose leader is not their preferred replica (the first of their replicas), offline ones included, from the metadata image; reported by the active controller, 0 elsewhere (Kafka's PreferredReplicaImbalanceCount). auto.leader.rebalance.enable or ElectLeaders PREFERRED brings it down.",
		ConstLabels: labels}, func() float64 { return float64(imbalance()) })
	m.snapshotAge = gf("snapshot_age_seconds", "Seconds since the last metadata snapshot (0 = none yet).", func(s Status) float64 {
		if s.SnapshotTime.IsZero() {
			return 0
		}
		return time.Since(s.SnapshotTime).Seconds()
	})
	return m
}

// register exports the metrics on reg (nil: nowhere). Called once the
// node exists, so a scrape never sees a half-built controller.
func (m *metrics) register(reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{m.term, m.leader, m.commit, m.applied, m.snapshotBytes,
		m.snapshotTime, m.snapshotAge, m.proposals, m.leaderChanges, m.uncleanElections, m.imbalance, m.refusedClients, m.saslFailures} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }
