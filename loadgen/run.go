package loadgen

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Options is one run: the workload and where and how to report.
type Options struct {
	Brokers    []string // seed brokers, host:port
	Workload   Workload // defaults are filled in by Run
	MetricsURL string   // a Strata admin /metrics URL for cost accounting (optional)
	PricePut   float64  // USD per 1000 PUT-class requests (PUT, LIST), default 0.005
	PriceGet   float64  // USD per 1000 GET-class requests, default 0.0004
	Progress   io.Writer
	// Keep keeps the topics this run created and its consumer groups
	// (--keep); by default Run deletes them at the end.
	Keep bool
	// Clock is the schedule's and the latencies' time source (nil: the
	// system clock).
	Clock Clock
}

// ErrUnreachable is returned by [Run] when no seed broker answers.
var ErrUnreachable = errors.New("loadgen: brokers unreachable")

// connectTimeout bounds reaching the cluster at start.
const connectTimeout = 5 * time.Second

// Run executes o.Workload against o.Brokers and returns its result. A
// canceled ctx ends the measured phase early; the result still reports
// what was measured.
func Run(ctx context.Context, o Options) (*Result, error) {
	w := o.Workload
	if err := w.Defaults(); err != nil {
		return nil, err
	}
	if len(o.Brokers) == 0 {
		return nil, errors.New("loadgen: no brokers (--brokers or STRATA_BROKERS)")
	}
	if o.Clock == nil {
		o.Clock = SystemClock{}
	}
	if o.PricePut == 0 {
		o.PricePut = 0.005
	}
	if o.PriceGet == 0 {
		o.PriceGet = 0.0004
	}
	r := &runner{o: o, w: w, clock: o.Clock, errs: map[string]int64{}}
	r.measureFrom.Store(math.MaxInt64)
	res := &Result{Version: ResultVersion, Scenario: scenarioName(w), Workload: w, Brokers: o.Brokers, Target: "kafka-compatible",
		Environment: localEnvironment()}
	r.res = res

	admCl, err := kgo.NewClient(kgo.SeedBrokers(o.Brokers...), kgo.DialTimeout(3*time.Second), kgo.RetryTimeout(connectTimeout))
	if err != nil {
		return nil, fmt.Errorf("loadgen: %w", err)
	}
	defer admCl.Close()
	r.adm = kadm.NewClient(admCl)
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	meta, err := r.adm.BrokerMetadata(cctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnreachable, strings.Join(o.Brokers, ","), err)
	}
	if meta.Cluster == "kfake" {
		res.Target = "kfake"
	}
	var before map[string]float64
	res.Environment.BrokerBuild = "no --metrics-url given: the broker's build is unknown"
	if o.MetricsURL != "" {
		var info map[string]string
		before, info, err = scrapeWithInfo(ctx, o.MetricsURL)
		if err != nil {
			return nil, err
		}
		if res.Environment.Broker = buildOf(info); res.Environment.Broker != nil {
			res.Environment.BrokerBuild = ""
		} else {
			res.Environment.BrokerBuild = "no " + metricBuildInfo + " in " + o.MetricsURL
		}
		if isStrata(before) {
			res.Target = "strata"
		} else {
			res.Notes = append(res.Notes, "the metrics URL exports no strata_ metrics: no cost accounting")
		}
	}
	for i := range w.Topics {
		if w.Topics == 1 {
			r.topics = append(r.topics, w.Topic)
		} else {
			r.topics = append(r.topics, fmt.Sprintf("%s-%d", w.Topic, i))
		}
	}
	defer r.cleanup(ctx)
	if err := r.prepareTopics(ctx); err != nil {
		return nil, err
	}
	r.describeCluster(ctx, meta)
	res.StartedAt = time.Now().UTC().Format(time.RFC3339)

	if w.Scenario == "catch-up" {
		err = r.catchUp(ctx)
	} else {
		err = r.steady(ctx)
	}
	if err != nil {
		return nil, err
	}
	r.finish()
	if before != nil && res.Target == "strata" {
		after, err := scrape(context.WithoutCancel(ctx), o.MetricsURL)
		if err != nil {
			res.Notes = append(res.Notes, "cost: "+err.Error())
		} else {
			res.Cost = costOf(before, after, res.Produce.Bytes, res.Consume.Bytes, o)
		}
	}
	return res, nil
}

// cleanup deletes the consumer groups of the run and the topics it
// created, unless o.Keep, and notes what it removed or failed to. It runs
// after the cost scrape, so the deletions' object-store traffic is not
// charged to the run.
func (r *runner) cleanup(ctx context.Context) {
	if r.o.Keep {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var ids []string
	r.recMu.Lock()
	for _, g := range r.groups {
		ids = append(ids, g.id)
	}
	r.recMu.Unlock()
	var removed, failed []string
	if len(ids) > 0 {
		resp, err := r.adm.DeleteGroups(ctx, ids...)
		for _, id := range ids {
			g, ok := resp[id]
			switch {
			case err != nil:
				failed = append(failed, fmt.Sprintf("group %s: %v", id, err))
			case ok && g.Err != nil:
				failed = append(failed, fmt.Sprintf("group %s: %v", id, g.Err))
			default:
				removed = append(removed, "group "+id)
			}
		}
	}
	if len(r.created) > 0 {
		resp, err := r.adm.DeleteTopics(ctx, r.created...)
		for _, t := range r.created {
			d, ok := resp[t]
			switch {
			case err != nil:
				failed = append(failed, fmt.Sprintf("topic %s: %v", t, err))
			case ok && d.Err != nil:
				failed = append(failed, fmt.Sprintf("topic %s: %v%s", t, d.Err, detail(d.ErrMessage)))
			default:
				removed = append(removed, "topic "+t)
			}
		}
	}
	if r.res == nil {
		return
	}
	if len(removed) > 0 {
		r.res.Notes = append(r.res.Notes, "removed what the run created (--keep keeps it): "+strings.Join(removed, ", "))
	}
	if len(failed) > 0 {
		r.res.Notes = append(r.res.Notes, "could not remove: "+strings.Join(failed, "; "))
	}
}

func scenarioName(w Workload) string {
	if w.Scenario != "" {
		return w.Scenario
	}
	if w.Name != "" {
		return w.Name
	}
	if w.Rate == 0 {
		return "max-throughput"
	}
	return "fixed-rate"
}

// side is one direction's counters: the measured phase's totals and the
// sampler's per-second interval.
type side struct {
	records, bytes, errors     atomic.Int64 // measured phase
	ivRecords, ivBytes, ivErrs atomic.Int64 // since the last sample, any phase
	last                       atomic.Int64 // unix nanos of the last measured record
	first                      atomic.Int64 // unix nanos of the first record of any phase (0: none yet)
	allRecords, allBytes       atomic.Int64 // every phase
}

type runner struct {
	o     Options
	w     Workload
	clock Clock
	res   *Result
	adm   *kadm.Client

	topics  []string
	created []string // the topics this run created (an existing one is not deleted)
	// measureFrom is the measured phase's start (unix nanos; MaxInt64
	// before it is known): records intended before it are warm-up.
	measureFrom atomic.Int64

	prod, cons side
	pubRecs    []*Recorder // one per producer (every phase's producers)
	e2eRecs    []*Recorder // one per consumer
	recMu      sync.Mutex  // guards pubRecs, e2eRecs, groups

	groups []*group

	errMu sync.Mutex // guards errs
	errs  map[string]int64

	// consFrom is the consumers' start in series time (the catch-up's
	// consume rates count from it).
	consFrom float64

	brokerMu  sync.Mutex // guards the broker's latest figures
	brokerCPU float64    // CPU seconds per second between the last two scrapes
	brokerRSS float64
	brokerErr error // the last scrape's, nil when it had both figures

	seriesMu sync.Mutex // guards series
	series   []Sample

	liveMu   sync.Mutex // guards livePub, liveE2E
	livePub  *hdr.Histogram
	liveE2E  *hdr.Histogram
	measured time.Duration // set at the end of the measured phase
	consumed time.Duration // measured phase through the consumers' drain
}

func (r *runner) noteErr(err error) {
	msg := err.Error()
	r.errMu.Lock()
	r.errs[msg]++
	r.errMu.Unlock()
}

// prepareTopics creates the topics (an existing one is used as is) and
// waits until every partition has a leader that answers ListOffsets.
func (r *runner) prepareTopics(ctx context.Context) error {
	w := r.w
	if *w.CreateTopics {
		configs := map[string]*string{}
		for k, v := range w.TopicConfigs {
			configs[k] = &v
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		resp, err := r.adm.CreateTopics(cctx, int32(w.Partitions), int16(w.ReplicationFactor), configs, r.topics...)
		cancel()
		if err != nil {
			return fmt.Errorf("loadgen: create topics: %w", err)
		}
		for _, t := range resp.Sorted() {
			if t.Err == nil {
				r.created = append(r.created, t.Topic)
			}
		}
		for _, t := range resp.Sorted() {
			if t.Err != nil && !errors.Is(t.Err, kerr.TopicAlreadyExists) {
				return fmt.Errorf("loadgen: create topic %s: %v%s", t.Topic, t.Err, detail(t.ErrMessage))
			}
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ends, err := r.adm.ListEndOffsets(cctx, r.topics...)
		cancel()
		if err == nil {
			err = ends.Error()
		}
		if err == nil {
			n := 0
			ends.Each(func(kadm.ListedOffset) { n++ })
			if n == 0 {
				err = fmt.Errorf("no partitions")
			} else {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("loadgen: topics %s not ready: %v", strings.Join(r.topics, ","), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func detail(msg string) string {
	if msg == "" {
		return ""
	}
	return " (" + msg + ")"
}

// producerOpts are the kgo options of a workload's producer client.
func (r *runner) producerOpts() []kgo.Opt {
	w := r.w
	opts := []kgo.Opt{
		kgo.SeedBrokers(r.o.Brokers...),
		kgo.ProducerLinger(dur(w.Linger)),
		kgo.ProducerBatchMaxBytes(int32(size(w.BatchBytes))),
		kgo.MaxBufferedRecords(max(w.Window, DefaultWindow)),
		kgo.RecordDeliveryTimeout(2 * time.Minute),
	}
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
	c := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}[w.Compression]
	opts = append(opts, kgo.ProducerBatchCompression(c))
	if w.MaxInFlight > 0 {
		opts = append(opts, kgo.MaxProduceRequestsInflightPerBroker(w.MaxInFlight))
	}
	return opts
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
}

// newProducers connects w.Producers producers sharing rate (records/s, 0:
// unthrottled) and, if fill is set, stopping once it is spent; launch
// starts them.
func (r *runner) newProducers(rate float64, fill *atomic.Int64) ([]*producer, error) {
	w := r.w
	var ps []*producer
	for i := range w.Producers {
		cl, err := kgo.NewClient(r.producerOpts()...)
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
	for n := 0; stop.Err() == nil; n++ {
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
		if measured {
			s.records.Add(1)
			s.bytes.Add(n)
			s.last.Store(now.UnixNano())
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
			cl, err := kgo.NewClient(
				kgo.SeedBrokers(r.o.Brokers...),
				kgo.ConsumerGroup(gr.id),
				kgo.ConsumeTopics(r.topics...),
				kgo.ConsumeResetOffset(reset),
				kgo.FetchMaxWait(100*time.Millisecond),
				kgo.AutoCommitInterval(time.Second),
				kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { gr.addAssigned(m, 1) }),
				kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { gr.addAssigned(m, -1) }),
				kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { gr.addAssigned(m, -1) }),
			)
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
				s.last.Store(now.UnixNano())
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

// startSampler starts the sampler and returns the function that stops
// it (idempotent): the sampler then takes one last, partial sample, so
// what was produced and consumed since the last tick is in the series
// too — a catch-up whose consumers read the whole backlog in the last
// fraction of a second shows that, not a flat zero.
func (r *runner) startSampler(ctx context.Context) (stop func()) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	resDone := make(chan struct{})
	if r.o.MetricsURL != "" {
		go r.sampleResources(sctx, resDone)
	} else {
		close(resDone)
	}
	go r.sampler(sctx, done)
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
			<-resDone
		})
	}
}

// sampler appends one Sample per second until ctx ends, then a last one
// for the partial interval, and prints the live line to o.Progress.
func (r *runner) sampler(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	ivPub, ivE2E := newHist(), newHist()
	r.liveMu.Lock()
	r.livePub, r.liveE2E = newHist(), newHist()
	r.liveMu.Unlock()
	prev := time.Now()
	for {
		select {
		case <-ctx.Done():
			// The interval since the last tick: its lag is read with a
			// context of its own (ctx is done).
			now := time.Now()
			if now.Sub(prev) >= 10*time.Millisecond {
				lctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				r.sample(lctx, now, prev, ivPub, ivE2E)
				cancel()
			}
			return
		case now := <-tk.C:
			r.sample(ctx, now, prev, ivPub, ivE2E)
			prev = now
		}
	}
}

// sample appends the Sample of the interval (prev, now].
func (r *runner) sample(ctx context.Context, now, prev time.Time, ivPub, ivE2E *hdr.Histogram) {
	r.recMu.Lock()
	pubs, e2es := append([]*Recorder(nil), r.pubRecs...), append([]*Recorder(nil), r.e2eRecs...)
	r.recMu.Unlock()
	ivPub.Reset()
	ivE2E.Reset()
	for _, x := range pubs {
		x.drainInterval(ivPub)
	}
	for _, x := range e2es {
		x.drainInterval(ivE2E)
	}
	t := float64(now.UnixNano()-r.measureFrom.Load()) / 1e9
	if r.measureFrom.Load() == math.MaxInt64 {
		t = -1
	}
	s := Sample{
		T:              math.Round(t*1000) / 1000,
		Seconds:        math.Round(now.Sub(prev).Seconds()*1000) / 1000,
		ProduceRecords: r.prod.ivRecords.Swap(0),
		ProduceBytes:   r.prod.ivBytes.Swap(0),
		ConsumeRecords: r.cons.ivRecords.Swap(0),
		ConsumeBytes:   r.cons.ivBytes.Swap(0),
		PublishP99:     p99Of(ivPub),
		EndToEndP99:    p99Of(ivE2E),
		Lag:            r.lag(ctx),
		ProduceErrors:  r.prod.ivErrs.Swap(0),
		ConsumeErrors:  r.cons.ivErrs.Swap(0),
	}
	s.BrokerCPUCores, s.BrokerRSSBytes = r.brokerNow()
	r.liveMu.Lock()
	if t >= 0 {
		r.livePub.Merge(ivPub)
		r.liveE2E.Merge(ivE2E)
	}
	soFar := p99Of(r.livePub)
	r.liveMu.Unlock()
	r.seriesMu.Lock()
	r.series = append(r.series, s)
	r.seriesMu.Unlock()
	if r.o.Progress != nil {
		perSec := func(n int64) float64 { return float64(n) / max(s.Seconds, 0.001) }
		fmt.Fprintf(r.o.Progress, "%s %7.1fs  produce %9.0f rec/s %8.2f MB/s  p99 %8.2f ms (so far %.2f)  consume %9.0f rec/s %8.2f MB/s  e2e p99 %8.2f ms  lag %d\n",
			r.res.Scenario, s.T, perSec(s.ProduceRecords), perSec(s.ProduceBytes)/1e6, s.PublishP99, soFar,
			perSec(s.ConsumeRecords), perSec(s.ConsumeBytes)/1e6, s.EndToEndP99, s.Lag)
	}
}

// steady is every scenario but catch-up: consumers (if any) join first,
// producers run through warm-up and the measured phase (or until the fill
// is written), then the consumers drain what was produced.
func (r *runner) steady(ctx context.Context) error {
	w := r.w
	warm, measure := dur(w.Warmup), dur(w.Duration)
	stopCons, cancelCons := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelCons()
	var stopSampler func()
	defer func() {
		if stopSampler != nil {
			stopSampler()
		}
	}()
	start := r.clock.Now()
	r.measureFrom.Store(start.Add(warm).UnixNano())
	if w.Consumers > 0 {
		if err := r.startConsumers(ctx, stopCons, w.ConsumeFrom); err != nil {
			cancelCons()
			r.stopConsumers()
			return err
		}
	}
	var fill *atomic.Int64
	if w.FillBytes != "" {
		fill = new(atomic.Int64)
		fill.Store(size(w.FillBytes))
	}
	var ps []*producer
	if w.Producers > 0 {
		var err error
		if ps, err = r.newProducers(float64(w.Rate), fill); err != nil {
			cancelCons()
			r.stopConsumers()
			return err
		}
	}
	// Clients are connected and consumers joined: the schedule starts now,
	// the measured phase after the warm-up.
	start = r.clock.Now()
	r.measureFrom.Store(start.Add(warm).UnixNano())
	r.recMu.Lock()
	for _, x := range r.e2eRecs {
		x.Measure(start.Add(warm))
	}
	r.recMu.Unlock()
	stopSampler = r.startSampler(ctx)
	if w.Producers > 0 {
		r.launch(ps, ctx, start, start.Add(warm+measure))
		// The loops end once every slot before the end is sent, on ctx,
		// or when the fill is spent.
		for _, p := range ps {
			p.wg.Wait()
		}
		r.measured = r.clock.Now().Sub(time.Unix(0, r.measureFrom.Load()))
		r.stopProducers(ps, dur(w.Drain)+30*time.Second)
	} else {
		select {
		case <-ctx.Done():
		case <-time.After(warm + measure):
		}
		r.measured = r.clock.Now().Sub(time.Unix(0, r.measureFrom.Load()))
	}
	if w.Consumers > 0 {
		// Everything acknowledged is read: lag reaches 0 in every group,
		// or the drain time runs out (noted).
		deadline := time.Now().Add(dur(w.Drain))
		for {
			l := r.lag(ctx)
			if l == 0 {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				r.res.Notes = append(r.res.Notes, fmt.Sprintf("consumers stopped with lag %d after the %s drain", l, w.Drain))
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		cancelCons()
		r.stopConsumers()
	}
	if last := r.cons.last.Load(); last > 0 {
		r.consumed = max(r.measured, time.Unix(0, last).Sub(time.Unix(0, r.measureFrom.Load())))
	}
	return nil
}

// finish fills the result from the counters and recorders.
func (r *runner) finish() {
	res := r.res
	if r.measured <= 0 {
		r.measured = time.Millisecond
	}
	res.Duration = r.measured.Seconds()
	pub, e2e := newHist(), newHist()
	for _, x := range r.pubRecs {
		x.mergeTotal(pub)
	}
	for _, x := range r.e2eRecs {
		x.mergeTotal(e2e)
	}
	res.Produce = summaryOf(&r.prod, r.measured, pub)
	consDur := r.consumed
	if consDur <= 0 {
		consDur = r.measured
	}
	if res.CatchUp == nil {
		res.Consume = summaryOf(&r.cons, consDur, e2e)
	}
	res.EndToEnd = latencyOf(e2e)
	res.Histogram = Histogram{Publish: percentilesOf(pub), EndToEnd: percentilesOf(e2e)}
	r.seriesMu.Lock()
	res.Series = append([]Sample(nil), r.series...)
	r.seriesMu.Unlock()
	res.Stability = stabilityOf(res.Series, res.Duration, r.consFrom)
	res.BrokerResources = r.brokerResources()
	r.errMu.Lock()
	for msg, n := range r.errs {
		res.Errors = append(res.Errors, fmt.Sprintf("%d× %s", n, msg))
	}
	r.errMu.Unlock()
	sort.Strings(res.Errors)
}

func summaryOf(s *side, d time.Duration, h *hdr.Histogram) Summary {
	sec := d.Seconds()
	return Summary{
		Records:       s.records.Load(),
		Bytes:         s.bytes.Load(),
		Errors:        s.errors.Load(),
		RecordsPerSec: float64(s.records.Load()) / sec,
		MBPerSec:      float64(s.bytes.Load()) / 1e6 / sec,
		Latency:       latencyOf(h),
	}
}
