package loadgen

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/strata-io/strata/internal/deliverycheck"
)

// VerifyOptions is one `strata loadgen verify` run: a durability check
// of a cluster, not a measurement.
type VerifyOptions struct {
	Brokers []string // seed brokers, host:port
	// Topic is created fresh (an existing one is refused: its older
	// records would not be in the history); "" picks verify-<unix ns>.
	Topic             string
	Partitions        int           // default 3
	ReplicationFactor int           // 0: the cluster's default.replication.factor
	Duration          time.Duration // producing phase, default 10s
	Rate              int64         // records/s over all producers, default 1000
	Producers         int           // idempotent acks=all producers, default 1
	Groups            int           // consumer groups (both 0: one group and one reader)
	Consumers         int           // consumers per group, default 2
	PartitionReaders  int           // group-less readers of every partition
	RecordSize        int           // value bytes (at least the self-describing header)
	// Compression of the producers' batches: none (default), gzip,
	// snappy, lz4 or zstd.
	Compression string `json:",omitempty"`
	// TopicConfigs are set on the topic at creation (min.insync.replicas,
	// remote.storage.enable, segment.bytes, ...).
	TopicConfigs map[string]string `json:",omitempty"`
	// Drain bounds the wait, after producing stops, for every group and
	// reader to reach the last acknowledged offset of every partition
	// (default 30s); the final read comes after it either way.
	Drain    time.Duration
	Keep     bool      // keep the topic and the groups
	Progress io.Writer `json:"-"` // a line a second (nil: none)
	// TLS, when set, is every client's TLS (an SSL listener: --tls-ca,
	// --tls-cert, --tls-key); nil: PLAINTEXT.
	TLS *tls.Config `json:"-"`
	// SASL, when set, authenticates every client (--command-config).
	SASL sasl.Mechanism `json:"-"`
}

// VerifyResult is what a verify run observed and concluded (--out writes
// it as JSON).
type VerifyResult struct {
	Version   int           `json:"version"`
	Target    string        `json:"target"` // kfake or kafka-compatible
	Brokers   []string      `json:"brokers"`
	Topic     string        `json:"topic"`
	StartedAt string        `json:"started_at"`
	Options   VerifyOptions `json:"options"`
	Verdict   string        `json:"verdict"` // "clean" or "anomalies"
	Summary   string        `json:"summary"`
	// Counts is the number of anomalies of each kind found (kinds with
	// none are absent).
	Counts  map[deliverycheck.Kind]int `json:"counts"`
	Report  *deliverycheck.Report      `json:"report"`
	History deliverycheck.History      `json:"history"`
	Notes   []string                   `json:"notes,omitempty"`
}

// Clean reports whether the history broke no rule.
func (r *VerifyResult) Clean() bool { return r.Report.Err() == nil }

// defaults fills in the zero fields of the Go API (the flags have the
// same defaults, so the CLI checks explicit zeros with validate first),
// then validates.
func (o *VerifyOptions) defaults() error {
	if len(o.Brokers) == 0 {
		return errors.New("loadgen: no brokers (--brokers or STRATA_BROKERS)")
	}
	set := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	set(&o.Partitions, 3)
	set(&o.Producers, 1)
	set(&o.Consumers, 2)
	if o.Groups == 0 && o.PartitionReaders == 0 {
		o.Groups, o.PartitionReaders = 1, 1
	}
	if o.Duration == 0 {
		o.Duration = 10 * time.Second
	}
	if o.Rate == 0 {
		o.Rate = 1000
	}
	if o.Drain == 0 {
		o.Drain = 30 * time.Second
	}
	if o.Compression == "" {
		o.Compression = "none"
	}
	return o.validate()
}

// validate checks o as given (no defaults).
func (o *VerifyOptions) validate() error {
	switch {
	case o.Partitions < 1:
		return fmt.Errorf("loadgen: verify: --partitions %d, want >= 1", o.Partitions)
	case o.ReplicationFactor < 0:
		return fmt.Errorf("loadgen: verify: --replication-factor %d, want >= 1 (0: the cluster's default)", o.ReplicationFactor)
	case o.Producers < 1:
		return fmt.Errorf("loadgen: verify: --producers %d, want >= 1", o.Producers)
	case o.Groups < 0 || o.Consumers < 1 || o.PartitionReaders < 0:
		return fmt.Errorf("loadgen: verify: --groups %d --consumers %d --partition-readers %d: want groups >= 0, consumers >= 1, readers >= 0",
			o.Groups, o.Consumers, o.PartitionReaders)
	case o.Groups == 0 && o.PartitionReaders == 0:
		return errors.New("loadgen: verify: nothing reads during the run (--groups 0 and --partition-readers 0)")
	case o.Rate < 1:
		return fmt.Errorf("loadgen: verify: --rate %d, want >= 1", o.Rate)
	case o.Duration <= 0 || o.Drain <= 0:
		return errors.New("loadgen: verify: --duration and --drain must be positive")
	}
	if _, ok := codecs[o.Compression]; !ok && o.Compression != "" {
		return fmt.Errorf("loadgen: verify: --compression %q, want none, gzip, snappy, lz4 or zstd", o.Compression)
	}
	return nil
}

// Verify runs the durability workload of o against its cluster: it
// creates a fresh topic, runs idempotent acks=all producers of
// self-describing values (producer, sequence, CRC-32C) at o.Rate,
// consumer groups and group-less partition readers recording every poll
// with its assignment generation, then after the producing phase drains
// the readers, reads every partition from its log start to its end (the
// final read) and checks the whole history with [deliverycheck.Check].
// A canceled ctx ends the producing phase early; the check still runs.
// An error means no verdict could be reached (the cluster could not be
// reached, the topic not created, the final read not finished).
func Verify(ctx context.Context, o VerifyOptions) (*VerifyResult, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if o.Topic == "" {
		o.Topic = fmt.Sprintf("verify-%d", time.Now().UnixNano())
	}
	res := &VerifyResult{Version: ResultVersion, Target: "kafka-compatible", Brokers: o.Brokers, Topic: o.Topic, Options: o}
	admCl, err := kgo.NewClient(seedOpts(o.Brokers, o.security(), kgo.DialTimeout(3*time.Second), kgo.RetryTimeout(connectTimeout))...)
	if err != nil {
		return nil, fmt.Errorf("loadgen: %w", err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	meta, err := adm.BrokerMetadata(cctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrUnreachable, strings.Join(o.Brokers, ","), err)
	}
	if meta.Cluster == "kfake" {
		res.Target = "kfake"
	}
	rf := int16(o.ReplicationFactor)
	if rf == 0 {
		rf = -1
	}
	cctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	var configs map[string]*string
	for k, v := range o.TopicConfigs {
		if configs == nil {
			configs = map[string]*string{}
		}
		configs[k] = &v
	}
	ct, err := adm.CreateTopic(cctx, int32(o.Partitions), rf, configs, o.Topic)
	cancel()
	if err == nil {
		err = ct.Err
	}
	if err != nil {
		return nil, fmt.Errorf("loadgen: verify: create topic %s: %v%s", o.Topic, err, detail(ct.ErrMessage))
	}
	var groups []string
	if !o.Keep {
		defer func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if len(groups) > 0 {
				if _, err := adm.DeleteGroups(dctx, groups...); err != nil {
					res.Notes = append(res.Notes, "cleanup: delete groups: "+err.Error())
				}
			}
			resp, err := adm.DeleteTopics(dctx, o.Topic)
			if err == nil {
				err = resp[o.Topic].Err
			}
			if err != nil {
				res.Notes = append(res.Notes, "cleanup: delete topic: "+err.Error())
			}
		}()
	}
	// The producers' view of partitions must exist before they pick one.
	if err := waitTopic(ctx, adm, o.Topic, o.Partitions); err != nil {
		return nil, err
	}
	res.StartedAt = time.Now().UTC().Format(time.RFC3339)

	rc := deliverycheck.NewRecorder(true)
	rc.SetChecksummed()
	run := strings.TrimPrefix(o.Topic, "verify-")
	// Readers first, so they poll while the records are produced.
	rctx, stopReaders := context.WithCancel(context.WithoutCancel(ctx))
	defer stopReaders()
	var readers sync.WaitGroup
	var readerNames [][]string // per reading unit (a group, a reader): its consumer names
	for g := range o.Groups {
		id := fmt.Sprintf("verify-%s-g%d", run, g)
		groups = append(groups, id)
		var names []string
		for c := range o.Consumers {
			name := fmt.Sprintf("g%d.c%d", g, c)
			names = append(names, name)
			readers.Add(1)
			go func() {
				defer readers.Done()
				_ = deliverycheck.Consume(rctx, o.Brokers, id, o.Topic, name, rc, o.security()...)
			}()
		}
		readerNames = append(readerNames, names)
	}
	for i := range o.PartitionReaders {
		name := fmt.Sprintf("r%d", i)
		readerNames = append(readerNames, []string{name})
		readers.Add(1)
		go func() {
			defer readers.Done()
			_ = deliverycheck.ConsumePartitions(rctx, o.Brokers, o.Topic, name, rc, o.security()...)
		}()
	}

	interval := time.Duration(float64(time.Second) * float64(o.Producers) / float64(o.Rate))
	// Every client first: a failure must not leave a load running.
	var cls []*kgo.Client
	for range o.Producers {
		cl, err := kgo.NewClient(seedOpts(o.Brokers, o.security(), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.ProducerBatchCompression(codecs[o.Compression]), kgo.RecordDeliveryTimeout(30*time.Second),
			kgo.ProducerLinger(0),
			// Every partition gets records from the first seconds on (the
			// sticky default would fill one partition for 64 KiB first).
			kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))...)
		if err != nil {
			return nil, fmt.Errorf("loadgen: %w", err)
		}
		defer cl.Close()
		cls = append(cls, cl)
	}
	var loads []*deliverycheck.Producer
	for i, cl := range cls {
		prefix := fmt.Sprintf("%s.p%d", run, i)
		pad := ""
		// The self-describing part: checksum, producer, sequence, and the
		// space before the padding.
		if n := o.RecordSize - len(deliverycheck.EncodeValue(prefix, 0, "")) - 1; n > 0 {
			pad = strings.Repeat("x", n)
		}
		loads = append(loads, deliverycheck.Produce(ctx, cl, o.Topic, rc, deliverycheck.ProduceOptions{
			Prefix: prefix, Interval: interval, Pad: pad, Checksum: true, MaxInFlight: 1000}))
	}
	start := time.Now()
	progress := time.NewTicker(time.Second)
	defer progress.Stop()
	timer := time.NewTimer(o.Duration)
	defer timer.Stop()
produce:
	for {
		select {
		case <-timer.C:
			break produce
		case <-ctx.Done():
			res.Notes = append(res.Notes, "interrupted: the producing phase ended early")
			break produce
		case <-progress.C:
			if o.Progress != nil {
				var acked, sent int64
				for _, l := range loads {
					s := l.Stats()
					acked, sent = acked+s.Acked, sent+s.Sent
				}
				fmt.Fprintf(o.Progress, "verify: %4.0fs  sent %d  acknowledged %d\n", time.Since(start).Seconds(), sent, acked)
			}
		}
	}
	for _, l := range loads {
		l.Stop() // every send has its outcome
	}

	// Drain: every reading unit reaches the last acknowledged offset of
	// every partition, or the drain bound passes.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.Drain)
	drained := waitDrained(dctx, rc, readerNames)
	cancel()
	if !drained {
		res.Notes = append(res.Notes, fmt.Sprintf("drain: the readers had not read every acknowledged record after %v", o.Drain))
	}
	stopReaders()
	readers.Wait()

	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	err = deliverycheck.FinalRead(fctx, admCl, o.Topic, rc, o.security()...)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("loadgen: verify: %w", err)
	}
	res.History = rc.History()
	res.Report = deliverycheck.Check(res.History)
	res.Summary = res.Report.Summary()
	res.Counts = map[deliverycheck.Kind]int{}
	for _, k := range deliverycheck.Kinds {
		if n := res.Report.Count(k); n > 0 {
			res.Counts[k] = n
		}
	}
	res.Verdict = "clean"
	if !res.Clean() {
		res.Verdict = "anomalies"
	}
	return res, nil
}

// waitTopic waits until metadata shows topic with its partitions led.
func waitTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			if t, ok := md.Topics[topic]; ok && t.Err == nil && len(t.Partitions) == partitions {
				led := 0
				for _, p := range t.Partitions {
					if p.Err == nil && p.Leader >= 0 {
						led++
					}
				}
				if led == partitions {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("loadgen: verify: topic %s has no leader for every partition: %v", topic, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitDrained polls rc until every unit of readers (a group's consumers,
// or one partition reader) has read, in some member, the last
// acknowledged offset of every partition, or ctx ends.
func waitDrained(ctx context.Context, rc *deliverycheck.Recorder, units [][]string) bool {
	tk := time.NewTicker(250 * time.Millisecond)
	defer tk.Stop()
	for {
		if drained(rc.History(), units) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tk.C:
		}
	}
}

func drained(h deliverycheck.History, units [][]string) bool {
	last := map[int32]int64{}
	for _, s := range h.Sends {
		if s.Status == deliverycheck.SendOK && s.Offset >= last[s.Partition] {
			last[s.Partition] = s.Offset
		}
	}
	unitOf := map[string]int{}
	for i, names := range units {
		for _, n := range names {
			unitOf[n] = i
		}
	}
	type up struct {
		u int
		p int32
	}
	read := map[up]int64{}
	for _, p := range h.Polls {
		k := up{unitOf[p.Consumer], p.Partition}
		if o, ok := read[k]; !ok || p.Offset > o {
			read[k] = p.Offset
		}
	}
	for u := range units {
		for p, o := range last {
			if r, ok := read[up{u, p}]; !ok || r < o {
				return false
			}
		}
	}
	return true
}

// WriteVerifySummary prints the verdict: the counts, the anomalies (at
// most 20 of each kind) and the verdict line.
func WriteVerifySummary(w io.Writer, r *VerifyResult) error {
	var b strings.Builder
	fmt.Fprintf(&b, "loadgen verify: topic %s on %s (%s)\n", r.Topic, strings.Join(r.Brokers, ","), r.Target)
	fmt.Fprintf(&b, "  %s\n", r.Summary)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	for _, k := range deliverycheck.Kinds {
		as := r.Report.Of(k)
		for i, a := range as {
			if i == 20 {
				fmt.Fprintf(&b, "  ... %d more %s\n", len(as)-20, k)
				break
			}
			fmt.Fprintf(&b, "  %s\n", a)
		}
	}
	if r.Clean() {
		b.WriteString("verdict: clean (every acknowledged record read back once, at its offset, intact and in order)\n")
	} else {
		fmt.Fprintf(&b, "verdict: ANOMALIES (%s)\n", r.Summary)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (o VerifyOptions) security() []kgo.Opt { return securityOpts(o.TLS, o.SASL) }
