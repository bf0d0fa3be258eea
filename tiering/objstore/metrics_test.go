package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/internal/promreg"
	"github.com/strata-io/strata/tiering/objstore"
)

func TestMetricsCountRequestsResultsAndBytes(t *testing.T) {
	reg := prometheus.NewRegistry()
	mem := objstore.NewMemStore()
	m, err := objstore.WithMetrics(mem, reg, "mem")
	if err != nil {
		t.Fatal(err)
	}
	mustPutBytes(t, m, "k", bytes.Repeat([]byte("x"), 1000))
	if _, err := putBytes(t, m, "k", []byte("y"), objstore.CreateOnly); !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatal(err)
	}
	if b, err := readAll(t, m, "k", 100, 300); err != nil || len(b) != 300 {
		t.Fatal(len(b), err)
	}
	// A body read only in part counts only what was read.
	rc, err := m.Get(tctx(t), "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadFull(rc, make([]byte, 50))
	rc.Close()
	m.Get(tctx(t), "missing", 0, -1)
	m.Get(tctx(t), "k", 5000, -1)
	c, cancel := context.WithCancel(context.Background())
	cancel()
	m.Head(c, "k")
	failing, err := objstore.WithMetrics(objstore.WithFaults(mem, objstore.Rule{Err: objstore.ErrInjected}), reg, "mem")
	if err != nil {
		t.Fatalf("second store on one registry: %v", err)
	}
	failing.List(tctx(t), "")
	m.List(tctx(t), "")
	m.Delete(tctx(t), "k")

	for _, tc := range []struct {
		c    []string
		want float64
	}{
		{[]string{"strata_objstore_requests_total", "mem", "put", "ok"}, 1},
		{[]string{"strata_objstore_requests_total", "mem", "put", "precondition_failed"}, 1},
		{[]string{"strata_objstore_requests_total", "mem", "get", "ok"}, 2},
		{[]string{"strata_objstore_requests_total", "mem", "get", "not_found"}, 1},
		{[]string{"strata_objstore_requests_total", "mem", "get", "invalid_range"}, 1},
		{[]string{"strata_objstore_requests_total", "mem", "head", "canceled"}, 1},
		{[]string{"strata_objstore_requests_total", "mem", "list", "error"}, 1},
		{[]string{"strata_objstore_requests_total", "mem", "list", "ok"}, 1},
		{[]string{"strata_objstore_requests_total", "mem", "delete", "ok"}, 1},
		{[]string{"strata_objstore_bytes_total", "mem", "put"}, 1000},
		{[]string{"strata_objstore_bytes_total", "mem", "get"}, 350},
	} {
		if got := counterValue(t, reg, tc.c[0], tc.c[1:]...); got != tc.want {
			t.Errorf("%v = %v, want %v", tc.c, got, tc.want)
		}
	}
	// One latency observation per call: put 2, get 4, head 1, list 2, delete 1.
	counts := histogramCounts(t, reg)
	for op, want := range map[string]uint64{"put": 2, "get": 4, "head": 1, "list": 2, "delete": 1} {
		if counts[op] != want {
			t.Errorf("request_seconds{op=%s} count = %d, want %d", op, counts[op], want)
		}
	}
}

// counterValue returns the counter name with these label values, in
// label order (backend, op[, result]), or -1 if there is none.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	names := []string{"backend", "op", "result"}
	m := map[string]string{}
	for i, v := range labels {
		m[names[i]] = v
	}
	v, ok, err := promreg.Counter(reg, name, m)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return -1
	}
	return v
}

func histogramCounts(t *testing.T, reg *prometheus.Registry) map[string]uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "strata_objstore_request_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "op" {
					out[lp.GetValue()] += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return out
}

// The decorator allocates nothing of its own on Put, Head, List and
// Delete (one counting reader on Get), so it can wrap the hot path.
func TestMetricsAddNoAllocations(t *testing.T) {
	m, err := objstore.WithMetrics(nopStore{}, prometheus.NewRegistry(), "nop")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	body := bytes.NewReader(nil)
	for name, fn := range map[string]func(){
		"put":    func() { m.Put(ctx, "k", body, 0, objstore.PutOptions{}) },
		"head":   func() { m.Head(ctx, "k") },
		"list":   func() { m.List(ctx, "k") },
		"delete": func() { m.Delete(ctx, "k") },
	} {
		if n := testing.AllocsPerRun(100, fn); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
	if n := testing.AllocsPerRun(100, func() { rc, _ := m.Get(ctx, "k", 0, -1); rc.Close() }); n > 2 {
		t.Errorf("get: %v allocations per call, want at most the counting reader and nopStore's", n)
	}
}

func TestMetricsRefuseIncompatibleCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_objstore_requests_total", Help: "other"}))
	if _, err := objstore.WithMetrics(objstore.NewMemStore(), reg, "mem"); err == nil {
		t.Fatal("registered over an incompatible collector")
	}
}
