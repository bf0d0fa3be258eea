package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// procWait bounds each wait of the process tests: start, produce, consume.
const procWait = 30 * time.Second

// proc is one running `strata serve`, in its own process group, with
// stdout and stderr in files that are printed when the test fails.
type proc struct {
	cmd  *exec.Cmd
	addr string // PLAINTEXT
	out  string // stdout file
	err  string // stderr file
	done chan struct{}
}

// startProc runs strata on dataDir with every listener on port 0 and
// waits for its address line (printed once the node serves). The process
// group is killed at cleanup.
func startProc(t *testing.T, dataDir string, incarnation int) *proc {
	t.Helper()
	return startProcOn(t, dataDir, incarnation, "127.0.0.1:0")
}

// startProcOn is startProc with the PLAINTEXT listener on addr; extra
// are more --set name=value settings.
func startProcOn(t *testing.T, dataDir string, incarnation int, addr string, extra ...string) *proc {
	t.Helper()
	return startProcWith(t, dataDir, incarnation, addr, 0, extra...)
}

// startProcWith is startProcOn with the open-file limit (soft and hard)
// set to nofile first when it is not 0, through sh's ulimit.
func startProcWith(t *testing.T, dataDir string, incarnation int, addr string, nofile int, extra ...string) *proc {
	t.Helper()
	p := launchProcWith(t, incarnation, nofile, append([]string{
		"listeners=PLAINTEXT://" + addr + ",CONTROLLER://127.0.0.1:0",
		"controller.quorum.voters=1@127.0.0.1:0",
		"admin.listener=127.0.0.1:0",
		"log.dirs=" + dataDir,
	}, extra...)...)
	p.waitServing(t)
	return p
}

// launchProc starts `strata serve` with settings (name=value, each passed
// as --set) and returns without waiting for it to serve (a node of a
// multi-voter quorum serves only once the others run too).
func launchProc(t *testing.T, incarnation int, settings ...string) *proc {
	t.Helper()
	return launchProcWith(t, incarnation, 0, settings...)
}

// launchProcWith is launchProc with the open-file limit set to nofile
// first when it is not 0.
func launchProcWith(t *testing.T, incarnation int, nofile int, settings ...string) *proc {
	t.Helper()
	logs := t.TempDir()
	p := &proc{
		out:  filepath.Join(logs, fmt.Sprintf("stdout-%d", incarnation)),
		err:  filepath.Join(logs, fmt.Sprintf("stderr-%d", incarnation)),
		done: make(chan struct{}),
	}
	stdout, err := os.Create(p.out)
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := os.Create(p.err)
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	defer stderr.Close()
	p.cmd = exec.Command(binary, "serve")
	for _, kv := range settings {
		p.cmd.Args = append(p.cmd.Args, "--set", kv)
	}
	if nofile > 0 {
		// sh -c script binary serve ...: the script's $0 is the binary.
		args := append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, nofile)}, p.cmd.Args...)
		p.cmd = exec.Command("/bin/sh", args...)
	}
	p.cmd.Stdout, p.cmd.Stderr = stdout, stderr
	// Pdeathsig: a test binary that dies without its cleanups (go test
	// -timeout panics, a kill) takes its nodes along instead of leaving
	// three strata processes running (seen: a TestFaultKill9 cluster
	// orphaned for 24 minutes on a loaded machine).
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			p.dump(t)
		}
	})
	return p
}

// waitServing waits for p's address line (printed once the node serves)
// and records its PLAINTEXT address.
func (p *proc) waitServing(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(procWait)
	for p.addr == "" {
		b, _ := os.ReadFile(p.out)
		if line, _, ok := bytes.Cut(b, []byte("\n")); ok {
			for _, f := range strings.Fields(string(line)) {
				if v, ok := strings.CutPrefix(f, "PLAINTEXT="); ok {
					p.addr = v
				}
			}
			if p.addr == "" {
				t.Fatalf("address line %q", line)
			}
			break
		}
		select {
		case <-p.done:
			t.Fatalf("strata exited before serving: %v", p.cmd.ProcessState)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no address line within %v", procWait)
		}
	}
}

// kill sends SIGKILL to the process group and waits for the exit.
// stop sends SIGTERM and fails the test unless the process exits cleanly
// (status 0) within procWait.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(procWait):
		t.Fatal("no exit after SIGTERM")
	}
	if !p.cmd.ProcessState.Success() {
		t.Fatalf("exit after SIGTERM: %v", p.cmd.ProcessState)
	}
}

func (p *proc) kill() {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

func (p *proc) dump(t *testing.T) {
	for _, f := range []string{p.out, p.err} {
		b, _ := os.ReadFile(f)
		if len(b) > 16<<10 {
			b = b[len(b)-16<<10:]
		}
		t.Logf("%s:\n%s", filepath.Base(f), b)
	}
}

// acked is one acknowledged record.
type acked struct {
	partition int32
	offset    int64
	value     string
}

// produceUntilKilled streams records to topic with acks=1 until p has been
// killed after killAfter acknowledgements, and returns every record the
// broker acknowledged. Unacknowledged records may or may not be in the log.
func produceUntilKilled(t *testing.T, p *proc, topic, tag string, killAfter int) []acked {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.ProducerLinger(time.Millisecond), kgo.MaxBufferedRecords(2000), kgo.RecordDeliveryTimeout(5*time.Second),
		kgo.RetryTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		acks    []acked
		failed  int
		pending sync.WaitGroup
		killed  = make(chan struct{})
		once    sync.Once
	)
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	pad := strings.Repeat("x", 200)
	for i := 0; ; i++ {
		select {
		case <-killed:
		case <-ctx.Done():
			t.Fatalf("%d acknowledgements in %v, want %d before the kill", len(acks), procWait, killAfter)
		default:
			pending.Add(1)
			rec := &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprintf("%s-%d-%s", tag, i, pad))}
			cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
				defer pending.Done()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed++
					return
				}
				acks = append(acks, acked{r.Partition, r.Offset, string(r.Value)})
				if len(acks) == killAfter {
					// kill -9 mid-stream, with produce requests in flight.
					once.Do(func() { p.kill(); close(killed) })
				}
			})
			continue
		}
		break
	}
	// Every promise is called: acknowledged before the kill, or failed
	// by Close (buffered records) or by the dead connection (in flight).
	cl.Close()
	waited := make(chan struct{})
	go func() { pending.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(procWait):
		t.Fatal("produce promises not all called")
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%s: %d acknowledged, %d failed after kill -9", tag, len(acks), failed)
	return acks
}

// checkLog reads every partition of topic from offset 0 to its end and
// checks each acknowledged record is at its offset, byte-exact, and that
// the offsets are dense.
func checkLog(t *testing.T, addr, topic string, partitions int32, all map[[2]int64]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	if err != nil || ends.Error() != nil {
		t.Fatalf("list end offsets: %v / %v", err, ends.Error())
	}
	start := map[string]map[int32]kgo.Offset{topic: {}}
	want := map[int32]int64{}
	for part := range partitions {
		o, ok := ends.Lookup(topic, part)
		if !ok {
			t.Fatalf("no end offset for partition %d", part)
		}
		want[part] = o.Offset
		start[topic][part] = kgo.NewOffset().At(0)
	}
	for k := range all {
		if k[1] >= want[int32(k[0])] {
			t.Fatalf("acknowledged offset %d/%d is past the log end %d after restart", k[0], k[1], want[int32(k[0])])
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(start))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	next := map[int32]int64{}
	done := func() bool {
		for part, end := range want {
			if next[part] < end {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed up to %v, log ends %v", next, want)
		}
		fs.EachError(func(_ string, part int32, err error) { t.Fatalf("fetch partition %d: %v", part, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != next[r.Partition] {
				t.Fatalf("partition %d: offset %d after %d (offsets not dense)", r.Partition, r.Offset, next[r.Partition]-1)
			}
			next[r.Partition]++
			if v, ok := all[[2]int64{int64(r.Partition), r.Offset}]; ok && v != string(r.Value) {
				t.Fatalf("partition %d offset %d: %.30q, acknowledged %.30q", r.Partition, r.Offset, r.Value, v)
			}
		})
	}
}

// TestKill9KeepsEveryAcknowledgedRecord runs the strata binary, streams
// acks=1 records into it, kills it with SIGKILL mid-stream, restarts it on
// the same data directory and reads everything back: each acknowledged
// record is at its offset and the offsets are dense. Three rounds, each
// checking the records of every round before.
func TestKill9KeepsEveryAcknowledgedRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	data := t.TempDir()
	const topic, partitions = "kill9", 3
	p := startProc(t, data, 0)
	// Recovery across many segments.
	createProcTopic(t, p.addr, topic, partitions, map[string]*string{"segment.bytes": kmsg.StringPtr("65536")})
	all := map[[2]int64]string{}
	for round := 1; round <= 3; round++ {
		acks := produceUntilKilled(t, p, topic, fmt.Sprintf("round%d", round), 1500*round)
		for _, a := range acks {
			k := [2]int64{int64(a.partition), a.offset}
			if prev, dup := all[k]; dup {
				t.Fatalf("offset %d/%d acknowledged twice: %.20q and %.20q", a.partition, a.offset, prev, a.value)
			}
			all[k] = a.value
		}
		p = startProc(t, data, round)
		checkLog(t, p.addr, topic, partitions, all)
	}
	// The last incarnation shuts down cleanly.
	p.stop(t)
	if _, err := os.Stat(filepath.Join(data, ".kafka_cleanshutdown")); err != nil {
		t.Fatalf("no clean-shutdown marker: %v", err)
	}
}

// TestKill9IdempotentProducerRetriesAcrossRestarts keeps one idempotent
// kgo producer (acks=all) streaming while the broker under it is killed
// with SIGKILL and restarted on the same data directory and port, twice.
// The producer retries its in-flight batches against the restarted broker,
// which must recognise those it had already appended (producer state
// rebuilt from the snapshot and the log after an unclean stop): every
// record is acknowledged, and the log holds each exactly once, in send
// order per partition, at dense offsets.
func TestKill9IdempotentProducerRetriesAcrossRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	// Free for the broker, reused by each restart: below the ephemeral
	// range (freePortsOn).
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePortsOn(t, "127.0.0.1", 1)[0]))
	data := t.TempDir()
	const topic, partitions, total = "idem9", 3, 9000
	var mu sync.Mutex // guards p
	p := startProcOn(t, data, 0, addr)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(time.Millisecond), kgo.MaxBufferedRecords(500),
		kgo.RecordDeliveryTimeout(2*procWait), kgo.RetryTimeout(2*procWait))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*procWait)
	defer cancel()
	// Small segments: rolls (each writing a producer-state snapshot) happen
	// all through the stream, so the kills land near some.
	segs := map[string]*string{"segment.bytes": kmsg.StringPtr("8192")}
	if resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, segs, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v / %v", err, resp.Err)
	}

	var (
		acks    sync.WaitGroup
		ackedN  atomic.Int64
		errsMu  sync.Mutex
		errs    []error
		bounced = make(chan struct{})
	)
	// Two kill -9 and restarts, once 2000 and 5000 records are acknowledged.
	go func() {
		defer close(bounced)
		for round, at := range []int64{2000, 5000} {
			for ackedN.Load() < at && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			mu.Lock()
			p.kill()
			killedAt := ackedN.Load()
			p = startProcOn(t, data, round+1, addr)
			mu.Unlock()
			t.Logf("kill -9 with %d of %d records acknowledged", killedAt, total)
		}
	}()
	for i := range total {
		acks.Add(1)
		r := &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: []byte(fmt.Sprintf("%06d", i))}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			defer acks.Done()
			if err != nil {
				errsMu.Lock()
				errs = append(errs, err)
				errsMu.Unlock()
				return
			}
			ackedN.Add(1)
		})
	}
	acks.Wait()
	<-bounced
	if len(errs) > 0 {
		t.Fatalf("%d of %d records failed, first: %v", len(errs), total, errs[0])
	}
	mu.Lock()
	addrNow := p.addr
	mu.Unlock()
	// Each partition holds its records exactly once, in send order.
	want := map[[2]int64]string{}
	for i := range total {
		part := int64(i % partitions)
		want[[2]int64{part, int64(i / partitions)}] = fmt.Sprintf("%06d", i)
	}
	checkLog(t, addrNow, topic, partitions, want)
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset != total/partitions {
			t.Errorf("partition %d ends at %d (%v), want %d: duplicates or losses", o.Partition, o.Offset, o.Err, total/partitions)
		}
	})
	logs, _ := filepath.Glob(filepath.Join(data, topic+"-0", "*.log"))
	snaps, _ := filepath.Glob(filepath.Join(data, topic+"-0", "*.snapshot"))
	if len(logs) < 3 || len(snaps) < 1 {
		t.Errorf("%d segments and %d producer snapshots in partition 0: the stream did not roll segments", len(logs), len(snaps))
	}
}

// createProcTopic creates topic with one replica and cfgs on the node at
// addr, through its own short-lived client.
func createProcTopic(t *testing.T, addr, topic string, partitions int32, cfgs map[string]*string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	if resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, cfgs, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v / %v", err, resp.Err)
	}
}
