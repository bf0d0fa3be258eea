package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testutil"
)

// readmeSection returns the indented (command) lines of the README
// section under heading ("## ..."), in order.
func readmeSection(t *testing.T, heading string) []string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	i := strings.Index(text, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README.md has no %q section", heading)
	}
	section := text[i+len(heading)+2:]
	if j := strings.Index(section, "\n## "); j >= 0 {
		section = section[:j]
	}
	var out []string
	for _, l := range strings.Split(section, "\n") {
		if strings.HasPrefix(l, "    ") && strings.TrimSpace(l) != "" {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// cluster3Ports is how scripts/cluster3 lays out node n's (1..3) ports
// from node 1's PLAINTEXT port.
func cluster3Ports(base, n int) (plaintext, controller, admin int) {
	off := 100 * (n - 1)
	return base + off, base + 1 + off, base + 552 + off
}

// freeCluster3Base returns a base port for scripts/cluster3 whose nine
// ports were all free a moment ago.
func freeCluster3Base(t *testing.T) int {
	t.Helper()
	for range 50 {
		// Below Linux's ephemeral range (32768-60999), where port-0
		// listeners and outgoing connections of other tests take ports.
		base := 10000 + rand.IntN(32768-10000-900)
		free := true
		var lns []net.Listener
		for n := 1; n <= 3 && free; n++ {
			p, c, a := cluster3Ports(base, n)
			for _, port := range []int{p, c, a} {
				ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
				if err != nil {
					free = false
					break
				}
				lns = append(lns, ln)
			}
		}
		for _, ln := range lns {
			ln.Close()
		}
		if free {
			return base
		}
	}
	t.Fatal("no free port range for scripts/cluster3")
	return 0
}

// cluster3Env is a directory to run scripts/cluster3 in as the README
// does (./strata is the binary TestMain built, scripts/cluster3 the
// repository's script) and the environment moving its ports to free ones.
// Whatever the script started is stopped at cleanup: `scripts/cluster3
// stop`, then SIGKILL for any node whose pid file remains.
func cluster3Env(t *testing.T) (dir string, env []string, base int) {
	t.Helper()
	dir = t.TempDir()
	script, err := filepath.Abs("../../scripts/cluster3")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"strata": binary, "scripts/cluster3": script} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	base = freeCluster3Base(t)
	// CLUSTER3_DIR set too: a caller's own (a cluster of theirs) must not
	// move or meet the test's.
	env = append(os.Environ(), "CLUSTER3_PORT="+strconv.Itoa(base), "STRATA_BROKERS=127.0.0.1:"+strconv.Itoa(base),
		"CLUSTER3_DIR="+filepath.Join(dir, "strata-cluster3"))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "scripts/cluster3", "stop")
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("scripts/cluster3 stop: %v\n%s", err, out)
		}
		for n := 1; n <= 3; n++ {
			b, err := os.ReadFile(filepath.Join(dir, "strata-cluster3", fmt.Sprintf("node%d.pid", n)))
			if err != nil {
				continue
			}
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if t.Failed() {
			for n := 1; n <= 3; n++ {
				b, _ := os.ReadFile(filepath.Join(dir, "strata-cluster3", fmt.Sprintf("node%d.log", n)))
				if len(b) > 8<<10 {
					b = b[len(b)-8<<10:]
				}
				t.Logf("node%d.log:\n%s", n, b)
			}
		}
	})
	return dir, env, base
}

// TestReadmeCluster3 runs the README's "Three nodes on loopback" lines
// as bash would, top to bottom, with the script's ports moved to free
// ones (CLUSTER3_PORT; STRATA_BROKERS names node 1, as the CLI's default
// seed does): three nodes start, `topic create` without flags makes a
// topic of three replicas, all in the ISR, records go in with acks=all
// and come back, `__consumer_offsets` has three replicas too, and stop
// ends every node.
func TestReadmeCluster3(t *testing.T) {
	lines := readmeSection(t, "## Three nodes on loopback")
	if len(lines) < 4 {
		t.Fatalf("Three nodes on loopback has %d command lines", len(lines))
	}
	dir, env, base := cluster3Env(t)
	var addrs []string
	for n := 1; n <= 3; n++ {
		p, _, _ := cluster3Ports(base, n)
		addrs = append(addrs, "127.0.0.1:"+strconv.Itoa(p))
	}
	start := time.Now()
	checked := map[string]bool{}
	for _, line := range lines {
		if strings.HasPrefix(line, "go build ./cmd/strata") {
			continue // TestMain built ./strata from this source
		}
		if strings.HasPrefix(line, "scripts/cluster3 stop") {
			checkCluster3(t, dir, addrs, checked)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", line)
		cmd.Dir, cmd.Env = dir, env
		cmd.WaitDelay = 5 * time.Second // a node started by the script keeps no pipe of ours open
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("README line failed:\n\t%s\n%v\n%s", line, err, out)
		}
		switch {
		case strings.HasPrefix(line, "./strata consume t "):
			if !strings.Contains(string(out), "k1=hello") || !strings.Contains(string(out), "k2=world") {
				t.Errorf("%s: printed %s", line, out)
			}
			checked["consume"] = true
		case strings.HasPrefix(line, "scripts/cluster3 status"):
			if n := strings.Count(string(out), ": running"); n != 3 {
				t.Errorf("%s: %d nodes running:\n%s", line, n, out)
			}
		}
	}
	if !checked["cluster"] || !checked["consume"] {
		t.Fatalf("README lines checked: %v; want the cluster checked before stop and a consume", checked)
	}
	// stop ended every node: the pid files are gone and nothing listens.
	for n := 1; n <= 3; n++ {
		if _, err := os.Stat(filepath.Join(dir, "strata-cluster3", fmt.Sprintf("node%d.pid", n))); err == nil {
			t.Errorf("node%d.pid remains after stop", n)
		}
		if c, err := net.DialTimeout("tcp", addrs[n-1], time.Second); err == nil {
			c.Close()
			t.Errorf("node %d still listens on %s after stop", n, addrs[n-1])
		}
	}
	t.Logf("README Three nodes on loopback: %d lines in %v", len(lines), time.Since(start).Round(time.Millisecond))
}

// checkCluster3 checks, through franz-go, what the README promises of the
// running cluster: three brokers, topic t and __consumer_offsets with
// three replicas each, every replica in the ISR, and t's
// min.insync.replicas 2 from the nodes' properties; and no node warned
// of a setting it ignores.
func checkCluster3(t *testing.T, dir string, addrs []string, checked map[string]bool) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if err := testutil.Within(procWait, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		m, err := adm.Metadata(ctx, "t", "__consumer_offsets")
		if err != nil {
			return err
		}
		if len(m.Brokers) != 3 {
			return fmt.Errorf("brokers %v, want 3", m.Brokers.NodeIDs())
		}
		for _, topic := range []string{"t", "__consumer_offsets"} {
			td, ok := m.Topics[topic]
			if !ok || td.Err != nil || len(td.Partitions) == 0 {
				return fmt.Errorf("topic %s: %+v", topic, td)
			}
			for _, p := range td.Partitions {
				if len(p.Replicas) != 3 || len(p.ISR) != 3 || p.Leader < 0 {
					return fmt.Errorf("%s-%d: leader %d, replicas %v, ISR %v; want 3 replicas, all in sync", topic, p.Partition, p.Leader, p.Replicas, p.ISR)
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	rcs, err := adm.DescribeTopicConfigs(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("t", nil)
	if err != nil {
		t.Fatal(err)
	}
	var minISR string
	for _, c := range rc.Configs {
		if c.Key == "min.insync.replicas" && c.Value != nil {
			minISR = *c.Value
		}
	}
	if minISR != "2" {
		t.Errorf("topic t: min.insync.replicas %q, want 2 (the nodes' min.insync.replicas)", minISR)
	}
	for n := 1; n <= 3; n++ {
		b, err := os.ReadFile(filepath.Join(dir, "strata-cluster3", fmt.Sprintf("node%d.log", n)))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "not implemented by Strata") {
				t.Errorf("node %d ignores a setting of scripts/cluster3: %s", n, l)
			}
		}
	}
	checked["cluster"] = true
}
