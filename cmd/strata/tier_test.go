package main

import (
	"net"
	"net/http"
	"strings"
	"testing"
)

// tierRun runs `strata tier ...` and returns exit code, stdout, stderr.
func tierRun(args ...string) (int, string, string) {
	var out, errb strings.Builder
	code := run(append([]string{"tier"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// TestTierCommandsAgainstAFakeAdmin: the table and JSON outputs of status
// and restore, and the error paths (flags, an endpoint's error, an
// unreachable listener), against a canned admin listener.
func TestTierCommandsAgainstAFakeAdmin(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/tier/status", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("topic") == "nope" {
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"error":"remote storage is disabled on this node"}`))
			return
		}
		w.Write([]byte(`[{"Topic":"orders","Index":1,"LogStart":0,"LocalStart":900,"LogEnd":1000,"RemoteStart":0,"RemoteEnd":899,
			"LocalBytes":4096,"RemoteBytes":90000,"RemoteSegments":9,"UploadLagBytes":512,"UploadLagSegments":1}]`))
	})
	mux.HandleFunc("/v1/tier/restore", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Query().Get("topic") != "orders" || r.URL.Query()["config"][0] != "retention.ms=-1" {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error":"unexpected request"}`))
			return
		}
		w.Write([]byte(`{"topic":"orders","topicId":"abc","created":true,"partitions":[{"partition":0,"segments":3,"registered":3,"logStart":0,"logEnd":300}]}`))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	admin := ln.Addr().String()

	code, out, _ := tierRun("status", "--admin", admin)
	if code != 0 || !strings.Contains(out, "REMOTE-START") || !strings.Contains(out, "orders") || !strings.Contains(out, "90000") {
		t.Fatalf("status table: %d\n%s", code, out)
	}
	if code, out, _ = tierRun("status", "--admin", admin, "--format", "json"); code != 0 || !strings.Contains(out, `"RemoteSegments":9`) {
		t.Fatalf("status json: %d\n%s", code, out)
	}
	if code, _, errs := tierRun("status", "--admin", admin, "--topic", "nope"); code != 1 || !strings.Contains(errs, "remote storage is disabled") {
		t.Fatalf("status error: %d %s", code, errs)
	}
	if code, out, _ = tierRun("restore", "--admin", admin, "--topic", "orders", "--config", "retention.ms=-1"); code != 0 ||
		!strings.Contains(out, `restored created topic "orders"`) || !strings.Contains(out, "300") {
		t.Fatalf("restore: %d\n%s", code, out)
	}
	if code, _, errs := tierRun("restore", "--admin", admin); code != 2 || !strings.Contains(errs, "--topic is required") {
		t.Fatalf("restore without a topic: %d %s", code, errs)
	}
	if code, _, _ := tierRun("status", "--format", "xml"); code != 2 {
		t.Fatalf("bad format: exit %d", code)
	}
	if code, _, _ := tierRun("restore", "--topic", "t", "--config", "novalue", "--admin", admin); code != 2 {
		t.Fatalf("bad --config: exit %d", code)
	}
	srv.Close()
	if code, _, errs := tierRun("status", "--admin", admin); code != 1 || !strings.Contains(errs, "cannot reach the admin listener") || strings.Count(errs, "\n") != 1 {
		t.Fatalf("unreachable admin: %d %q", code, errs)
	}
}
