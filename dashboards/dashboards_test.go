package dashboards

import (
	"encoding/json"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"time"
)

// wantDashboards are the dashboards issue 8 asks for, by file.
var wantDashboards = []string{"controller.json", "groups.json", "overview.json", "storage.json", "tiering.json"}

// TestDashboardsAreProvisionable checks the Grafana JSON model of every
// dashboard without Grafana: the five dashboards exist with distinct uids
// and titles and a current schemaVersion; every panel and target names
// the provisioned datasource by uid (no ${DS_*} import placeholders);
// panel ids are unique and each panel fits the 24-column grid; every
// non-row panel has a query; every variable a query uses is defined on
// that dashboard or is a Grafana built-in the test substitutes.
func TestDashboardsAreProvisionable(t *testing.T) {
	names, err := fs.Glob(Files, "*.json")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(names, wantDashboards) {
		t.Fatalf("dashboards %v, want %v", names, wantDashboards)
	}
	uids, titles := map[string]string{}, map[string]string{}
	for _, name := range names {
		d, err := readDashboard(Files, name)
		if err != nil {
			t.Fatal(err)
		}
		if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 {
			t.Errorf("%s: uid %q, title %q, schemaVersion %d: want both set and schemaVersion >= 36", name, d.UID, d.Title, d.SchemaVersion)
		}
		if prev, dup := uids[d.UID]; dup {
			t.Errorf("%s and %s share uid %q", prev, name, d.UID)
		}
		if prev, dup := titles[d.Title]; dup {
			t.Errorf("%s and %s share title %q", prev, name, d.Title)
		}
		uids[d.UID], titles[d.Title] = name, name

		defined := map[string]bool{"__rate_interval": true, "__interval": true, "__range": true}
		for _, v := range d.Templating.List {
			defined[v.Name] = true
		}
		ids := map[int]bool{}
		var walk func([]panel)
		walk = func(ps []panel) {
			for _, p := range ps {
				if ids[p.ID] || p.ID == 0 {
					t.Errorf("%s: panel %q has id %d, zero or repeated", name, p.Title, p.ID)
				}
				ids[p.ID] = true
				walk(p.Panels)
				if p.Type == "row" {
					continue
				}
				if !isProvisioned(p.Datasource) {
					t.Errorf("%s: panel %q datasource %s, want {\"type\":\"prometheus\",\"uid\":\"prometheus\"}", name, p.Title, p.Datasource)
				}
				if len(p.Targets) == 0 {
					t.Errorf("%s: panel %q has no query", name, p.Title)
				}
				for _, tg := range p.Targets {
					if !isProvisioned(tg.Datasource) {
						t.Errorf("%s: panel %q target %s datasource %s", name, p.Title, tg.RefID, tg.Datasource)
					}
					for _, m := range grafanaVar.FindAllStringSubmatch(tg.Expr, -1) {
						if v := m[1] + m[2] + m[3]; !defined[v] {
							t.Errorf("%s: panel %q uses $%s, which the dashboard does not define", name, p.Title, v)
						}
					}
				}
			}
		}
		walk(d.Panels)
		raw, _ := fs.ReadFile(Files, name)
		if strings.Contains(string(raw), "${DS_") {
			t.Errorf("%s holds a ${DS_...} import placeholder: provisioning cannot resolve it", name)
		}
		var grid struct {
			Panels []struct {
				Title   string                   `json:"title"`
				GridPos struct{ X, Y, W, H int } `json:"gridPos"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(raw, &grid); err != nil {
			t.Fatal(err)
		}
		for _, p := range grid.Panels {
			if g := p.GridPos; g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
				t.Errorf("%s: panel %q gridPos %+v outside the 24-column grid", name, p.Title, g)
			}
		}
	}
}

func isProvisioned(raw json.RawMessage) bool {
	var ds struct{ Type, UID string }
	return json.Unmarshal(raw, &ds) == nil && ds.Type == "prometheus" && ds.UID == "prometheus"
}

// TestExprsReadsPanelsRowsAndVariables checks the extraction the
// Prometheus test relies on, on a dashboard written for it: nested row
// panels, string and object variable queries, label_values and
// query_result, and a custom variable (not a query) skipped.
func TestExprsReadsPanelsRowsAndVariables(t *testing.T) {
	fsys := mapFS(map[string]string{"a.json": `{"uid":"a","panels":[
		{"id":1,"type":"timeseries","title":"p1","targets":[{"expr":"up"},{"expr":"  "}]},
		{"id":2,"type":"row","title":"r","panels":[{"id":3,"title":"p3","targets":[{"expr":"strata_x"}]}]}],
		"templating":{"list":[
		{"name":"v1","type":"query","query":"label_values(strata_y{a=\"b\"}, topic)"},
		{"name":"v2","type":"query","query":{"query":"query_result(sum(strata_z))"}},
		{"name":"v3","type":"custom","query":"a,b"}]}}`})
	got, err := Exprs(fsys)
	if err != nil {
		t.Fatal(err)
	}
	want := []Expr{
		{"a.json", "panel p1", "up"},
		{"a.json", "panel p3", "strata_x"},
		{"a.json", "variable v1", `strata_y{a="b"}`},
		{"a.json", "variable v2", "sum(strata_z)"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Exprs = %v\nwant %v", got, want)
	}
	bad := mapFS(map[string]string{"b.json": `{"templating":{"list":[{"name":"v","type":"query","query":"metrics(strata_)"}]}}`})
	if _, err := Exprs(bad); err == nil || !strings.Contains(err.Error(), "variable v") {
		t.Fatalf("an unknown variable query: err %v, want one naming the variable", err)
	}
	if _, err := Exprs(mapFS(map[string]string{"c.json": `{"panels": [`})); err == nil {
		t.Fatal("a truncated dashboard parsed")
	}
}

func TestSubstitute(t *testing.T) {
	vars := map[string]string{"topic": ".*", "__rate_interval": "1m"}
	got, err := Substitute(`rate(m{topic=~"$topic",x=~"${topic}",y=~"${topic:regex}",z=~"[[topic]]"}[$__rate_interval])`, vars)
	if err != nil {
		t.Fatal(err)
	}
	if want := `rate(m{topic=~".*",x=~".*",y=~".*",z=~".*"}[1m])`; got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	if _, err := Substitute(`m{a=~"$nope"}`, vars); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("unknown variable: err %v, want one naming it", err)
	}
}

func TestSelectors(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`sum by (topic) (rate(strata_a_total{x=~".*"}[1m]))`, []string{`strata_a_total{x=~".*"}`}},
		{`histogram_quantile(0.99, sum by (api, le) (rate(strata_b_bucket[1m])))`, []string{"strata_b_bucket"}},
		{`max by (instance) (strata_c) - on (instance) max by (instance) (strata_d{i="1"})`, []string{"strata_c", `strata_d{i="1"}`}},
		{`up{job="strata"} == 0 and process_open_fds > go_goroutines`, []string{`up{job="strata"}`, "process_open_fds", "go_goroutines"}},
		{`strata_e / strata_e`, []string{"strata_e"}},
		{`sum without (strata_label) (strata_f)`, []string{"strata_f"}},
	} {
		if got := Selectors(c.expr); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Selectors(%s) = %q, want %q", c.expr, got, c.want)
		}
	}
	if MetricName(`strata_a{x="y"}`) != "strata_a" || MetricName("up") != "up" {
		t.Error("MetricName")
	}
}

// TestAlertRulesWithPromtool checks alerts.yml with Prometheus's own
// tools: promtool check rules (syntax, PromQL, templates), promtool
// check config on prometheus.yml (which loads alerts.yml), and promtool
// test rules on alerts_test.yml (each alert fires on its condition and
// not on a healthy or steady series). Also: every rule is an alert with
// a severity, a summary and a description.
func TestAlertRulesWithPromtool(t *testing.T) {
	rules, err := Rules(Files, "alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) < 4 {
		t.Fatalf("%d rules in alerts.yml", len(rules))
	}
	tested, _ := fs.ReadFile(Files, "alerts_test.yml")
	for _, r := range rules {
		if r.Alert == "" || r.Labels["severity"] == "" || r.Annots["summary"] == "" || r.Annots["description"] == "" {
			t.Errorf("rule %+v: want an alert with labels.severity and annotations summary and description", r)
		}
		if !strings.Contains(string(tested), "alertname: "+r.Alert+"\n") {
			t.Errorf("alert %s has no promtool test in alerts_test.yml", r.Alert)
		}
	}
	promtool := needTool(t, "promtool")
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		{"check", "config", "prometheus.yml"},
		{"test", "rules", "alerts_test.yml"},
	} {
		out, err := runTool(t, 30*time.Second, ".", promtool, args...)
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
