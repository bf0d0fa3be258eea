package loadgen

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// state lists the cluster's topics and its loadgen consumer groups.
func state(t *testing.T, addr string) (topics, groups []string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ts, err := adm.ListTopics(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	topics = ts.Names()
	gs, err := adm.ListGroups(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs.Groups() {
		if strings.HasPrefix(g, "loadgen-") {
			groups = append(groups, g)
		}
	}
	return topics, groups
}

// TestRunRemovesWhatItCreated: a run deletes the topics it created and
// its consumer groups at the end; a topic that existed before the run is
// left alone, and --keep (Options.Keep) keeps everything.
func TestRunRemovesWhatItCreated(t *testing.T) {
	c, addr, err := StartKfake("127.0.0.1:0", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	run := func(topic string, keep bool) *Result {
		w := shortWorkload(topic, 500)
		w.Duration = "1s"
		res, err := Run(testCtx(t), Options{Brokers: []string{addr}, Workload: w, Keep: keep})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	res := run("gone", false)
	topics, groups := state(t, addr)
	t.Logf("after the default run: topics %v, groups %v, notes %v", topics, groups, res.Notes)
	if slices.Contains(topics, "gone") || len(groups) != 0 {
		t.Fatalf("left behind topics %v, groups %v", topics, groups)
	}

	res = run("kept", true)
	topics, groups = state(t, addr)
	if !slices.Contains(topics, "kept") || len(groups) != 1 {
		t.Fatalf("--keep: topics %v, groups %v (notes %v)", topics, groups, res.Notes)
	}

	// "kept" exists now: the next run uses it and must not delete it, but
	// its own group goes.
	run("kept", false)
	topics, groups2 := state(t, addr)
	if !slices.Contains(topics, "kept") || !slices.Equal(groups2, groups) {
		t.Fatalf("run on an existing topic: topics %v, groups %v (before %v)", topics, groups2, groups)
	}
}
