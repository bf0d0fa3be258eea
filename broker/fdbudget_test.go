package broker

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/fdlimit"
)

// TestCreateTopicsRefusedPastTheOpenFileBudget: with an open-file limit
// that allows 47 partitions, a CreateTopics or CreatePartitions that would
// take the broker past them is refused with POLICY_VIOLATION and a message
// naming the limit, and nothing is created (before: the controller
// committed the topic and the logs failed to open with "too many open
// files"); creations that fit still succeed, and ValidateOnly answers the
// same.
func TestCreateTopicsRefusedPastTheOpenFileBudget(t *testing.T) {
	allowed := fdlimit.Plan(256).Partitions
	n, err := Open(Options{Config: testConfig(t, t.TempDir(), nil), Logger: testLogger(), StartTimeout: testWait, FileLimit: 256})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	adm := newAdmin(t, n)
	ctx := testCtx(t)

	wantRefused := func(what string, err error, msg string) {
		t.Helper()
		if !errors.Is(err, kerr.PolicyViolation) || !strings.Contains(msg, "open-file limit of 256") {
			t.Fatalf("%s: %v %q, want POLICY_VIOLATION naming the open-file limit", what, err, msg)
		}
	}
	vr, err := adm.ValidateCreateTopics(ctx, 1000, 1, nil, "big")
	if err != nil {
		t.Fatal(err)
	}
	wantRefused("CreateTopics of 1,000 partitions, validate only", vr["big"].Err, vr["big"].ErrMessage)
	resp, _ := adm.CreateTopic(ctx, 1000, 1, nil, "big") // the error is resp.Err
	wantRefused("CreateTopics of 1,000 partitions", resp.Err, resp.ErrMessage)
	createTopic(t, adm, "small", 10, nil)
	// 10 + 37 fit, one more does not.
	resp, _ = adm.CreateTopic(ctx, int32(allowed-10+1), 1, nil, "over")
	wantRefused("CreateTopics one partition over", resp.Err, resp.ErrMessage)
	cp, err := adm.UpdatePartitions(ctx, allowed+1, "small")
	if err != nil {
		t.Fatal(err)
	}
	wantRefused("CreatePartitions one over", cp["small"].Err, cp["small"].ErrMessage)

	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has("big") || topics.Has("over") || len(topics["small"].Partitions) != 10 {
		t.Fatalf("topics after refusals: %v", topics.Names())
	}
	if got := len(n.store.Logs()); got != 10 {
		t.Fatalf("%d logs open, want 10", got)
	}
	// What fits is still created.
	cp, err = adm.UpdatePartitions(ctx, allowed, "small")
	if err != nil || cp["small"].Err != nil {
		t.Fatalf("CreatePartitions to %d (fits): %v %v", allowed, err, cp["small"].Err)
	}
	if got := len(n.store.Logs()); got != allowed {
		t.Fatalf("%d logs open, want %d", got, allowed)
	}
}
