package broker

import (
	"errors"
	"strings"
	"testing"
)

// TestLoadConfigRefusesUnknownNames: a misspelt --set name, STRATA_*
// variable or properties key stops the start with the closest known name;
// Kafka settings Strata does not implement are accepted and listed.
func TestLoadConfigRefusesUnknownNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  ConfigSources
		want []string
	}{
		{"flag", ConfigSources{Flags: map[string]string{"log.segment.byte": "1000"}},
			[]string{"--set", "unknown setting log.segment.byte", "did you mean log.segment.bytes?"}},
		{"env", ConfigSources{Env: []string{"STRATA_LOG_SEGMENT_BYTEZ=1000"}},
			[]string{"environment", "STRATA_LOG_SEGMENT_BYTEZ", "did you mean STRATA_LOG_SEGMENT_BYTES (log.segment.bytes)?"}},
		{"file", ConfigSources{File: map[string]string{"log.retention.hour": "1"}, FileName: "server.properties"},
			[]string{"server.properties: unknown setting log.retention.hour", "did you mean log.retention.hours?"}},
		{"far from anything", ConfigSources{Flags: map[string]string{"completely.different": "x"}},
			[]string{"unknown setting completely.different", "strata serve --help"}},
		{"renamed in KRaft", ConfigSources{File: map[string]string{"broker.id": "2"}},
			[]string{"unknown setting broker.id", "node.id"}},
		{"security setting is not ignored", ConfigSources{File: map[string]string{"sasl.kerberos.service.name": "kafka"}},
			[]string{"unknown setting sasl.kerberos.service.name"}},
		{"unknown authorizer", ConfigSources{File: map[string]string{"authorizer.class.name": "x"}},
			[]string{"authorizer.class.name", "unknown authorizer", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}},
		{"removed ZooKeeper authorizer", ConfigSources{File: map[string]string{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}},
			[]string{"removed in Kafka 4.0"}},
		{"bad super.users", ConfigSources{File: map[string]string{"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer", "super.users": "alice"}},
			[]string{"super.users", "principalType:principalName"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig(tc.src)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err %v, want ErrInvalidConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	// ParseConfig alone (merged properties) refuses them too.
	if _, err := ParseConfig(MergeProperties(nil, nil, map[string]string{"log.segment.byte": "1"})); !errors.Is(err, ErrInvalidConfig) ||
		!strings.Contains(err.Error(), "log.segment.bytes") {
		t.Errorf("ParseConfig: %v", err)
	}

	c, err := LoadConfig(ConfigSources{
		File: map[string]string{"num.network.threads": "3", "socket.send.buffer.bytes": "102400", "zookeeper.connect": "x:2181"},
		Env: []string{"STRATA_NUM_IO_THREADS=8", "STRATA_BROKERS=127.0.0.1:9092", "STRATA_ADMIN=127.0.0.1:9644", "STRATA_TEST_MINIO=/bin/minio", "OTHER=1",
			"STRATA_COMMAND_CONFIG=/c.properties", "STRATA_CLIENT_SASL_JAAS_CONFIG=x", "STRATA_ADMIN_TOKEN=t"},
		Flags: map[string]string{"log.dirs": t.TempDir()},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Ignored, " "); got != "num.io.threads num.network.threads socket.send.buffer.bytes zookeeper.connect" {
		t.Errorf("ignored %q", got)
	}
	var help strings.Builder
	HelpIgnored(&help)
	for _, n := range []string{"num.network.threads", "num.io.threads", "socket.send.buffer.bytes", "num.replica.alter.log.dirs.threads"} {
		if !strings.Contains(help.String(), " "+n) {
			t.Errorf("HelpIgnored lacks %s", n)
		}
	}
	for _, s := range Settings {
		if ignoredSetting(s.Name) {
			t.Errorf("%s is a setting and an ignored one", s.Name)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"log.segment.byte", "log.segment.bytes", 1}, {"ab", "ba", 2}} {
		if got := editDistance(tc.a, tc.b); got != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}

// TestConfigKafkaTimeUnits: Kafka's *.hours and *.minutes forms are
// accepted, with Kafka's precedence (ms > minutes > hours), and the value
// used is what DescribeConfigs sees under the ms name.
func TestConfigKafkaTimeUnits(t *testing.T) {
	parse := func(props map[string]string) Config {
		t.Helper()
		c, err := LoadConfig(ConfigSources{File: props})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	const h, m = 3600 * 1000, 60 * 1000
	for _, tc := range []struct {
		props     map[string]string
		retention int64
		roll      int64
		jitter    int64
	}{
		{map[string]string{}, 168 * h, 168 * h, 0},
		{map[string]string{"log.retention.hours": "1", "log.roll.hours": "2", "log.roll.jitter.hours": "1"}, 1 * h, 2 * h, 1 * h},
		{map[string]string{"log.retention.hours": "1", "log.retention.minutes": "30"}, 30 * m, 168 * h, 0},
		{map[string]string{"log.retention.hours": "1", "log.retention.minutes": "30", "log.retention.ms": "5000"}, 5000, 168 * h, 0},
		{map[string]string{"log.roll.hours": "2", "log.roll.ms": "7000", "log.roll.jitter.hours": "1", "log.roll.jitter.ms": "9"}, 168 * h, 7000, 9},
		{map[string]string{"log.retention.hours": "-1"}, -1, 168 * h, 0},
	} {
		c := parse(tc.props)
		if c.Storage.RetentionMs != tc.retention || c.Storage.SegmentMs != tc.roll || c.Storage.SegmentJitterMs != tc.jitter {
			t.Errorf("%v: retention %d roll %d jitter %d, want %d %d %d", tc.props,
				c.Storage.RetentionMs, c.Storage.SegmentMs, c.Storage.SegmentJitterMs, tc.retention, tc.roll, tc.jitter)
		}
	}
	if c := parse(map[string]string{"log.retention.hours": "2"}); c.Props["log.retention.ms"] != "7200000" {
		t.Errorf("Props[log.retention.ms] = %q", c.Props["log.retention.ms"])
	}
	if _, err := LoadConfig(ConfigSources{File: map[string]string{"log.roll.hours": "0"}}); !errors.Is(err, ErrInvalidConfig) ||
		!strings.Contains(err.Error(), "log.roll.hours") {
		t.Errorf("log.roll.hours=0: %v", err)
	}
	if _, err := LoadConfig(ConfigSources{File: map[string]string{"log.retention.hours": "many"}}); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("log.retention.hours=many: %v", err)
	}
	// log.dir is Kafka's single-directory form; log.dirs wins over it.
	dir, dirs := t.TempDir(), t.TempDir()
	if c := parse(map[string]string{"log.dir": dir}); c.LogDir != dir {
		t.Errorf("log.dir: LogDir %s", c.LogDir)
	}
	if c := parse(map[string]string{"log.dir": dir, "log.dirs": dirs}); c.LogDir != dirs {
		t.Errorf("log.dir and log.dirs: LogDir %s", c.LogDir)
	}
}
