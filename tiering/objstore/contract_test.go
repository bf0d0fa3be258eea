package objstore_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/tiering/objstore"
	"github.com/strata-io/strata/tiering/objstore/objstoretest"
)

func TestMemStoreContract(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.ObjectStore { return objstore.NewMemStore() })
}

func TestFSStoreContract(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.ObjectStore { return newFS(t) })
}

func TestFSStoreContractWithoutXattrs(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.ObjectStore {
		s := newFS(t)
		s.DisableXattr()
		return s
	})
}

// The decorators keep the contract: metrics and retry over a store that
// fails a fifth of all calls (retried away), and faults with no rules.
func TestDecoratedStoreContract(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.ObjectStore {
		flaky := objstore.WithFaults(objstore.NewMemStore(), objstore.Rule{Prob: 0.2, Err: objstore.ErrInjected})
		retried := objstore.WithRetry(flaky, objstore.RetryPolicy{MaxAttempts: 30, BaseDelay: time.Microsecond, MaxDelay: time.Millisecond})
		m, err := objstore.WithMetrics(retried, prometheus.NewRegistry(), "mem")
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
}

func TestFaultsWithoutRulesContract(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.ObjectStore {
		return objstore.WithFaults(newFS(t))
	})
}
