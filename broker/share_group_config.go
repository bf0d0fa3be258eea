package broker

// TEMPORARY (S19c): the share-group configs a share-partition leader reads.
// S19b owns the share.* group configs (their names, validation and
// IncrementalAlterConfigs on GROUP resources) and writes the real body of
// shareGroupConfig with the same signature; the merger keeps S19b's. This
// version answers the broker defaults for every group.

// ShareGroupConfig is what a share-partition leader reads of a share
// group's configs (Kafka's GroupConfig share.*), broker defaults filled in.
type ShareGroupConfig struct {
	AutoOffsetReset      string // share.auto.offset.reset: latest, earliest, by_duration:<ISO-8601>
	RecordLockDurationMs int64  // share.record.lock.duration.ms
	DeliveryCountLimit   int16  // share.delivery.count.limit
	IsolationLevel       int8   // share.isolation.level: 0 read_uncommitted, 1 read_committed
}

// shareGroupConfig returns group's share configs (broker defaults when the
// group sets none).
func (n *Node) shareGroupConfig(group string) ShareGroupConfig {
	_ = group
	return ShareGroupConfig{
		AutoOffsetReset:      "latest",
		RecordLockDurationMs: n.cfg.Share.RecordLockDurationMs,
		DeliveryCountLimit:   n.cfg.Share.DeliveryCountLimit,
		IsolationLevel:       0,
	}
}
