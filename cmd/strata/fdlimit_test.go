package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testutil"
)

// TestProcLowFileLimitRefusesCreateTopicsAndRestarts runs strata under
// `ulimit -n 256` (issue 12: a 1,000-partition CreateTopics answered
// success while 433 partitions failed with "too many open files", and the
// node then would not start). Now: the start logs how many partitions the
// limit allows; CreateTopics of 1,000 partitions is refused with
// POLICY_VIOLATION and creates nothing (no topic, no log directory); a
// topic that fits is created, written into many more sealed segments than
// the limit could hold open at once, read back; and the node restarts
// under the same limit after SIGTERM and after SIGKILL, reading everything
// back each time, with no "too many open files" anywhere.
func TestProcLowFileLimitRefusesCreateTopicsAndRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	const nofile, topic, partitions, perPartition = 256, "fits", 20, 60
	data := t.TempDir()
	start := func(i int) *proc { return startProcWith(t, data, i, "127.0.0.1:0", nofile) }
	p := start(0)
	waitLog(t, p, "partitions_allowed=47")

	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	adm := kadm.NewClient(cl)
	resp, _ := adm.CreateTopic(ctx, 1000, 1, nil, "toomany")
	if !errors.Is(resp.Err, kerr.PolicyViolation) || !strings.Contains(resp.ErrMessage, "open-file limit of 256") {
		t.Fatalf("CreateTopics of 1,000 partitions under ulimit -n %d: %v %q, want POLICY_VIOLATION naming the limit", nofile, resp.Err, resp.ErrMessage)
	}
	topics, err := adm.ListTopics(ctx)
	if err != nil || topics.Has("toomany") {
		t.Fatalf("topics after the refusal: %v %v", topics.Names(), err)
	}
	if dirs, _ := filepath.Glob(filepath.Join(data, "toomany-*")); len(dirs) > 0 {
		t.Fatalf("refused topic left log directories: %v", dirs)
	}
	cl.Close()

	// 20 partitions of 1 KiB segments: about 20 sealed segments each, 400
	// in all, 1,200 descriptors if they all stayed open.
	createProcTopic(t, p.addr, topic, partitions, map[string]*string{"segment.bytes": kmsg.StringPtr("1024")})
	want := produceProc(t, p.addr, topic, partitions, perPartition)
	segs, _ := filepath.Glob(filepath.Join(data, topic+"-*", "*.log"))
	if len(segs) < 10*partitions {
		t.Fatalf("%d segments, want at least %d", len(segs), 10*partitions)
	}
	consumeProc(t, p.addr, topic, partitions, want)

	// A clean stop and a restart under the same limit.
	p.stop(t)
	noFileErrors(t, p)
	p = start(1)
	consumeProc(t, p.addr, topic, partitions, want)
	noFileErrors(t, p)
	// And after kill -9 (unclean recovery of every partition).
	p.kill()
	p = start(2)
	consumeProc(t, p.addr, topic, partitions, want)
	noFileErrors(t, p)
}

// waitLog waits until p's stderr holds s.
func waitLog(t *testing.T, p *proc, s string) {
	t.Helper()
	if err := testutil.Within(procWait, func() error {
		if b, _ := os.ReadFile(p.err); !strings.Contains(string(b), s) {
			return fmt.Errorf("stderr lacks %q", s)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func noFileErrors(t *testing.T, p *proc) {
	t.Helper()
	for _, f := range []string{p.out, p.err} {
		if b, _ := os.ReadFile(f); strings.Contains(string(b), "too many open files") {
			t.Fatalf("%s mentions too many open files", filepath.Base(f))
		}
	}
}

// produceProc writes n records to each partition (acks=all) and returns
// each partition's values in offset order.
func produceProc(t *testing.T, addr, topic string, partitions int32, n int) map[int32][]string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	want := map[int32][]string{}
	pad := strings.Repeat("v", 300)
	for i := range n {
		var recs []*kgo.Record
		for part := range partitions {
			v := fmt.Sprintf("%d-%d-%s", part, i, pad)
			recs = append(recs, &kgo.Record{Topic: topic, Partition: part, Value: []byte(v)})
			want[part] = append(want[part], v)
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce round %d: %v", i, err)
		}
	}
	return want
}

// consumeProc reads every partition from offset 0 and checks it holds
// exactly want's values in order.
func consumeProc(t *testing.T, addr, topic string, partitions int32, want map[int32][]string) {
	t.Helper()
	start := map[string]map[int32]kgo.Offset{topic: {}}
	for part := range partitions {
		start[topic][part] = kgo.NewOffset().At(0)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(start))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), procWait)
	defer cancel()
	got := map[int32][]string{}
	total, n := 0, 0
	for _, v := range want {
		total += len(v)
	}
	for n < total {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", n, total)
		}
		fs.EachError(func(_ string, part int32, err error) { t.Fatalf("fetch partition %d: %v", part, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			n++
		})
	}
	for part, vs := range want {
		g := got[part]
		if len(g) != len(vs) {
			t.Fatalf("partition %d: %d records, want %d", part, len(g), len(vs))
		}
		for i := range vs {
			if g[i] != vs[i] {
				t.Fatalf("partition %d offset %d: %.20q, want %.20q", part, i, g[i], vs[i])
			}
		}
	}
}
