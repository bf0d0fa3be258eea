package dashboards

// Tests of the quickstart around the dashboards: docker-compose.yml, the
// Dockerfile and the README's "Try it with MinIO" section. No Docker
// engine runs here or in CI, so nothing is started or built: the compose
// file is validated by docker-compose itself and checked against the
// settings table, the loadgen CLI and the files it mounts.

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/strata-io/strata/broker"
	"github.com/strata-io/strata/loadgen"
)

const (
	composeFile     = "../docker-compose.yml"
	dockerfile      = "../Dockerfile"
	readmeFile      = "../README.md"
	composeSection  = "## Try it with MinIO: docker compose"
	strataService   = "strata-1" // the node the README's compose section documents
	strataNet       = "strata-net"
	loadgenService  = "loadgen"
	loadgenProfile  = "loadgen"
	prometheusImage = "prom/prometheus"
)

type composeService struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Command     any               `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	Profiles    []string          `yaml:"profiles"`
	NetworkMode string            `yaml:"network_mode"`
	DependsOn   any               `yaml:"depends_on"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

func readCompose(t *testing.T) map[string]composeService {
	t.Helper()
	raw, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Services map[string]composeService `yaml:"services"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(false)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", composeFile, err)
	}
	if len(f.Services) == 0 {
		t.Fatalf("%s has no services", composeFile)
	}
	return f.Services
}

// TestComposeValidates runs Debian's docker-compose on the file, with and
// without the loadgen profile: the schema, interpolation and references
// between services are docker-compose's own judgement.
func TestComposeValidates(t *testing.T) {
	dc := needTool(t, "docker-compose")
	for _, args := range [][]string{
		{"-f", filepath.Base(composeFile), "config", "-q"},
		{"-f", filepath.Base(composeFile), "--profile", loadgenProfile, "config", "-q"},
	} {
		out, err := runTool(t, 60*time.Second, "..", dc, args...)
		if err != nil {
			t.Errorf("docker-compose %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// pinnedImage matches repository[:port]/path:tag (optionally @digest).
var pinnedImage = regexp.MustCompile(`^[a-z0-9][a-z0-9._/:-]*:([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})(@sha256:[0-9a-f]{64})?$`)

// imagePinned reports whether ref names an explicit version: a tag that
// is not latest (a digest may follow).
func imagePinned(ref string) bool {
	m := pinnedImage.FindStringSubmatch(ref)
	if m == nil {
		return false
	}
	// "host:5000/img" has a colon but no tag.
	if last := ref[strings.LastIndex(ref, "/")+1:]; !strings.Contains(last, ":") {
		return false
	}
	return m[1] != "latest"
}

func TestImagePinned(t *testing.T) {
	for ref, want := range map[string]bool{
		"prom/prometheus:v2.53.0": true, "minio/minio:RELEASE.2024-12-18T13-15-44Z": true,
		"gcr.io/distroless/static-debian12:nonroot": true, "strata:dev": true,
		"golang:1.26-bookworm@sha256:" + strings.Repeat("a", 64): true,
		"grafana/grafana": false, "grafana/grafana:latest": false, "localhost:5000/strata": false,
		"": false, "minio/minio:": false,
	} {
		if got := imagePinned(ref); got != want {
			t.Errorf("imagePinned(%q) = %v, want %v", ref, got, want)
		}
	}
}

// TestComposeServices checks what docker-compose cannot: every service
// names an image pinned to a version; the services the issue asks for
// are there (MinIO, a one-shot bucket creation Strata waits for, Strata
// built from the Dockerfile with a /readyz healthcheck, Prometheus,
// Grafana, loadgen behind its profile on Strata's network); every
// file mounted from the repository exists; Prometheus scrapes the Strata
// service on its admin port and Grafana's datasource is the Prometheus
// service.
func TestComposeServices(t *testing.T) {
	svcs := readCompose(t)
	for name, s := range svcs {
		if !imagePinned(s.Image) {
			t.Errorf("service %s: image %q is not pinned to a version (want name:tag, tag not latest)", name, s.Image)
		}
		for _, v := range s.Volumes {
			src, _, ok := strings.Cut(v, ":")
			if ok && strings.HasPrefix(src, ".") {
				if _, err := os.Stat(filepath.Join("..", src)); err != nil {
					t.Errorf("service %s mounts %s: %v", name, src, err)
				}
			}
		}
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("service %s publishes %q beyond loopback", name, p)
			}
		}
	}
	for _, want := range []string{"minio", "minio-init", strataNet, "strata-1", "strata-2", "strata-3", "prometheus", "grafana", loadgenService} {
		if _, ok := svcs[want]; !ok {
			t.Errorf("no service %s", want)
		}
	}
	st := svcs[strataService]
	prom, err := os.ReadFile("prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	published := svcs[strataNet].Ports
	var advertised []string
	for _, name := range strataNodes {
		n := svcs[name]
		if n.Build != "." || n.Image != st.Image || !strings.HasPrefix(n.Image, "strata:") {
			t.Errorf("%s: build %v, image %q: want build . tagged strata:<version>, as strata-1", name, n.Build, n.Image)
		}
		if n.NetworkMode != "service:"+strataNet {
			t.Errorf("%s: network_mode %q, want service:%s (one address per node for host clients and peers alike)", name, n.NetworkMode, strataNet)
		}
		if len(n.Ports) > 0 {
			t.Errorf("%s publishes %v: a service sharing %s's network cannot; publish on %s", name, n.Ports, strataNet, strataNet)
		}
		_, adminPort, _ := strings.Cut(n.Environment["STRATA_ADMIN_LISTENER"], ":")
		if n.Healthcheck == nil || !slices.Contains(n.Healthcheck.Test, "/healthcheck") ||
			!strings.Contains(strings.Join(n.Healthcheck.Test, " "), ":"+adminPort+"/readyz") {
			t.Errorf("%s: healthcheck %+v, want /healthcheck probing /readyz on its admin port %s", name, n.Healthcheck, adminPort)
		}
		if !strings.Contains(yamlString(t, n.DependsOn), "service_completed_successfully") {
			t.Errorf("%s depends_on %v: want the bucket creation completed first", name, n.DependsOn)
		}
		// The advertised address is 127.0.0.1:<the PLAINTEXT listener's
		// port>, published on loopback to the same host port.
		_, port, _ := strings.Cut(strings.TrimPrefix(n.Environment["STRATA_LISTENERS"], "PLAINTEXT://"), ":")
		port, _, _ = strings.Cut(port, ",")
		adv := strings.TrimPrefix(n.Environment["STRATA_ADVERTISED_LISTENERS"], "PLAINTEXT://")
		if port == "" || adv != "127.0.0.1:"+port {
			t.Errorf("%s: listeners %q, advertised %q: want 127.0.0.1:<its PLAINTEXT port>", name, n.Environment["STRATA_LISTENERS"], adv)
		}
		advertised = append(advertised, adv)
		for _, p := range []string{port, adminPort} {
			if !slices.Contains(published, "127.0.0.1:"+p+":"+p) {
				t.Errorf("%s publishes %v, not %s's port %s as 127.0.0.1:%s:%s", strataNet, published, name, p, p, p)
			}
		}
		// Prometheus scrapes strata-net:<admin port>.
		if want := `"` + strataNet + ":" + adminPort + `"`; adminPort == "" || !strings.Contains(string(prom), want) {
			t.Errorf("prometheus.yml does not scrape %s (%s's admin.listener)", want, name)
		}
	}
	if !strings.Contains(yamlString(t, svcs["minio-init"].Command), "mc mb") {
		t.Errorf("minio-init does not create a bucket: %v", svcs["minio-init"].Command)
	}
	lg := svcs[loadgenService]
	if !slices.Equal(lg.Profiles, []string{loadgenProfile}) || lg.Image != st.Image || lg.NetworkMode != "service:"+strataNet {
		t.Errorf("loadgen: profiles %v, image %q, network_mode %q: want [loadgen], %q, service:%s", lg.Profiles, lg.Image, lg.NetworkMode, st.Image, strataNet)
	}
	if want := "--brokers=" + strings.Join(advertised, ","); !strings.Contains(yamlString(t, lg.Command), want) {
		t.Errorf("loadgen command %v: want %s", lg.Command, want)
	}

	if !strings.HasPrefix(svcs["prometheus"].Image, prometheusImage+":") ||
		!slices.Contains(svcs["prometheus"].Volumes, "./dashboards/prometheus.yml:/etc/prometheus/prometheus.yml:ro") ||
		!slices.Contains(svcs["prometheus"].Volumes, "./dashboards/alerts.yml:/etc/prometheus/alerts.yml:ro") {
		t.Errorf("prometheus: image %q volumes %v: want prometheus.yml and alerts.yml mounted side by side", svcs["prometheus"].Image, svcs["prometheus"].Volumes)
	}
	ds, err := os.ReadFile("grafana/provisioning/datasources/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ds), "url: http://prometheus:9090") || !strings.Contains(string(ds), "uid: prometheus") {
		t.Error("the Grafana datasource is not the prometheus service with uid prometheus")
	}
	if !slices.Contains(svcs["grafana"].Volumes, "./dashboards:/var/lib/grafana/dashboards:ro") ||
		!slices.Contains(svcs["grafana"].Volumes, "./dashboards/grafana/provisioning:/etc/grafana/provisioning:ro") {
		t.Errorf("grafana volumes %v: want dashboards/ and its provisioning mounted", svcs["grafana"].Volumes)
	}
	prov, err := os.ReadFile("grafana/provisioning/dashboards/strata.yml")
	if err != nil || !strings.Contains(string(prov), "path: /var/lib/grafana/dashboards") {
		t.Errorf("dashboard provider does not read /var/lib/grafana/dashboards: %v", err)
	}
}

// strataNodes are the compose file's Strata services, node.id 1, 2, 3.
var strataNodes = []string{"strata-1", "strata-2", "strata-3"}

// nodeEnv is what node n's settings must be given node 1's: the same,
// but for its node.id and every port (listeners, advertised, admin)
// 100(n-1) higher, as scripts/cluster3 lays nodes out.
func nodeEnv(t *testing.T, node1 map[string]string, n int) map[string]string {
	t.Helper()
	port := regexp.MustCompile(`:(\d+)`)
	shift := func(v string) string {
		return port.ReplaceAllStringFunc(v, func(m string) string {
			p, err := strconv.Atoi(m[1:])
			if err != nil {
				t.Fatal(err)
			}
			return ":" + strconv.Itoa(p+100*(n-1))
		})
	}
	out := maps.Clone(node1)
	out["STRATA_NODE_ID"] = strconv.Itoa(n)
	for _, k := range []string{"STRATA_LISTENERS", "STRATA_ADVERTISED_LISTENERS", "STRATA_ADMIN_LISTENER"} {
		out[k] = shift(node1[k])
	}
	return out
}

func yamlString(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// readmeSettingsEnv returns the environment variables of README.md's
// generated settings table (cmd/strata/readme_test.go keeps it equal to
// broker.Settings), mapped to their setting names.
func readmeSettingsEnv(t *testing.T, readme string) map[string]string {
	t.Helper()
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9.]+)` \\| .* \\| `(STRATA_[A-Z0-9_]+)` \\|")
	out := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(readme, -1) {
		out[m[2]] = m[1]
	}
	if len(out) == 0 {
		t.Fatal("README.md has no settings table rows")
	}
	return out
}

// readmeComposeEnv returns the NAME: value lines of the code block in
// the README's compose section, which must be its last section.
func readmeComposeEnv(t *testing.T, readme string) map[string]string {
	t.Helper()
	i := strings.Index(readme, "\n"+composeSection+"\n")
	if i < 0 {
		t.Fatalf("README.md has no %q section", composeSection)
	}
	sec := readme[i+1:]
	if strings.Contains(sec[len(composeSection):], "\n## ") {
		t.Errorf("README.md: %q is not the last section", composeSection)
	}
	out := map[string]string{}
	line := regexp.MustCompile(`^(STRATA_[A-Z0-9_]+): (.*)$`)
	sc := bufio.NewScanner(strings.NewReader(sec))
	for sc.Scan() {
		if m := line.FindStringSubmatch(sc.Text()); m != nil {
			out[m[1]] = strings.Trim(m[2], `"`)
		}
	}
	return out
}

// TestComposeSettingsAreDocumented: the strata service's settings are
// STRATA_* variables of real settings (in broker.Settings and in the
// README's settings table), the README's compose section lists exactly
// them with the same values, and together they parse and validate as a
// node configuration (broker.ParseConfig, as `strata serve` would). The
// Dockerfile's ENV defaults pass the same checks.
func TestComposeSettingsAreDocumented(t *testing.T) {
	raw, err := os.ReadFile(readmeFile)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	table := readmeSettingsEnv(t, readme)
	settings := map[string]string{}
	for _, s := range broker.Settings {
		settings[broker.EnvName(s.Name)] = s.Name
	}
	checkEnv := func(where string, env map[string]string) {
		t.Helper()
		var list []string
		for k, v := range env {
			if !strings.HasPrefix(k, "STRATA_") {
				t.Errorf("%s: %s is not a STRATA_* setting", where, k)
				continue
			}
			if _, ok := settings[k]; !ok {
				t.Errorf("%s: %s is no setting of `strata serve --help`", where, k)
			}
			if _, ok := table[k]; !ok {
				t.Errorf("%s: %s is not in README.md's settings table", where, k)
			}
			list = append(list, k+"="+v)
		}
		sort.Strings(list)
		cfg, err := broker.LoadConfig(broker.ConfigSources{Env: list})
		if err != nil {
			t.Errorf("%s: the settings do not parse: %v", where, err)
		} else if len(cfg.Ignored) > 0 {
			t.Errorf("%s: Kafka settings Strata ignores %v", where, cfg.Ignored)
		}
	}

	svcs := readCompose(t)
	st := svcs[strataService]
	if len(st.Environment) == 0 {
		t.Fatal("the strata-1 service sets no STRATA_* settings")
	}
	for i, name := range strataNodes {
		env := svcs[name].Environment
		checkEnv(composeFile+" "+name, env)
		if env["STRATA_REMOTE_STORAGE_BACKEND"] != "s3" || env["STRATA_REMOTE_LOG_STORAGE_SYSTEM_ENABLE"] != "true" {
			t.Errorf("%s does not tier into S3 (MinIO)", name)
		}
		if want := nodeEnv(t, st.Environment, i+1); !maps.Equal(env, want) {
			t.Errorf("%s's settings are not strata-1's with its own id and ports:\n got %v\nwant %v", name, env, want)
		}
	}
	// One cluster: three voters, each node's CONTROLLER listener among
	// them under its id; topics and __consumer_offsets at three replicas,
	// two in sync for acks=all.
	for i, name := range strataNodes {
		env := svcs[name].Environment
		_, ctl, _ := strings.Cut(env["STRATA_LISTENERS"], ",CONTROLLER://0.0.0.0:")
		voter := fmt.Sprintf("%d@127.0.0.1:%s", i+1, ctl)
		if voters := strings.Split(env["STRATA_CONTROLLER_QUORUM_VOTERS"], ","); len(voters) != 3 || !slices.Contains(voters, voter) {
			t.Errorf("%s: controller.quorum.voters %q, want three voters, %s among them", name, env["STRATA_CONTROLLER_QUORUM_VOTERS"], voter)
		}
		for k, want := range map[string]string{"STRATA_DEFAULT_REPLICATION_FACTOR": "3", "STRATA_OFFSETS_TOPIC_REPLICATION_FACTOR": "3", "STRATA_MIN_INSYNC_REPLICAS": "2"} {
			if env[k] != want {
				t.Errorf("%s: %s=%q, want %s", name, k, env[k], want)
			}
		}
	}
	documented := readmeComposeEnv(t, readme)
	for k, v := range st.Environment {
		if dv, ok := documented[k]; !ok || dv != v {
			t.Errorf("README.md's compose section: %s is %q, docker-compose.yml says %q", k, dv, v)
		}
	}
	for k := range documented {
		if _, ok := st.Environment[k]; !ok {
			t.Errorf("README.md's compose section lists %s, which docker-compose.yml does not set", k)
		}
	}

	df := parseDockerfile(t)
	if len(df.env) == 0 {
		t.Error("the Dockerfile sets no STRATA_* defaults")
	}
	checkEnv(dockerfile, df.env)
}

// TestComposeLoadgenCommand: the loadgen service runs a scenario the
// loadgen CLI ships, with flags that CLI defines.
func TestComposeLoadgenCommand(t *testing.T) {
	lg := readCompose(t)[loadgenService]
	cmd, ok := lg.Command.([]any)
	if !ok || len(cmd) < 2 || cmd[0] != "loadgen" {
		t.Fatalf("loadgen command %v: want [loadgen <scenario> flags...]", lg.Command)
	}
	var stdout, stderr bytes.Buffer
	code := loadgen.CLI{}.Main([]string{cmd[1].(string), "-help"}, &stdout, &stderr)
	usage := stdout.String() + stderr.String()
	if code != 0 && code != 2 || !strings.Contains(usage, "-brokers") {
		t.Fatalf("strata loadgen %s -help: exit %d\n%s", cmd[1], code, usage)
	}
	for _, a := range cmd[2:] {
		arg := a.(string)
		if !strings.HasPrefix(arg, "--") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		if !regexp.MustCompile(`(?m)^\s+-` + regexp.QuoteMeta(name) + `\b`).MatchString(usage) {
			t.Errorf("loadgen %s has no flag --%s", cmd[1], name)
		}
	}
}

type dockerfileInfo struct {
	froms     []string // image of each FROM, in order
	finalUser string   // last USER of the final stage
	env       map[string]string
	text      string
}

// parseDockerfile reads the Dockerfile's instructions (continuation
// lines joined, comments dropped).
func parseDockerfile(t *testing.T) dockerfileInfo {
	t.Helper()
	raw, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	cur := ""
	for _, l := range strings.Split(string(raw), "\n") {
		tl := strings.TrimSpace(l)
		if strings.HasPrefix(tl, "#") || (tl == "" && cur == "") {
			continue
		}
		if strings.HasSuffix(tl, "\\") {
			cur += strings.TrimSuffix(tl, "\\") + " "
			continue
		}
		lines = append(lines, cur+tl)
		cur = ""
	}
	d := dockerfileInfo{env: map[string]string{}, text: strings.Join(lines, "\n")}
	for _, l := range lines {
		instr, rest, _ := strings.Cut(l, " ")
		switch strings.ToUpper(instr) {
		case "FROM":
			f := strings.Fields(rest)
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				f = f[1:]
			}
			if len(f) > 0 {
				d.froms = append(d.froms, f[0])
			}
			d.finalUser, d.env = "", map[string]string{}
		case "USER":
			d.finalUser = strings.TrimSpace(rest)
		case "ENV":
			for _, kv := range strings.Fields(rest) {
				if k, v, ok := strings.Cut(kv, "="); ok {
					d.env[k] = v
				}
			}
		}
	}
	return d
}

// TestDockerfile: multi-stage, every FROM pinned to a version, a static
// build (CGO_ENABLED=0, -trimpath, stripped), the final stage runs as a
// user that is not root, exposes the three ports and starts strata. No
// Docker engine runs here: `docker build` is not run.
func TestDockerfile(t *testing.T) {
	d := parseDockerfile(t)
	if len(d.froms) < 2 {
		t.Errorf("FROM %v: want a multi-stage build", d.froms)
	}
	for _, f := range d.froms {
		if !imagePinned(f) {
			t.Errorf("FROM %s is not pinned to a version", f)
		}
	}
	if u, _, _ := strings.Cut(d.finalUser, ":"); u == "" || u == "root" || u == "0" {
		t.Errorf("final stage USER %q: want a non-root user", d.finalUser)
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", `-ldflags "-s -w"`, "./cmd/strata", "./deploy/healthcheck",
		"EXPOSE 9092 9093 9644", "VOLUME /var/lib/strata", `ENTRYPOINT ["/strata"]`, `CMD ["serve"]`} {
		if !strings.Contains(d.text, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	if d.env["STRATA_LOG_DIRS"] != "/var/lib/strata" {
		t.Errorf("STRATA_LOG_DIRS=%q, want the volume /var/lib/strata", d.env["STRATA_LOG_DIRS"])
	}
}
