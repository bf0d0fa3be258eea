package faultbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testutil"
)

// node is one strata process of the cluster and what it keeps across
// restarts (its addresses, its data directory, its settings).
type node struct {
	id       int32
	ip       string
	plain    string // PLAINTEXT host:port
	admin    string // admin (metrics) host:port
	dir      string // the file system its log.dirs (and the metadata log) live on
	settings []string
	logs     string // stdout/stderr of every incarnation

	cmd  *exec.Cmd
	done chan struct{}
	runs int
}

// cluster is three nodes on 127.0.0.2-4.
type cluster struct {
	t     *testing.T
	bin   string
	nodes []*node
	cl    *kgo.Client // seeded with every node: requests go to one by id
}

// startCluster starts n nodes, node i binding PLAINTEXT, CONTROLLER and
// the admin listener on 127.0.0.(i+1), with dirs[i] as its file system
// and extra settings for all, and returns once every node serves.
func startCluster(t *testing.T, bin string, dirs []string, extra []string) *cluster {
	t.Helper()
	c := &cluster{t: t, bin: bin}
	var voters []string
	ctl := make([]string, len(dirs))
	for i := range dirs {
		ip := fmt.Sprintf("127.0.0.%d", i+2)
		ports := testutil.FreePortsOn(t, ip, 3)
		n := &node{id: int32(i + 1), ip: ip, dir: dirs[i], logs: t.TempDir(),
			plain: net.JoinHostPort(ip, strconv.Itoa(ports[0])), admin: net.JoinHostPort(ip, strconv.Itoa(ports[2]))}
		ctl[i] = net.JoinHostPort(ip, strconv.Itoa(ports[1]))
		voters = append(voters, fmt.Sprintf("%d@%s", n.id, ctl[i]))
		c.nodes = append(c.nodes, n)
	}
	for i, n := range c.nodes {
		n.settings = append([]string{
			"node.id=" + strconv.Itoa(int(n.id)),
			"process.roles=broker,controller",
			fmt.Sprintf("listeners=PLAINTEXT://%s,CONTROLLER://%s", n.plain, ctl[i]),
			"controller.quorum.voters=" + strings.Join(voters, ","),
			"admin.listener=" + n.admin,
			"log.dirs=" + filepath.Join(n.dir, "data"),
		}, extra...)
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			if t.Failed() {
				n.dumpTail(t)
			}
			n.kill()
		}
	})
	for _, n := range c.nodes {
		c.start(n)
	}
	for _, n := range c.nodes {
		c.waitServing(n)
	}
	var seeds []string
	for _, n := range c.nodes {
		seeds = append(seeds, n.plain)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DialTimeout(time.Second), kgo.RequestRetries(0),
		kgo.RetryTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	c.cl = cl
	return c
}

func (c *cluster) node(id int32) *node { return c.nodes[id-1] }

// start launches n (again).
func (c *cluster) start(n *node) {
	c.t.Helper()
	n.runs++
	out, err := os.Create(filepath.Join(n.logs, fmt.Sprintf("run-%d.log", n.runs)))
	if err != nil {
		c.t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command(c.bin, "serve")
	for _, kv := range n.settings {
		cmd.Args = append(cmd.Args, "--set", kv)
	}
	cmd.Stdout, cmd.Stderr = out, out
	// Settings come from the command line only (strata reads STRATA_*
	// variables as settings).
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STRATA_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// Pdeathsig: a test binary killed without its cleanups takes its
	// nodes along.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	n.cmd, n.done = cmd, make(chan struct{})
	go func(done chan struct{}) { cmd.Wait(); close(done) }(n.done)
}

// waitServing waits for n's "listening" line.
func (c *cluster) waitServing(n *node) {
	c.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		b, _ := os.ReadFile(filepath.Join(n.logs, fmt.Sprintf("run-%d.log", n.runs)))
		if bytes.Contains(b, []byte("strata: listening ")) {
			return
		}
		select {
		case <-n.done:
			c.t.Fatalf("node %d exited before serving:\n%s", n.id, tail(b, 3000))
		default:
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("node %d not serving after 2m:\n%s", n.id, tail(b, 3000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// alive reports whether n's process runs (a stopped one counts).
func (n *node) alive() bool {
	if n.done == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

func (n *node) signal(sig syscall.Signal) error {
	if !n.alive() {
		return errors.New("not running")
	}
	return n.cmd.Process.Signal(sig)
}

// kill kills n (and resumes it first if it was stopped) and waits.
func (n *node) kill() {
	if !n.alive() {
		return
	}
	n.cmd.Process.Kill()
	<-n.done
}

// stop is SIGTERM (a controlled shutdown), then SIGKILL after d.
func (n *node) stop(d time.Duration) (clean bool) {
	if !n.alive() {
		return false
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
		return true
	case <-time.After(d):
		n.kill()
		return false
	}
}

func (n *node) dumpTail(t *testing.T) {
	b, _ := os.ReadFile(filepath.Join(n.logs, fmt.Sprintf("run-%d.log", n.runs)))
	t.Logf("node %d (run %d) log tail:\n%s", n.id, n.runs, tail(b, 4000))
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// partitions is the metadata of topic as node from sees it (nil when it
// does not answer).
func (c *cluster) partitions(ctx context.Context, from int32, topic string) []kmsg.MetadataResponseTopicPartition {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := c.cl.Broker(int(from)).Request(rctx, req)
	if err != nil {
		return nil
	}
	for _, tp := range resp.(*kmsg.MetadataResponse).Topics {
		if tp.Topic != nil && *tp.Topic == topic && tp.ErrorCode == 0 {
			return tp.Partitions
		}
	}
	return nil
}

// controllerLeader is the quorum leader node from's metrics name (0:
// none known, or no answer).
func (c *cluster) controllerLeader(from int32) int32 {
	cl := http.Client{Timeout: time.Second}
	resp, err := cl.Get("http://" + c.node(from).admin + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		// strata_controller_raft_leader_id{node="1"} 2
		if rest, ok := strings.CutPrefix(line, "strata_controller_raft_leader_id"); ok && (rest[0] == '{' || rest[0] == ' ') {
			f := strings.Fields(rest)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			return int32(v)
		}
	}
	return 0
}
