package deliverycheck

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/internal/testutil"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want SendStatus
	}{
		{nil, SendOK},
		{kerr.MessageTooLarge, SendFailed},
		{fmt.Errorf("wrapped: %w", kerr.InvalidRecord), SendFailed},
		{kerr.NotEnoughReplicas, SendUnknown}, // may follow an attempt that appended
		{kerr.RequestTimedOut, SendUnknown},
		{kgo.ErrRecordTimeout, SendUnknown},
		{context.DeadlineExceeded, SendUnknown},
		{errors.New("connection reset"), SendUnknown},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestDriverAgainstKfake runs the producer, a group consumer and the final
// read against franz-go's in-memory broker: a healthy cluster gives a
// clean report with every acknowledged value read back, and the same
// history with one record dropped from the final read reports it lost.
func TestDriverAgainstKfake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordDeliveryTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	rc := NewRecorder(true)
	cctx, ccancel := context.WithCancel(ctx)
	consumed := make(chan error, 1)
	go func() { consumed <- Consume(cctx, c.ListenAddrs(), "g", "t", "c1", rc) }()
	p := Produce(ctx, cl, "t", rc, ProduceOptions{Prefix: "run", MaxInFlight: 50})
	testutil.Eventually(t, 20*time.Second, func() bool { return p.Stats().Acked >= 2000 }, "2000 acknowledgements")
	st := p.Stop()
	if st.Acked < 2000 || st.Sent != st.Acked+st.Failed {
		t.Fatalf("stats %+v", st)
	}
	if p.LastAck().IsZero() {
		t.Fatal("no last acknowledgement time")
	}
	testutil.Eventually(t, 20*time.Second, func() bool { return len(rc.History().Polls) >= int(st.Acked) }, "the consumer reads everything")
	ccancel()
	if err := <-consumed; err != nil {
		t.Fatal(err)
	}
	if err := FinalRead(ctx, cl, "t", rc); err != nil {
		t.Fatal(err)
	}
	h := rc.History()
	r := Check(h)
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if r.Acked != int(st.Acked) || r.FinalRead != int(st.Acked) || len(h.FinalEnds) != 3 {
		t.Fatalf("report %s, final ends %v, want %d acknowledged and read", r.Summary(), h.FinalEnds, st.Acked)
	}
	if n := r.Count(Unseen) + r.Count(Lost); n != 0 {
		t.Fatalf("%d unseen or lost in a healthy run", n)
	}

	// The same history with one acknowledged value missing from the final
	// read is a loss.
	h.Final = h.Final[1:]
	if r := Check(h); r.Count(Lost) != 1 || r.Err() == nil {
		t.Fatalf("one final read record dropped: %s", r.Summary())
	}
}
