package broker

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testutil"
)

// onceChecker counts, per (partition, offset), how many times a member
// reported the record consumed and committed.
type onceChecker struct {
	mu   sync.Mutex
	seen map[[2]int64]int
}

func (c *onceChecker) add(p int32, o int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[[2]int64{int64(p), o}]++
}

// check compares the counts with the partitions' end offsets: nil when
// every record was counted exactly once.
func (c *onceChecker) check(ends map[int32]int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var missing, dup []string
	for p, end := range ends {
		for o := range end {
			switch n := c.seen[[2]int64{int64(p), o}]; {
			case n == 0:
				missing = append(missing, fmt.Sprintf("%d/%d", p, o))
			case n > 1:
				dup = append(dup, fmt.Sprintf("%d/%d×%d", p, o, n))
			}
		}
	}
	if len(missing)+len(dup) == 0 {
		return nil
	}
	return fmt.Errorf("%d records missing (%.10v), %d counted twice or more (%.10v)", len(missing), missing, len(dup), dup)
}

// duplicates returns the records counted more than once so far.
func (c *onceChecker) duplicates() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var dup []string
	for k, n := range c.seen {
		if n > 1 {
			dup = append(dup, fmt.Sprintf("%d/%d×%d", k[0], k[1], n))
		}
	}
	return dup
}

// pyMember is a librdkafka classic member (client.py member).
type pyMember struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	joined chan struct{}
	closed chan struct{}
}

func startPyMember(t *testing.T, name, addr, groupID, topic string, chk *onceChecker) *pyMember {
	t.Helper()
	py := needClient(t, systemPython, "-c", "import confluent_kafka")
	script, err := filepath.Abs(filepath.Join("testdata", "compat", "client.py"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*testWait)
	m := &pyMember{name: name, joined: make(chan struct{}), closed: make(chan struct{})}
	m.cmd = exec.CommandContext(ctx, py, script, "member", addr, groupID, topic)
	m.cmd.WaitDelay = 5 * time.Second
	var stderr strings.Builder
	m.cmd.Stderr = &stderr
	if m.stdin, err = m.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var once sync.Once
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			switch f := strings.Fields(line); {
			case len(f) > 0 && f[0] == "joined":
				once.Do(func() { close(m.joined) })
			case line == "closed":
				close(m.closed)
			case len(f) == 2:
				p, _ := strconv.Atoi(f[0])
				o, _ := strconv.ParseInt(f[1], 10, 64)
				chk.add(int32(p), o)
			}
		}
	}()
	t.Cleanup(func() {
		m.stdin.Close()
		<-done
		if err := m.cmd.Wait(); err != nil {
			t.Errorf("librdkafka member %s: %v\n%s", name, err, stderr.String())
		}
		cancel()
	})
	return m
}

// leave closes the member's stdin and waits until it left the group.
func (m *pyMember) leave(t *testing.T) {
	t.Helper()
	m.stdin.Close()
	select {
	case <-m.closed:
	case <-time.After(testWait):
		t.Fatalf("librdkafka member %s did not leave", m.name)
	}
}

// kgoMember is a franz-go KIP-848 member: it commits each poll's records
// synchronously before allowing a rebalance, and counts them once the
// commit succeeded.
type kgoMember struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func startKgoMember(t *testing.T, addr, groupID, topic string, chk *onceChecker) *kgoMember {
	t.Helper()
	var mu sync.Mutex
	pending := map[int32][]*kgo.Record{}
	drop := func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
		mu.Lock()
		defer mu.Unlock()
		for _, ps := range lost {
			for _, p := range ps {
				delete(pending, p)
			}
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RetryTimeout(testWait),
		kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic), kgo.ServerSideBalancer(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(drop), kgo.OnPartitionsLost(drop))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &kgoMember{cl: cl, cancel: cancel, done: make(chan struct{})}
	commit := func(ctx context.Context) {
		mu.Lock()
		defer mu.Unlock()
		var recs []*kgo.Record
		for _, rs := range pending {
			recs = append(recs, rs...)
		}
		if len(recs) == 0 {
			return
		}
		if err := cl.CommitRecords(ctx, recs...); err != nil {
			return // kept: the next commit covers them
		}
		for _, r := range recs {
			chk.add(r.Partition, r.Offset)
		}
		clear(pending)
	}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := cl.PollRecords(ctx, 200)
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) { pending[r.Partition] = append(pending[r.Partition], r) })
			mu.Unlock()
			commit(ctx)
			cl.AllowRebalance()
		}
		cctx, ccancel := context.WithTimeout(context.Background(), testWait)
		defer ccancel()
		commit(cctx)
	}()
	t.Cleanup(m.leave)
	return m
}

// leave stops polling, commits what is pending and leaves the group.
func (m *kgoMember) leave() {
	m.cancel()
	<-m.done
	m.cl.Close()
}

// TestMixedGroupKgo848AndLibrdkafkaClassic: a group of librdkafka classic
// members (python3-confluent-kafka) is upgraded online by franz-go
// KIP-848 members joining it, keeps consuming while members join and
// leave and across a coordinator restart (the group resumes from
// __consumer_offsets), and is downgraded to a classic group when the last
// KIP-848 member leaves. Each step waits until the group settled with its
// members each holding partitions, produces 200 records, and waits until
// every record produced so far is consumed and committed exactly once
// (counted per partition and offset; a member counts a record once a
// commit covering it succeeded). The restart comes right after 400
// records were produced, while the members consume and commit them.
func TestMixedGroupKgo848AndLibrdkafkaClassic(t *testing.T) {
	needClient(t, systemPython, "-c", "import confluent_kafka")
	dir := t.TempDir()
	n := startNode(t, dir, consumerGroupSettings)
	addr := n.Addr()
	const topic, groupID, parts = "mx", "mixed", 8
	createTopic(t, newAdmin(t, n), topic, parts, nil)
	chk := &onceChecker{seen: map[[2]int64]int{}}
	produced := 0
	// settled waits until the group has members members, each holding
	// partitions (KIP-848 members reconciled, classic members synced).
	settled := func(what string, members int) {
		t.Helper()
		cl := newClient(t, n)
		testutil.Eventually(t, 2*testWait, func() error {
			if n.groupIsConsumer(groupID) {
				d := describe848(t, cl, groupID)
				if d.State != "Stable" || len(d.Members) != members {
					return fmt.Errorf("consumer group %s with %d members", d.State, len(d.Members))
				}
				for _, m := range d.Members {
					if len(m.Assignment.TopicPartitions) == 0 {
						return fmt.Errorf("member %s (classic %v) holds nothing", m.MemberID, m.MemberType)
					}
				}
				return nil
			}
			gs, err := kadm.NewClient(cl).DescribeGroups(testCtx(t), groupID)
			if err != nil {
				return err
			}
			g := gs[groupID]
			if g.State != "Stable" || len(g.Members) != members {
				return fmt.Errorf("classic group %s with %d members", g.State, len(g.Members))
			}
			return nil
		}, "%s: the group settles with %d members", what, members)
		cl.Close()
	}
	produce := func(what string, count int) {
		t.Helper()
		prod := newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		var recs []*kgo.Record
		for i := range count {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % parts), Value: fmt.Appendf(nil, "%s-%d", what, i)})
		}
		if err := prod.ProduceSync(testCtx(t), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		prod.Close()
		produced += len(recs)
	}
	consumedOnce := func(what string) {
		t.Helper()
		adm := kadm.NewClient(newClient(t, n))
		ends, err := adm.ListEndOffsets(testCtx(t), topic)
		if err != nil {
			t.Fatal(err)
		}
		want := map[int32]int64{}
		ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
		testutil.Eventually(t, 3*testWait, func() error {
			if dup := chk.duplicates(); len(dup) > 0 {
				t.Fatalf("%s: records counted twice: %v", what, dup)
			}
			return chk.check(want)
		}, "%s: every record of %d consumed once", what, produced)
		t.Logf("%s: %d records consumed once", what, produced)
	}
	step := func(what string, members int) {
		t.Helper()
		settled(what, members)
		produce(what, 200)
		consumedOnce(what)
	}

	py1 := startPyMember(t, "py1", addr, groupID, topic, chk)
	py2 := startPyMember(t, "py2", addr, groupID, topic, chk)
	for _, m := range []*pyMember{py1, py2} {
		select {
		case <-m.joined:
		case <-time.After(testWait):
			t.Fatalf("librdkafka member %s got no assignment", m.name)
		}
	}
	step("classic group", 2)
	if n.groupIsConsumer(groupID) {
		t.Fatal("a consumer group before any KIP-848 member")
	}

	k1 := startKgoMember(t, addr, groupID, topic, chk)
	testutil.Eventually(t, testWait, func() error {
		if !n.groupIsConsumer(groupID) {
			return fmt.Errorf("not upgraded yet")
		}
		return nil
	}, "the upgrade")
	step("upgraded, k1 joined", 3)
	k2 := startKgoMember(t, addr, groupID, topic, chk)
	step("k2 joined", 4)
	py1.leave(t)
	step("py1 left", 3)

	// The restart comes while the members are consuming (and committing)
	// the records just produced.
	settled("before the restart", 3)
	produce("before the restart", 400)
	chk.mu.Lock()
	t.Logf("restarting with %d of %d records counted", len(chk.seen), produced)
	chk.mu.Unlock()
	n.Close()
	n = startNode(t, dir, withListen(consumerGroupSettings, addr))
	waitLoaded(t, n, groupID)
	if !n.groupIsConsumer(groupID) {
		t.Fatal("the mixed group is not a consumer group after the restart")
	}
	step("coordinator restarted", 3)

	startPyMember(t, "py3", addr, groupID, topic, chk)
	step("py3 joined", 4)
	k1.leave()
	step("k1 left", 3)
	k2.leave()
	testutil.Eventually(t, testWait, func() error {
		if _, ok := n.groups.members.GroupState(groupID); !ok || n.groupIsConsumer(groupID) {
			return fmt.Errorf("not downgraded yet")
		}
		return nil
	}, "the downgrade")
	step("downgraded, k2 left", 2)
	_ = py2
}

// withListen is settings with the node's client listener on addr (a
// restart on the address the clients know).
func withListen(settings map[string]string, addr string) map[string]string {
	out := maps.Clone(settings)
	out["listeners"] = "PLAINTEXT://" + addr + ",CONTROLLER://127.0.0.1:0"
	return out
}
