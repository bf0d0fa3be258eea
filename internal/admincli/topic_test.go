package admincli

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestTopicCreateListDescribe creates a topic with configs through the
// CLI, then checks list and describe in both formats against what kadm
// sees and what was produced.
func TestTopicCreateListDescribe(t *testing.T) {
	r := mustOK(t, "", "topic", "create", "tcld", "-p", "3", "-c", "retention.ms=3600000", "-c", "cleanup.policy=compact")
	if !tableRow(r.stdout, "TOPIC", "ID", "PARTITIONS", "REPLICAS") || !strings.Contains(r.stdout, "tcld") {
		t.Fatalf("create table: %s", r.stdout)
	}
	adm := newAdmin(t)
	td, err := adm.ListTopics(testCtx(t), "tcld")
	if err != nil || td["tcld"].Err != nil || len(td["tcld"].Partitions) != 3 {
		t.Fatalf("kadm sees %v %v", td, err)
	}
	if id := topicID(td["tcld"].ID); len(id) != 22 || strings.ContainsAny(id, "+/=") {
		t.Errorf("topic id %q is not Kafka's form (URL-safe base64, no padding)", id)
	}
	if !tableRow(r.stdout, "tcld", topicID(td["tcld"].ID), "3", "1") {
		t.Errorf("create row lacks the topic id %s: %s", td["tcld"].ID, r.stdout)
	}

	// JSON create of a second topic, flags before the name.
	r = mustOK(t, "", "topic", "create", "-p", "2", "--format", "json", "tcld-json")
	var created topicCreated
	if err := json.Unmarshal([]byte(r.stdout), &created); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if created.Topic != "tcld-json" || created.Partitions != 2 || created.ReplicationFactor != 1 || created.ID == "" {
		t.Errorf("created %+v", created)
	}

	produceN(t, "tcld", 1, 5)

	r = mustOK(t, "", "topic", "list")
	if !tableRow(r.stdout, "tcld", "3", "1", topicID(td["tcld"].ID)) || !tableRow(r.stdout, "tcld-json", "2", "1", created.ID) {
		t.Errorf("list table: %s", r.stdout)
	}
	if strings.Contains(r.stdout, "__consumer_offsets") {
		t.Errorf("internal topic listed without -i: %s", r.stdout)
	}
	r = mustOK(t, "", "topic", "list", "--format", "json")
	var listed []topicListed
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	found := 0
	for i, l := range listed {
		if i > 0 && listed[i-1].Topic >= l.Topic {
			t.Errorf("list not sorted: %q before %q", listed[i-1].Topic, l.Topic)
		}
		if l.Topic == "tcld" && l.Partitions == 3 && l.ReplicationFactor == 1 && l.ID == topicID(td["tcld"].ID) && !l.Internal {
			found++
		}
	}
	if found != 1 {
		t.Errorf("json list lacks tcld: %s", r.stdout)
	}

	r = mustOK(t, "", "topic", "describe", "tcld", "--format", "json")
	var d topicDescribed
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if d.Topic != "tcld" || d.ID != topicID(td["tcld"].ID) || len(d.Partitions) != 3 {
		t.Fatalf("describe %+v", d)
	}
	for i, p := range d.Partitions {
		wantEnd := int64(0)
		if i == 1 {
			wantEnd = 5
		}
		if p.Partition != int32(i) || p.Leader != 1 || len(p.Replicas) != 1 || p.Replicas[0] != 1 || len(p.ISR) != 1 || p.LogStartOffset != 0 || p.LogEndOffset != wantEnd || p.Error != "" {
			t.Errorf("partition %d: %+v (want end %d)", i, p, wantEnd)
		}
	}
	cfg := map[string]configDescribed{}
	for _, c := range d.Configs {
		cfg[c.Name] = c
	}
	if c := cfg["retention.ms"]; c.Value == nil || *c.Value != "3600000" || c.Source != "DYNAMIC_TOPIC_CONFIG" {
		t.Errorf("retention.ms %+v", c)
	}
	if c := cfg["cleanup.policy"]; c.Value == nil || *c.Value != "compact" || c.Source != "DYNAMIC_TOPIC_CONFIG" {
		t.Errorf("cleanup.policy %+v", c)
	}
	if c := cfg["segment.bytes"]; c.Value == nil || c.Source != "DEFAULT_CONFIG" {
		t.Errorf("segment.bytes %+v", c)
	}

	r = mustOK(t, "", "topic", "describe", "tcld")
	for _, row := range [][]string{
		{"PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "LOG-START", "LOG-END", "ERROR"},
		{"1", "1", "0", "1", "1", "0", "5", "-"},
		{"retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG"},
		{"cleanup.policy", "compact", "DYNAMIC_TOPIC_CONFIG"},
	} {
		if !tableRow(r.stdout, row...) {
			t.Errorf("describe table lacks row %q:\n%s", row, r.stdout)
		}
	}
}

// TestTopicAlterAddDelete changes configs incrementally, grows and deletes
// topics through the CLI and checks each effect with kadm.
func TestTopicAlterAddDelete(t *testing.T) {
	createTopic(t, "tad", 1)
	adm := newAdmin(t)
	configOf := func(name string) (string, string) {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(testCtx(t), "tad")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range rcs[0].Configs {
			if c.Key == name && c.Value != nil {
				return *c.Value, c.Source.String()
			}
		}
		return "", ""
	}

	r := mustOK(t, "", "topic", "alter-config", "tad", "--set", "retention.ms=1234567", "--set", "segment.ms=7654321")
	if !tableRow(r.stdout, "tad", "retention.ms", "set", "to", "1234567") {
		t.Errorf("alter table: %s", r.stdout)
	}
	if v, src := configOf("retention.ms"); v != "1234567" || src != "DYNAMIC_TOPIC_CONFIG" {
		t.Fatalf("retention.ms = %q from %s", v, src)
	}
	r = mustOK(t, "", "topic", "alter-config", "tad", "--delete", "retention.ms", "--format", "json")
	var alt configsAltered
	if err := json.Unmarshal([]byte(r.stdout), &alt); err != nil || alt.Topic != "tad" || len(alt.Deleted) != 1 || alt.Deleted[0] != "retention.ms" || len(alt.Set) != 0 {
		t.Fatalf("alter json %+v %v: %s", alt, err, r.stdout)
	}
	if _, src := configOf("retention.ms"); src == "DYNAMIC_TOPIC_CONFIG" {
		t.Errorf("retention.ms still the topic's own after --delete")
	}
	if v, _ := configOf("segment.ms"); v != "7654321" {
		t.Errorf("incremental delete touched segment.ms: %q", v)
	}
	wantFail(t, cli(t, "", "topic", "alter-config", "tad", "--set", "retention.ms=soon"), ExitFail, `alter configs of topic "tad"`, "INVALID_CONFIG")
	wantFail(t, cli(t, "", "topic", "alter-config", "tad"), ExitUsage, "nothing to change")
	wantFail(t, cli(t, "", "topic", "alter-config", "no-such-topic", "--set", "retention.ms=1"), ExitFail, "UNKNOWN_TOPIC_OR_PARTITION")

	r = mustOK(t, "", "topic", "add-partitions", "tad", "--total", "4")
	if !tableRow(r.stdout, "tad", "4") {
		t.Errorf("add-partitions table: %s", r.stdout)
	}
	td, err := adm.ListTopics(testCtx(t), "tad")
	if err != nil || len(td["tad"].Partitions) != 4 {
		t.Fatalf("after add-partitions kadm sees %v %v", td["tad"].Partitions, err)
	}
	wantFail(t, cli(t, "", "topic", "add-partitions", "tad", "--total", "2"), ExitFail, "INVALID_PARTITIONS")
	wantFail(t, cli(t, "", "topic", "add-partitions", "tad"), ExitUsage, "--total")

	createTopic(t, "tad-2", 1)
	r = mustOK(t, "", "topic", "delete", "tad", "tad-2", "--format", "json")
	var del []map[string]string
	if err := json.Unmarshal([]byte(r.stdout), &del); err != nil || len(del) != 2 || del[0]["topic"] != "tad" || del[0]["error"] != "" || del[1]["topic"] != "tad-2" {
		t.Fatalf("delete json %+v %v", del, err)
	}
	td, err = adm.ListTopics(testCtx(t))
	if err != nil || td.Has("tad") || td.Has("tad-2") {
		t.Fatalf("topics after delete: %v %v", td.Names(), err)
	}
	r = cli(t, "", "topic", "delete", "tad")
	wantFail(t, r, ExitFail, `delete topic "tad"`, "UNKNOWN_TOPIC_OR_PARTITION")
	if !tableRow(r.stdout, "TOPIC", "STATUS") || !strings.Contains(r.stdout, "FAILED: UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("delete table of a failure: %s", r.stdout)
	}
	wantFail(t, cli(t, "", "topic", "delete"), ExitUsage, "name the topics")
}

// TestTopicErrors: unknown topics, existing topics and bad values each get
// one line and the right exit code.
func TestTopicErrors(t *testing.T) {
	createTopic(t, "terr", 1)
	wantFail(t, cli(t, "", "topic", "describe", "x-missing"), ExitFail, `strata: describe topic "x-missing": UNKNOWN_TOPIC_OR_PARTITION`)
	wantFail(t, cli(t, "", "topic", "describe", "x-missing", "--format", "json"), ExitFail, "UNKNOWN_TOPIC_OR_PARTITION")
	wantFail(t, cli(t, "", "topic", "create", "terr"), ExitFail, `create topic "terr"`, "TOPIC_ALREADY_EXISTS")
	wantFail(t, cli(t, "", "topic", "create", "bad/name"), ExitFail, "INVALID_TOPIC_EXCEPTION")
	wantFail(t, cli(t, "", "topic", "create", "x", "-p", "abc"), ExitUsage, `invalid value "abc" for flag -p`)
	wantFail(t, cli(t, "", "topic", "create", "x", "-p", "0"), ExitUsage, "invalid -p 0")
	wantFail(t, cli(t, "", "topic", "create", "x", "-c", "novalue"), ExitUsage, "want key=value")
	wantFail(t, cli(t, "", "topic", "create"), ExitUsage, "want exactly one topic name")
	wantFail(t, cli(t, "", "topic", "describe", "a", "b"), ExitUsage, "want exactly one topic name")
	wantFail(t, cli(t, "", "topic", "frobnicate"), ExitUsage, `unknown action "frobnicate"`)
	wantFail(t, cli(t, "", "topic", "list", "--format", "yaml"), ExitUsage, `invalid value "yaml" for flag --format`)
	wantFail(t, cli(t, "", "topic", "list", "--timeout", "soon"), ExitUsage, `invalid value "soon" for flag -timeout`)
	wantFail(t, cli(t, "", "topic", "list", "--timeout", "0s"), ExitUsage, "--timeout")
	wantFail(t, cli(t, "", "topic", "list", "--no-such-flag"), ExitUsage, "no-such-flag")
	if r := cliAt(t, "", "", "topic"); r.code != ExitUsage || !strings.Contains(r.stderr, "actions:") {
		t.Errorf("bare topic: %v", r)
	}
	if r := cli(t, "", "topic", "create", "--help"); r.code != ExitOK || !strings.Contains(r.stdout, "-partitions") || !strings.Contains(r.stdout, "-brokers") {
		t.Errorf("topic create --help: %v", r)
	}
}

// TestTopicErrorsPrintBrokerMessageOnce: a refused create or alter-config
// prints the broker's reason, and the error code once.
func TestTopicErrorsPrintBrokerMessageOnce(t *testing.T) {
	createTopic(t, "terr", 1)
	for _, args := range [][]string{
		{"create", "terr-new", "-c", "foo=bar"},
		{"alter-config", "terr", "--set", "foo=bar"},
	} {
		r := cli(t, "", "topic", args...)
		wantFail(t, r, ExitFail, `INVALID_CONFIG: `, `unknown topic config "foo"`)
		if n := strings.Count(r.stderr, "INVALID_CONFIG"); n != 1 {
			t.Errorf("topic %v: INVALID_CONFIG printed %d times: %s", args, n, r.stderr)
		}
		if strings.Contains(r.stderr, "Configuration is invalid.") {
			t.Errorf("topic %v: the code's description is printed besides the broker's message: %s", args, r.stderr)
		}
	}
}
