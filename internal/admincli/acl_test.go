package admincli

import (
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/strata-io/strata/broker"
)

// TestACLCommands: against a node without an authorizer `acl list`
// reports SECURITY_DISABLED; against one with the StandardAuthorizer
// `acl create` adds bindings, `acl list` shows them (with --principal and
// --pattern match filters), `acl delete` removes the matching ones; usage
// errors exit 2.
func TestACLCommands(t *testing.T) {
	plain := testNode(t)
	if r := cliAt(t, plain.Addr(), "", "acl", "list"); r.code != ExitFail || !strings.Contains(r.stderr, "SECURITY_DISABLED") {
		t.Fatalf("acl list without an authorizer: %+v", r)
	}

	props := map[string]string{
		"listeners":                             "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"controller.quorum.voters":              "1@127.0.0.1:0",
		"log.dirs":                              t.TempDir(),
		"admin.listener":                        "",
		"controller.quorum.election.timeout.ms": "300",
		"authorizer.class.name":                 "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users":                           "User:ANONYMOUS",
	}
	cfg, err := broker.ParseConfig(broker.MergeProperties(props, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	n, err := broker.Open(broker.Options{Config: cfg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), StartTimeout: testWait})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	addr := n.Addr()

	for _, args := range [][]string{
		{"create", "--principal", "User:alice", "--operation", "read,describe", "--topic", "orders"},
		{"create", "--principal", "User:bob", "--operation", "write", "--topic", "ord", "--pattern", "prefixed", "--deny", "--host", "10.0.0.1"},
		{"create", "--principal", "User:alice", "--operation", "read", "--group", "g"},
		{"create", "--principal", "User:admin", "--operation", "alter", "--cluster"},
	} {
		if r := cliAt(t, addr, "", "acl", args...); r.code != ExitOK {
			t.Fatalf("acl %q: %+v", args, r)
		}
	}
	list := func(args ...string) []aclRow {
		t.Helper()
		r := cliAt(t, addr, "", "acl", append([]string{"list", "--format", "json"}, args...)...)
		var rows []aclRow
		if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &rows) != nil {
			t.Fatalf("acl list %q: %+v", args, r)
		}
		return rows
	}
	if rows := list(); len(rows) != 5 {
		t.Fatalf("acl list: %d bindings, want 5: %+v", len(rows), rows)
	}
	if rows := list("--principal", "User:alice"); len(rows) != 3 {
		t.Fatalf("acl list --principal User:alice: %+v", rows)
	}
	rows := list("--topic", "orders", "--pattern", "match")
	if len(rows) != 3 {
		t.Fatalf("acl list --topic orders --pattern match: %+v, want alice's two and bob's prefixed deny", rows)
	}
	for _, r := range rows {
		if r.Principal == "User:bob" && (r.Pattern != "PREFIXED" || r.Permission != "DENY" || r.Host != "10.0.0.1" || r.Name != "ord") {
			t.Fatalf("bob's binding: %+v", r)
		}
	}
	r := cliAt(t, addr, "", "acl", "delete", "--principal", "User:alice", "--format", "json")
	var deleted []aclRow
	if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &deleted) != nil || len(deleted) != 3 {
		t.Fatalf("acl delete --principal User:alice: %+v", r)
	}
	if rows := list(); len(rows) != 2 {
		t.Fatalf("after delete: %+v", rows)
	}
	for _, args := range [][]string{
		{"create", "--operation", "read", "--topic", "t"},                         // no principal
		{"create", "--principal", "User:a", "--operation", "read"},                // no resource
		{"create", "--principal", "User:a", "--operation", "fly", "--topic", "t"}, // unknown operation
		{"create", "--principal", "User:a", "--operation", "read", "--topic", "t", "--pattern", "match"},
		{"delete"}, // no filter
	} {
		if r := cliAt(t, addr, "", "acl", args...); r.code != ExitUsage {
			t.Errorf("acl %q: exit %d, want %d: %s", args, r.code, ExitUsage, r.stderr)
		}
	}
}
