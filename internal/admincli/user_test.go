package admincli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUserCommands: `user create` with the password from $STRATA_PASSWORD,
// from --password-file and from stdin (--password-file -), `user list`
// (table and JSON; mechanisms and iterations, never a password), `user
// delete` of every mechanism or one; refusals: no password source, bad
// iterations or mechanism (exit 2), an unknown user (exit 1,
// RESOURCE_NOT_FOUND).
func TestUserCommands(t *testing.T) {
	n := testNode(t)
	addr := n.Addr()

	if r := cliAt(t, addr, "", "user", "create", "alice"); r.code != ExitUsage || !strings.Contains(r.stderr, PasswordEnv) {
		t.Fatalf("create without a password source: %+v", r)
	}
	t.Setenv(PasswordEnv, "alice-secret")
	if r := cliAt(t, addr, "", "user", "create", "alice", "--mechanism", "scram-sha-256,SCRAM-SHA-512", "--iterations", "8192"); r.code != ExitOK ||
		strings.Count(r.stdout, "alice") != 2 || strings.Contains(r.stdout+r.stderr, "alice-secret") {
		t.Fatalf("create alice from the environment: %+v", r)
	}
	os.Unsetenv(PasswordEnv)
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("bob-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := cliAt(t, addr, "", "user", "create", "bob", "--password-file", pw); r.code != ExitOK {
		t.Fatalf("create bob from a file: %+v", r)
	}
	if r := cliAt(t, addr, "carol-secret\n", "user", "create", "carol", "--password-file", "-", "--mechanism", "SCRAM-SHA-512", "--iterations", "16384"); r.code != ExitOK {
		t.Fatalf("create carol from stdin: %+v", r)
	}

	r := cliAt(t, addr, "", "user", "list", "--format", "json")
	if r.code != ExitOK {
		t.Fatalf("list: %+v", r)
	}
	var rows []userRow
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
		t.Fatalf("list json %q: %v", r.stdout, err)
	}
	want := []userRow{{"alice", "SCRAM-SHA-256", 8192, ""}, {"alice", "SCRAM-SHA-512", 8192, ""}, {"bob", "SCRAM-SHA-256", 4096, ""}, {"carol", "SCRAM-SHA-512", 16384, ""}}
	if len(rows) != len(want) {
		t.Fatalf("list: %+v, want %+v", rows, want)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Fatalf("list row %d: %+v, want %+v", i, rows[i], want[i])
		}
	}
	if r := cliAt(t, addr, "", "user", "list", "bob"); r.code != ExitOK || !strings.Contains(r.stdout, "SCRAM-SHA-256") || strings.Contains(r.stdout, "alice") {
		t.Fatalf("list bob: %+v", r)
	}

	if r := cliAt(t, addr, "", "user", "delete", "alice", "--mechanism", "SCRAM-SHA-512"); r.code != ExitOK {
		t.Fatalf("delete alice's SHA-512: %+v", r)
	}
	if r := cliAt(t, addr, "", "user", "delete", "bob"); r.code != ExitOK {
		t.Fatalf("delete bob: %+v", r)
	}
	r = cliAt(t, addr, "", "user", "list", "--format", "json")
	rows = nil
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 2 || rows[0] != (userRow{"alice", "SCRAM-SHA-256", 8192, ""}) || rows[1].User != "carol" {
		t.Fatalf("list after deletes: %+v %v", rows, err)
	}
	if r := cliAt(t, addr, "", "user", "delete", "bob"); r.code != ExitFail || !strings.Contains(r.stderr, "RESOURCE_NOT_FOUND") {
		t.Fatalf("delete of an absent user: %+v", r)
	}
	if r := cliAt(t, addr, "", "user", "list", "nobody"); r.code != ExitFail || !strings.Contains(r.stdout, "RESOURCE_NOT_FOUND") {
		t.Fatalf("list of an absent user: %+v", r)
	}
	for _, args := range [][]string{
		{"create", "x", "--password-file", pw, "--iterations", "100"},
		{"create", "x", "--password-file", pw, "--mechanism", "SCRAM-SHA-1"},
		{"create", "--password-file", pw},
		{"delete"},
		{"create", "x", "--password", "inline"},
	} {
		if r := cliAt(t, addr, "", "user", args...); r.code != ExitUsage {
			t.Errorf("user %q: %+v, want exit %d", args, r, ExitUsage)
		}
	}
}
