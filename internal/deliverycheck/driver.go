package deliverycheck

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Recorder collects a [History] from concurrent producers and consumers.
// Safe for concurrent use.
type Recorder struct {
	mu sync.Mutex // guards h
	h  History
}

// NewRecorder returns an empty recorder; idempotent says whether the
// producers feeding it are idempotent.
func NewRecorder(idempotent bool) *Recorder {
	return &Recorder{h: History{Idempotent: idempotent, FinalEnds: map[int32]int64{}}}
}

// SetChecksummed marks the history as made of self-describing values
// ([ProduceOptions.Checksum]): [Check] verifies every value read.
func (rc *Recorder) SetChecksummed() {
	rc.mu.Lock()
	rc.h.Checksummed = true
	rc.mu.Unlock()
}

// Sent records the outcome of producing value (r and err as a franz-go
// promise receives them).
func (rc *Recorder) Sent(value string, r *kgo.Record, err error) {
	s := Send{Value: value}
	if err == nil {
		s.Status, s.Partition, s.Offset = SendOK, r.Partition, r.Offset
	} else {
		s.Status, s.Err = Classify(err), err.Error()
	}
	rc.mu.Lock()
	rc.h.Sends = append(rc.h.Sends, s)
	rc.mu.Unlock()
}

// Polled records r as read by consumer in assignment generation gen.
func (rc *Recorder) Polled(consumer string, gen int32, r *kgo.Record) {
	rc.mu.Lock()
	rc.h.Polls = append(rc.h.Polls, Poll{Consumer: consumer, Generation: gen, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
	rc.mu.Unlock()
}

// History returns a copy of what was recorded.
func (rc *Recorder) History() History {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	h := rc.h
	h.Sends = append([]Send(nil), rc.h.Sends...)
	h.Polls = append([]Poll(nil), rc.h.Polls...)
	h.Final = append([]Poll(nil), rc.h.Final...)
	h.FinalEnds = map[int32]int64{}
	for k, v := range rc.h.FinalEnds {
		h.FinalEnds[k] = v
	}
	return h
}

// Classify maps a produce error to what it says about the write: only
// errors a broker returns before appending anything, for every attempt
// alike, are [SendFailed]; anything else (timeouts, lost connections,
// retriable errors after retries: an earlier attempt may have been
// appended) is [SendUnknown].
func Classify(err error) SendStatus {
	switch {
	case err == nil:
		return SendOK
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge),
		errors.Is(err, kerr.InvalidRecord), errors.Is(err, kerr.CorruptMessage),
		errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.InvalidTopicException),
		errors.Is(err, kerr.InvalidRequiredAcks):
		return SendFailed
	}
	return SendUnknown
}

// ProduceOptions tunes [Produce].
type ProduceOptions struct {
	// Prefix makes the values unique across runs sharing a topic:
	// values are Prefix-00000000, Prefix-00000001, ...
	Prefix string
	// MaxInFlight bounds records buffered and unanswered (default 200).
	MaxInFlight int
	// Interval paces sends: one record every Interval (0: as fast as
	// MaxInFlight allows).
	Interval time.Duration
	// Pad is appended to each value to make records bigger.
	Pad string
	// Checksum makes the values self-describing ([EncodeValue] with
	// Prefix as the producer): readers verify them (set
	// [History.Checksummed]).
	Checksum bool
}

// ProduceStats are counts of a [Produce] run so far.
type ProduceStats struct {
	Sent, Acked, Failed int64
}

// Producer is a running [Produce] load.
type Producer struct {
	stop    context.CancelFunc
	done    chan struct{}
	sent    atomic.Int64
	acked   atomic.Int64
	failed  atomic.Int64
	lastAck atomic.Int64 // unix nanos of the last acknowledgement
}

// Stats returns the counts so far.
func (p *Producer) Stats() ProduceStats {
	return ProduceStats{Sent: p.sent.Load(), Acked: p.acked.Load(), Failed: p.failed.Load()}
}

// LastAck returns when the last acknowledgement arrived (zero before the
// first).
func (p *Producer) LastAck() time.Time {
	if n := p.lastAck.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Stop stops sending, waits until every send has its outcome (a bounded
// wait: the client's delivery timeout), and returns the final counts.
func (p *Producer) Stop() ProduceStats {
	p.stop()
	<-p.done
	return p.Stats()
}

// Produce streams unique values into topic through cl (which the caller
// configures: acks=all and idempotence are franz-go's defaults; a
// RecordDeliveryTimeout bounds each outcome), recording every outcome in
// rc, until ctx ends or Stop is called.
func Produce(ctx context.Context, cl *kgo.Client, topic string, rc *Recorder, o ProduceOptions) *Producer {
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 200
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &Producer{stop: cancel, done: make(chan struct{})}
	sem := make(chan struct{}, o.MaxInFlight)
	go func() {
		defer close(p.done)
		var wg sync.WaitGroup
		defer wg.Wait()
		var tick <-chan time.Time
		if o.Interval > 0 {
			tk := time.NewTicker(o.Interval)
			defer tk.Stop()
			tick = tk.C
		}
		for i := 0; ; i++ {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			if tick != nil {
				select {
				case <-tick:
				case <-ctx.Done():
					<-sem
					return
				}
			}
			v := fmt.Sprintf("%s-%08d%s", o.Prefix, i, o.Pad)
			if o.Checksum {
				v = EncodeValue(o.Prefix, int64(i), o.Pad)
			}
			wg.Add(1)
			p.sent.Add(1)
			// The record's own context is not ctx: stopping the load must
			// not fail records already handed to the client (that would
			// make an acknowledged append look failed).
			cl.Produce(context.WithoutCancel(ctx), &kgo.Record{Topic: topic, Value: []byte(v)}, func(r *kgo.Record, err error) {
				defer wg.Done()
				defer func() { <-sem }()
				rc.Sent(v, r, err)
				if err != nil {
					p.failed.Add(1)
				} else {
					p.acked.Add(1)
					p.lastAck.Store(time.Now().UnixNano())
				}
			})
		}
	}()
	return p
}

// FinalRead reads every partition of topic from its log start to its end
// offset (listed first, through cl's cluster) and records it as the final
// read of rc. It returns an error when a partition cannot be read to its
// end before ctx ends. Run it after the faults healed. opts go to the
// reading client (e.g. kgo.DialTLSConfig for an SSL listener).
func FinalRead(ctx context.Context, cl *kgo.Client, topic string, rc *Recorder, opts ...kgo.Opt) error {
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("deliverycheck: final read: list end offsets: %w", err)
	}
	if err := ends.Error(); err != nil {
		return fmt.Errorf("deliverycheck: final read: list end offsets: %w", err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil || starts.Error() != nil {
		return fmt.Errorf("deliverycheck: final read: list start offsets: %v / %v", err, starts.Error())
	}
	want := map[int32]int64{}
	from := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		want[o.Partition] = o.Offset
		from[o.Partition] = kgo.NewOffset().At(0)
		if s, ok := starts.Lookup(topic, o.Partition); ok {
			from[o.Partition] = kgo.NewOffset().At(s.Offset)
		}
	})
	seeds := brokerSeeds(ctx, adm)
	rd, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
	if err != nil {
		return err
	}
	defer rd.Close()
	next := map[int32]int64{}
	for p, o := range from {
		next[p] = o.EpochOffset().Offset
	}
	var got []Poll
	for {
		done := true
		for p, end := range want {
			if next[p] < end {
				done = false
			}
		}
		if done {
			break
		}
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("deliverycheck: final read: read up to %v of ends %v: %w", next, want, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= want[r.Partition] {
				return // appended after the listing
			}
			got = append(got, Poll{Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
			next[r.Partition] = r.Offset + 1
		})
	}
	sort.SliceStable(got, func(i, j int) bool { return got[i].Partition < got[j].Partition })
	rc.mu.Lock()
	rc.h.Final = append(rc.h.Final, got...)
	for p, e := range want {
		rc.h.FinalEnds[p] = e
	}
	rc.mu.Unlock()
	return nil
}

// brokerSeeds lists the cluster's brokers (the final read must not depend
// on the seed the load used being alive).
func brokerSeeds(ctx context.Context, adm *kadm.Client) []string {
	m, err := adm.BrokerMetadata(ctx)
	var out []string
	if err == nil {
		for _, b := range m.Brokers {
			out = append(out, fmt.Sprintf("%s:%d", b.Host, b.Port))
		}
	}
	return out
}

// Consume reads topic in consumer group group as consumer name through a
// new client seeded with seeds (opts added), recording every record with
// its assignment generation (bumped on each assignment or revocation),
// until ctx ends. It returns once the client is closed.
func Consume(ctx context.Context, seeds []string, group, topic, name string, rc *Recorder, opts ...kgo.Opt) error {
	var gen atomic.Int32
	bump := func(context.Context, *kgo.Client, map[string][]int32) { gen.Add(1) }
	opts = append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.OnPartitionsAssigned(bump), kgo.OnPartitionsRevoked(bump), kgo.OnPartitionsLost(bump),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond), kgo.BlockRebalanceOnPoll()}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		// Rebalances wait for AllowRebalance: the generation read now is
		// the one these records were fetched in.
		g := gen.Load()
		fs.EachRecord(func(r *kgo.Record) { rc.Polled(name, g, r) })
		cl.AllowRebalance()
	}
	return nil
}

// ConsumePartitions reads every partition of topic directly (no group:
// the client assigns itself all of them, from the log start) as consumer
// name through a new client seeded with seeds (opts added), recording
// every record in generation 0, until ctx ends.
func ConsumePartitions(ctx context.Context, seeds []string, topic, name string, rc *Recorder, opts ...kgo.Opt) error {
	opts = append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { rc.Polled(name, 0, r) })
	}
	return nil
}
