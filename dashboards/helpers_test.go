package dashboards

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"testing/fstest"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/strata-io/strata/internal/testutil"
)

// needTool returns the path of an external program; when it is missing
// the test skips, or fails under CI=true (.ci/run installs it).
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s missing under CI (.ci/run installs it): %v", name, err)
		}
		t.Skipf("%s not available: %v", name, err)
	}
	return p
}

// runTool runs a program with a deadline and returns its combined output.
func runTool(t *testing.T, timeout time.Duration, dir, name string, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	return cmd.CombinedOutput()
}

// freePort returns a loopback port free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// promServer is a Prometheus process started by a test.
type promServer struct {
	URL string // http://127.0.0.1:port
	log string // its stderr
}

// startPrometheus runs Prometheus on dashboards/prometheus.yml with the
// strata job's target replaced by target, the scrape and rule evaluation
// intervals set to interval, and alerts.yml loaded from this directory. It
// stops (SIGKILL, then reaped) when the test ends, and its log is printed
// if the test failed.
func startPrometheus(t *testing.T, bin, target string, interval time.Duration) *promServer {
	t.Helper()
	dir := t.TempDir()
	raw, err := os.ReadFile("prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	global, _ := cfg["global"].(map[string]any)
	if global == nil {
		t.Fatal("prometheus.yml has no global section")
	}
	global["scrape_interval"] = interval.String()
	global["evaluation_interval"] = interval.String()
	rules, _ := cfg["rule_files"].([]any)
	if len(rules) != 1 || rules[0] != "alerts.yml" {
		t.Fatalf("prometheus.yml rule_files = %v, want [alerts.yml]", cfg["rule_files"])
	}
	abs, err := filepath.Abs("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	cfg["rule_files"] = []any{abs}
	found := false
	jobs, _ := cfg["scrape_configs"].([]any)
	for _, j := range jobs {
		job, _ := j.(map[string]any)
		if job["job_name"] != "strata" {
			continue
		}
		found = true
		job["static_configs"] = []any{map[string]any{"targets": []any{target}}}
	}
	if !found {
		t.Fatal(`prometheus.yml has no job_name: strata (the alerts select job="strata")`)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, out, 0o644); err != nil {
		t.Fatal(err)
	}

	port := freePort(t)
	s := &promServer{URL: "http://127.0.0.1:" + strconv.Itoa(port), log: filepath.Join(dir, "prometheus.log")}
	logf, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:"+strconv.Itoa(port),
		"--log.level=info",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	dieWithTest(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(s.log)
			t.Logf("prometheus log:\n%s", lastLines(b, 40))
		}
	})
	err = testutil.Within(20*time.Second, func() error {
		resp, err := http.Get(s.URL + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return errors.New(resp.Status)
		}
		return nil
	})
	if err != nil {
		b, _ := os.ReadFile(s.log)
		t.Fatalf("prometheus not ready within 20s: %v\n%s", err, lastLines(b, 40))
	}
	return s
}

func lastLines(b []byte, n int) []byte {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return bytes.Join(lines, []byte("\n"))
}

// promResult is the data of an instant query's answer.
type promResult struct {
	ResultType string            `json:"resultType"`
	Result     []json.RawMessage `json:"result"` // vector/matrix: series; scalar/string: [t, v] pairs
}

// query runs an instant query; an error is a transport failure or a
// Prometheus error (bad_data for a parse error, execution errors).
func (s *promServer) query(ctx context.Context, q string) (promResult, error) {
	var body struct {
		Status    string     `json:"status"`
		ErrorType string     `json:"errorType"`
		Error     string     `json:"error"`
		Data      promResult `json:"data"`
	}
	if err := s.get(ctx, "/api/v1/query?query="+url.QueryEscape(q), &body); err != nil {
		return promResult{}, err
	}
	if body.Status != "success" {
		return promResult{}, fmt.Errorf("%s: %s", body.ErrorType, body.Error)
	}
	return body.Data, nil
}

// nonEmpty reports whether an instant query returned data.
func (r promResult) nonEmpty() bool {
	switch r.ResultType {
	case "scalar", "string":
		return true
	}
	return len(r.Result) > 0
}

func (s *promServer) get(ctx context.Context, path string, into any) error {
	req, err := http.NewRequestWithContext(ctx, "GET", s.URL+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		return fmt.Errorf("GET %s: %s: %w", path, resp.Status, err)
	}
	return nil
}

// scalarOf returns the value of a one-sample vector query, or -1 if the
// answer is empty.
func (s *promServer) scalarOf(ctx context.Context, q string) (float64, error) {
	r, err := s.query(ctx, q)
	if err != nil {
		return 0, err
	}
	if len(r.Result) == 0 {
		return -1, nil
	}
	var sample struct {
		Value [2]any `json:"value"`
	}
	if err := json.Unmarshal(r.Result[0], &sample); err != nil {
		return 0, err
	}
	str, _ := sample.Value[1].(string)
	return strconv.ParseFloat(str, 64)
}

// rulesEvaluated returns when Prometheus last evaluated its rules: the
// oldest last evaluation of any rule (zero if one was never evaluated).
func (s *promServer) rulesEvaluated(ctx context.Context) (time.Time, error) {
	var body struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					LastEvaluation time.Time `json:"lastEvaluation"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := s.get(ctx, "/api/v1/rules", &body); err != nil {
		return time.Time{}, err
	}
	var oldest time.Time
	first := true
	for _, g := range body.Data.Groups {
		for _, r := range g.Rules {
			if first || r.LastEvaluation.Before(oldest) {
				oldest, first = r.LastEvaluation, false
			}
		}
	}
	return oldest, nil
}

// mapFS is an in-memory fs.FS of the given files, for extraction tests.
func mapFS(files map[string]string) fstest.MapFS {
	out := fstest.MapFS{}
	for k, v := range files {
		out[k] = &fstest.MapFile{Data: []byte(v)}
	}
	return out
}
