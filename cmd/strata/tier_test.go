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
		w.Write([]byte(`[{"topic":"orders","topic_id":"AAECAwQFBgcICQoLDA0ODw","partition":1,"log_start":0,"local_start":900,"log_end":1000,
			"remote_start":0,"remote_end":899,"local_bytes":4096,"remote_bytes":90000,"remote_segments":9,"upload_lag_bytes":512,
			"upload_lag_segments":1,"missing_segments":[{"segment_id":"s","base_offset":100,"end_offset":199,"key":"orders-x/1/00000000000000000100-s.log","error":"not found"}]}]`))
	})
	mux.HandleFunc("/v1/tier/restore", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("all") == "true" {
			w.Write([]byte(`{"restored":[{"topic":"orders","topic_id":"AAECAwQFBgcICQoLDA0ODw","created":true,"partitions":[]}],
				"skipped":[{"topic":"kept","topic_id":"x","reason":"present","detail":"the cluster has it"}],
				"failed":[{"topic":"bad","topic_id":"y","reason":"tiering: remote segments missing"}]}`))
			return
		}
		if r.Method != http.MethodPost || r.URL.Query().Get("topic") != "orders" || r.URL.Query()["config"][0] != "retention.ms=-1" {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error":"unexpected request"}`))
			return
		}
		w.Write([]byte(`{"topic":"orders","topic_id":"AAECAwQFBgcICQoLDA0ODw","created":true,"partitions":[{"partition":0,"segments":3,"registered":3,"log_start":0,"log_end":300}]}`))
	})
	mux.HandleFunc("/v1/tier/list", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`[{"topic":"orders","topic_id":"AAECAwQFBgcICQoLDA0ODw","state":"lost","updated_at":5,
			"partitions":[{"partition":0,"segments":3,"objects":16,"bytes":123456,"log_start":0,"end_offset":299,"manifest":true}]}]`))
	})
	mux.HandleFunc("/v1/tier/verify", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"partitions":2,"segments":7,"problems":[{"topic":"orders","topic_id":"x","partition":1,"segment_id":"s",
			"base_offset":100,"end_offset":199,"key":"orders-x/1/00000000000000000100-s.log","problem":"missing"}]}`))
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
	if !strings.Contains(out, "missing: orders partition 1 offsets [100, 199]") {
		t.Fatalf("status table does not show the missing segment:\n%s", out)
	}
	if code, out, _ = tierRun("status", "--admin", admin, "--format", "json"); code != 0 || !strings.Contains(out, `"remote_segments": 9`) ||
		!strings.Contains(out, `"topic_id": "AAECAwQFBgcICQoLDA0ODw"`) || strings.Contains(out, "RemoteSegments") {
		t.Fatalf("status json: %d\n%s", code, out)
	}
	if code, out, _ = tierRun("list", "--admin", admin); code != 0 || !strings.Contains(out, "AAECAwQFBgcICQoLDA0ODw") ||
		!strings.Contains(out, "lost") || !strings.Contains(out, "123456") || !strings.Contains(out, "299") {
		t.Fatalf("list: %d\n%s", code, out)
	}
	if code, out, _ = tierRun("verify", "--admin", admin); code != 1 || !strings.Contains(out, "1 problems") || !strings.Contains(out, "missing") {
		t.Fatalf("verify with a problem: exit %d, want 1\n%s", code, out)
	}
	if code, _, errs := tierRun("status", "--admin", admin, "--topic", "nope"); code != 1 || !strings.Contains(errs, "remote storage is disabled") {
		t.Fatalf("status error: %d %s", code, errs)
	}
	if code, out, _ = tierRun("restore", "--admin", admin, "--topic", "orders", "--config", "retention.ms=-1"); code != 0 ||
		!strings.Contains(out, `restored created topic "orders"`) || !strings.Contains(out, "300") {
		t.Fatalf("restore: %d\n%s", code, out)
	}
	if code, out, errs := tierRun("restore", "--all", "--admin", admin); code != 1 || !strings.Contains(out, `restored created topic "orders"`) ||
		!strings.Contains(out, `skipped "kept" (id x): present: the cluster has it`) || !strings.Contains(errs, `"bad"`) {
		t.Fatalf("restore --all with a failure: exit %d, want 1\n%s%s", code, out, errs)
	}
	if code, _, _ := tierRun("restore", "--all", "--topic", "x", "--admin", admin); code != 2 {
		t.Fatalf("restore --all --topic: exit %d, want 2", code)
	}
	if code, _, errs := tierRun("restore", "--admin", admin); code != 2 || !strings.Contains(errs, "--topic or --all is required") {
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
