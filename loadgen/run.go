package loadgen

import (
	"context"
	"crypto/tls"
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
	"github.com/twmb/franz-go/pkg/sasl"
)

// Options is one run: the workload and where and how to report.
type Options struct {
	Brokers    []string    // seed brokers, host:port
	TLS        *tls.Config // nil: PLAINTEXT; else every client connects with TLS (--tls-ca, --tls-cert, --tls-key)
	Workload   Workload    // defaults are filled in by Run
	MetricsURL string      // a Strata admin /metrics URL for cost accounting (optional)
	PricePut   float64     // USD per 1000 PUT-class requests (PUT, LIST), default 0.005
	PriceGet   float64     // USD per 1000 GET-class requests, default 0.0004
	Progress   io.Writer
	// Keep keeps the topics this run created and its consumer groups
	// (--keep); by default Run deletes them at the end.
	Keep bool
	// Clock is the schedule's and the latencies' time source (nil: the
	// system clock).
	Clock Clock
	// SASL, when set, authenticates every client (--command-config's
	// sasl.mechanism and sasl.jaas.config).
	SASL sasl.Mechanism
}

// seedOpts are the seed brokers and the security options sec, before opts.
func seedOpts(brokers []string, sec []kgo.Opt, opts ...kgo.Opt) []kgo.Opt {
	out := append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, sec...)
	return append(out, opts...)
}

// securityOpts are the client options of TLS (when tc is set) and SASL
// (when m is set).
func securityOpts(tc *tls.Config, m sasl.Mechanism) []kgo.Opt {
	var out []kgo.Opt
	if tc != nil {
		out = append(out, kgo.DialTLSConfig(tc))
	}
	if m != nil {
		out = append(out, kgo.SASL(m))
	}
	return out
}

func (o Options) security() []kgo.Opt { return securityOpts(o.TLS, o.SASL) }

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

	admCl, err := kgo.NewClient(seedOpts(o.Brokers, o.security(), kgo.DialTimeout(3*time.Second), kgo.RetryTimeout(connectTimeout))...)
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
		} else if res.Target != "kfake" { // kfake has no object store: nothing to account
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
			// Per GiB of what moved between the two scrapes: the whole run,
			// warm-up (and a catch-up's backlog) included, not the measured
			// phase alone, whose bytes would carry the warm-up's requests.
			res.Cost = costOf(before, after, r.prod.allBytes.Load(), r.cons.allBytes.Load(), o)
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
	txnCommits                 atomic.Int64 // transactions committed, every phase
}

type runner struct {
	lastSelfCPU time.Duration // the sampler's: the process's CPU time at the last sample
	o           Options
	w           Workload
	clock       Clock
	res         *Result
	adm         *kadm.Client

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

// steady is every scenario but catch-up: consumers (if any) join first,
// producers run through warm-up and the measured phase (or until the fill
// is written), then the consumers drain what was produced.
func (r *runner) steady(ctx context.Context) error {
	w := r.w
	warm, measure := dur(w.Warmup), dur(w.Duration)
	stopCons, cancelCons := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelCons()
	defer r.startResources(ctx)()
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
		// Acknowledgements that arrive in the flush count, so the time
		// they took counts too (as in Kafka's producer-perf-test): the
		// rate is records over first send to last ack, and the
		// per-second samples cover the same span.
		if last := r.prod.last.Load(); last > 0 {
			r.measured = max(r.measured, time.Unix(0, last).Sub(time.Unix(0, r.measureFrom.Load())))
		}
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
	res.LoadgenResources = loadgenResources(res.Series, res.Duration, res.Produce.Bytes)
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
		TxnCommits:    s.txnCommits.Load(),
		RecordsPerSec: float64(s.records.Load()) / sec,
		MBPerSec:      float64(s.bytes.Load()) / 1e6 / sec,
		Latency:       latencyOf(h),
	}
}
