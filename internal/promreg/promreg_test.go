package promreg

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestRegisterReusesIdenticalAndRefusesConflicting(t *testing.T) {
	reg := prometheus.NewRegistry()
	mk := func() *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "x"}, []string{"op"})
	}
	a, err := Register(reg, mk())
	if err != nil {
		t.Fatal(err)
	}
	b, err := Register(reg, mk())
	if err != nil || b != a {
		t.Fatalf("second identical registration: %v, same collector %v", err, b == a)
	}
	a.WithLabelValues("put").Inc()
	b.WithLabelValues("put").Inc()
	if got := testValue(t, reg); got != 2 {
		t.Fatalf("shared counter = %v, want 2", got)
	}
	other := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x_total", Help: "x"})
	if _, err := Register(reg, other); err == nil {
		t.Fatal("a different collector under the same name was accepted")
	}
	if c, err := Register[prometheus.Counter](nil, prometheus.NewCounter(prometheus.CounterOpts{Name: "y", Help: "y"})); err != nil || c == nil {
		t.Fatalf("nil registry: %v", err)
	}
}

func testValue(t *testing.T, reg *prometheus.Registry) float64 {
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

func TestCounterMatchesTheExactLabelSet(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, _ := Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ops_total", Help: "x"}, []string{"op", "result"}))
	c.WithLabelValues("put", "ok").Add(3)
	c.WithLabelValues("put", "error").Add(1)
	if v, ok, err := Counter(reg, "ops_total", map[string]string{"op": "put", "result": "ok"}); err != nil || !ok || v != 3 {
		t.Fatalf("put/ok = %v %v %v, want 3", v, ok, err)
	}
	if _, ok, _ := Counter(reg, "ops_total", map[string]string{"op": "put"}); ok {
		t.Fatal("a partial label set matched")
	}
	if _, ok, _ := Counter(reg, "ops_total", map[string]string{"op": "get", "result": "ok"}); ok {
		t.Fatal("an absent series matched")
	}
}
