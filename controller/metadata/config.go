package metadata

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/strata-io/strata/broker/share"
)

// ErrInvalidConfig is wrapped by [ValidateTopicConfig] and
// [ValidateTopicConfigs] for an unknown name or a bad value; planners turn
// it into INVALID_CONFIG.
var ErrInvalidConfig = errors.New("metadata: invalid config")

// Topic config names the controller knows (Kafka's names). Values are
// validated by [ValidateTopicConfig].
const (
	ConfigCleanupPolicy               = "cleanup.policy"
	ConfigCompressionGzipLevel        = "compression.gzip.level"
	ConfigCompressionLz4Level         = "compression.lz4.level"
	ConfigCompressionZstdLevel        = "compression.zstd.level"
	ConfigMessageDownconversionEnable = "message.downconversion.enable"
	ConfigRemoteLogCopyDisable        = "remote.log.copy.disable"
	ConfigRemoteLogDeleteOnDisable    = "remote.log.delete.on.disable"
	ConfigCompressionType             = "compression.type"
	ConfigDeleteRetentionMs           = "delete.retention.ms"
	ConfigFileDeleteDelayMs           = "file.delete.delay.ms"
	ConfigFlushMessages               = "flush.messages"
	ConfigFlushMs                     = "flush.ms"
	ConfigIndexIntervalBytes          = "index.interval.bytes"
	ConfigLocalRetentionBytes         = "local.retention.bytes"
	ConfigLocalRetentionMs            = "local.retention.ms"
	ConfigMaxCompactionLagMs          = "max.compaction.lag.ms"
	ConfigMaxMessageBytes             = "max.message.bytes"
	ConfigMessageTimestampType        = "message.timestamp.type"
	ConfigMessageTimestampBeforeMaxMs = "message.timestamp.before.max.ms"
	ConfigMessageTimestampAfterMaxMs  = "message.timestamp.after.max.ms"
	ConfigMinCleanableDirtyRatio      = "min.cleanable.dirty.ratio"
	ConfigMinCompactionLagMs          = "min.compaction.lag.ms"
	ConfigMinInsyncReplicas           = "min.insync.replicas"
	ConfigPreallocate                 = "preallocate"
	ConfigRemoteStorageEnable         = "remote.storage.enable"
	ConfigRetentionBytes              = "retention.bytes"
	ConfigRetentionMs                 = "retention.ms"
	ConfigSegmentBytes                = "segment.bytes"
	ConfigSegmentIndexBytes           = "segment.index.bytes"
	ConfigSegmentJitterMs             = "segment.jitter.ms"
	ConfigSegmentMs                   = "segment.ms"
	ConfigUncleanLeaderElectionEnable = "unclean.leader.election.enable"
	// Replication throttles (KIP-73): which replicas of the topic are
	// throttled on the leader side and on the follower side, as
	// "partition:broker" pairs or "*".
	ConfigLeaderReplicationThrottledReplicas   = "leader.replication.throttled.replicas"
	ConfigFollowerReplicationThrottledReplicas = "follower.replication.throttled.replicas"
)

// throttledReplicas validates a throttled-replicas list: empty, "*", or
// comma-separated partition:broker pairs.
func throttledReplicas(v string) error {
	v = strings.TrimSpace(v)
	if v == "" || v == "*" {
		return nil
	}
	for _, pair := range strings.Split(v, ",") {
		p, b, ok := strings.Cut(strings.TrimSpace(pair), ":")
		if !ok {
			return fmt.Errorf("%q is not partition:broker", pair)
		}
		for _, x := range []string{p, b} {
			if n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 32); err != nil || n < 0 {
				return fmt.Errorf("%q is not partition:broker", pair)
			}
		}
	}
	return nil
}

// ThrottledReplica reports whether a throttled-replicas list names
// partition's replica on broker (a valid list: see throttledReplicas).
func ThrottledReplica(list string, partition, broker int32) bool {
	list = strings.TrimSpace(list)
	if list == "*" {
		return true
	}
	want := strconv.Itoa(int(partition)) + ":" + strconv.Itoa(int(broker))
	for _, pair := range strings.Split(list, ",") {
		p, b, _ := strings.Cut(strings.TrimSpace(pair), ":")
		if strings.TrimSpace(p)+":"+strings.TrimSpace(b) == want {
			return true
		}
	}
	return false
}

// configKind validates one config's value.
type configKind func(v string) error

func longAtLeast(min int64) configKind {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a long", v)
		}
		if n < min {
			return fmt.Errorf("%d is below %d", n, min)
		}
		return nil
	}
}

func intAtLeast(min int64) configKind {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("%q is not an int", v)
		}
		if n < min {
			return fmt.Errorf("%d is below %d", n, min)
		}
		return nil
	}
}

// intIn accepts ints in [lo, hi], except those listed in not.
func intIn(lo, hi int64, not ...int64) configKind {
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("%q is not an int", v)
		}
		if n < lo || n > hi {
			return fmt.Errorf("%d is not in [%d, %d]", n, lo, hi)
		}
		for _, x := range not {
			if n == x {
				return fmt.Errorf("%d is not allowed", n)
			}
		}
		return nil
	}
}

func boolean(v string) error {
	switch strings.ToLower(v) {
	case "true", "false":
		return nil
	}
	return fmt.Errorf("%q is not a boolean", v)
}

func oneOf(vals ...string) configKind {
	return func(v string) error {
		for _, x := range vals {
			if v == x {
				return nil
			}
		}
		return fmt.Errorf("%q is not one of %s", v, strings.Join(vals, ", "))
	}
}

func ratio(v string) error {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) {
		return fmt.Errorf("%q is not a double", v)
	}
	if f < 0 || f > 1 {
		return fmt.Errorf("%v is not in [0, 1]", f)
	}
	return nil
}

func cleanupPolicy(v string) error {
	if v == "" {
		return errors.New("empty cleanup.policy")
	}
	for _, p := range strings.Split(v, ",") {
		switch strings.TrimSpace(p) {
		case "delete", "compact":
		default:
			return fmt.Errorf("%q is not a cleanup policy (delete, compact)", p)
		}
	}
	return nil
}

// topicConfigs lists every topic config name the controller accepts. The
// minimums follow Kafka's TopicConfig/LogConfig definitions, except
// segment.bytes, whose minimum stays at Kafka 3.x's 14 bytes so tests can
// roll tiny segments.
var topicConfigs = map[string]configKind{
	ConfigCleanupPolicy:               cleanupPolicy,
	ConfigCompressionType:             oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
	ConfigCompressionGzipLevel:        intIn(-1, 9, 0),
	ConfigCompressionLz4Level:         intIn(1, 17),
	ConfigCompressionZstdLevel:        intIn(-131072, 22),
	ConfigMessageDownconversionEnable: boolean,
	ConfigRemoteLogCopyDisable:        boolean,
	ConfigRemoteLogDeleteOnDisable:    boolean,
	ConfigDeleteRetentionMs:           longAtLeast(0),
	ConfigFileDeleteDelayMs:           longAtLeast(0),
	ConfigFlushMessages:               longAtLeast(1),
	ConfigFlushMs:                     longAtLeast(0),
	ConfigIndexIntervalBytes:          intAtLeast(0),
	ConfigLocalRetentionBytes:         longAtLeast(-2),
	ConfigLocalRetentionMs:            longAtLeast(-2),
	ConfigMaxCompactionLagMs:          longAtLeast(1),
	ConfigMaxMessageBytes:             intAtLeast(0),
	ConfigMessageTimestampType:        oneOf("CreateTime", "LogAppendTime"),
	ConfigMessageTimestampBeforeMaxMs: longAtLeast(0),
	ConfigMessageTimestampAfterMaxMs:  longAtLeast(0),
	ConfigMinCleanableDirtyRatio:      ratio,
	ConfigMinCompactionLagMs:          longAtLeast(0),
	ConfigMinInsyncReplicas:           intAtLeast(1),
	ConfigPreallocate:                 boolean,
	ConfigRemoteStorageEnable:         boolean,
	ConfigRetentionBytes:              longAtLeast(-1),
	ConfigRetentionMs:                 longAtLeast(-1),
	ConfigSegmentBytes:                intAtLeast(14),
	ConfigSegmentIndexBytes:           intAtLeast(4),
	ConfigSegmentJitterMs:             longAtLeast(0),
	ConfigSegmentMs:                   longAtLeast(1),
	ConfigUncleanLeaderElectionEnable: boolean,

	ConfigLeaderReplicationThrottledReplicas:   throttledReplicas,
	ConfigFollowerReplicationThrottledReplicas: throttledReplicas,
}

// brokerConfigs lists the broker-level (dynamic, or cluster-default when the
// resource name is "") configs the controller accepts.
var brokerConfigs = map[string]configKind{
	"log.retention.ms":               longAtLeast(-1),
	"log.retention.bytes":            longAtLeast(-1),
	"log.segment.bytes":              intAtLeast(14),
	"log.local.retention.ms":         longAtLeast(-2),
	"log.local.retention.bytes":      longAtLeast(-2),
	"log.cleanup.policy":             cleanupPolicy,
	"compression.type":               oneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
	"min.insync.replicas":            intAtLeast(1),
	"message.max.bytes":              intAtLeast(0),
	"unclean.leader.election.enable": boolean,
	"log.flush.interval.messages":    longAtLeast(1),
	"log.flush.interval.ms":          longAtLeast(0),
	// bytes/s of throttled replicas' copying, per broker (KIP-73)
	"leader.replication.throttled.rate":   longAtLeast(0),
	"follower.replication.throttled.rate": longAtLeast(0),
}

// TopicConfigNames returns the topic config names the controller accepts,
// sorted.
func TopicConfigNames() []string { return sortedKeys(topicConfigs) }

// ValidateTopicConfig checks one topic config name and value in isolation.
func ValidateTopicConfig(name, value string) error {
	kind, ok := topicConfigs[name]
	if !ok {
		return fmt.Errorf("%w: unknown topic config %q", ErrInvalidConfig, name)
	}
	if err := kind(value); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalidConfig, name, err)
	}
	return nil
}

// ValidateTopicConfigs checks a topic's complete set of configs: each one,
// then the rules that relate them:
//   - on a topic with remote.storage.enable=true, local.retention.ms must
//     not exceed retention.ms unless retention.ms is unlimited (-1) or
//     local is -2 ("same as retention.ms"), and local may not be -1 under a
//     bounded retention.ms; likewise local.retention.bytes against
//     retention.bytes (Kafka's LogConfig checks these only when remote
//     storage is enabled);
//   - min.compaction.lag.ms must not exceed max.compaction.lag.ms;
//   - remote.storage.enable=true is refused on a compacted topic
//     (cleanup.policy containing compact), as Kafka refuses it: tiering
//     copies sealed segments as they are, and the cleaner rewrites them.
//
// Unset configs take Kafka's defaults for the cross-checks.
func ValidateTopicConfigs(cfg map[string]string) error {
	for _, name := range sortedKeys(cfg) {
		if err := ValidateTopicConfig(name, cfg[name]); err != nil {
			return err
		}
	}
	get := func(name string, def int64) int64 {
		if v, ok := cfg[name]; ok {
			n, _ := strconv.ParseInt(v, 10, 64) // validated above
			return n
		}
		return def
	}
	tiered := strings.EqualFold(cfg[ConfigRemoteStorageEnable], "true")
	if tiered && strings.Contains(cfg[ConfigCleanupPolicy], "compact") {
		return fmt.Errorf("%w: %s=true is not supported with %s=%s", ErrInvalidConfig, ConfigRemoteStorageEnable, ConfigCleanupPolicy, cfg[ConfigCleanupPolicy])
	}
	for _, pair := range [][2]string{
		{ConfigLocalRetentionMs, ConfigRetentionMs},
		{ConfigLocalRetentionBytes, ConfigRetentionBytes},
	} {
		def := int64(-1)
		if pair[1] == ConfigRetentionMs {
			def = 7 * 24 * 60 * 60 * 1000
		}
		local, total := get(pair[0], -2), get(pair[1], def)
		if !tiered || local == -2 || total == -1 {
			continue
		}
		if local == -1 {
			return fmt.Errorf("%w: %s=-1 (unlimited) exceeds %s=%d", ErrInvalidConfig, pair[0], pair[1], total)
		}
		if local > total {
			return fmt.Errorf("%w: %s=%d exceeds %s=%d", ErrInvalidConfig, pair[0], local, pair[1], total)
		}
	}
	if minLag, maxLag := get(ConfigMinCompactionLagMs, 0), get(ConfigMaxCompactionLagMs, math.MaxInt64); minLag > maxLag {
		return fmt.Errorf("%w: %s=%d exceeds %s=%d", ErrInvalidConfig, ConfigMinCompactionLagMs, minLag, ConfigMaxCompactionLagMs, maxLag)
	}
	return nil
}

// ValidateBrokerConfig checks one broker or cluster-default config.
func ValidateBrokerConfig(name, value string) error {
	kind, ok := brokerConfigs[name]
	if !ok {
		return fmt.Errorf("%w: unknown or read-only broker config %q", ErrInvalidConfig, name)
	}
	if err := kind(value); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalidConfig, name, err)
	}
	return nil
}

// Group config names (Kafka's GroupConfig): a consumer group's own
// session timeout and heartbeat interval (KIP-848), overriding the
// brokers' group.consumer.session.timeout.ms and
// group.consumer.heartbeat.interval.ms, and a share group's share.*
// (KIP-932; Kafka 4.2's list), overriding the brokers' group.share.*.
const (
	ConfigConsumerSessionTimeoutMs    = "consumer.session.timeout.ms"
	ConfigConsumerHeartbeatIntervalMs = "consumer.heartbeat.interval.ms"

	ConfigShareSessionTimeoutMs     = "share.session.timeout.ms"
	ConfigShareHeartbeatIntervalMs  = "share.heartbeat.interval.ms"
	ConfigShareRecordLockDurationMs = "share.record.lock.duration.ms"
	ConfigShareDeliveryCountLimit   = "share.delivery.count.limit"
	ConfigShareAutoOffsetReset      = "share.auto.offset.reset"
	ConfigShareIsolationLevel       = "share.isolation.level"
)

// GroupConfigNames returns the group config names the controller accepts,
// sorted.
func GroupConfigNames() []string {
	return []string{ConfigConsumerHeartbeatIntervalMs, ConfigConsumerSessionTimeoutMs,
		ConfigShareAutoOffsetReset, ConfigShareDeliveryCountLimit, ConfigShareHeartbeatIntervalMs,
		ConfigShareIsolationLevel, ConfigShareRecordLockDurationMs, ConfigShareSessionTimeoutMs}
}

// IsStringGroupConfig reports whether a group config takes a string (the
// others are ints).
func IsStringGroupConfig(name string) bool {
	return name == ConfigShareAutoOffsetReset || name == ConfigShareIsolationLevel
}

// GroupConfigBounds are the broker-level settings a group config is
// validated against: group.consumer.{min,max}.session.timeout.ms,
// group.consumer.{min,max}.heartbeat.interval.ms, their group.share.*
// counterparts, group.share.{min,max}.record.lock.duration.ms and the
// delivery count limit's range, and the broker defaults
// (group.consumer.session.timeout.ms, group.share.heartbeat.interval.ms,
// ...) that an unset group config inherits. A zero field (a request
// logged before share groups) means Kafka's default.
type GroupConfigBounds struct {
	MinSessionTimeoutMs, MaxSessionTimeoutMs       int32
	MinHeartbeatIntervalMs, MaxHeartbeatIntervalMs int32
	SessionTimeoutMs, HeartbeatIntervalMs          int32

	ShareMinSessionTimeoutMs, ShareMaxSessionTimeoutMs         int32 `json:",omitempty"`
	ShareMinHeartbeatIntervalMs, ShareMaxHeartbeatIntervalMs   int32 `json:",omitempty"`
	ShareSessionTimeoutMs, ShareHeartbeatIntervalMs            int32 `json:",omitempty"`
	ShareMinRecordLockDurationMs, ShareMaxRecordLockDurationMs int32 `json:",omitempty"`
	ShareMinDeliveryCountLimit, ShareMaxDeliveryCountLimit     int32 `json:",omitempty"`
}

// DefaultGroupConfigBounds are Kafka's defaults of the broker settings.
var DefaultGroupConfigBounds = GroupConfigBounds{
	MinSessionTimeoutMs: 45000, MaxSessionTimeoutMs: 60000,
	MinHeartbeatIntervalMs: 5000, MaxHeartbeatIntervalMs: 15000,
	SessionTimeoutMs: 45000, HeartbeatIntervalMs: 5000,

	ShareMinSessionTimeoutMs: 45000, ShareMaxSessionTimeoutMs: 60000,
	ShareMinHeartbeatIntervalMs: 5000, ShareMaxHeartbeatIntervalMs: 15000,
	ShareSessionTimeoutMs: 45000, ShareHeartbeatIntervalMs: 5000,
	ShareMinRecordLockDurationMs: 15000, ShareMaxRecordLockDurationMs: 60000,
	ShareMinDeliveryCountLimit: 2, ShareMaxDeliveryCountLimit: 10,
}

// withDefaults fills the zero fields with Kafka's defaults.
func (b GroupConfigBounds) withDefaults() GroupConfigBounds {
	d := DefaultGroupConfigBounds
	for _, f := range []struct{ v, def *int32 }{
		{&b.MinSessionTimeoutMs, &d.MinSessionTimeoutMs}, {&b.MaxSessionTimeoutMs, &d.MaxSessionTimeoutMs},
		{&b.MinHeartbeatIntervalMs, &d.MinHeartbeatIntervalMs}, {&b.MaxHeartbeatIntervalMs, &d.MaxHeartbeatIntervalMs},
		{&b.SessionTimeoutMs, &d.SessionTimeoutMs}, {&b.HeartbeatIntervalMs, &d.HeartbeatIntervalMs},
		{&b.ShareMinSessionTimeoutMs, &d.ShareMinSessionTimeoutMs}, {&b.ShareMaxSessionTimeoutMs, &d.ShareMaxSessionTimeoutMs},
		{&b.ShareMinHeartbeatIntervalMs, &d.ShareMinHeartbeatIntervalMs}, {&b.ShareMaxHeartbeatIntervalMs, &d.ShareMaxHeartbeatIntervalMs},
		{&b.ShareSessionTimeoutMs, &d.ShareSessionTimeoutMs}, {&b.ShareHeartbeatIntervalMs, &d.ShareHeartbeatIntervalMs},
		{&b.ShareMinRecordLockDurationMs, &d.ShareMinRecordLockDurationMs}, {&b.ShareMaxRecordLockDurationMs, &d.ShareMaxRecordLockDurationMs},
		{&b.ShareMinDeliveryCountLimit, &d.ShareMinDeliveryCountLimit}, {&b.ShareMaxDeliveryCountLimit, &d.ShareMaxDeliveryCountLimit},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return b
}

// ValidateGroupConfigs checks a group's complete set of configs as Kafka's
// GroupConfig.validate does: known names, int values within the brokers'
// bounds, the effective heartbeat interval (the group's or the broker
// default) below the effective session timeout (consumer and share
// each), share.auto.offset.reset one of latest, earliest or
// by_duration:<ISO-8601 duration>, share.isolation.level read_committed
// or read_uncommitted.
func ValidateGroupConfigs(cfg map[string]string, b GroupConfigBounds) error {
	b = b.withDefaults()
	eff := map[string]int64{
		ConfigConsumerSessionTimeoutMs:    int64(b.SessionTimeoutMs),
		ConfigConsumerHeartbeatIntervalMs: int64(b.HeartbeatIntervalMs),
		ConfigShareSessionTimeoutMs:       int64(b.ShareSessionTimeoutMs),
		ConfigShareHeartbeatIntervalMs:    int64(b.ShareHeartbeatIntervalMs),
	}
	bounds := map[string][2]int64{
		ConfigConsumerSessionTimeoutMs:    {int64(b.MinSessionTimeoutMs), int64(b.MaxSessionTimeoutMs)},
		ConfigConsumerHeartbeatIntervalMs: {int64(b.MinHeartbeatIntervalMs), int64(b.MaxHeartbeatIntervalMs)},
		ConfigShareSessionTimeoutMs:       {int64(b.ShareMinSessionTimeoutMs), int64(b.ShareMaxSessionTimeoutMs)},
		ConfigShareHeartbeatIntervalMs:    {int64(b.ShareMinHeartbeatIntervalMs), int64(b.ShareMaxHeartbeatIntervalMs)},
		ConfigShareRecordLockDurationMs:   {int64(b.ShareMinRecordLockDurationMs), int64(b.ShareMaxRecordLockDurationMs)},
		ConfigShareDeliveryCountLimit:     {int64(b.ShareMinDeliveryCountLimit), int64(b.ShareMaxDeliveryCountLimit)},
	}
	brokerName := map[string]string{
		ConfigConsumerSessionTimeoutMs:    "group.consumer.%s.session.timeout.ms",
		ConfigConsumerHeartbeatIntervalMs: "group.consumer.%s.heartbeat.interval.ms",
		ConfigShareSessionTimeoutMs:       "group.share.%s.session.timeout.ms",
		ConfigShareHeartbeatIntervalMs:    "group.share.%s.heartbeat.interval.ms",
		ConfigShareRecordLockDurationMs:   "group.share.%s.record.lock.duration.ms",
		ConfigShareDeliveryCountLimit:     "group.share.%s.delivery.count.limit",
	}
	for _, name := range sortedKeys(cfg) {
		v := strings.TrimSpace(cfg[name])
		switch name {
		case ConfigShareAutoOffsetReset:
			if _, err := share.ParseAutoOffsetReset(v); err != nil {
				return fmt.Errorf("%w: %s: %q is not latest, earliest or by_duration:<ISO-8601 duration>", ErrInvalidConfig, name, cfg[name])
			}
			continue
		case ConfigShareIsolationLevel:
			if !strings.EqualFold(v, "read_committed") && !strings.EqualFold(v, "read_uncommitted") {
				return fmt.Errorf("%w: %s: %q is not read_committed or read_uncommitted", ErrInvalidConfig, name, cfg[name])
			}
			continue
		}
		lh, ok := bounds[name]
		if !ok {
			return fmt.Errorf("%w: unknown group config %q", ErrInvalidConfig, name)
		}
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return fmt.Errorf("%w: %s: %q is not an int", ErrInvalidConfig, name, cfg[name])
		}
		if n < lh[0] {
			return fmt.Errorf("%w: %s=%d must be greater than or equal to %s (%d)", ErrInvalidConfig, name, n, fmt.Sprintf(brokerName[name], "min"), lh[0])
		}
		if n > lh[1] {
			return fmt.Errorf("%w: %s=%d must be less than or equal to %s (%d)", ErrInvalidConfig, name, n, fmt.Sprintf(brokerName[name], "max"), lh[1])
		}
		eff[name] = n
	}
	for _, p := range [][2]string{{ConfigConsumerHeartbeatIntervalMs, ConfigConsumerSessionTimeoutMs}, {ConfigShareHeartbeatIntervalMs, ConfigShareSessionTimeoutMs}} {
		if hb, st := eff[p[0]], eff[p[1]]; hb >= st {
			return fmt.Errorf("%w: %s (%d) must be less than %s (%d)", ErrInvalidConfig, p[0], hb, p[1], st)
		}
	}
	return nil
}

// UncleanLeaderElection reports whether a topic allows unclean leader
// election: the topic's unclean.leader.election.enable, else the cluster
// default (broker resource ""), else the controller's static default
// ([Defaults], false unless set).
func (s *State) UncleanLeaderElection(topic string) bool {
	if v, ok := s.configs[configKey{ResourceTopic, topic}][ConfigUncleanLeaderElectionEnable]; ok {
		return strings.EqualFold(v, "true")
	}
	if v, ok := s.configs[configKey{ResourceBroker, ""}]["unclean.leader.election.enable"]; ok {
		return strings.EqualFold(v, "true")
	}
	return s.defaults.UncleanLeaderElection
}

// MinInsyncReplicas returns the effective min ISR of a partition of topic
// with rf replicas (KIP-966): min(min.insync.replicas, rf), where
// min.insync.replicas is the topic's, else the cluster default (broker
// resource ""), else the controller's static default ([Defaults]), else 1.
// Never below 1.
func (s *State) MinInsyncReplicas(topic string, rf int) int {
	n := int64(s.defaults.MinInsyncReplicas)
	if v, ok := s.configs[configKey{ResourceTopic, topic}][ConfigMinInsyncReplicas]; ok {
		n, _ = strconv.ParseInt(v, 10, 32) // validated when set
	} else if v, ok := s.configs[configKey{ResourceBroker, ""}]["min.insync.replicas"]; ok {
		n, _ = strconv.ParseInt(v, 10, 32)
	}
	return int(max(1, min(n, int64(rf))))
}

// maxTopicNameLen is Kafka's limit (Topic.MAX_NAME_LENGTH).
const maxTopicNameLen = 249

// validTopicName applies Kafka's topic name rules.
func validTopicName(name string) error {
	if name == "" || name == "." || name == ".." {
		return fmt.Errorf("illegal topic name %q", name)
	}
	if len(name) > maxTopicNameLen {
		return fmt.Errorf("topic name longer than %d", maxTopicNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("topic name %q has illegal character %q", name, c)
		}
	}
	return nil
}
