package broker

// The share.* group configs (Kafka's GroupConfig for share groups, set on
// GROUP resources through IncrementalAlterConfigs; names and validation
// in controller/metadata): what the share-partition leader reads of a
// group (shareGroupConfig) and the membership's own timeouts
// (shareGroupTimeouts). An unset group config inherits the broker's
// group.share.* setting, else Kafka's default.

import (
	"strconv"
	"strings"

	"github.com/strata-io/strata/controller/metadata"
)

// ShareGroupConfig is what a share-partition leader reads of a share
// group's configs (Kafka's GroupConfig share.*), broker defaults filled in.
type ShareGroupConfig struct {
	AutoOffsetReset      string // share.auto.offset.reset: latest, earliest, by_duration:<ISO-8601>
	RecordLockDurationMs int64  // share.record.lock.duration.ms
	DeliveryCountLimit   int16  // share.delivery.count.limit
	IsolationLevel       int8   // share.isolation.level: 0 read_uncommitted, 1 read_committed
}

// brokerShareSetting is the broker's value of a group.share.* setting:
// its property, else its setting's default, else def (Kafka's default,
// for a setting this broker does not have).
func (n *Node) brokerShareSetting(name string, def int64) int64 {
	v, ok := n.cfg.Props[name]
	if !ok {
		s, _ := lookupSetting(name)
		v = s.Default
	}
	if x, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && x > 0 {
		return x
	}
	return def
}

// shareGroupConfig returns group's share configs: the group's own
// share.* (validated when set), else the broker's group.share.* setting
// (group.share.record.lock.duration.ms, group.share.delivery.count.limit),
// else Kafka's defaults (latest, read_uncommitted).
func (n *Node) shareGroupConfig(group string) ShareGroupConfig {
	c := ShareGroupConfig{
		AutoOffsetReset:      "latest",
		RecordLockDurationMs: n.brokerShareSetting("group.share.record.lock.duration.ms", 30000),
		DeliveryCountLimit:   int16(min(n.brokerShareSetting("group.share.delivery.count.limit", 5), 1<<15-1)),
	}
	n.view(func(st *metadata.State) {
		if st == nil {
			return
		}
		own := st.Config(metadata.ResourceGroup, group)
		if v := strings.TrimSpace(own[metadata.ConfigShareAutoOffsetReset]); v != "" {
			c.AutoOffsetReset = v
		}
		if v, err := strconv.ParseInt(strings.TrimSpace(own[metadata.ConfigShareRecordLockDurationMs]), 10, 64); err == nil && v > 0 {
			c.RecordLockDurationMs = v
		}
		if v, err := strconv.ParseInt(strings.TrimSpace(own[metadata.ConfigShareDeliveryCountLimit]), 10, 16); err == nil && v > 0 {
			c.DeliveryCountLimit = int16(v)
		}
		if strings.EqualFold(strings.TrimSpace(own[metadata.ConfigShareIsolationLevel]), "read_committed") {
			c.IsolationLevel = 1
		}
	})
	return c
}

// shareGroupTimeouts are group id's session timeout and heartbeat
// interval: its own share.session.timeout.ms / share.heartbeat.interval.ms,
// else 0 (the broker's group.share.*, which the core holds).
func (n *Node) shareGroupTimeouts(id string) (sessionMs, intervalMs int32) {
	n.view(func(st *metadata.State) {
		if st == nil {
			return
		}
		own := st.Config(metadata.ResourceGroup, id)
		get := func(name string) int32 {
			v, err := strconv.ParseInt(strings.TrimSpace(own[name]), 10, 32)
			if err != nil || v <= 0 {
				return 0
			}
			return int32(v)
		}
		sessionMs, intervalMs = get(metadata.ConfigShareSessionTimeoutMs), get(metadata.ConfigShareHeartbeatIntervalMs)
	})
	return sessionMs, intervalMs
}
