// Package controller is the cluster's metadata quorum: a Raft node
// (go.etcd.io/raft/v3) whose replicated state machine is the metadata image
// of controller/metadata, its durable log in controller/raftlog, the TCP
// transport between controllers on the CONTROLLER listener, and the
// [Service] brokers call to register, heartbeat, change metadata and follow
// the metadata log.
//
// It owns: the Ready loop (persist → send → apply → advance) and its
// ticker; proposals that wait until applied; snapshots every N entries and
// log compaction; catching up lagging followers by snapshot; broker
// liveness on the leader (broker.session.timeout.ms → fence); ordering
// the leader's decisions through one planner so each plan sees every
// decision before it (group-committed, one entry per batch);
// forwarding follower requests to the leader; metrics; configuration under
// Kafka's names (node.id, process.roles, controller.quorum.voters,
// metadata.log.dir, ...).
//
// It must never: touch partition data; make a metadata decision itself
// (every decision is a pure Plan* function of controller/metadata, so it
// is tested without goroutines); write the log or snapshots other than
// through its [Storage] (controller/raftlog in production); block the Ready
// loop on the network (transports queue and drop); use the global
// Prometheus registry.
//
// Usage, a quorum of one in-process:
//
//	cfg, err := controller.ParseConfig(map[string]string{
//		"node.id":                  "1",
//		"process.roles":            "broker,controller",
//		"controller.quorum.voters": "1@127.0.0.1:9093",
//		"metadata.log.dir":         "/var/lib/strata",
//	})
//	c, err := controller.Open(controller.Options{Config: cfg, Registry: reg})
//	defer c.Close()
//	resp, err := c.RegisterBroker(ctx, metadata.RegisterBrokerRequest{...})
//	w, err := c.Watch(ctx, 0) // image, then one Delta per entry
//	for {
//		d, err := w.Next(ctx)
//		...
//	}
//
// A broker in another process uses [NewClient] with the voters' CONTROLLER
// addresses; [*Client] implements the same [Service].
//
// Read DESIGN.md in this directory for the file map, goroutines, the
// persistence order and the lock order.
package controller
