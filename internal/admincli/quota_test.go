package admincli

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestQuotaCommands: `quota set` sets and removes quotas of user,
// client-id, user+client-id and ip entities (and their defaults),
// `quota describe` lists them with the filter flags; refused values fail
// with the broker's error; usage errors exit 2.
func TestQuotaCommands(t *testing.T) {
	n := testNode(t)
	addr := n.Addr()
	for _, args := range [][]string{
		{"set", "--user", "qalice", "--add", "producer_byte_rate=1048576", "--add", "request_percentage=12.5"},
		{"set", "--user", "qalice", "--client-default", "--add", "consumer_byte_rate=2048"},
		{"set", "--client-id", "qapp", "--add", "producer_byte_rate=4096"},
		{"set", "--ip", "10.9.9.9", "--add", "connection_creation_rate=5"},
	} {
		if r := cliAt(t, addr, "", "quota", args...); r.code != ExitOK {
			t.Fatalf("quota %v: %+v", args, r)
		}
	}
	r := cliAt(t, addr, "", "quota", "describe", "--user", "qalice", "--format", "json")
	var rows []quotaRow
	if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &rows) != nil {
		t.Fatalf("describe: %+v", r)
	}
	want := map[quotaRow]bool{
		{"user=qalice", "producer_byte_rate", 1048576}:                  true,
		{"user=qalice", "request_percentage", 12.5}:                     true,
		{"user=qalice,client-id=<default>", "consumer_byte_rate", 2048}: true,
	}
	if len(rows) != len(want) {
		t.Fatalf("describe --user qalice: %+v", rows)
	}
	for _, row := range rows {
		if !want[row] {
			t.Fatalf("describe --user qalice: unexpected %+v in %+v", row, rows)
		}
	}
	r = cliAt(t, addr, "", "quota", "describe", "--user", "qalice", "--strict")
	if r.code != ExitOK || !strings.Contains(r.stdout, "request_percentage") || strings.Contains(r.stdout, "consumer_byte_rate") {
		t.Fatalf("describe --strict: %+v", r)
	}
	r = cliAt(t, addr, "", "quota", "describe", "--any-ip")
	if r.code != ExitOK || !strings.Contains(r.stdout, "ip=10.9.9.9") || strings.Contains(r.stdout, "qalice") {
		t.Fatalf("describe --any-ip: %+v", r)
	}

	if r := cliAt(t, addr, "", "quota", "set", "--user", "qalice", "--delete", "producer_byte_rate", "--delete", "request_percentage"); r.code != ExitOK {
		t.Fatalf("delete: %+v", r)
	}
	r = cliAt(t, addr, "", "quota", "describe", "--user", "qalice", "--strict")
	if r.code != ExitOK || strings.Contains(r.stdout, "qalice") {
		t.Fatalf("after delete: %+v", r)
	}

	// The broker's validation: a fraction for a byte rate, an ip key on a user.
	for _, args := range [][]string{
		{"set", "--user", "qbob", "--add", "producer_byte_rate=1.5"},
		{"set", "--user", "qbob", "--add", "connection_creation_rate=1"},
	} {
		if r := cliAt(t, addr, "", "quota", args...); r.code != ExitFail || !strings.Contains(r.stderr, "INVALID_REQUEST") {
			t.Fatalf("quota %v: %+v, want INVALID_REQUEST", args, r)
		}
	}
	for _, args := range [][]string{
		{"set", "--add", "producer_byte_rate=1"},
		{"set", "--user", "a", "--user-default", "--add", "producer_byte_rate=1"},
		{"set", "--user", "a"},
		{"set", "--user", "a", "--add", "producer_byte_rate=x"},
		{"describe", "--user", "a", "--any-user"},
	} {
		if r := cliAt(t, addr, "", "quota", args...); r.code != ExitUsage {
			t.Fatalf("quota %v: %+v, want a usage error", args, r)
		}
	}
}
