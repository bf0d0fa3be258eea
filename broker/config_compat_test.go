package broker

// Second-client test of the config and cluster admin APIs: librdkafka's
// AdminClient (python3-confluent-kafka, its own protocol code and its own
// choice of versions) describes and alters configs and adds partitions,
// driven by testdata/compat_admin/admin.py. Skips where the package is
// missing, fails under CI=true (see needClient).

import (
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

type adminStep struct {
	Step       string `json:"step"`
	Count      int    `json:"count"`
	Error      string `json:"error"`
	Partitions int    `json:"partitions"`
	Configs    map[string]struct {
		Value    *string `json:"value"`
		Source   int     `json:"source"`
		ReadOnly bool    `json:"read_only"`
	} `json:"configs"`
}

func TestConfigAdminWithLibrdkafka(t *testing.T) {
	py := needClient(t, systemPython, "-c", "import confluent_kafka")
	script, err := filepath.Abs(filepath.Join("testdata", "compat_admin", "admin.py"))
	if err != nil {
		t.Fatal(err)
	}
	n := startNode(t, t.TempDir(), map[string]string{"num.partitions": "2"})
	createTopic(t, newAdmin(t, n), "rdk", 1, map[string]*string{"segment.bytes": kmsg.StringPtr("1048576")})
	out := runClient(t, nil, py, script, n.Addr(), "rdk")
	steps := map[string]adminStep{}
	for _, s := range jsonLines[adminStep](t, out) {
		steps[s.Step] = s
	}
	val := func(s adminStep, name string) string {
		c, ok := s.Configs[name]
		if !ok || c.Value == nil {
			t.Fatalf("%s: no %s in %+v", s.Step, name, s.Configs)
		}
		return *c.Value
	}
	d := steps["describe_topic"]
	if d.Count < 30 || val(d, "segment.bytes") != "1048576" || d.Configs["segment.bytes"].Source != int(kmsg.ConfigSourceDynamicTopicConfig) ||
		val(d, "cleanup.policy") != "delete" || d.Configs["cleanup.policy"].Source != int(kmsg.ConfigSourceDefaultConfig) {
		t.Fatalf("describe topic: %+v", d)
	}
	if e := steps["alter_topic"].Error; e != "NONE" {
		t.Fatalf("alter: %s", e)
	}
	// AlterConfigs replaces: segment.bytes goes back to its default.
	d = steps["describe_after_alter"]
	if val(d, "retention.ms") != "12345" || d.Configs["retention.ms"].Source != int(kmsg.ConfigSourceDynamicTopicConfig) ||
		d.Configs["segment.bytes"].Source != int(kmsg.ConfigSourceDefaultConfig) {
		t.Fatalf("describe after alter: %+v", d)
	}
	if e := steps["alter_bad"].Error; e != "INVALID_CONFIG" {
		t.Fatalf("bad alter: %s", e)
	}
	b := steps["describe_broker"]
	if val(b, "num.partitions") != "2" || !b.Configs["num.partitions"].ReadOnly || b.Configs["log.retention.ms"].ReadOnly {
		t.Fatalf("describe broker: %+v", b)
	}
	if e := steps["create_partitions"].Error; e != "NONE" {
		t.Fatalf("create partitions: %s", e)
	}
	if e := steps["shrink_partitions"].Error; e != "INVALID_PARTITIONS" {
		t.Fatalf("shrink partitions: %s", e)
	}
	if p := steps["metadata"].Partitions; p != 3 {
		t.Fatalf("librdkafka sees %d partitions, want 3", p)
	}
	if n.partition("rdk", 2) == nil {
		t.Fatal("partition 2 not hosted")
	}
}
