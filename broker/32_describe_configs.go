package broker

// DescribeConfigs (key 32), versions 0 through kmsg's newest (4).
//
// Behaviour: TOPIC resources list every topic config the controller
// accepts (metadata.TopicConfigNames), BROKER resources every setting of
// [Settings] plus the dynamic broker configs the controller accepts, GROUP
// resources (any group id, existing or not, as Kafka) the group configs
// (metadata.GroupConfigNames): the group's own value (GROUP_CONFIG), else
// the value of the broker's group.consumer.* setting it overrides, as
// DEFAULT_CONFIG (Kafka's createGroupConfigEntry). Each
// value is resolved as Kafka resolves it, highest precedence first:
//
//	topic config   DYNAMIC_TOPIC_CONFIG          the topic's own (metadata ConfigRecord)
//	               DYNAMIC_BROKER_CONFIG         broker resource "<node.id>", for dynamic broker configs
//	               DYNAMIC_DEFAULT_BROKER_CONFIG broker resource "" (cluster default)
//	               STATIC_BROKER_CONFIG          server.properties / --set / STRATA_* differing from the default
//	               DEFAULT_CONFIG                the built-in default
//
// The same chain is what the partitions' logs run with (effectiveTopicConfigs
// feeds reconcile), so what DescribeConfigs says is what storage does.
// ConfigNames filters (null or empty: all; unknown names are left out).
// v1+: Source, and with IncludeSynonyms the whole chain, value first. v0:
// IsDefault. v3+: ConfigType always, Documentation with
// IncludeDocumentation. Broker configs that cannot change at run time are
// ReadOnly; sensitive ones (remote.storage.s3.secret.key) have IsSensitive
// and a null value, their synonyms' values null too, as Kafka.
//
// Errors per resource, as Kafka: INVALID_TOPIC_EXCEPTION (illegal name),
// UNKNOWN_TOPIC_OR_PARTITION; a BROKER resource naming another broker id or
// not an integer, or an unsupported resource type (BROKER_LOGGER, ...),
// INVALID_REQUEST with a message. A BROKER resource "" lists only the
// cluster-wide dynamic defaults (Kafka's currentDynamicDefaultConfigs).
//
// Differences from Kafka: a static setting given explicitly with its default
// value reports DEFAULT_CONFIG (the merged properties cannot tell); broker
// synonyms such as log.retention.hours/minutes do not exist here; broker
// configs Strata does not have are not listed.

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/broker/authz"
	"github.com/strata-io/strata/controller/metadata"
)

func init() { register(32, 0, handleDescribeConfigs) }

// topicConfigDef describes one topic config for DescribeConfigs: the broker
// setting it defaults from (its synonym; "" when it is topic-only), the
// built-in default when that setting is not in [Settings], its type and
// documentation.
type topicConfigDef struct {
	broker string
	def    string
	typ    kmsg.ConfigType
	doc    string
}

var maxLong = strconv.FormatInt(math.MaxInt64, 10)

// topicConfigDefs covers every name of metadata.TopicConfigNames (a test
// checks it). Defaults of names with a broker synonym in Settings come from
// Settings, so def is empty for them.
var topicConfigDefs = map[string]topicConfigDef{
	metadata.ConfigLeaderReplicationThrottledReplicas:   {"", "", kmsg.ConfigTypeList, "replicas (partition:broker, or *) whose copying by followers out of the ISR the leader throttles to leader.replication.throttled.rate"},
	metadata.ConfigFollowerReplicationThrottledReplicas: {"", "", kmsg.ConfigTypeList, "replicas (partition:broker, or *) that, out of the ISR, fetch at most follower.replication.throttled.rate"},
	metadata.ConfigCleanupPolicy:                        {"log.cleanup.policy", "", kmsg.ConfigTypeList, "delete or compact (or both): how old segments are discarded"},
	metadata.ConfigCompressionType:                      {"compression.type", "producer", kmsg.ConfigTypeString, "final compression of the topic's batches; producer keeps what the producer sent (Strata stores batches as sent)"},
	metadata.ConfigCompressionGzipLevel:                 {"compression.gzip.level", "-1", kmsg.ConfigTypeInt, "gzip level when compression.type is gzip"},
	metadata.ConfigCompressionLz4Level:                  {"compression.lz4.level", "9", kmsg.ConfigTypeInt, "lz4 level when compression.type is lz4"},
	metadata.ConfigCompressionZstdLevel:                 {"compression.zstd.level", "3", kmsg.ConfigTypeInt, "zstd level when compression.type is zstd"},
	metadata.ConfigMessageDownconversionEnable:          {"log.message.downconversion.enable", "true", kmsg.ConfigTypeBoolean, "down-conversion of record formats for old consumers (Strata serves record batch v2 only)"},
	metadata.ConfigRemoteLogCopyDisable:                 {"", "false", kmsg.ConfigTypeBoolean, "stop copying segments to the remote tier while keeping what is there"},
	metadata.ConfigRemoteLogDeleteOnDisable:             {"", "false", kmsg.ConfigTypeBoolean, "delete remote data when remote storage is disabled"},
	metadata.ConfigDeleteRetentionMs:                    {"log.cleaner.delete.retention.ms", "", kmsg.ConfigTypeLong, "how long delete tombstones are kept on compacted topics"},
	metadata.ConfigFileDeleteDelayMs:                    {"log.segment.delete.delay.ms", "", kmsg.ConfigTypeLong, "wait before a deleted segment's files are removed"},
	metadata.ConfigFlushMessages:                        {"log.flush.interval.messages", "", kmsg.ConfigTypeLong, "fsync after this many records"},
	metadata.ConfigFlushMs:                              {"log.flush.interval.ms", "", kmsg.ConfigTypeLong, "fsync after this many milliseconds"},
	metadata.ConfigIndexIntervalBytes:                   {"log.index.interval.bytes", "", kmsg.ConfigTypeInt, "bytes between offset index entries"},
	metadata.ConfigLocalRetentionBytes:                  {"log.local.retention.bytes", "", kmsg.ConfigTypeLong, "local bytes kept before tiered segments are deleted locally (-2: retention.bytes)"},
	metadata.ConfigLocalRetentionMs:                     {"log.local.retention.ms", "", kmsg.ConfigTypeLong, "local age kept before tiered segments are deleted locally (-2: retention.ms)"},
	metadata.ConfigMaxCompactionLagMs:                   {"log.cleaner.max.compaction.lag.ms", "", kmsg.ConfigTypeLong, "longest time a record stays uncompacted"},
	metadata.ConfigMaxMessageBytes:                      {"message.max.bytes", "", kmsg.ConfigTypeInt, "largest record batch accepted"},
	metadata.ConfigMessageTimestampType:                 {"log.message.timestamp.type", "", kmsg.ConfigTypeString, "CreateTime or LogAppendTime"},
	metadata.ConfigMessageTimestampBeforeMaxMs:          {"log.message.timestamp.before.max.ms", maxLong, kmsg.ConfigTypeLong, "largest allowed age of a CreateTime timestamp"},
	metadata.ConfigMessageTimestampAfterMaxMs:           {"log.message.timestamp.after.max.ms", maxLong, kmsg.ConfigTypeLong, "largest allowed lead of a CreateTime timestamp over the broker's clock"},
	metadata.ConfigMinCleanableDirtyRatio:               {"log.cleaner.min.cleanable.ratio", "", kmsg.ConfigTypeDouble, "dirty ratio above which a log is compacted"},
	metadata.ConfigMinCompactionLagMs:                   {"log.cleaner.min.compaction.lag.ms", "", kmsg.ConfigTypeLong, "shortest time a record stays uncompacted"},
	metadata.ConfigMinInsyncReplicas:                    {"min.insync.replicas", "", kmsg.ConfigTypeInt, "replicas that must have a record before acks=all succeeds"},
	metadata.ConfigPreallocate:                          {"log.preallocate", "false", kmsg.ConfigTypeBoolean, "preallocate segment files (reserved)"},
	metadata.ConfigRemoteStorageEnable:                  {"", "false", kmsg.ConfigTypeBoolean, "copy rolled segments to the remote tier"},
	metadata.ConfigRetentionBytes:                       {"log.retention.bytes", "", kmsg.ConfigTypeLong, "bytes kept per partition before old segments are deleted (-1: unlimited)"},
	metadata.ConfigRetentionMs:                          {"log.retention.ms", "", kmsg.ConfigTypeLong, "age after which segments are deleted (-1: forever)"},
	metadata.ConfigSegmentBytes:                         {"log.segment.bytes", "", kmsg.ConfigTypeInt, "segment size at which the log rolls"},
	metadata.ConfigSegmentIndexBytes:                    {"log.index.size.max.bytes", "", kmsg.ConfigTypeInt, "offset and time index size per segment"},
	metadata.ConfigSegmentJitterMs:                      {"log.roll.jitter.ms", "", kmsg.ConfigTypeLong, "random jitter subtracted from segment.ms"},
	metadata.ConfigSegmentMs:                            {"log.roll.ms", "", kmsg.ConfigTypeLong, "segment age at which the log rolls"},
	metadata.ConfigUncleanLeaderElectionEnable:          {"unclean.leader.election.enable", "", kmsg.ConfigTypeBoolean, "allow an out-of-sync replica to become leader"},
}

// brokerOnlyConfigDefs are the dynamic broker configs the controller
// accepts that are not static settings of [Settings]: listed on BROKER
// resources with their defaults.
var brokerOnlyConfigDefs = map[string]topicConfigDef{
	"compression.type": {"", "producer", kmsg.ConfigTypeString, "compression.type of topics that do not set it"},
}

// dynamicBrokerConfigs are the broker configs AlterConfigs may change at run
// time (metadata.ValidateBrokerConfig accepts exactly these; a test checks
// it). The others are read-only.
var dynamicBrokerConfigs = map[string]bool{
	"log.retention.ms": true, "log.retention.bytes": true, "log.segment.bytes": true,
	"log.local.retention.ms": true, "log.local.retention.bytes": true, "log.cleanup.policy": true,
	"compression.type": true, "min.insync.replicas": true, "message.max.bytes": true,
	"unclean.leader.election.enable": true, "log.flush.interval.messages": true,
	"log.flush.interval.ms":             true,
	"leader.replication.throttled.rate": true, "follower.replication.throttled.rate": true,
}

// brokerSettingTypes gives the Kafka type of the settings that are not
// strings or longs (Kafka's KafkaConfig types).
var brokerSettingTypes = map[string]kmsg.ConfigType{
	"node.id": kmsg.ConfigTypeInt, "num.partitions": kmsg.ConfigTypeInt, "default.replication.factor": kmsg.ConfigTypeShort,
	"auto.create.topics.enable": kmsg.ConfigTypeBoolean, "socket.request.max.bytes": kmsg.ConfigTypeInt,
	"queued.max.requests": kmsg.ConfigTypeInt, "log.segment.bytes": kmsg.ConfigTypeInt,
	"log.index.size.max.bytes": kmsg.ConfigTypeInt, "log.index.interval.bytes": kmsg.ConfigTypeInt,
	"message.max.bytes": kmsg.ConfigTypeInt, "num.recovery.threads.per.data.dir": kmsg.ConfigTypeInt,
	"broker.session.timeout.ms": kmsg.ConfigTypeInt, "broker.heartbeat.interval.ms": kmsg.ConfigTypeInt,
	"controller.quorum.election.timeout.ms": kmsg.ConfigTypeInt, "process.roles": kmsg.ConfigTypeList,
	"controller.listener.names": kmsg.ConfigTypeList, "controller.quorum.voters": kmsg.ConfigTypeList,
	"log.dirs": kmsg.ConfigTypeString, "listeners": kmsg.ConfigTypeString, "advertised.listeners": kmsg.ConfigTypeString,
	"log.cleanup.policy": kmsg.ConfigTypeList, "log.message.timestamp.type": kmsg.ConfigTypeString,
	"metadata.log.dir": kmsg.ConfigTypeString, "admin.listener": kmsg.ConfigTypeString,
	"strata.log.level": kmsg.ConfigTypeString, "strata.log.format": kmsg.ConfigTypeString,
	"remote.log.storage.system.enable": kmsg.ConfigTypeBoolean, "remote.storage.backend": kmsg.ConfigTypeString,
	"remote.storage.fs.path": kmsg.ConfigTypeString, "remote.storage.s3.endpoint": kmsg.ConfigTypeString,
	"remote.storage.s3.bucket": kmsg.ConfigTypeString, "remote.storage.s3.region": kmsg.ConfigTypeString,
	"remote.storage.s3.prefix": kmsg.ConfigTypeString, "remote.storage.s3.path.style": kmsg.ConfigTypeBoolean,
	"remote.storage.s3.access.key": kmsg.ConfigTypeString, "remote.storage.s3.secret.key": kmsg.ConfigTypePassword,
	"remote.storage.request.timeout.ms": kmsg.ConfigTypeInt, "remote.storage.retry.max.attempts": kmsg.ConfigTypeInt,
	"remote.log.manager.copier.thread.pool.size": kmsg.ConfigTypeInt, "remote.log.reader.threads": kmsg.ConfigTypeInt,
	"remote.log.reader.readahead.chunks": kmsg.ConfigTypeInt, "remote.fetch.max.wait.ms": kmsg.ConfigTypeInt,
}

func brokerSettingType(name string) kmsg.ConfigType {
	if isSensitiveSetting(name) {
		return kmsg.ConfigTypePassword
	}
	if t, ok := brokerSettingTypes[name]; ok {
		return t
	}
	if d, ok := brokerOnlyConfigDefs[name]; ok {
		return d.typ
	}
	if strings.HasPrefix(name, "ssl.") || strings.HasPrefix(name, "admin.") {
		return kmsg.ConfigTypeString // locations, PEM, names, lists
	}
	return kmsg.ConfigTypeLong // the rest of the table: *.ms, *.bytes, counts
}

// configValue is one link of a config's resolution chain.
type configValue struct {
	name   string
	value  string
	source kmsg.ConfigSource
}

// staticChain returns the static links of a broker setting: its value from
// the merged properties when it differs from the built-in default, then the
// default ("" setting default: unset, no link). def is used for names
// outside [Settings].
func (n *Node) staticChain(name, def string) []configValue {
	var out []configValue
	if s, ok := lookupSetting(name); ok {
		if v, set := n.cfg.Props[name]; set && v != s.Default {
			out = append(out, configValue{name, v, kmsg.ConfigSourceStaticBrokerConfig})
		}
		def = s.Default
		if name == "metadata.log.dir" {
			def = n.cfg.MetadataLogDir // derived: the resolved directory is the default
		}
		if def == "" {
			return out
		}
	}
	return append(out, configValue{name, def, kmsg.ConfigSourceDefaultConfig})
}

// dynamicBrokerChain returns the dynamic links of a broker config in st:
// this broker's own value, then the cluster default.
func (n *Node) dynamicBrokerChain(st *metadata.State, name string) []configValue {
	if !dynamicBrokerConfigs[name] {
		return nil
	}
	var out []configValue
	if v, ok := st.Config(metadata.ResourceBroker, strconv.Itoa(int(n.cfg.NodeID)))[name]; ok {
		out = append(out, configValue{name, v, kmsg.ConfigSourceDynamicBrokerConfig})
	}
	if v, ok := st.Config(metadata.ResourceBroker, "")[name]; ok {
		out = append(out, configValue{name, v, kmsg.ConfigSourceDynamicDefaultBrokerConfig})
	}
	return out
}

// topicConfigChain resolves one topic config, highest precedence first.
func (n *Node) topicConfigChain(st *metadata.State, topic, name string) []configValue {
	d := topicConfigDefs[name]
	var out []configValue
	if v, ok := st.TopicConfig(topic)[name]; ok {
		out = append(out, configValue{name, v, kmsg.ConfigSourceDynamicTopicConfig})
	}
	if d.broker == "" {
		return append(out, configValue{name, d.def, kmsg.ConfigSourceDefaultConfig})
	}
	out = append(out, n.dynamicBrokerChain(st, d.broker)...)
	return append(out, n.staticChain(d.broker, d.def)...)
}

// effectiveTopicConfigs returns the configs a topic's logs run with beyond
// the static broker defaults (which storage already has): the dynamic
// broker configs (this broker's, then the cluster default) under their
// topic names, overlaid by the topic's own. reconcile hands the result to
// topicStorageConfig, so a dynamic change of log.segment.bytes reaches
// every log of topics that do not set segment.bytes.
func (n *Node) effectiveTopicConfigs(st *metadata.State, topic string) map[string]string {
	out := map[string]string{}
	for name, d := range topicConfigDefs {
		if d.broker == "" {
			continue
		}
		if chain := n.dynamicBrokerChain(st, d.broker); len(chain) > 0 {
			out[name] = chain[0].value
		}
	}
	for k, v := range st.TopicConfig(topic) {
		out[k] = v
	}
	return out
}

// brokerConfigNames lists what a BROKER resource describes, in table order
// then the dynamic-only configs sorted.
func brokerConfigNames() []string {
	names := make([]string, 0, len(Settings)+len(brokerOnlyConfigDefs))
	for _, s := range Settings {
		names = append(names, s.Name)
	}
	var extra []string
	for k := range brokerOnlyConfigDefs {
		extra = append(extra, k)
	}
	slices.Sort(extra)
	return append(names, extra...)
}

func brokerConfigDoc(name string) string {
	if s, ok := lookupSetting(name); ok {
		return s.Doc
	}
	return brokerOnlyConfigDefs[name].doc
}

func handleDescribeConfigs(_ context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.DescribeConfigsRequest)
	resp := kmsg.NewPtrDescribeConfigsResponse()
	az := n.authorizer() // authorize.go: DESCRIBE_CONFIGS
	n.view(func(st *metadata.State) {
		for _, rr := range req.Resources {
			if err := r.configRefusal(az, rr.ResourceType, rr.ResourceName, authz.OpDescribeConfigs); err != nil {
				res := kmsg.NewDescribeConfigsResponseResource()
				res.ResourceType, res.ResourceName, res.ErrorCode = rr.ResourceType, rr.ResourceName, errCode(err)
				resp.Resources = append(resp.Resources, res)
				continue
			}
			resp.Resources = append(resp.Resources, n.describeResource(st, req, rr))
		}
	})
	return encodeResponse(r, resp), nil
}

func (n *Node) describeResource(st *metadata.State, req *kmsg.DescribeConfigsRequest, rr kmsg.DescribeConfigsRequestResource) kmsg.DescribeConfigsResponseResource {
	res := kmsg.NewDescribeConfigsResponseResource()
	res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
	fail := func(err *kerr.Error, msg string) kmsg.DescribeConfigsResponseResource {
		res.ErrorCode, res.ErrorMessage = err.Code, kmsg.StringPtr(msg)
		return res
	}
	wanted := func(name string) bool { return len(rr.ConfigNames) == 0 || slices.Contains(rr.ConfigNames, name) }
	add := func(name string, chain []configValue, readOnly bool, typ kmsg.ConfigType, doc string) {
		if len(chain) == 0 || !wanted(name) {
			return
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name, c.Value, c.Source = name, kmsg.StringPtr(chain[0].value), chain[0].source
		c.ReadOnly = readOnly
		c.IsDefault = chain[0].source == kmsg.ConfigSourceDefaultConfig
		if req.IncludeSynonyms {
			for _, l := range chain {
				s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
				s.Name, s.Value, s.Source = l.name, kmsg.StringPtr(l.value), l.source
				c.ConfigSynonyms = append(c.ConfigSynonyms, s)
			}
		}
		if isSensitiveSetting(name) { // a secret: say it is set, never what it is
			c.Value, c.IsSensitive = nil, true
			for i := range c.ConfigSynonyms {
				c.ConfigSynonyms[i].Value = nil
			}
		}
		c.ConfigType = typ
		if req.IncludeDocumentation {
			c.Documentation = kmsg.StringPtr(doc)
		}
		res.Configs = append(res.Configs, c)
	}
	switch rr.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		if !legalTopicName(rr.ResourceName) {
			return fail(kerr.InvalidTopicException, fmt.Sprintf("illegal topic name %q", rr.ResourceName))
		}
		if _, ok := st.TopicByName(rr.ResourceName); !ok {
			return fail(kerr.UnknownTopicOrPartition, fmt.Sprintf("topic %q does not exist", rr.ResourceName))
		}
		for _, name := range metadata.TopicConfigNames() {
			d := topicConfigDefs[name]
			add(name, n.topicConfigChain(st, rr.ResourceName, name), false, d.typ, d.doc)
		}
	case kmsg.ConfigResourceTypeBroker:
		if rr.ResourceName == "" {
			// The cluster-wide dynamic defaults only, as Kafka.
			defaults := st.Config(metadata.ResourceBroker, "")
			for _, name := range brokerConfigNames() {
				if v, ok := defaults[name]; ok {
					add(name, []configValue{{name, v, kmsg.ConfigSourceDynamicDefaultBrokerConfig}}, false, brokerSettingType(name), brokerConfigDoc(name))
				}
			}
			return res
		}
		id, err := strconv.ParseInt(rr.ResourceName, 10, 32)
		if err != nil {
			return fail(kerr.InvalidRequest, fmt.Sprintf("broker id must be an integer, but it is: %s", rr.ResourceName))
		}
		if int32(id) != n.cfg.NodeID {
			return fail(kerr.InvalidRequest, fmt.Sprintf("unexpected broker id, expected %d or empty string, but received %s", n.cfg.NodeID, rr.ResourceName))
		}
		for _, name := range brokerConfigNames() {
			chain := n.dynamicBrokerChain(st, name)
			def := ""
			if d, ok := brokerOnlyConfigDefs[name]; ok {
				def = d.def
			}
			chain = append(chain, n.staticChain(name, def)...)
			add(name, chain, !dynamicBrokerConfigs[name], brokerSettingType(name), brokerConfigDoc(name))
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if rr.ResourceName == "" {
			return fail(kerr.InvalidRequest, "Group name must not be empty")
		}
		own := st.Config(metadata.ResourceGroup, rr.ResourceName)
		for _, name := range metadata.GroupConfigNames() {
			// As Kafka's createGroupConfigEntry: the group's value
			// (GROUP_CONFIG), else the broker's setting as DEFAULT_CONFIG;
			// no further synonyms.
			broker := groupConfigBrokerSetting[name]
			v, ok := own[name]
			src := kmsg.ConfigSourceGroupConfig
			if !ok {
				v = groupConfigFixedDefault[name]
				if chain := n.staticChain(broker, v); broker != "" && len(chain) > 0 {
					v = chain[0].value
				}
				src = kmsg.ConfigSourceDefaultConfig
			}
			typ, doc := kmsg.ConfigTypeInt, "the group's own "+broker+" ("+brokerConfigDoc(broker)+")"
			if metadata.IsStringGroupConfig(name) {
				typ, doc = kmsg.ConfigTypeString, groupConfigDoc[name]
			}
			add(name, []configValue{{name, v, src}}, false, typ, doc)
		}
	default:
		return fail(kerr.InvalidRequest, fmt.Sprintf("unsupported resource type %s", rr.ResourceType))
	}
	return res
}

// groupConfigBrokerSetting is the broker setting a group config overrides
// (its default, and its synonym in DescribeConfigs).
var groupConfigBrokerSetting = map[string]string{
	metadata.ConfigConsumerSessionTimeoutMs:    "group.consumer.session.timeout.ms",
	metadata.ConfigConsumerHeartbeatIntervalMs: "group.consumer.heartbeat.interval.ms",
	metadata.ConfigShareSessionTimeoutMs:       "group.share.session.timeout.ms",
	metadata.ConfigShareHeartbeatIntervalMs:    "group.share.heartbeat.interval.ms",
	metadata.ConfigShareRecordLockDurationMs:   "group.share.record.lock.duration.ms",
	metadata.ConfigShareDeliveryCountLimit:     "group.share.delivery.count.limit",
}

// groupConfigFixedDefault is a group config's default where the broker
// has no setting for it (Kafka's GroupConfig defaults), or while the
// broker setting it inherits is not one of this broker's.
var groupConfigFixedDefault = map[string]string{
	metadata.ConfigShareAutoOffsetReset:      "latest",
	metadata.ConfigShareIsolationLevel:       "read_uncommitted",
	metadata.ConfigShareRecordLockDurationMs: "30000",
	metadata.ConfigShareDeliveryCountLimit:   "5",
}

// groupConfigDoc documents the string group configs.
var groupConfigDoc = map[string]string{
	metadata.ConfigShareAutoOffsetReset: "where a share group starts reading a partition it has no state for: latest, earliest or by_duration:<ISO-8601 duration>",
	metadata.ConfigShareIsolationLevel:  "what a share group reads: read_uncommitted, or read_committed (up to the last stable offset, aborted transactions skipped)",
}
