// Package promreg registers Prometheus collectors so that several
// components may share one registry: a collector already registered under
// the same description is reused instead of failing. It owns that one
// rule and must never hold state of its own.
package promreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg and returns it, or returns the identical
// collector already registered (so two object stores, uploaders or readers
// in one process count into the same series). A nil reg registers
// nothing. Any other registration error is returned with c.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

// Counter returns the value of the counter name whose label set is exactly
// labels, as g gathers it now, and whether there is one. (Tests across
// packages read metrics back through it.)
func Counter(g prometheus.Gatherer, name string, labels map[string]string) (float64, bool, error) {
	mfs, err := g.Gather()
	if err != nil {
		return 0, false, err
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
					continue next
				}
			}
			return m.GetCounter().GetValue(), true, nil
		}
	}
	return 0, false, nil
}
