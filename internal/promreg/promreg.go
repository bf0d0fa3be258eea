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
