package dashboards

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Files holds the dashboards, the Prometheus configuration and the alert
// rules, as docker-compose.yml mounts them.
//
//go:embed *.json prometheus.yml alerts.yml alerts_test.yml grafana
var Files embed.FS

// Expr is one PromQL expression found in a dashboard or a rule file.
type Expr struct {
	File  string // e.g. "overview.json", "alerts.yml"
	Where string // "panel <title>", "variable <name>", "alert <name>"
	Expr  string
}

func (e Expr) String() string { return e.File + ": " + e.Where + ": " + e.Expr }

// dashboard is the part of Grafana's JSON model these functions read.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int             `json:"id"`
	Title      string          `json:"title"`
	Type       string          `json:"type"`
	Datasource json.RawMessage `json:"datasource"`
	Targets    []struct {
		Expr       string          `json:"expr"`
		RefID      string          `json:"refId"`
		Datasource json.RawMessage `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's panels
}

type variable struct {
	Name  string          `json:"name"`
	Type  string          `json:"type"`
	Query json.RawMessage `json:"query"` // a string, or {"query": "..."} (Grafana 10+)
}

// labelValues matches Grafana's label_values(selector, label) variable
// query; label_values(label) has no selector to check.
var labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)

// queryResult matches Grafana's query_result(expr) variable query.
var queryResult = regexp.MustCompile(`^\s*query_result\((.*)\)\s*$`)

// Exprs returns every PromQL expression of the dashboards (*.json at the
// root of fsys): each panel target's expr, rows' nested panels included,
// and each query variable's selector (label_values(sel, label) gives sel,
// query_result(e) gives e). Files are read in name order, panels in their
// order. A dashboard that does not parse, or a query variable Grafana
// would run that is not one of those forms, is an error.
func Exprs(fsys fs.FS) ([]Expr, error) {
	names, err := fs.Glob(fsys, "*.json")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []Expr
	for _, name := range names {
		d, err := readDashboard(fsys, name)
		if err != nil {
			return nil, err
		}
		var walk func([]panel)
		walk = func(ps []panel) {
			for _, p := range ps {
				for _, t := range p.Targets {
					if strings.TrimSpace(t.Expr) != "" {
						out = append(out, Expr{File: name, Where: "panel " + p.Title, Expr: t.Expr})
					}
				}
				walk(p.Panels)
			}
		}
		walk(d.Panels)
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			q, err := variableQuery(v.Query)
			if err != nil {
				return nil, fmt.Errorf("dashboards: %s: variable %s: %w", name, v.Name, err)
			}
			switch {
			case labelValues.MatchString(q):
				q = labelValues.FindStringSubmatch(q)[1]
			case queryResult.MatchString(q):
				q = queryResult.FindStringSubmatch(q)[1]
			default:
				return nil, fmt.Errorf("dashboards: %s: variable %s: query %q is neither label_values(selector, label) nor query_result(expr)", name, v.Name, q)
			}
			out = append(out, Expr{File: name, Where: "variable " + v.Name, Expr: q})
		}
	}
	return out, nil
}

func readDashboard(fsys fs.FS, name string) (dashboard, error) {
	var d dashboard
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return d, err
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&d); err != nil {
		return d, fmt.Errorf("dashboards: %s: %w", name, err)
	}
	return d, nil
}

func variableQuery(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var o struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return "", fmt.Errorf("query is neither a string nor {\"query\": ...}: %s", raw)
	}
	return o.Query, nil
}

// Rule is one alerting or recording rule of a Prometheus rule file.
type Rule struct {
	Group  string
	Alert  string // "" for a recording rule
	Record string
	Expr   string
	For    string
	Labels map[string]string
	Annots map[string]string
}

// Rules parses a Prometheus rule file (groups → rules).
func Rules(fsys fs.FS, name string) ([]Rule, error) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, err
	}
	var f struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Record      string            `yaml:"record"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("dashboards: %s: %w", name, err)
	}
	var out []Rule
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out = append(out, Rule{Group: g.Name, Alert: r.Alert, Record: r.Record, Expr: r.Expr,
				For: r.For, Labels: r.Labels, Annots: r.Annotations})
		}
	}
	return out, nil
}

// RuleExprs returns the expression of every rule in the rule file name.
func RuleExprs(fsys fs.FS, name string) ([]Expr, error) {
	rules, err := Rules(fsys, name)
	if err != nil {
		return nil, err
	}
	out := make([]Expr, 0, len(rules))
	for _, r := range rules {
		where := "alert " + r.Alert
		if r.Alert == "" {
			where = "record " + r.Record
		}
		out = append(out, Expr{File: path.Base(name), Where: where, Expr: r.Expr})
	}
	return out, nil
}

// grafanaVar matches Grafana's variable syntaxes: ${name}, ${name:format},
// $name and [[name]] (built-ins such as $__rate_interval included).
var grafanaVar = regexp.MustCompile(`\$\{([a-zA-Z_][a-zA-Z0-9_]*)(?::[a-zA-Z]+)?\}|\$([a-zA-Z_][a-zA-Z0-9_]*)|\[\[([a-zA-Z_][a-zA-Z0-9_]*)\]\]`)

// Substitute replaces Grafana variables in expr by vars[name] (names
// without the $). A variable missing from vars is an error naming it, so
// a dashboard cannot use a variable its test does not know about.
func Substitute(expr string, vars map[string]string) (string, error) {
	var missing []string
	out := grafanaVar.ReplaceAllStringFunc(expr, func(m string) string {
		sm := grafanaVar.FindStringSubmatch(m)
		name := sm[1] + sm[2] + sm[3]
		v, ok := vars[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("dashboards: unknown variable(s) %s in %q", strings.Join(missing, ", "), expr)
	}
	return out, nil
}

// selector matches the series selectors of the metric families Strata's
// files name: strata_*, the Go and process collectors' go_* and
// process_*, and Prometheus's up, each with its label matchers if any.
// Label values never contain '}' in these files.
var selector = regexp.MustCompile(`\b((?:strata|go|process)_[a-zA-Z0-9_:]+|up)\b(\{[^}]*\})?`)

// Selectors returns the distinct series selectors in expr (metric name
// plus its matchers, as written), in order of first appearance. Words
// after "by", "without", "on", "ignoring" and "group_left/right" are
// label names, not metrics, and are skipped.
func Selectors(expr string) []string {
	labelLists := regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	masked := labelLists.ReplaceAllStringFunc(expr, func(s string) string { return strings.Repeat(" ", len(s)) })
	seen := map[string]bool{}
	var out []string
	for _, ix := range selector.FindAllStringIndex(masked, -1) {
		s := expr[ix[0]:ix[1]]
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// MetricName returns the metric name of a selector from [Selectors].
func MetricName(sel string) string {
	if i := strings.IndexByte(sel, '{'); i >= 0 {
		return sel[:i]
	}
	return sel
}
