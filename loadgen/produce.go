package loadgen

// The producers of a run: kgo clients built from the workload, each
// goroutine sending at its share of the open-loop rate (or as fast as the
// fill allows), with publish latency recorded in each record's promise.

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// producerOpts are the kgo options of a workload's producer client.
func (r *runner) producerOpts() []kgo.Opt {
	w := r.w
	opts := append(seedOpts(r.o.Brokers, r.o.security()),
		kgo.ProducerLinger(dur(w.Linger)),
		kgo.ProducerBatchMaxBytes(int32(size(w.BatchBytes))),
		kgo.MaxBufferedRecords(max(w.Window, DefaultWindow)),
		kgo.RecordDeliveryTimeout(2*time.Minute),
	)
	switch w.Acks {
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	default:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	}
	if !*w.Idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	opts = append(opts, kgo.ProducerBatchCompression(codecs[w.Compression]))
	if w.MaxInFlight > 0 {
		opts = append(opts, kgo.MaxProduceRequestsInflightPerBroker(w.MaxInFlight))
	}
	return opts
}

// codecs are the producers' batch compressions by their flag names.
var codecs = map[string]kgo.CompressionCodec{
	"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
	"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
}

// producer is one producing goroutine and its client.
type producer struct {
	r      *runner
	cl     *kgo.Client
	sched  *Schedule
	rate   float64 // this producer's share, records/s
	sizes  *SizeSampler
	keys   *KeyGen
	rec    *Recorder
	window chan struct{}    // rate 0: records in flight
	free   chan *kgo.Record // records (and their value buffers) whose promise fired
	fill   *atomic.Int64    // bytes left to write (nil: unbounded)
	wg     sync.WaitGroup   // the loop
	filler []byte           // payload bytes copied after the timestamp
	// txnEvery, when not 0, is Workload.TxnInterval: the loop commits a
	// transaction that often (the client has a transactional id).
	txnEvery time.Duration
	inTxn    bool
}

// newProducers connects w.Producers producers sharing rate (records/s, 0:
// unthrottled) and, if fill is set, stopping once it is spent; launch
// starts them.
func (r *runner) newProducers(rate float64, fill *atomic.Int64) ([]*producer, error) {
	w := r.w
	var ps []*producer
	txnBase := fmt.Sprintf("loadgen-%s-%d", r.topics[0], time.Now().UnixNano())
	for i := range w.Producers {
		opts := r.producerOpts()
		if w.TxnInterval != "" {
			opts = append(opts, kgo.TransactionalID(fmt.Sprintf("%s-p%d", txnBase, i)))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			for _, p := range ps {
				p.cl.Close()
			}
			return nil, fmt.Errorf("loadgen: producer: %w", err)
		}
		seed := w.Seed
		if seed == 0 {
			seed = uint64(time.Now().UnixNano())
		}
		seed += uint64(i) * 0x9e3779b97f4a7c15
		sizes, _ := NewSizeSampler(w.RecordSize, seed)
		keys, _ := NewKeyGen(w.Keys, w.KeySpace, w.ZipfS, seed+1)
		p := &producer{
			r: r, cl: cl, sizes: sizes, keys: keys, rec: NewRecorder(), fill: fill,
			rate: rate / float64(w.Producers),
			free: make(chan *kgo.Record, max(w.Window, DefaultWindow)+64),
		}
		// Incompressible-ish payload so compression codecs do real work:
		// a fixed pseudo-random pattern, not zeros.
		p.filler = make([]byte, sizes.Max())
		for j := range p.filler {
			p.filler[j] = byte(keys.rng.Uint32())
		}
		if rate == 0 {
			p.window = make(chan struct{}, w.Window)
		}
		if w.TxnInterval != "" {
			p.txnEvery = dur(w.TxnInterval)
		}
		r.recMu.Lock()
		r.pubRecs = append(r.pubRecs, p.rec)
		r.recMu.Unlock()
		ps = append(ps, p)
	}
	return ps, nil
}

// launch starts the producers' loops, their schedules starting at start
// and their measured phase at measureFrom; they run until stop ends, the
// fill is spent, or (end not zero) every slot before end has been sent.
func (r *runner) launch(ps []*producer, stop context.Context, start, end time.Time) {
	for _, p := range ps {
		p.sched = NewScheduleAt(r.clock, start, p.rate)
		p.rec.Measure(time.Unix(0, r.measureFrom.Load()))
		p.wg.Add(1)
		go p.loop(stop, end)
	}
}

// loop schedules and hands records to the client until stop ends, the
// fill budget is spent, or the next slot is at or past end (zero: no
// end). Produce may block (the client's buffer is full when the cluster
// is slow); the schedule does not move meanwhile, so the records due
// during the block go out at once afterwards, each measured from its own
// slot — and that holds at the end too: a loop running late on a loaded
// machine still sends every slot before end, so a run of rate r for d
// seconds sends r×d records whatever the cluster or the machine did.
func (p *producer) loop(stop context.Context, end time.Time) {
	defer p.wg.Done()
	topics := p.r.topics
	// The in-flight window (rate 0) is waited for no later than end: its
	// slots are "now", so none past end would be sent anyway.
	win := stop
	if !end.IsZero() {
		var cancel context.CancelFunc
		win, cancel = context.WithDeadline(stop, end)
		defer cancel()
	}
	var txnStart time.Time
	if p.txnEvery > 0 {
		defer p.endTxn(stop)
	}
	for n := 0; stop.Err() == nil; n++ {
		if p.txnEvery > 0 && (!p.inTxn || time.Since(txnStart) >= p.txnEvery) {
			// Commit what was produced since the last commit (the
			// schedule does not move meanwhile: the records due go out
			// at once afterwards, measured from their own slots).
			p.endTxn(stop)
			if err := p.cl.BeginTransaction(); err != nil {
				p.r.noteErr(fmt.Errorf("begin transaction: %w", err))
				return
			}
			p.inTxn, txnStart = true, time.Now()
		}
		sz := p.sizes.Next()
		if p.fill != nil && p.fill.Add(-int64(sz)) < 0 {
			return
		}
		if p.window != nil {
			select {
			case p.window <- struct{}{}:
			case <-win.Done():
				return
			}
		}
		var intended time.Time
		err := context.DeadlineExceeded
		if end.IsZero() || p.sched.Due().Before(end) {
			// A due slot returns at once; a future one is before end,
			// so Next sleeps no later than end.
			intended, err = p.sched.Next(stop)
		}
		if err != nil {
			if p.window != nil {
				<-p.window
			}
			return
		}
		var rec *kgo.Record
		select {
		case rec = <-p.free:
		default:
			rec = &kgo.Record{Value: make([]byte, 0, p.sizes.Max())}
		}
		v := rec.Value[:sz]
		binary.BigEndian.PutUint64(v, uint64(intended.UnixNano()))
		copy(v[8:], p.filler)
		*rec = kgo.Record{Topic: topics[n%len(topics)], Key: p.keys.AppendKey(rec.Key[:0]), Value: v, Timestamp: intended}
		// Records already buffered outlive stop: they are flushed, not
		// failed, so the produce context is not stop.
		p.cl.Produce(context.WithoutCancel(stop), rec, p.promise)
	}
}

// endTxn flushes the open transaction's records and commits it (aborts
// it if a record failed); a commit that fails is counted as the run's
// error, and its records are not consumed by read_committed readers.
func (p *producer) endTxn(stop context.Context) {
	if !p.inTxn {
		return
	}
	p.inTxn = false
	// Bounded even when stop has ended: the last transaction is
	// committed, not left to time out.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(stop), time.Minute)
	defer cancel()
	commit := kgo.TryCommit
	if err := p.cl.Flush(ctx); err != nil {
		p.r.noteErr(fmt.Errorf("flush before commit: %w", err))
		commit = kgo.TryAbort
	}
	if err := p.cl.EndTransaction(ctx, commit); err != nil {
		p.r.noteErr(fmt.Errorf("end transaction: %w", err))
		return
	}
	if commit == kgo.TryCommit {
		p.r.prod.txnCommits.Add(1)
	}
}

// promise runs on the client's promise goroutine for every record.
func (p *producer) promise(rec *kgo.Record, err error) {
	now := p.r.clock.Now()
	intended := time.Unix(0, int64(binary.BigEndian.Uint64(rec.Value)))
	measured := intended.UnixNano() >= p.r.measureFrom.Load()
	n := int64(len(rec.Value) + len(rec.Key))
	s := &p.r.prod
	if err != nil {
		p.r.noteErr(fmt.Errorf("produce: %w", err))
		s.ivErrs.Add(1)
		if measured {
			s.errors.Add(1)
		}
	} else {
		p.rec.Record(intended, now)
		s.ivRecords.Add(1)
		s.ivBytes.Add(n)
		s.allRecords.Add(1)
		s.allBytes.Add(n)
		if measured {
			s.records.Add(1)
			s.bytes.Add(n)
			storeMax(&s.last, now.UnixNano())
		}
	}
	if p.window != nil {
		<-p.window
	}
	select {
	case p.free <- rec:
	default:
	}
}

// stopProducers waits for the loops (stop must be canceled or the fill
// spent), flushes what is buffered within timeout and closes the clients.
func (r *runner) stopProducers(ps []*producer, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, p := range ps {
		p.wg.Wait()
	}
	for _, p := range ps {
		if err := p.cl.Flush(ctx); err != nil {
			r.noteErr(fmt.Errorf("flush: %w", err))
		}
		p.cl.Close()
	}
}

// storeMax raises v to x unless it already holds more: producers and
// consumers record their last record's time concurrently, out of order.
func storeMax(v *atomic.Int64, x int64) {
	for {
		cur := v.Load()
		if cur >= x || v.CompareAndSwap(cur, x) {
			return
		}
	}
}
