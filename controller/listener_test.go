package controller

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/internal/netbuf"
	"github.com/strata-io/strata/internal/testutil"
)

// header builds a CONTROLLER frame header claiming a payload of n bytes.
func header(n uint32, kind byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, n+1), kind)
}

// TestControllerListenerBoundsWhatPeersMakeItAllocate is the issue's
// attack on the CONTROLLER listener and its variants, ten connections each:
// a first frame claiming 256 MiB (closed at once: a first frame is at most
// maxFirstFrame), nothing at all (closed after FrameReadTimeout), and a
// client hello followed by a header claiming 200 MiB and a few bytes
// (closed after FrameReadTimeout). None makes the controller hold more
// than netbuf.FirstChunk of frame buffer a connection (the request
// budget's exact count, not the process's heap, which other goroutines
// move; allocating from the header would take 200 MiB), and it keeps
// serving.
func TestControllerListenerBoundsWhatPeersMakeItAllocate(t *testing.T) {
	const timeout = 300 * time.Millisecond
	c := newCtrlCluster(t, clusterOpts{n: 1, tcp: true, tune: func(cfg *Config) { cfg.FrameReadTimeout = timeout }})
	lead := c.leader()
	for _, tc := range []struct {
		name     string
		send     []byte
		minDelay time.Duration // closed no earlier than this
	}{
		{"first frame of 256 MiB", header(256<<20-1, kindRequest), 0},
		{"silent", nil, timeout},
		{"hello then a stalled 200 MiB frame", append(append(header(0, kindClientHello), header(200<<20, kindRequest)...), 1, 2, 3), timeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			errs := make([]error, 10)
			var wg sync.WaitGroup
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					conn, err := net.DialTimeout("tcp", lead.Addr(), testWait)
					if err != nil {
						errs[i] = err
						return
					}
					defer conn.Close()
					conn.SetWriteDeadline(time.Now().Add(testWait))
					if _, err := conn.Write(tc.send); err != nil {
						errs[i] = err
						return
					}
					errs[i] = testutil.ClosedWithin(conn, testWait)
				}()
			}
			wg.Wait()
			el := time.Since(start)
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if el < tc.minDelay {
				t.Errorf("closed after %v, before FrameReadTimeout %v", el, tc.minDelay)
			}
			if peak := lead.reqMem.ReadingPeak(); peak > int64(len(errs))*netbuf.FirstChunk {
				t.Errorf("ten connections made the controller hold %d MiB of frame buffers at once", peak>>20)
			}
		})
	}
	registerBrokers(t, lead, 1, 0)
	res, err := lead.CreateTopics(ctx(t), metadata.CreateTopicsRequest{Topics: []metadata.CreateTopic{{Name: "still-serving", NumPartitions: 1, ReplicationFactor: 1}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("CreateTopics after the attack: %v %v", err, res)
	}
	if used, reading := lead.reqMem.Used(), lead.reqMem.Reading(); used != 0 || reading != 0 {
		t.Fatalf("%d bytes of request budget, %d of frame buffers still held", used, reading)
	}
}

// TestClientRequestLargerThanFirstFrame: a client's first request on a new
// connection may be far larger than maxFirstFrame (it says hello first).
func TestClientRequestLargerThanFirstFrame(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 1, tcp: true})
	lead := c.leader()
	registerBrokers(t, lead, 1, 0)
	cl := NewClient(ClientOptions{Addrs: []string{lead.Addr()}})
	defer cl.Close()
	var req metadata.CreateTopicsRequest
	for i := range 500 {
		req.Topics = append(req.Topics, metadata.CreateTopic{Name: fmt.Sprintf("topic-with-a-long-name-%04d", i), NumPartitions: 1, ReplicationFactor: 1})
	}
	res, err := cl.CreateTopics(ctx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("%s: %v", r.Name, r.Err)
		}
	}
}
