package loadgen

// The consumers of a run: one kgo client per consumer in each group,
// joined before the producers start, their assigned partitions and
// positions tracked so the end-to-end latency is recorded per record and
// the lag (end offsets minus positions) can be sampled.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// group is one consumer group of the run and its consumers' positions.
type group struct {
	id       string
	clients  []*kgo.Client
	wg       sync.WaitGroup
	mu       sync.Mutex // guards pos, assigned
	pos      map[string]map[int32]int64
	assigned int
}

// startConsumers starts w.Groups groups of w.Consumers consumers each,
// reading from "earliest" (each partition's log start) or "latest" (the
// end offsets now, committed for the fresh group before it joins, so no
// record produced after this call can be missed). It waits up to 30 s for
// every partition to be assigned.
func (r *runner) startConsumers(ctx, stop context.Context, from string) error {
	w := r.w
	run := fmt.Sprintf("loadgen-%d", time.Now().UnixNano())
	for g := range w.Groups {
		gr := &group{id: fmt.Sprintf("%s-g%d", run, g), pos: map[string]map[int32]int64{}}
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		var offs kadm.ListedOffsets
		var err error
		if from == "earliest" {
			offs, err = r.adm.ListStartOffsets(cctx, r.topics...)
		} else {
			offs, err = r.adm.ListEndOffsets(cctx, r.topics...)
		}
		if err == nil {
			err = offs.Error()
		}
		if err == nil && from != "earliest" {
			var resp kadm.OffsetResponses
			resp, err = r.adm.CommitOffsets(cctx, gr.id, offs.Offsets())
			if err == nil {
				err = resp.Error()
			}
		}
		cancel()
		if err != nil {
			return fmt.Errorf("loadgen: consumer group %s start offsets: %w", gr.id, err)
		}
		offs.Each(func(o kadm.ListedOffset) {
			if gr.pos[o.Topic] == nil {
				gr.pos[o.Topic] = map[int32]int64{}
			}
			gr.pos[o.Topic][o.Partition] = o.Offset
		})
		reset := kgo.NewOffset().AtStart()
		if from != "earliest" {
			reset = kgo.NewOffset().AtEnd()
		}
		for range w.Consumers {
			rec := NewRecorder()
			rec.Measure(time.Unix(0, r.measureFrom.Load()))
			opts := []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadUncommitted())}
			if w.Isolation == "read_committed" {
				opts[0] = kgo.FetchIsolationLevel(kgo.ReadCommitted())
			}
			if w.TxnInterval != "" {
				// The commit markers come through, so the group's
				// position passes the last one (the topic's end offset)
				// and the drain ends.
				opts = append(opts, kgo.KeepControlRecords())
			}
			cl, err := kgo.NewClient(append(append(opts, seedOpts(r.o.Brokers, r.o.security())...),
				kgo.ConsumerGroup(gr.id),
				kgo.ConsumeTopics(r.topics...),
				kgo.ConsumeResetOffset(reset),
				kgo.FetchMaxWait(100*time.Millisecond),
				kgo.AutoCommitInterval(time.Second),
				kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { gr.addAssigned(m, 1) }),
				kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { gr.addAssigned(m, -1) }),
				kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { gr.addAssigned(m, -1) }),
			)...)
			if err != nil {
				return fmt.Errorf("loadgen: consumer: %w", err)
			}
			gr.clients = append(gr.clients, cl)
			r.recMu.Lock()
			r.e2eRecs = append(r.e2eRecs, rec)
			r.recMu.Unlock()
			gr.wg.Add(1)
			go r.consume(stop, gr, cl, rec)
		}
		r.recMu.Lock()
		r.groups = append(r.groups, gr)
		r.recMu.Unlock()
	}
	want := len(r.topics) * w.Partitions
	deadline := time.Now().Add(30 * time.Second)
	for _, gr := range r.groups {
		for gr.assignedCount() < want {
			if time.Now().After(deadline) || ctx.Err() != nil {
				r.res.Notes = append(r.res.Notes, fmt.Sprintf("group %s: %d of %d partitions assigned after 30s; started anyway", gr.id, gr.assignedCount(), want))
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

func (g *group) addAssigned(m map[string][]int32, sign int) {
	g.mu.Lock()
	for _, ps := range m {
		g.assigned += sign * len(ps)
	}
	g.mu.Unlock()
}

func (g *group) assignedCount() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.assigned
}

// consume polls until stop ends, recording end-to-end latency from the
// send time each value carries (independent of the topic's timestamp
// type) and the group's position per partition.
func (r *runner) consume(stop context.Context, g *group, cl *kgo.Client, rec *Recorder) {
	defer g.wg.Done()
	s := &r.cons
	for stop.Err() == nil {
		fs := cl.PollFetches(stop)
		now := r.clock.Now()
		from := r.measureFrom.Load()
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				r.noteErr(fmt.Errorf("fetch %s/%d: %w", t, p, err))
				s.ivErrs.Add(1)
				if now.UnixNano() >= from {
					s.errors.Add(1)
				}
			}
		})
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			var n, bytes, mn, mb int64
			for _, x := range p.Records {
				if x.Attrs.IsControl() {
					continue // a commit marker: only the position moves past it
				}
				sent := x.Timestamp
				if len(x.Value) >= 8 {
					sent = time.Unix(0, int64(binary.BigEndian.Uint64(x.Value)))
				}
				rec.Record(sent, now)
				sz := int64(len(x.Value) + len(x.Key))
				n++
				bytes += sz
				if sent.UnixNano() >= from {
					mn++
					mb += sz
				}
			}
			s.first.CompareAndSwap(0, now.UnixNano())
			s.ivRecords.Add(n)
			s.ivBytes.Add(bytes)
			s.allRecords.Add(n)
			s.allBytes.Add(bytes)
			if mn > 0 {
				s.records.Add(mn)
				s.bytes.Add(mb)
				storeMax(&s.last, now.UnixNano())
			}
			next := p.Records[len(p.Records)-1].Offset + 1
			g.mu.Lock()
			if g.pos[p.Topic] == nil {
				g.pos[p.Topic] = map[int32]int64{}
			}
			if next > g.pos[p.Topic][p.Partition] {
				g.pos[p.Topic][p.Partition] = next
			}
			g.mu.Unlock()
		})
	}
}

// stopConsumers waits for the poll loops (stop must be canceled) and
// closes the clients (leaving the groups).
func (r *runner) stopConsumers() {
	for _, g := range r.groups {
		g.wg.Wait()
		for _, cl := range g.clients {
			cl.Close()
		}
	}
}

// lag is the summed consumer lag over groups and partitions: end offsets
// minus each group's position (-1 when it cannot be read now).
func (r *runner) lag(ctx context.Context) int64 {
	r.recMu.Lock()
	groups := append([]*group(nil), r.groups...)
	r.recMu.Unlock()
	if len(groups) == 0 {
		return 0
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ends, err := r.adm.ListEndOffsets(cctx, r.topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return -1
	}
	var sum int64
	for _, g := range groups {
		g.mu.Lock()
		ends.Each(func(o kadm.ListedOffset) {
			if d := o.Offset - g.pos[o.Topic][o.Partition]; d > 0 {
				sum += d
			}
		})
		g.mu.Unlock()
	}
	return sum
}
