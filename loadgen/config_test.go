package loadgen

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseWorkloadUnknownFieldIsAnError(t *testing.T) {
	_, err := ParseWorkload([]byte("topic: a\nparititons: 3\n"))
	if err == nil || !strings.Contains(err.Error(), "parititons") {
		t.Fatalf("err %v, want one naming the unknown field", err)
	}
	if _, err := ParseWorkload([]byte("recordSize:\n  kind: fixed\n  bytes: 10\n")); err == nil {
		t.Fatal("unknown nested field accepted")
	}
	if _, err := ParseWorkload([]byte("rate: fast\n")); err == nil {
		t.Fatal("a string rate accepted")
	}
}

func TestWorkloadDefaults(t *testing.T) {
	w, err := ParseWorkload(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Defaults(); err != nil {
		t.Fatal(err)
	}
	if w.Topic != DefaultTopic || w.Topics != 1 || w.Partitions != 6 || w.ReplicationFactor != -1 || !*w.CreateTopics ||
		w.RecordSize != (SizeDist{Kind: "fixed", Size: "1KiB"}) || w.Keys != "none" || w.KeySpace != 10000 || w.ZipfS != 1.1 ||
		w.Compression != "none" || w.Acks != "all" || !*w.Idempotent || w.Linger != "5ms" || w.BatchBytes != "976KiB" ||
		w.Producers != 1 || w.Consumers != 0 || w.Groups != 0 || w.ConsumeFrom != "latest" || w.Rate != 0 ||
		w.Duration != "60s" || w.Warmup != "5s" || w.Window != DefaultWindow {
		t.Fatalf("defaults: %+v", w)
	}
	w = Workload{Consumers: 2, Acks: "1"}
	if err := w.Defaults(); err != nil {
		t.Fatal(err)
	}
	if w.Groups != 1 || *w.Idempotent {
		t.Fatalf("consumers imply one group and acks=1 a non-idempotent producer: %+v", w)
	}
}

func TestWorkloadValidation(t *testing.T) {
	yes := true
	for _, c := range []struct {
		w    Workload
		want string
	}{
		{Workload{Keys: "hash"}, "keys"},
		{Workload{Compression: "brotli"}, "compression"},
		{Workload{Acks: "2"}, "acks"},
		{Workload{Acks: "1", Idempotent: &yes}, "idempotent"},
		{Workload{Rate: -1}, "rate"},
		{Workload{Duration: "forever"}, "duration"},
		{Workload{BatchBytes: "3 bananas"}, "batchBytes"},
		{Workload{ConsumeFrom: "middle"}, "consumeFrom"},
		{Workload{Scenario: "fill"}, "fillBytes"},
		{Workload{Scenario: "catch-up", FillBytes: "1MiB"}, "fillBytes"},
		{Workload{RecordSize: SizeDist{Kind: "fixed", Size: "2"}}, "recordSize"},
		{Workload{ZipfS: 0.5}, "zipfS"},
	} {
		err := c.w.Defaults()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want one naming %s", c.w, err, c.want)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"512": 512, "512B": 512, "1KiB": 1024, "1KB": 1000, "1.5MiB": 3 << 19, "2GiB": 2 << 30, " 3 MB ": 3e6} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "KiB", "-1", "1XB", "1e400"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}

// TestShippedWorkloads: every file in workloads/ parses strictly, passes
// validation, is byte-for-byte the preset the scenario shortcut runs, and
// every preset has its file.
func TestShippedWorkloads(t *testing.T) {
	files, err := filepath.Glob("../workloads/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no shipped workloads: %v", err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		seen[name] = true
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if presets[name] != string(b) {
			t.Errorf("%s differs from the preset in presets.go: keep them equal", f)
		}
		w, err := LoadWorkload(f)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := Preset(name)
		if !reflect.DeepEqual(w, p) {
			t.Errorf("%s: file and preset parse differently", name)
		}
		if w.Scenario != name {
			t.Errorf("%s: scenario %q, want the file's name", f, w.Scenario)
		}
		if err := w.Defaults(); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, s := range Scenarios() {
		if !seen[s] {
			t.Errorf("scenario %s has no workloads/%s.yaml", s, s)
		}
	}
	if len(presets) != len(Scenarios()) {
		t.Errorf("%d presets, %d scenarios", len(presets), len(Scenarios()))
	}
}
