package share

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestMemPersisterContract pins the Persister contract the leader side and
// the share coordinator's RPC persister both keep: no state before
// Initialize, Read records a newer leader epoch, Write fences a stale
// leader and a reset group, Summary drops batches, Delete forgets.
func TestMemPersisterContract(t *testing.T) {
	ctx := context.Background()
	m := NewMemPersister()
	m.Now = func() int64 { return 1000 }
	k := Key{Group: "g", Partition: 3}
	if _, err := m.Read(ctx, k, 0); !errors.Is(err, ErrNoState) {
		t.Fatalf("read before initialize: %v", err)
	}
	if err := m.Initialize(ctx, k, 0, 10); err != nil {
		t.Fatal(err)
	}
	st, err := m.Read(ctx, k, 2)
	if err != nil || st.StartOffset != 10 || st.LeaderEpoch != 2 {
		t.Fatalf("read: %+v %v", st, err)
	}
	u := Update{StartOffset: -1, DeliveryCompleteCount: 1, Batches: []StateBatch{{FirstOffset: 10, LastOffset: 10, DeliveryState: Acknowledged, DeliveryCount: 1}}}
	if err := m.Write(ctx, k, 0, 1, u); !errors.Is(err, kerr.FencedLeaderEpoch) {
		t.Fatalf("stale leader write: %v", err)
	}
	if err := m.Write(ctx, k, 1, 2, u); !errors.Is(err, kerr.FencedStateEpoch) {
		t.Fatalf("wrong state epoch write: %v", err)
	}
	if err := m.Write(ctx, k, 0, 2, u); err != nil {
		t.Fatal(err)
	}
	if st, _ := m.Read(ctx, k, 2); len(st.Batches) != 1 || st.Batches[0].DeliveryState != Acknowledged {
		t.Fatalf("after write: %+v", st)
	}
	if s, err := m.Summary(ctx, k); err != nil || s.Batches != nil || s.DeliveryCompleteCount != 1 {
		t.Fatalf("summary: %+v %v", s, err)
	}
	if err := m.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Summary(ctx, k); !errors.Is(err, ErrNoState) {
		t.Fatalf("summary after delete: %v", err)
	}
}
