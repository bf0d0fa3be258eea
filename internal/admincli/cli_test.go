package admincli

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestPureClientDeps: the package (not its tests) reaches the cluster only
// over the wire, so it must not link the broker's insides.
func TestPureClientDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 || !strings.Contains(string(out), "github.com/twmb/franz-go/pkg/kadm") {
		t.Fatalf("go list -deps gave an implausible list: %q", deps)
	}
	for _, d := range deps {
		for _, banned := range []string{"broker", "storage", "controller", "tiering"} {
			if strings.HasPrefix(d, "github.com/strata-io/strata/"+banned) {
				t.Errorf("admincli imports %s", d)
			}
		}
	}
}

// TestClusterInfo: id, controller and broker address, as the node knows
// them, in both formats.
func TestClusterInfo(t *testing.T) {
	n := testNode(t)
	createTopic(t, "ci-topic", 1)
	r := mustOK(t, "", "cluster", "info", "--format", "json")
	var ci clusterInfo
	if err := json.Unmarshal([]byte(r.stdout), &ci); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	host, port, _ := net.SplitHostPort(n.Addr())
	if ci.ClusterID != n.ClusterID() || ci.ControllerID != 1 || len(ci.Brokers) != 1 || ci.Brokers[0].ID != 1 ||
		ci.Brokers[0].Host != host || itoa(int64(ci.Brokers[0].Port)) != port || ci.Brokers[0].Addr != n.Addr() || ci.Brokers[0].Rack != nil || ci.Topics < 1 {
		t.Errorf("cluster info %+v (node %s %s)", ci, n.ClusterID(), n.Addr())
	}
	topics, err := newAdmin(t).ListTopics(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if ci.Topics < len(topics) {
		t.Errorf("topic count %d, kadm lists %d", ci.Topics, len(topics))
	}
	r = mustOK(t, "", "cluster", "info")
	if !tableRow(r.stdout, "CLUSTER-ID", "CONTROLLER", "BROKERS", "TOPICS", "INTERNAL-TOPICS") || !strings.Contains(r.stdout, n.ClusterID()+"  ") ||
		!tableRow(r.stdout, "1*", n.Addr(), "-") {
		t.Errorf("cluster info table:\n%s", r.stdout)
	}
}

// TestUnreachableBroker: a refused connection is one line naming the
// brokers and the dial error, fast; a silent address (no listener that
// answers) fails within --timeout.
func TestUnreachableBroker(t *testing.T) {
	// A port that refuses: bind, note it, close.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	for _, args := range [][]string{
		{"topic", "list"}, {"topic", "describe", "x"}, {"group", "list"}, {"cluster", "info"}, {"consume", "t", "-e"}, {"produce", "t"},
	} {
		start := time.Now()
		r := cliAt(t, dead, "x\n", args[0], args[1:]...)
		wantFail(t, r, ExitFail, "strata: cannot reach brokers "+dead+": ", "connection refused")
		if len(lines(r.stderr)) != 1 {
			t.Errorf("%q: stderr is not one line: %q", args, r.stderr)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("%q: took %v to report a refused connection", args, el)
		}
	}

	// A listener that accepts and never answers: bounded by --timeout.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	start := time.Now()
	r := cliAt(t, silent.Addr().String(), "", "topic", "list", "--timeout", "1s")
	wantFail(t, r, ExitFail, "cannot reach brokers "+silent.Addr().String())
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("silent broker took %v with --timeout 1s", el)
	}
}

// TestBrokersFromEnvironment: $STRATA_BROKERS is the default of --brokers,
// and --brokers wins over it.
func TestBrokersFromEnvironment(t *testing.T) {
	n := testNode(t)
	t.Setenv("STRATA_BROKERS", n.Addr())
	r := cliAt(t, "", "", "cluster", "info", "--format", "json")
	if r.code != ExitOK || !strings.Contains(r.stdout, n.Addr()) {
		t.Fatalf("with STRATA_BROKERS: %v", r)
	}
	t.Setenv("STRATA_BROKERS", "127.0.0.1:1")
	r = cliAt(t, "", "", "cluster", "info")
	wantFail(t, r, ExitFail, "cannot reach brokers 127.0.0.1:1")
	r = cliAt(t, n.Addr(), "", "cluster", "info")
	if r.code != ExitOK {
		t.Errorf("--brokers did not override the environment: %v", r)
	}
	t.Setenv("STRATA_BROKERS", " , ")
	wantFail(t, cliAt(t, "", "", "cluster", "info"), ExitUsage, "no brokers")
	wantFail(t, cliAt(t, "host:notaport", "", "cluster", "info"), ExitFail, "host:notaport")
}

// TestCompletion: every shell's script names every subcommand, every
// action and the real flags; bash accepts the bash and zsh scripts.
func TestCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		var out, errb strings.Builder
		if code := Completion([]string{sh}, &out, &errb, []string{"serve", "loadgen", "tier"}); code != ExitOK {
			t.Fatalf("%s: exit %d: %s", sh, code, errb.String())
		}
		s := out.String()
		for _, w := range append(append([]string{}, Commands...), "serve", "loadgen", "tier",
			"create", "list", "describe", "alter-config", "add-partitions", "delete", "reset-offsets", "info",
			"to-earliest", "shift-by", "dry-run", "json-input", "brokers", "timeout", "total") {
			if !strings.Contains(s, w) {
				t.Errorf("%s completion lacks %q", sh, w)
			}
		}
		if sh != "fish" {
			if bash, err := exec.LookPath("bash"); err == nil && sh == "bash" {
				f := t.TempDir() + "/c.sh"
				os.WriteFile(f, []byte(s), 0o644)
				if out, err := exec.Command(bash, "-n", f).CombinedOutput(); err != nil {
					t.Errorf("bash -n: %v: %s", err, out)
				}
				// Completing "strata topic cr" offers create.
				script := s + "\nCOMP_WORDS=(strata topic cr); COMP_CWORD=2; _strata; echo \"${COMPREPLY[@]}\"\n" +
					"COMP_WORDS=(strata group reset-offsets g --to-l); COMP_CWORD=4; _strata; echo \"${COMPREPLY[@]}\"\n"
				out, err := exec.Command(bash, "-c", script).CombinedOutput()
				if err != nil || strings.Join(lines(string(out)), "|") != "create|--to-latest" {
					t.Errorf("bash completion run: %v: %q", err, out)
				}
			}
		}
	}
	// Through Run too (the package's own subcommands only).
	r := cliAt(t, "", "", "completion", "bash")
	if r.code != ExitOK || !strings.Contains(r.stdout, "complete -F _strata strata") {
		t.Errorf("Run completion: %v", r)
	}
	wantFail(t, cliAt(t, "", "", "completion", "powershell"), ExitUsage, `unknown shell "powershell"`)
	wantFail(t, cliAt(t, "", "", "completion"), ExitUsage, "name one shell")
}

// TestUnknownCommand and the help paths.
func TestUnknownCommandAndHelp(t *testing.T) {
	wantFail(t, cliAt(t, "", "", "frob"), ExitUsage, `unknown command "frob"`)
	for _, c := range []string{"topic", "group", "cluster"} {
		if r := cliAt(t, "", "", c, "--help"); r.code != ExitOK || !strings.Contains(r.stdout, "actions:") {
			t.Errorf("%s --help: %v", c, r)
		}
	}
	for _, c := range []string{"produce", "consume"} {
		if r := cliAt(t, "", "", c, "-h"); r.code != ExitOK || !strings.Contains(r.stdout, "-brokers") {
			t.Errorf("%s -h: %v", c, r)
		}
	}
	for _, c := range Commands {
		if Summary(c) == "" {
			t.Errorf("no summary for %s", c)
		}
	}
}
