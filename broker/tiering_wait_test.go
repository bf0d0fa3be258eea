package broker

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/miniotest"
)

// slowProxy forwards TCP to target, holding each chunk the client sends
// for delay first: a slow object store.
type slowProxy struct {
	ln     net.Listener
	target string
	delay  atomic.Int64 // nanoseconds
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{} // closed at cleanup: the S3 client keeps idle ones open
}

func startSlowProxy(t *testing.T, target string) *slowProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &slowProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() { defer p.wg.Done(); p.serve(c) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *slowProxy) serve(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer s.Close()
	p.mu.Lock()
	p.conns[c], p.conns[s] = struct{}{}, struct{}{}
	p.mu.Unlock()
	go func() { io.Copy(c, s); c.Close() }()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			time.Sleep(time.Duration(p.delay.Load()))
			if _, err := s.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// TestRemoteFetchWaitsAtMostRemoteFetchMaxWait: with the object store
// answering slowly, a fetch below the local start answers within
// remote.fetch.max.wait.ms — with no records and no error, though it
// asked to wait 10 s — and the read it started goes on, so a later fetch
// gets the data. A burst of historical reads never holds a consumer
// longer than the setting.
func TestRemoteFetchWaitsAtMostRemoteFetchMaxWait(t *testing.T) {
	srv := miniotest.Start(t)
	proxy := startSlowProxy(t, strings.TrimPrefix(srv.Endpoint, "http://"))
	settings := tierSettings(minioSettings(srv, srv.Bucket))
	settings["remote.storage.s3.endpoint"] = "http://" + proxy.ln.Addr().String()
	settings["remote.fetch.max.wait.ms"] = "300"
	settings["remote.log.reader.readahead.chunks"] = "0" // no read-ahead: the fetch itself must wait for a GET
	n := startNode(t, t.TempDir(), settings)
	const topic = "slow"
	createTopic(t, newAdmin(t, n), topic, e2ePartitions, tieredTopicConfigs())
	var prod produced
	produceE2E(t, newClient(t, n, kgo.RecordPartitioner(kgo.ManualPartitioner())), topic, 8<<20, &prod)
	rollAll(t, n, topic)
	waitUploaded(t, n, topic, time.Minute)
	if n.partition(topic, 0).log.LocalLogStartOffset() == 0 {
		t.Fatal("offset 0 is still local")
	}

	proxy.delay.Store(int64(time.Second))
	cl := newClient(t, n)
	id := topicID(t, n, topic)
	fetch := func() (time.Duration, int, int16) {
		req := kmsg.NewPtrFetchRequest()
		req.Version = 12
		req.ReplicaID = -1
		req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 10_000, 1, 1<<20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, id // kgo sends its newest version: v13+ names topics by id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, 1<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		start := time.Now()
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil {
			t.Fatal(err)
		}
		got := resp.Topics[0].Partitions[0]
		return time.Since(start), len(got.RecordBatches), got.ErrorCode
	}
	el, size, code := fetch()
	if code != 0 || size != 0 || el > 1500*time.Millisecond {
		t.Fatalf("first fetch with a 1 s store: %v, %d bytes, error %d; want an empty answer after ~300 ms", el, size, code)
	}
	t.Logf("first fetch answered empty after %v", el)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		el, size, code = fetch()
		if code != 0 {
			t.Fatalf("fetch error %d", code)
		}
		if size > 0 {
			t.Logf("data after the read in the air landed (%d bytes, %v)", size, el)
			return
		}
		if el > 1500*time.Millisecond {
			t.Fatalf("a fetch waited %v with remote.fetch.max.wait.ms=300", el)
		}
	}
	t.Fatal("the remote data never arrived")
}
