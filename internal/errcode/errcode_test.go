package errcode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

var errGone = errors.New("gone")

func TestMappingTable(t *testing.T) {
	m := Mapping{{Err: context.DeadlineExceeded, Code: kerr.RequestTimedOut}, {Err: errGone, Code: kerr.NotLeaderForPartition}}
	for _, c := range []struct {
		name          string
		err           error
		shared, layer int16
		sharedName    string
	}{
		{"nil", nil, 0, 0, "NONE"},
		{"kerr", kerr.TopicAlreadyExists, 36, 36, "TOPIC_ALREADY_EXISTS"},
		{"wrapped kerr", fmt.Errorf("x: %w", kerr.FencedLeaderEpoch), 74, 74, "FENCED_LEADER_EPOCH"},
		{"first kerr in the chain", fmt.Errorf("%w: %w", kerr.InvalidRequest, kerr.InvalidConfig), 42, 42, "INVALID_REQUEST"},
		{"kerr before a sentinel", fmt.Errorf("%w (%w)", kerr.NotEnoughReplicas, context.DeadlineExceeded), 19, 19, "NOT_ENOUGH_REPLICAS"},
		{"sentinel", context.DeadlineExceeded, -1, 7, "UNKNOWN_SERVER_ERROR"},
		{"wrapped sentinel", fmt.Errorf("x: %w", errGone), -1, 6, "UNKNOWN_SERVER_ERROR"},
		{"sentinels in order", errors.Join(errGone, context.DeadlineExceeded), -1, 7, "UNKNOWN_SERVER_ERROR"},
		{"unknown server error", kerr.UnknownServerError, -1, -1, "UNKNOWN_SERVER_ERROR"},
		{"plain", io.EOF, -1, -1, "UNKNOWN_SERVER_ERROR"},
	} {
		if got := Code(c.err); got != c.shared {
			t.Errorf("%s: Code = %d, want %d", c.name, got, c.shared)
		}
		if got := Name(c.err); got != c.sharedName {
			t.Errorf("%s: Name = %s, want %s", c.name, got, c.sharedName)
		}
		if got := m.Code(c.err); got != c.layer {
			t.Errorf("%s: Mapping.Code = %d, want %d", c.name, got, c.layer)
		}
		if ke := m.Error(c.err); (ke == nil) != (c.err == nil) || (ke != nil && ke.Code != c.layer) {
			t.Errorf("%s: Mapping.Error = %v, want code %d", c.name, ke, c.layer)
		}
	}
}

// TestLeafDeps: the mapping is shared by broker, group and controller, so
// it imports nothing of Strata (no cycle, no layer leaking into another).
func TestLeafDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if !strings.Contains(string(out), "github.com/twmb/franz-go/pkg/kerr") {
		t.Fatalf("go list -deps gave an implausible list: %q", out)
	}
	for _, d := range strings.Fields(string(out)) {
		if strings.HasPrefix(d, "github.com/strata-io/strata/") && d != "github.com/strata-io/strata/internal/errcode" {
			t.Errorf("errcode imports %s", d)
		}
	}
}
