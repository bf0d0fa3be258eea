package loadgen

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKfakeDataDirPersistsToFiles: `strata loadgen kfake --data-dir`
// writes what it is sent to files (the baseline bench/run calls
// kfake-files), and a kfake restarted on the same directory still holds
// the records.
func TestKfakeDataDirPersistsToFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "kfake")
	c, addr, err := StartKfakeDir("127.0.0.1:0", 2, dir)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("files"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	const n = 200
	for i := range n {
		cl.Produce(testCtx(t), &kgo.Record{Value: bytes.Repeat([]byte{byte(i)}, 100)}, nil)
	}
	if err := cl.Flush(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	c.Close()
	var segBytes int64
	filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && strings.HasSuffix(path, ".dat") {
			segBytes += info.Size()
		}
		return nil
	})
	if segBytes < n*100 {
		t.Fatalf("%d bytes of segment files under %s after producing %d records of 100 B", segBytes, dir, n)
	}

	c2, addr2, err := StartKfakeDir("127.0.0.1:0", 2, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got := heldRecords(t, addr2, "files"); got != n {
		t.Fatalf("restarted kfake holds %d records, want %d", got, n)
	}
	if _, _, err := StartKfakeDir("0.0.0.0:0", 1, dir); err == nil {
		t.Fatal("kfake on a non-loopback address")
	}
}

// TestRunAgainstKfakeWithProcessMetrics: kfake's process metrics
// (`kfake --metrics-listen`) give a run against kfake the broker's CPU
// per GB, as a Strata node's /metrics does, without cost accounting
// (kfake has no object store) or a note about it.
func TestRunAgainstKfakeWithProcessMetrics(t *testing.T) {
	c, addr, err := StartKfake("127.0.0.1:0", 3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	url, stop, err := serveProcessMetrics("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if _, _, err := serveProcessMetrics("0.0.0.0:0"); err == nil {
		t.Fatal("metrics on a non-loopback address")
	}
	w := shortWorkload("kfcpu", 2000)
	w.Duration = "3s"
	res, err := Run(testCtx(t), Options{Brokers: []string{addr}, Workload: w, MetricsURL: url})
	if err != nil {
		t.Fatal(err)
	}
	if res.Target != "kfake" || res.Cost != nil {
		t.Fatalf("target %q, cost %v; want kfake and no cost", res.Target, res.Cost)
	}
	for _, n := range res.Notes {
		if strings.Contains(n, "cost accounting") {
			t.Errorf("note %q for kfake", n)
		}
	}
	b := res.BrokerResources
	if b == nil || !b.Sampled || b.CPUSeconds <= 0 || b.CPUSecondsPerGBProduced <= 0 || b.CPUSecondsPerGBConsumed <= 0 {
		t.Fatalf("broker resources %+v", b)
	}
	if want := b.CPUSeconds / (float64(res.Produce.Bytes) / 1e9); math.Abs(b.CPUSecondsPerGBProduced-want) > 1e-9*want {
		t.Fatalf("CPU-seconds per GB produced %g, want %g", b.CPUSecondsPerGBProduced, want)
	}
	var out bytes.Buffer
	if err := WriteSummary(&out, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "broker CPU: ") || !strings.Contains(out.String(), "per GB produced") {
		t.Errorf("summary lacks the CPU per GB:\n%s", out.String())
	}
}

// TestCPUPerGB: the broker's CPU-seconds over the measured phase from
// the samples' CPU rates (warm-up and unknown rates left out) and per GB
// of each side.
func TestCPUPerGB(t *testing.T) {
	s := func(tt, cores float64) Sample { return Sample{T: tt, Seconds: 1, BrokerCPUCores: cores} }
	for _, c := range []struct {
		name               string
		series             []Sample
		measured           float64
		prod, cons         int64
		cpu, perProd, perC float64
	}{
		{"steady", []Sample{s(1, 0.5), s(2, 0.5), s(3, 0.5), s(4, 0.5)}, 4, 2e9, 1e9, 2, 1, 2},
		{"warm-up left out", []Sample{s(-1, 1.9), s(0, 1.9), s(1, 0.5), s(2, 0.5)}, 2, 1e9, 0, 1, 1, 0},
		{"unknown rate is not idle", []Sample{s(1, 1), s(2, 0), s(3, 1)}, 3, 3e9, 0, 3, 1, 0},
		{"after the phase left out", []Sample{s(1, 1), s(2, 1), s(3.5, 1.9)}, 2, 1e9, 1e9, 2, 2, 2},
		{"not sampled", []Sample{s(1, 0), s(2, 0)}, 2, 1e9, 1e9, 0, 0, 0},
		{"nothing moved", []Sample{s(1, 0.2)}, 1, 0, 0, 0.2, 0, 0},
	} {
		cpu, p, q := cpuPerGB(c.series, c.measured, c.prod, c.cons)
		if math.Abs(cpu-c.cpu) > 1e-9 || math.Abs(p-c.perProd) > 1e-9 || math.Abs(q-c.perC) > 1e-9 {
			t.Errorf("%s: cpuPerGB = %g, %g, %g; want %g, %g, %g", c.name, cpu, p, q, c.cpu, c.perProd, c.perC)
		}
	}
}
