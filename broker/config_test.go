package broker

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestConfigDefaultsMatchTheBrief(t *testing.T) {
	c := DefaultConfig()
	if c.NodeID != 1 || len(c.Roles) != 2 || c.LogDir != "./strata-data" ||
		c.MetadataLogDir != "./strata-data" || c.AdminListener != "127.0.0.1:9644" ||
		c.NumPartitions != 1 || c.DefaultReplicationFactor != 1 || !c.AutoCreateTopics ||
		c.SocketRequestMaxBytes != 104857600 || c.ConnectionsMaxIdle != 10*time.Minute {
		t.Fatalf("defaults: %+v", c)
	}
	if cl := c.ClientListeners(); len(cl) != 1 || cl[0].String() != "PLAINTEXT://127.0.0.1:9092" {
		t.Fatalf("client listeners %v", cl)
	}
	if len(c.QuorumVoters) != 1 || c.QuorumVoters[0].String() != "1@127.0.0.1:9093" {
		t.Fatalf("voters %v", c.QuorumVoters)
	}
	if c.Storage.SegmentBytes != 1<<30 || c.Storage.RetentionMs != 7*24*3600*1000 {
		t.Fatalf("storage defaults %+v", c.Storage)
	}
}

func TestConfigPrecedenceFlagOverEnvOverFileOverDefault(t *testing.T) {
	file, err := ReadProperties(strings.NewReader(`
# a comment
! another
num.partitions = 3
log.dirs: /from/file
log.retention.ms=1000
listeners=PLAINTEXT://127.0.0.1:0,\
  CONTROLLER://127.0.0.1:0
num.network.threads=8
`))
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"STRATA_LOG_DIRS=/from/env", "STRATA_LOG_RETENTION_MS=2000", "UNRELATED=1", "STRATA_NUM_IO_THREADS=8"}
	flags := map[string]string{"log.retention.ms": "3000"}
	c, err := ParseConfig(MergeProperties(file, env, flags))
	if err != nil {
		t.Fatal(err)
	}
	if c.NumPartitions != 3 {
		t.Errorf("file value lost: num.partitions=%d", c.NumPartitions)
	}
	if c.LogDir != "/from/env" {
		t.Errorf("env should beat file: log.dirs=%s", c.LogDir)
	}
	if c.Storage.RetentionMs != 3000 {
		t.Errorf("flag should beat env: retention %d", c.Storage.RetentionMs)
	}
	if c.ConnectionsMaxIdle != 10*time.Minute {
		t.Errorf("default lost: %v", c.ConnectionsMaxIdle)
	}
	if len(c.Listeners) != 2 || c.Listeners[1].Name != "CONTROLLER" {
		t.Errorf("continued line: %v", c.Listeners)
	}
	if len(c.Ignored) != 2 || c.Ignored[0] != "num.io.threads" || c.Ignored[1] != "num.network.threads" {
		t.Errorf("ignored Kafka settings %v", c.Ignored)
	}
	if EnvName("log.dirs") != "STRATA_LOG_DIRS" {
		t.Error(EnvName("log.dirs"))
	}
}

func TestConfigRejectsBadValues(t *testing.T) {
	for name, v := range map[string]string{
		"node.id":                    "x",
		"num.partitions":             "0",
		"auto.create.topics.enable":  "maybe",
		"listeners":                  "PLAINTEXT//127.0.0.1:9092",
		"controller.quorum.voters":   "1@nohostport",
		"log.message.timestamp.type": "Sometimes",
		"process.roles":              "broker,chef",
		"log.cleanup.policy":         "compact,shred",
		"strata.log.level":           "loud",
		"replica.selector.class":     "com.example.MySelector",
	} {
		_, err := ParseConfig(MergeProperties(nil, nil, map[string]string{name: v}))
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s=%q: err %v, want ErrInvalidConfig", name, v, err)
		}
	}
	if _, err := ReadProperties(strings.NewReader("novalue\n")); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("line without '=': %v", err)
	}
}

// TestConfigReplicationSettings: default.replication.factor and
// offsets.topic.replication.factor above 1 are accepted (Kafka's defaults
// stay 1), a factor beyond a short is refused naming the setting, and the
// replication settings the controller uses (min.insync.replicas,
// unclean.leader.election.enable, broker.rack, controlled.shutdown.enable)
// have Kafka's defaults and reach the controller's configuration.
func TestConfigReplicationSettings(t *testing.T) {
	for _, name := range []string{"default.replication.factor", "offsets.topic.replication.factor"} {
		c, err := ParseConfig(MergeProperties(nil, nil, map[string]string{name: "3"}))
		if err != nil {
			t.Fatalf("%s=3: %v", name, err)
		}
		if got := map[string]int16{"default.replication.factor": c.DefaultReplicationFactor, "offsets.topic.replication.factor": c.OffsetsTopicReplicationFactor}[name]; got != 3 {
			t.Errorf("%s=3 parsed as %d", name, got)
		}
		if _, err := ParseConfig(MergeProperties(nil, nil, map[string]string{name: "40000"})); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=40000: %v, want ErrInvalidConfig naming it", name, err)
		}
	}
	def, err := ParseConfig(MergeProperties(nil, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if def.DefaultReplicationFactor != 1 || def.OffsetsTopicReplicationFactor != 1 || def.MinInsyncReplicas != 1 ||
		def.UncleanLeaderElection || !def.ControlledShutdown || def.Rack != "" {
		t.Fatalf("defaults: rf %d offsets rf %d min isr %d unclean %t controlled shutdown %t rack %q", def.DefaultReplicationFactor,
			def.OffsetsTopicReplicationFactor, def.MinInsyncReplicas, def.UncleanLeaderElection, def.ControlledShutdown, def.Rack)
	}
	c, err := ParseConfig(MergeProperties(nil, nil, map[string]string{"min.insync.replicas": "2", "unclean.leader.election.enable": "true", "broker.rack": "r1"}))
	if err != nil {
		t.Fatal(err)
	}
	cc := c.controllerConfig("127.0.0.1:0", nil, nil)
	if cc.MinInsyncReplicas != 2 || !cc.UncleanLeaderElection || c.Rack != "r1" {
		t.Fatalf("controller config min isr %d unclean %t, rack %q", cc.MinInsyncReplicas, cc.UncleanLeaderElection, c.Rack)
	}
	if _, err := ParseConfig(MergeProperties(nil, nil, map[string]string{"min.insync.replicas": "0"})); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("min.insync.replicas=0: %v", err)
	}
	// KIP-392's selector: Kafka's two class names; leader-only by default.
	for v, want := range map[string]bool{
		"": false, "org.apache.kafka.common.replica.LeaderSelector": false,
		"org.apache.kafka.common.replica.RackAwareReplicaSelector": true,
	} {
		c, err := ParseConfig(MergeProperties(nil, nil, map[string]string{"replica.selector.class": v}))
		if err != nil || c.RackAwareReads != want {
			t.Errorf("replica.selector.class=%q: rack-aware %v, err %v; want %v", v, c.RackAwareReads, err, want)
		}
	}
}

func TestConfigHelpListsEverySettingWithDefault(t *testing.T) {
	var b bytes.Buffer
	Help(&b)
	out := b.String()
	for _, s := range Settings {
		if !strings.Contains(out, s.Name) || !strings.Contains(out, EnvName(s.Name)) {
			t.Errorf("help lacks %s", s.Name)
		}
		if s.Default != "" && !strings.Contains(out, "default "+s.Default) {
			t.Errorf("help lacks the default of %s", s.Name)
		}
	}
	// Every setting in the table parses with its own default.
	if _, err := ParseConfig(MergeProperties(nil, nil, nil)); err != nil {
		t.Fatal(err)
	}
}

func TestTopicConfigOverlaysBrokerDefaults(t *testing.T) {
	base := DefaultConfig().Storage
	c := topicStorageConfig(base, map[string]string{
		"segment.bytes": "1048576", "retention.ms": "-1", "message.timestamp.type": "LogAppendTime", "max.message.bytes": "200",
	})
	if c.SegmentBytes != 1<<20 || c.RetentionMs != -1 || c.TimestampType != 1 || c.MaxMessageBytes != 200 {
		t.Fatalf("%+v", c)
	}
	if c.IndexIntervalBytes != base.IndexIntervalBytes {
		t.Fatal("unset config lost its default")
	}
}

func TestConfigTransactionDefaultsAreKafkas(t *testing.T) {
	c := DefaultConfig()
	if c.TxnStatePartitions != 50 || c.TxnStateReplicationFactor != 3 || c.TxnStateMinISR != 2 ||
		c.TxnStateSegmentBytes != 104857600 || c.TxnMaxTimeout != 15*time.Minute ||
		c.TxnIDExpiration != 7*24*time.Hour || c.TxnAbortTimedOutInterval != 10*time.Second ||
		c.TxnRemoveExpiredInterval != time.Hour {
		t.Fatalf("transaction defaults: %d %d %d %d %v %v %v %v", c.TxnStatePartitions, c.TxnStateReplicationFactor,
			c.TxnStateMinISR, c.TxnStateSegmentBytes, c.TxnMaxTimeout, c.TxnIDExpiration,
			c.TxnAbortTimedOutInterval, c.TxnRemoveExpiredInterval)
	}
}
