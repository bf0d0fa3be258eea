package broker

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/storage/vfs"
	"github.com/strata-io/strata/storage/vfs/errfs"
)

// TestConnPipelinedProducesOverlapAndAnswerInOrder: issue 20's "reading
// the next request from a connection overlaps with appending the current
// one (responses in request order)". The first Produce of a connection
// is held inside its segment write (errfs); the seven sent after it are
// read and decoded meanwhile (the connection holds all eight, not one).
// Released, the eight are answered in request order, acks=1 and acks=-1
// mixed, and each partition's batches got offsets in the order sent.
func TestConnPipelinedProducesOverlapAndAnswerInOrder(t *testing.T) {
	const reqs, parts, recs = 8, 3, 5
	var hold atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	inj := errfs.InjectorFunc(func(c errfs.Call) *errfs.Fault {
		if c.Op == errfs.OpWriteAt && strings.Contains(c.Path, "pipe-0/") && strings.HasSuffix(c.Path, ".log") && hold.CompareAndSwap(true, false) {
			close(entered)
			<-release
		}
		return nil
	})
	n := startNodeOn(t, errfs.Wrap(vfs.NewMem(), inj), t.TempDir(), nil)
	createTopic(t, newAdmin(t, n), "pipe", parts, nil)
	c := dialRaw(t, n)
	defer func() {
		select {
		case <-release:
		default:
			close(release) // a failure before the release: let the node close
		}
	}()

	frames := make([][]byte, reqs)
	partOf := func(i int) int32 { return int32(i % parts) }
	for i := range reqs {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(9)
		req.Acks, req.TimeoutMillis = 1, 5000
		if i%2 == 1 {
			req.Acks = -1
		}
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "pipe"
		tp := kmsg.NewProduceRequestTopicPartition()
		tp.Partition = partOf(i)
		tp.Records = recordBatch(int64(i), vals(fmt.Sprintf("req%d", i), recs)...)
		rt.Partitions = append(rt.Partitions, tp)
		req.Topics = append(req.Topics, rt)
		frames[i] = frameRequest(req, int32(500+i))
	}
	hold.Store(true)
	if _, err := c.nc.Write(frames[0]); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, testWait, func() bool {
		select {
		case <-entered:
			return true
		default:
			return false
		}
	}, "the first request's append to reach its segment write")
	var rest []byte
	for _, f := range frames[1:] {
		rest = append(rest, f...)
	}
	if _, err := c.nc.Write(rest); err != nil {
		t.Fatal(err)
	}
	// While the first append is held, the reader reads and decodes the
	// seven requests behind it: eight in flight on the connection.
	testutil.Eventually(t, testWait, func() error {
		n.connMu.Lock()
		defer n.connMu.Unlock()
		for sc := range n.conns {
			if sc.nc.RemoteAddr().String() != c.nc.LocalAddr().String() {
				continue
			}
			if p := sc.pending.Load(); p != reqs {
				return fmt.Errorf("%d requests read and not answered, want %d while the first appends", p, reqs)
			}
			return nil
		}
		return errors.New("connection not registered")
	}, "the reader to read ahead of the held append")
	close(release)

	next := map[int32]int64{} // partition → the base offset its next batch must get
	for i := range reqs {
		corr, body, err := c.readFrame()
		if err != nil {
			t.Fatal(err)
		}
		if corr != int32(500+i) {
			t.Fatalf("response %d has correlation id %d, want %d", i, corr, 500+i)
		}
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(9)
		resp := decodeResponse(t, req, body).(*kmsg.ProduceResponse)
		p := resp.Topics[0].Partitions[0]
		if p.Partition != partOf(i) || p.ErrorCode != 0 || p.BaseOffset != next[p.Partition] {
			t.Fatalf("response %d: partition %d error %d base offset %d; want partition %d, no error, base offset %d",
				i, p.Partition, p.ErrorCode, p.BaseOffset, partOf(i), next[partOf(i)])
		}
		next[p.Partition] += recs
	}
	for p := range int32(parts) {
		if got := n.partition("pipe", p).log.LogEndOffset(); got != next[p] {
			t.Fatalf("partition %d ends at %d, want %d", p, got, next[p])
		}
	}
}
