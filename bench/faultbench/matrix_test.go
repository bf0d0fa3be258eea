package faultbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/deliverycheck"
	"github.com/strata-io/strata/internal/miniotest"
	"github.com/strata-io/strata/loadgen"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "strata-faultbench")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "strata")
	if out, err := exec.Command("go", "build", "-o", binary, "../../cmd/strata").CombinedOutput(); err != nil {
		panic("build strata: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// profile is the cluster's timeouts and how long faults are held.
type profile struct {
	name     string
	settings []string
	session  time.Duration // broker.session.timeout.ms
	hold     time.Duration // a fault without an election (full disk, object store) lasts this long
	settle   time.Duration // after a re-election, before the heal
	rate     int           // verify's records/s
}

var profiles = map[string]profile{
	// fast: the suite's (fencing within about two seconds).
	"fast": {name: "fast", settings: []string{"broker.session.timeout.ms=2000", "broker.heartbeat.interval.ms=200",
		"replica.lag.time.max.ms=3000", "remote.log.manager.task.interval.ms=1000"},
		session: 2 * time.Second, hold: 5 * time.Second, settle: time.Second, rate: 500},
	// kafka: Strata's defaults, which are Kafka's (broker.session.timeout.ms
	// 9000, broker.heartbeat.interval.ms 2000, replica.lag.time.max.ms
	// 30000, remote.log.manager.task.interval.ms 5000).
	"kafka": {name: "kafka", session: 9 * time.Second, hold: 15 * time.Second, settle: 3 * time.Second, rate: 1000},
}

// fault is one row: how it is injected and healed.
type fault struct {
	key, name, desc string
	election        bool // takes a leader away: every run must re-elect
	tiered          bool // the verify topic tiers to the object store
	rf              int  // the verify topic's replication factor (0: the cluster's, 3)
	needs           string
	inject          func(r *run)
}

var faults = []fault{
	{key: "kill9", name: "kill -9 the leader", election: true,
		desc: "SIGKILL of the node leading partition 0, restarted once every partition it led has a new leader and the load has gone on",
		inject: func(r *run) {
			v, parts := r.victim()
			at := time.Now()
			r.c.node(v).kill()
			r.reelected(at, v, parts)
			r.settle()
			r.restart(v)
		}},
	{key: "sigstop", name: "SIGSTOP the leader past the session timeout", election: true,
		desc: "SIGSTOP of the node leading partition 0, held past broker.session.timeout.ms and until every partition it led has a new leader, then SIGCONT: the resumed node learns it was deposed",
		inject: func(r *run) {
			v, parts := r.victim()
			at := time.Now()
			r.c.node(v).signal(syscall.SIGSTOP)
			r.reelected(at, v, parts)
			r.settle()
			if d := r.p.session + time.Second - time.Since(at); d > 0 {
				time.Sleep(d) // past the session timeout whatever the election took
			}
			healed := time.Now()
			r.c.node(v).signal(syscall.SIGCONT)
			r.isrRecovered(healed)
		}},
	{key: "partition", name: "network partition isolating the leader", election: true, needs: "iptables",
		desc: "iptables DROP rules on lo between the leader of partition 0's address and the other two nodes' (both ways, packets dropped silently; clients on 127.0.0.1 still reach it), removed once every partition it led has a new leader",
		inject: func(r *run) {
			v, parts := r.victim()
			at := time.Now()
			r.fw.isolate(r.t, r.c.node(v).ip, r.otherIPs(v))
			r.reelected(at, v, parts)
			r.settle()
			healed := time.Now()
			r.fw.heal(r.t)
			r.isrRecovered(healed)
		}},
	{key: "controller", name: "kill -9 the controller quorum's leader", election: true,
		desc: "SIGKILL of the node its peers' metrics name the Raft leader of the metadata quorum; re-election is to another quorum leader (the partitions it led move too); restarted after that",
		inject: func(r *run) {
			var v int32
			for deadline := time.Now().Add(time.Minute); v == 0; time.Sleep(100 * time.Millisecond) {
				if v = r.c.controllerLeader(r.c.nodes[0].id); v == 0 && time.Now().After(deadline) {
					r.t.Fatal("node 1's metrics name no controller leader")
				}
			}
			parts := r.ledBy(v)
			r.setVictim(v)
			at := time.Now()
			r.c.node(v).kill()
			deadline := time.Now().Add(time.Minute)
			for {
				if l := r.c.controllerLeader(r.others(v)[0]); l != 0 && l != v {
					r.res.Reelection = append(r.res.Reelection, time.Since(at))
					break
				}
				if time.Now().After(deadline) {
					r.t.Errorf("no new controller leader within 1m of killing node %d", v)
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			r.waitNewLeaders(v, parts, time.Minute)
			r.settle()
			r.restart(v)
		}},
	{key: "rolling", name: "rolling restart", election: true,
		desc: "SIGTERM (controlled shutdown) of each node in turn, restarted once it exited; the next only once the ISR is full again. Re-election is per node, from SIGTERM to its partitions' new leaders",
		inject: func(r *run) {
			for _, n := range r.c.nodes {
				parts := r.ledBy(n.id)
				r.t.Logf("rolling restart: node %d leads partitions %v", n.id, parts)
				r.setVictim(n.id)
				at := time.Now()
				n.signal(syscall.SIGTERM)
				if len(parts) > 0 {
					r.reelected(at, n.id, parts)
				}
				select {
				case <-n.done:
				case <-time.After(2 * time.Minute):
					r.t.Errorf("node %d still running 2m after SIGTERM", n.id)
					n.kill()
				}
				r.restart(n.id)
				r.progress(100)
			}
		}},
	{key: "reassign", name: "reassignment to rotated replicas and back", rf: 2,
		desc: "a topic at RF=2 (min.insync.replicas 2) whose every partition is reassigned from its replicas {a,b} to {a+1,b+1} (mod 3) under the load, then back: each move copies the partition to a new node and drops an old one. The re-election column is the time each reassignment took to complete (ListPartitionReassignments empty, the new replicas in metadata), the ISR is whole when a move completes",
		inject: func(r *run) {
			from := map[int32][]int32{}
			for _, p := range r.parts() {
				from[p.Partition] = p.Replicas
			}
			rotated := map[int32][]int32{}
			for p, rs := range from {
				for _, id := range rs {
					rotated[p] = append(rotated[p], id%3+1)
				}
			}
			r.reassign(rotated)
			r.progress(200)
			r.reassign(from)
		}},
	{key: "fulldisk", name: "full disk on the leader's node", needs: "root",
		desc: "the tmpfs holding the log dir and metadata log of partition 0's leader filled to ENOSPC, held, then the filler removed. Strata keeps the node's leaderships and refuses their appends while its disk is full (KAFKA_STORAGE_ERROR, retried by the producers) rather than going offline as a Kafka broker whose only log dir fails does: nothing is lost and nothing fails within the producers' delivery timeout, but those partitions take no records for the hold",
		inject: func(r *run) {
			v, led := r.victim()
			n := r.c.node(v)
			filler := filepath.Join(n.dir, "filler")
			f, err := os.Create(filler)
			if err != nil {
				r.t.Fatal(err)
			}
			buf := bytes.Repeat([]byte{0x5a}, 64<<10)
			for chunk := len(buf); chunk > 0; {
				if _, err := f.Write(buf[:chunk]); err != nil {
					chunk /= 2
				}
			}
			f.Close()
			time.Sleep(r.p.hold)
			stuck := r.endOffsetsOf(led)
			healed := time.Now()
			if err := os.Remove(filler); err != nil {
				r.t.Fatal(err)
			}
			// Strata keeps the leader and refuses its appends while the
			// disk is full (strata.log.dir.min.free.bytes): time how soon
			// they resume.
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
				if r.endOffsetsOf(led) > stuck {
					r.note(fmt.Sprintf("appends to the partitions it leads resumed %v after the space was freed", round(time.Since(healed))))
					break
				}
				if time.Now().After(deadline) {
					r.t.Errorf("no append to partitions %v within 1m of freeing node %d's disk", led, v)
					break
				}
			}
			if !n.alive() {
				r.note(fmt.Sprintf("node %d exited on the full disk; restarted after the space was freed", v))
				r.restart(v)
				return
			}
			r.isrRecovered(healed)
		}},
	{key: "objstore", name: "object-store outage under a tiered topic", tiered: true, needs: "minio",
		desc: "MinIO (the remote tier of every node) SIGSTOPped, so uploads and remote reads hang, then SIGCONT; the topic has remote.storage.enable=true with small segments and local retention, so the final read comes from the bucket",
		inject: func(r *run) {
			if err := r.minio.Pause(); err != nil {
				r.t.Fatal(err)
			}
			time.Sleep(r.p.hold)
			healed := time.Now()
			if err := r.minio.Resume(); err != nil {
				r.t.Fatal(err)
			}
			r.isrRecovered(healed)
		}},
}

// TestFaultMatrix runs `strata loadgen verify` against a fresh 3-node
// cluster under each fault (FAULTBENCH_RUNS runs each, default
// 1; FAULTBENCH_FAULTS picks some by key; the profile is
// FAULTBENCH_PROFILE, fast by default) and fails on any lost,
// duplicated or otherwise anomalous record, a run without a verdict, or
// a fault that should re-elect a leader and did not. With
// FAULTBENCH_PAGE it writes the page (bench/faults: docs/reliability.md),
// with FAULTBENCH_RESULTS the rows as JSON.
func TestFaultMatrix(t *testing.T) {
	runs := 1
	if v := os.Getenv("FAULTBENCH_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("FAULTBENCH_RUNS=%q", v)
		}
		runs = n
	}
	p, ok := profiles[cmp(os.Getenv("FAULTBENCH_PROFILE"), "fast")]
	if !ok {
		t.Fatalf("FAULTBENCH_PROFILE=%q: want fast or kafka", os.Getenv("FAULTBENCH_PROFILE"))
	}
	want := map[string]bool{}
	for _, k := range strings.FieldsFunc(os.Getenv("FAULTBENCH_FAULTS"), func(r rune) bool { return r == ',' || r == ' ' }) {
		want[k] = true
	}
	ci := os.Getenv("CI") == "true"
	missing := map[string]string{}
	if err := checkFirewall(); err != nil {
		missing["iptables"] = err.Error()
	}
	if os.Geteuid() != 0 {
		missing["root"] = "needs root (mount a tmpfs)"
	}
	var minio *miniotest.Server
	if _, err := miniotest.Binary(); err != nil {
		missing["minio"] = err.Error()
	} else {
		minio = miniotest.Start(t)
	}
	common := []string{"default.replication.factor=3", "min.insync.replicas=2", "offsets.topic.replication.factor=3"}
	if minio != nil {
		common = append(common, "remote.storage.backend=s3", "remote.storage.s3.endpoint="+minio.Endpoint,
			"remote.storage.s3.bucket="+minio.Bucket, "remote.storage.s3.path.style=true",
			"remote.storage.s3.access.key="+minio.AccessKey, "remote.storage.s3.secret.key="+minio.SecretKey)
	}
	var results []*Result
	descs := map[string]string{}
	for _, f := range faults {
		if len(want) > 0 && !want[f.key] {
			continue
		}
		res := &Result{FaultResult: deliverycheck.FaultResult{Fault: f.name}, ExpectElection: f.election}
		results = append(results, res)
		descs[f.name] = f.desc
		if why := missing[f.needs]; why != "" {
			if ci {
				t.Errorf("%s: %s (CI=true: .ci/run installs what the matrix needs)", f.key, why)
			}
			res.Skipped = why
			continue
		}
		t.Run(f.key, func(t *testing.T) {
			for i := range runs {
				runFault(t, p, f, append(slices.Clone(common), p.settings...), minio, res, i)
			}
			if !res.Clean() {
				t.Errorf("%s", res.Row())
			}
			t.Logf("%s\n%s", Header(), res.Row())
		})
	}
	if path := os.Getenv("FAULTBENCH_RESULTS"); path != "" {
		b, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Error(err)
		}
	}
	if path := os.Getenv("FAULTBENCH_PAGE"); path != "" {
		env := loadgen.LocalEnvironment()
		commit, _ := exec.Command("git", "describe", "--always", "--dirty", "--abbrev=12").Output()
		settings := append(slices.Clone(common[:3]), p.settings...)
		if minio != nil {
			settings = append(settings, "remote.storage.backend=s3 (MinIO on 127.0.0.1)")
		}
		page := &Page{Generated: time.Now(), Commit: strings.TrimSpace(string(commit)),
			Machine:  fmt.Sprintf("%s, %d cores, %.0f GiB, Linux %s", env.CPUModel, env.CPUCores, float64(env.MemoryBytes)/(1<<30), env.Kernel),
			Profile:  fmt.Sprintf("%s (broker.session.timeout.ms %d; held faults %v)", p.name, p.session.Milliseconds(), p.hold),
			Settings: settings, Results: results, Description: descs,
			Workload: fmt.Sprintf("%d runs per fault; each a fresh cluster and `strata loadgen verify --partitions 3 --rate %d --record-size 256` (1 idempotent acks=all producer, 1 group of 2 consumers, 1 reader of every partition; RF=3, min.insync.replicas=2), stopped by SIGINT after the heal", runs, p.rate)}
		var b bytes.Buffer
		if err := page.Write(&b); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func cmp(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// run is one verify run under one fault.
type run struct {
	t     *testing.T
	p     profile
	c     *cluster
	fw    *firewall
	minio *miniotest.Server
	topic string
	res   *Result
	adm   *kadm.Client

	mu      sync.Mutex
	victimN int32 // the faulted node: the monitor watches from another
	shrank  bool
	changes int
	notes   []string
}

func runFault(t *testing.T, p profile, f fault, settings []string, minio *miniotest.Server, res *Result, i int) {
	var dirs []string
	for range 3 {
		dir := t.TempDir()
		if os.Geteuid() == 0 {
			d, err := smalldiskMount(t, 512)
			if err != nil {
				t.Fatal(err)
			}
			dir = d
		}
		dirs = append(dirs, dir)
	}
	c := startCluster(t, binary, dirs, settings)
	r := &run{t: t, p: p, c: c, minio: minio, res: res, adm: kadm.NewClient(c.cl), topic: fmt.Sprintf("fault-%s-%d", f.key, i)}
	if f.needs == "iptables" {
		r.fw = newFirewall(t)
	}
	out := filepath.Join(t.TempDir(), "verify.json")
	args := []string{"loadgen", "verify", "--brokers", strings.Join(c.seeds(), ","), "--topic", r.topic,
		"--partitions", "3", "--duration", "1h", "--rate", strconv.Itoa(p.rate), "--record-size", "256",
		"--drain", "90s", "--out", out, "--quiet"}
	if f.rf > 0 {
		args = append(args, "--replication-factor", strconv.Itoa(f.rf))
	}
	if f.tiered {
		args = append(args, "--topic-config", "remote.storage.enable=true", "--topic-config", "segment.bytes=262144",
			"--topic-config", "local.retention.bytes=262144")
	}
	verify := exec.Command(binary, args...)
	var vout, verr bytes.Buffer
	verify.Stdout, verify.Stderr = &vout, &verr
	verify.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := verify.Start(); err != nil {
		t.Fatal(err)
	}
	vdone := make(chan error, 1)
	go func() { vdone <- verify.Wait() }()
	t.Cleanup(func() {
		verify.Process.Kill()
		<-vdone
	})

	// The load flows: every partition led, records acknowledged.
	r.waitTopic()
	r.progress(200)
	stop := r.monitor()
	f.inject(r)
	r.progress(300) // the load goes on after the heal
	stop()

	verify.Process.Signal(syscall.SIGINT)
	var werr error
	select {
	case werr = <-vdone:
	case <-time.After(4 * time.Minute):
		t.Fatalf("verify still running 4m after SIGINT:\n%s", verr.String())
	}
	vdone <- werr // for the cleanup
	res.Runs++
	code := verify.ProcessState.ExitCode()
	if code != 0 && code != 1 {
		res.NoVerdict++
		t.Errorf("run %d: verify exited %d (no verdict): %v\n%s%s", i, code, werr, vout.String(), verr.String())
		return
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var vr loadgen.VerifyResult
	if err := json.Unmarshal(b, &vr); err != nil {
		t.Fatal(err)
	}
	res.Add(vr.Report)
	for _, s := range vr.History.Sends {
		switch s.Status {
		case deliverycheck.SendFailed:
			res.Failed++
		case deliverycheck.SendUnknown:
			res.Unknown++
		}
	}
	r.mu.Lock()
	if r.shrank {
		res.ISRShrinks++
	}
	res.LeaderChanges += r.changes
	for _, n := range r.notes {
		if !slices.Contains(res.Notes, n) {
			res.Notes = append(res.Notes, n)
		}
	}
	r.mu.Unlock()
	t.Logf("run %d: %s", i, strings.TrimSpace(vout.String()))
	if code == 1 {
		t.Errorf("run %d: anomalies: %s", i, vr.Summary)
	}
}

func (c *cluster) seeds() []string {
	var s []string
	for _, n := range c.nodes {
		s = append(s, n.plain)
	}
	return s
}

func (r *run) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, s)
}

func (r *run) setVictim(id int32) {
	r.mu.Lock()
	r.victimN = id
	r.mu.Unlock()
}

// observer is a node other than the faulted one.
func (r *run) observer() int32 {
	r.mu.Lock()
	v := r.victimN
	r.mu.Unlock()
	for _, n := range r.c.nodes {
		if n.id != v && n.alive() {
			return n.id
		}
	}
	return r.c.nodes[0].id
}

func (r *run) others(v int32) []int32 {
	var o []int32
	for _, n := range r.c.nodes {
		if n.id != v {
			o = append(o, n.id)
		}
	}
	return o
}

func (r *run) otherIPs(v int32) []string {
	var ips []string
	for _, id := range r.others(v) {
		ips = append(ips, r.c.node(id).ip)
	}
	return ips
}

func (r *run) parts() []kmsg.MetadataResponseTopicPartition {
	return r.c.partitions(context.Background(), r.observer(), r.topic)
}

// waitTopic waits until every partition of the topic has a leader.
func (r *run) waitTopic() {
	deadline := time.Now().Add(time.Minute)
	for {
		ps := r.parts()
		ok := len(ps) == 3
		for _, p := range ps {
			ok = ok && p.Leader >= 0 && len(p.ISR) == len(p.Replicas)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("topic %s not led with a full ISR within 1m: %+v", r.topic, ps)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ledBy is the partitions id leads now.
func (r *run) ledBy(id int32) []int32 {
	var led []int32
	for _, p := range r.parts() {
		if p.Leader == id {
			led = append(led, p.Partition)
		}
	}
	return led
}

// victim is partition 0's leader and the partitions it leads.
func (r *run) victim() (int32, []int32) {
	for _, p := range r.parts() {
		if p.Partition == 0 && p.Leader >= 0 {
			r.setVictim(p.Leader)
			return p.Leader, r.ledBy(p.Leader)
		}
	}
	r.t.Fatal("partition 0 has no leader")
	return 0, nil
}

// reelected records the time from at until every one of parts has a
// leader other than v.
func (r *run) reelected(at time.Time, v int32, parts []int32) {
	if r.waitNewLeaders(v, parts, 2*time.Minute) {
		r.res.Reelection = append(r.res.Reelection, time.Since(at))
	}
}

func (r *run) waitNewLeaders(v int32, parts []int32, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		moved := 0
		for _, p := range r.parts() {
			if slices.Contains(parts, p.Partition) && p.Leader >= 0 && p.Leader != v {
				moved++
			}
		}
		if moved == len(parts) {
			return true
		}
		if time.Now().After(deadline) {
			r.t.Errorf("partitions %v still without a leader other than %d after %v", parts, v, d)
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// reassign moves every partition to the replicas of to and records how
// long the move took and then the ISR's recovery.
func (r *run) reassign(to map[int32][]int32) {
	req := kadm.AlterPartitionAssignmentsReq{}
	for p, rs := range to {
		req.Assign(r.topic, p, rs)
	}
	at := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := r.adm.AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		r.t.Fatalf("AlterPartitionReassignments: %v", err)
	}
	r.mu.Lock()
	r.shrank = false
	r.mu.Unlock()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		lctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		ls, err := r.adm.ListPartitionReassignments(lctx, kadm.TopicsSet{r.topic: nil})
		cancel()
		done := err == nil && len(ls[r.topic]) == 0
		if done {
			for _, p := range r.parts() {
				done = done && slices.Equal(p.Replicas, to[p.Partition])
			}
		}
		if done {
			r.res.Reelection = append(r.res.Reelection, time.Since(at))
			break
		}
		if time.Now().After(deadline) {
			r.t.Errorf("reassignment to %v not complete after 3m: %v %v", to, ls, err)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A move completes only once its new replicas are in the ISR: the
	// ISR is whole then by definition, and an adding replica outside it
	// is no shrink.
	r.mu.Lock()
	r.shrank = false
	r.mu.Unlock()
	r.res.ISRNote = "whole at completion (a move completes once the new replicas are in the ISR)"
}

// settle lets the load go on under the new leaders before the heal.
func (r *run) settle() {
	time.Sleep(r.p.settle)
	r.progress(100)
}

// restart starts v again and records its ISR recovery (from the start).
func (r *run) restart(v int32) {
	n := r.c.node(v)
	healed := time.Now()
	r.c.start(n)
	r.c.waitServing(n)
	r.isrRecovered(healed)
}

// isrRecovered records the time from healed until every partition's ISR
// is whole, if it was not whole at the heal.
func (r *run) isrRecovered(healed time.Time) {
	r.mu.Lock()
	r.victimN = 0
	shrank := r.shrank
	r.mu.Unlock()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ps := r.parts()
		whole := len(ps) == 3
		for _, p := range ps {
			whole = whole && p.Leader >= 0 && len(p.ISR) == len(p.Replicas)
		}
		if whole {
			if shrank {
				r.res.ISRRecovery = append(r.res.ISRRecovery, time.Since(healed))
			}
			return
		}
		if time.Now().After(deadline) {
			r.t.Errorf("ISR of %s not whole 3m after the heal: %+v", r.topic, ps)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// progress waits until n more records are in the topic's logs.
func (r *run) progress(n int64) {
	start := r.endOffsets()
	deadline := time.Now().Add(2 * time.Minute)
	for r.endOffsets() < start+n {
		if time.Now().After(deadline) {
			r.t.Errorf("the load did not go on: fewer than %d records in 2m", n)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r *run) endOffsets() int64 { return r.endOffsetsOf(nil) }

// endOffsetsOf sums the end offsets of parts (nil: every partition).
func (r *run) endOffsetsOf(parts []int32) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	offs, err := r.adm.ListEndOffsets(ctx, r.topic)
	if err != nil {
		return 0
	}
	var sum int64
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && (parts == nil || slices.Contains(parts, o.Partition)) {
			sum += o.Offset
		}
	})
	return sum
}

// monitor samples leaders and ISRs from a surviving node until stopped:
// leader changes and whether any ISR shrank.
func (r *run) monitor() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		leaders := map[int32]int32{}
		for _, p := range r.parts() {
			leaders[p.Partition] = p.Leader
		}
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			for _, p := range r.parts() {
				r.mu.Lock()
				if len(p.ISR) < len(p.Replicas) {
					r.shrank = true
				}
				if p.Leader >= 0 && p.Leader != leaders[p.Partition] {
					leaders[p.Partition] = p.Leader
					r.changes++
				}
				r.mu.Unlock()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
