package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestNodeProduceConsumeSmoke(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	adm := newAdmin(t, n)
	createTopic(t, adm, "smoke", 1, nil)
	cl := newClient(t, n, kgo.ConsumeTopics("smoke"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	res := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "smoke", Key: []byte("k"), Value: []byte("v")})
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	fs := cl.PollFetches(testCtx(t))
	if errs := fs.Errors(); len(errs) > 0 {
		t.Fatal(errs)
	}
	recs := fs.Records()
	if len(recs) != 1 || string(recs[0].Value) != "v" {
		t.Fatalf("got %v", recs)
	}
}
