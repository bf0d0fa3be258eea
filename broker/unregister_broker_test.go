package broker

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/testutil"
)

func unregisterBroker(t *testing.T, cl *kgo.Client, id int32) int16 {
	t.Helper()
	req := kmsg.NewPtrUnregisterBrokerRequest()
	req.BrokerID = id
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.ErrorCode
}

// TestUnregisterBroker: UnregisterBroker (key 64) of a stopped broker
// takes it out of the ISRs and the cluster's brokers (its place in the
// replica lists stays, listed offline); an unknown id is
// BROKER_ID_NOT_REGISTERED; the broker started again registers anew; a
// running broker unregistered registers again at its next heartbeat and
// rejoins the ISR.
func TestUnregisterBroker(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"broker.session.timeout.ms": "2000", "broker.heartbeat.interval.ms": "200",
		"replica.lag.time.max.ms": "2000"})
	cl := c.client()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(testCtx(t), 1, 3, nil, "u"); err != nil {
		t.Fatal(err)
	}
	// A Metadata request of its own (kadm's BrokerMetadata answers from
	// the client's cache).
	brokers := func() []int32 {
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{}
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			return nil
		}
		var ids []int32
		for _, b := range resp.Brokers {
			ids = append(ids, b.NodeID)
		}
		slices.Sort(ids)
		return ids
	}
	if code := unregisterBroker(t, cl, 9); code != kerr.BrokerIDNotRegistered.Code {
		t.Fatalf("unknown broker: %v, want BROKER_ID_NOT_REGISTERED", kerr.ErrorForCode(code))
	}

	c.stop(3)
	if code := unregisterBroker(t, cl, 3); code != 0 {
		t.Fatalf("unregister 3: %v", kerr.ErrorForCode(code))
	}
	// The answer comes once the controller committed it; broker 1's
	// image (c.ctl's) applies it from its metadata stream a moment later
	// (seen in CI).
	testutil.Eventually(t, testWait, func() bool {
		var registered bool
		c.ctl.view(func(st *metadata.State) { _, registered = st.Broker(3) })
		return !registered
	}, "broker 3 unregistered in broker 1's image")
	p, _ := c.partitionState("u", 0)
	if slices.Contains(p.ISR, 3) || !slices.Contains(p.Replicas, 3) {
		t.Fatalf("after unregistering 3: replicas %v isr %v, want 3 a replica outside the ISR", p.Replicas, p.ISR)
	}
	testutil.Eventually(t, testWait, func() bool { return slices.Equal(brokers(), []int32{1, 2}) }, "brokers [1 2] in Metadata")
	if code := unregisterBroker(t, cl, 3); code != kerr.BrokerIDNotRegistered.Code {
		t.Fatalf("second unregister: %v, want BROKER_ID_NOT_REGISTERED", kerr.ErrorForCode(code))
	}

	c.start(3)
	testutil.Eventually(t, testWait, func() bool { return slices.Equal(brokers(), []int32{1, 2, 3}) }, "broker 3 registered again")

	// A running broker: registered again at its next heartbeat (a new
	// epoch), back in the ISR once it fetches again.
	var before int64
	c.ctl.view(func(st *metadata.State) { b, _ := st.Broker(2); before = b.Epoch })
	if code := unregisterBroker(t, cl, 2); code != 0 {
		t.Fatalf("unregister running 2: %v", kerr.ErrorForCode(code))
	}
	testutil.Eventually(t, testWait, func() bool {
		var b metadata.BrokerInfo
		var ok bool
		c.ctl.view(func(st *metadata.State) { b, ok = st.Broker(2) })
		p, _ := c.partitionState("u", 0)
		return ok && b.Epoch > before && !b.Fenced && len(p.ISR) == 3
	}, "broker 2 registered with a new epoch, unfenced, back in the ISR")
}
