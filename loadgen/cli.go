package loadgen

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"

	"github.com/strata-io/strata/internal/clientsec"
)

// CLI is `strata loadgen`: the binary registers it and hands in what
// loadgen cannot import (the HTML report package imports loadgen).
type CLI struct {
	// WriteHTML renders --html (loadgen/report.WriteHTML); nil: --html is
	// refused with a one-line error.
	WriteHTML func(io.Writer, *Result) error
	// Getenv reads STRATA_BROKERS (nil: os.Getenv).
	Getenv func(string) string
}

const cliUsage = `usage: strata loadgen <command> [flags]

commands:
  run             run a workload (--workload file.yaml and/or flags)
  max-throughput  run the shipped max-throughput scenario
  fixed-rate      run the shipped fixed-rate scenario
  e2e-latency     run the shipped end-to-end latency scenario
  catch-up        run the shipped catch-up read scenario (remote tier)
  fill            run the shipped fill scenario (write fillBytes fast)
  verify          check a cluster keeps what it acknowledges (lost, duplicate,
                  reordered, corrupt records); exit 0 clean, 1 anomalies
  compare         compare two JSON results: compare a.json b.json
  machine         measure the machine's disk write and loopback sendfile MB/s
                  (and a raw ranged S3 GET with --s3-endpoint)
  kfake           run franz-go's kfake cluster (a peer baseline), in memory
                  or persisting to files (--data-dir)
`

// Main runs `strata loadgen args...` and returns the exit code. SIGINT or
// SIGTERM ends a run's measured phase early (the result is still
// reported) and stops kfake.
func (c CLI) Main(args []string, stdout, stderr io.Writer) int {
	if c.Getenv == nil {
		c.Getenv = os.Getenv
	}
	if len(args) == 0 {
		fmt.Fprint(stderr, cliUsage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	switch cmd := args[0]; cmd {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, cliUsage)
		return 0
	case "run":
		err = c.run(ctx, "", args[1:], stdout, stderr)
	case "verify":
		return c.verify(ctx, args[1:], stdout, stderr)
	case "compare":
		err = c.compare(args[1:], stdout, stderr)
	case "machine":
		err = c.machine(ctx, args[1:], stdout, stderr)
	case "kfake":
		err = c.kfake(ctx, args[1:], stdout, stderr)
	default:
		if _, ok := presets[cmd]; !ok {
			fmt.Fprintf(stderr, "strata loadgen: unknown command %q\n%s", cmd, cliUsage)
			return 2
		}
		err = c.run(ctx, cmd, args[1:], stdout, stderr)
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintf(stderr, "strata loadgen: %s\n", strings.TrimPrefix(err.Error(), "loadgen: "))
		return 1
	}
}

// errUsage: the flag package already printed the problem.
var errUsage = errors.New("usage")

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "strata loadgen %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return errUsage
	}
	return nil
}

// kvFlags collects repeated --topic-config name=value.
type kvFlags map[string]string

func (k kvFlags) String() string { return "" }

func (k kvFlags) Set(v string) error {
	name, val, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(name) == "" {
		return fmt.Errorf("want name=value, got %q", v)
	}
	k[strings.TrimSpace(name)] = strings.TrimSpace(val)
	return nil
}

// run is `run` and the scenario shortcuts: the workload is the scenario's
// preset (or --workload), then each flag given overrides its field.
func (c CLI) run(ctx context.Context, scenario string, args []string, stdout, stderr io.Writer) error {
	name := "run"
	if scenario != "" {
		name = scenario
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		file       = fs.String("workload", "", "YAML workload file (flags override its fields)")
		brokers    = fs.String("brokers", c.brokersDefault(), "seed brokers host:port,... (default $STRATA_BROKERS, else 127.0.0.1:9092)")
		out        = fs.String("out", "", "write the JSON result to this file")
		html       = fs.String("html", "", "write the HTML report to this file")
		cpuProfile = fs.String("cpuprofile", "", "write the load generator's own CPU profile (go tool pprof) to this file")
		metricsURL = fs.String("metrics-url", "", "a Strata node's admin /metrics URL for object-store cost accounting")
		pricePut   = fs.Float64("price-put", 0.005, "USD per 1000 PUT/LIST requests")
		priceGet   = fs.Float64("price-get", 0.0004, "USD per 1000 GET/HEAD requests")
		quiet      = fs.Bool("quiet", false, "no live progress line")
		keep       = fs.Bool("keep", false, "keep the topics the run created and its consumer groups (default: delete them at the end)")
		tlsCA      = fs.String("tls-ca", "", "connect with TLS (an SSL listener), trusting the CA certificates of this PEM file")
		tlsCert    = fs.String("tls-cert", "", "connect with TLS, presenting this PEM client certificate (with --tls-key)")
		tlsKey     = fs.String("tls-key", "", "the PEM private key of --tls-cert")
		cmdConfig  = fs.String("command-config", "", "Kafka client properties file: security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config (default $STRATA_COMMAND_CONFIG; each property overridden by $STRATA_CLIENT_<NAME>)")
		w          Workload
		recordSize string
		idem       bool
		cfgs       = kvFlags{}
	)
	fs.StringVar(&w.Topic, "topic", "", "topic (prefix when --topics > 1)")
	fs.IntVar(&w.Topics, "topics", 0, "number of topics")
	fs.IntVar(&w.Partitions, "partitions", 0, "partitions per topic")
	fs.IntVar(&w.ReplicationFactor, "replication-factor", 0, "replication factor (default: the cluster's default.replication.factor)")
	fs.Var(cfgs, "topic-config", "topic config name=value (repeatable)")
	fs.StringVar(&recordSize, "record-size", "", "fixed record value size, e.g. 1KiB")
	fs.StringVar(&w.Keys, "keys", "", "none, round-robin, uniform or zipf")
	fs.IntVar(&w.KeySpace, "key-space", 0, "distinct keys")
	fs.Float64Var(&w.ZipfS, "zipf-s", 0, "zipf exponent (> 1)")
	fs.StringVar(&w.Compression, "compression", "", "none, gzip, snappy, lz4 or zstd")
	fs.StringVar(&w.Acks, "acks", "", "all, 1 or 0")
	fs.StringVar(&w.Linger, "linger", "", "producer linger, e.g. 5ms")
	fs.StringVar(&w.BatchBytes, "batch-bytes", "", "producer batch max, e.g. 1MiB")
	fs.BoolVar(&idem, "idempotent", true, "idempotent producer (needs acks=all)")
	fs.IntVar(&w.Producers, "producers", 0, "producers")
	fs.IntVar(&w.Consumers, "consumers", 0, "consumers per group")
	fs.IntVar(&w.Groups, "groups", 0, "consumer groups")
	fs.StringVar(&w.ConsumeFrom, "consume-from", "", "latest or earliest")
	fs.Int64Var(&w.Rate, "rate", 0, "records/s over all producers (0: as fast as possible)")
	fs.StringVar(&w.Duration, "duration", "", "measured phase, e.g. 60s")
	fs.StringVar(&w.Warmup, "warmup", "", "warm-up before the measured phase, e.g. 5s")
	fs.StringVar(&w.FillBytes, "fill-bytes", "", "stop after producing this many bytes, e.g. 10GiB")
	fs.IntVar(&w.MaxInFlight, "max-inflight", 0, "produce requests in flight per broker")
	fs.Uint64Var(&w.Seed, "seed", 0, "randomness seed (0: time-based)")
	fs.StringVar(&w.Baseline, "baseline", "", "catch-up: producer-alone phase")
	fs.StringVar(&w.RemoteWait, "remote-wait", "", "catch-up: max wait for the remote tier")
	fs.StringVar(&w.Drain, "drain", "", "max wait for consumers to read everything after producing stops")
	fs.StringVar(&w.TxnInterval, "txn-interval", "", "transactional producers committing every this long, e.g. 100ms (default: not transactional)")
	fs.StringVar(&w.Isolation, "isolation", "", "consumers' isolation: read_uncommitted (default) or read_committed")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *html != "" && c.WriteHTML == nil {
		return errors.New("--html: the HTML report (loadgen/report) is not built into this binary yet; use --out and render later")
	}
	var base Workload
	var err error
	switch {
	case *file != "":
		base, err = LoadWorkload(*file)
	case scenario != "":
		base, err = Preset(scenario)
	}
	if err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "topic":
			base.Topic = w.Topic
		case "topics":
			base.Topics = w.Topics
		case "partitions":
			base.Partitions = w.Partitions
		case "replication-factor":
			base.ReplicationFactor = w.ReplicationFactor
		case "topic-config":
			if base.TopicConfigs == nil {
				base.TopicConfigs = map[string]string{}
			}
			for k, v := range cfgs {
				base.TopicConfigs[k] = v
			}
		case "record-size":
			base.RecordSize = SizeDist{Kind: "fixed", Size: recordSize}
		case "keys":
			base.Keys = w.Keys
		case "key-space":
			base.KeySpace = w.KeySpace
		case "zipf-s":
			base.ZipfS = w.ZipfS
		case "compression":
			base.Compression = w.Compression
		case "acks":
			base.Acks = w.Acks
		case "linger":
			base.Linger = w.Linger
		case "batch-bytes":
			base.BatchBytes = w.BatchBytes
		case "idempotent":
			base.Idempotent = &idem
		case "producers":
			base.Producers = w.Producers
		case "consumers":
			base.Consumers = w.Consumers
		case "groups":
			base.Groups = w.Groups
		case "consume-from":
			base.ConsumeFrom = w.ConsumeFrom
		case "rate":
			base.Rate = w.Rate
		case "duration":
			base.Duration = w.Duration
		case "warmup":
			base.Warmup = w.Warmup
		case "txn-interval":
			base.TxnInterval = w.TxnInterval
		case "isolation":
			base.Isolation = w.Isolation
		case "fill-bytes":
			base.FillBytes = w.FillBytes
		case "max-inflight":
			base.MaxInFlight = w.MaxInFlight
		case "seed":
			base.Seed = w.Seed
		case "baseline":
			base.Baseline = w.Baseline
		case "remote-wait":
			base.RemoteWait = w.RemoteWait
		case "drain":
			base.Drain = w.Drain
		}
	})
	var bs []string
	for _, b := range strings.Split(*brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			bs = append(bs, b)
		}
	}
	o := Options{Brokers: bs, Workload: base, MetricsURL: *metricsURL, PricePut: *pricePut, PriceGet: *priceGet, Keep: *keep}
	if o.TLS, o.SASL, err = clientSecurity(*cmdConfig, *tlsCA, *tlsCert, *tlsKey); err != nil {
		return err
	}
	if !*quiet {
		o.Progress = stderr
	}
	if *cpuProfile != "" {
		// The load generator shares the machine with what it measures; its
		// own profile says what a run costs the generating side.
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("loadgen: --cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("loadgen: --cpuprofile: %w", err)
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	res, err := Run(ctx, o)
	if err != nil {
		return err
	}
	if err := WriteSummary(stdout, res); err != nil {
		return err
	}
	if *out != "" {
		if err := WriteFile(*out, func(w io.Writer) error { return WriteJSON(w, res) }); err != nil {
			return err
		}
	}
	if *html != "" {
		if err := WriteFile(*html, func(w io.Writer) error { return c.WriteHTML(w, res) }); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile creates path and writes to it, buffered, what fn writes: a
// result's JSON or HTML report. An error names the file.
func WriteFile(path string, fn func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	if err := fn(bw); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// brokersDefault is --brokers' default, as for every client subcommand of
// strata: $STRATA_BROKERS, else the local node's 127.0.0.1:9092.
func (c CLI) brokersDefault() string {
	if v := c.Getenv("STRATA_BROKERS"); v != "" {
		return v
	}
	return "127.0.0.1:9092"
}

const compareUsage = `usage: strata loadgen compare a.json b.json

Compares two loadgen results (the JSON files --out writes), side by side:
for produce and consume records/s and MB/s and the publish and end-to-end
latency percentiles (p50 ... max), it prints a's value, b's, and the ratio
b/a (above 1: b is higher).
`

func (c CLI) compare(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), compareUsage) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() != 2 {
		fmt.Fprintln(stderr, "usage: strata loadgen compare a.json b.json")
		return errUsage
	}
	a, err := ReadResult(fs.Arg(0))
	if err != nil {
		return err
	}
	b, err := ReadResult(fs.Arg(1))
	if err != nil {
		return err
	}
	return Compare(stdout, a, b, fs.Arg(0), fs.Arg(1))
}

func (c CLI) machine(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("machine", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", os.TempDir(), "directory for the write test (the disk to measure)")
	sz := fs.String("size", "1GiB", "bytes to write and send")
	out := fs.String("out", "", "write the JSON result to this file")
	var s3 S3Target
	fs.StringVar(&s3.Endpoint, "s3-endpoint", "", "also measure a raw ranged GET from this S3-compatible store, e.g. http://127.0.0.1:9000 (MinIO); empty: not")
	fs.StringVar(&s3.Bucket, "s3-bucket", "strata", "bucket of --s3-endpoint (created when missing)")
	fs.StringVar(&s3.Region, "s3-region", "us-east-1", "region of --s3-endpoint")
	fs.StringVar(&s3.AccessKey, "s3-access-key", "", "access key of --s3-endpoint")
	fs.StringVar(&s3.SecretKey, "s3-secret-key", "", "secret key of --s3-endpoint")
	s3sz := fs.String("s3-size", "", "bytes of the object the S3 GET reads (default: --size)")
	s3chunk := fs.String("s3-chunk", "4MiB", "bytes per ranged GET (the remote tier's remote.log.cache.chunk.bytes)")
	if err := parse(fs, args); err != nil {
		return err
	}
	n, err := ParseSize(*sz)
	if err != nil {
		return err
	}
	m, err := MeasureMachine(ctx, *dir, n)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "sequential write (one fsync): %.0f MB/s\nloopback sendfile: %.0f MB/s\n", m.SeqWriteMBPerSec, m.LoopbackSendfileMBs)
	if s3.Endpoint != "" {
		on := n
		if *s3sz != "" {
			if on, err = ParseSize(*s3sz); err != nil {
				return err
			}
		}
		chunk, err := ParseSize(*s3chunk)
		if err != nil {
			return err
		}
		if m.S3Get, err = MeasureS3Get(ctx, s3, on, chunk); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "S3 ranged GET (%s, one stream, %d GETs of %d bytes): %.0f MB/s\n", s3.Endpoint, m.S3Get.GETs, chunk, m.S3Get.MBPerSec)
	}
	if *out != "" {
		res := &Result{Version: ResultVersion, Scenario: "machine", Target: "machine", Machine: m, Environment: localEnvironment()}
		return WriteFile(*out, func(w io.Writer) error { return WriteJSON(w, res) })
	}
	return nil
}

func (c CLI) kfake(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kfake", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "loopback address to listen on")
	parts := fs.Int("partitions", 6, "default partitions of auto-created topics")
	dataDir := fs.String("data-dir", "", "persist to files in this directory (kfake's DataDir: segment and index files, fsynced on roll and shutdown); empty: in memory")
	metricsListen := fs.String("metrics-listen", "", "also serve this process's CPU and memory (process_cpu_seconds_total, process_resident_memory_bytes) at http://ADDR/metrics on this loopback address, for --metrics-url; empty: none")
	if err := parse(fs, args); err != nil {
		return err
	}
	cl, addr, err := StartKfakeDir(*listen, *parts, *dataDir)
	if err != nil {
		return err
	}
	defer cl.Close()
	if *metricsListen != "" {
		url, stop, err := serveProcessMetrics(*metricsListen)
		if err != nil {
			return err
		}
		defer stop()
		fmt.Fprintf(stdout, "kfake: metrics %s\n", url)
	}
	fmt.Fprintf(stdout, "kfake: listening %s\n", addr)
	<-ctx.Done()
	return nil
}

const verifyUsage = `usage: strata loadgen verify [flags]

Checks that a Kafka-protocol cluster keeps what it acknowledges. It creates
a fresh topic, produces self-describing records (producer, sequence and a
CRC-32C of the value) with idempotent acks=all producers, consumes them in
consumer groups and with group-less readers of every partition, then reads
every partition from its start to its end and checks the whole history for
Jepsen's queue anomalies: lost (acknowledged, never read back), duplicate
(one value at two offsets), inconsistent offset (two values at one offset),
offset reused, nonmonotonic poll and poll skip (within one assignment),
G1a (a failed send read), corrupt (a value whose checksum fails),
reordered (a producer's records out of its order in a partition). Inject
faults while it runs; it prints the verdict and, with --out, writes the
history and the anomalies as JSON.

Exit status: 0 clean, 1 anomalies found, 2 usage error, 3 no verdict (the
cluster could not be reached, the topic created or read to its end).

flags:
`

// verify is `strata loadgen verify`; it returns the exit code itself (its
// codes differ from run's: 1 is a verdict, 3 a failure to reach one).
func (c CLI) verify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(fs.Output(), verifyUsage); fs.PrintDefaults() }
	var (
		o          VerifyOptions
		brokers    = fs.String("brokers", c.brokersDefault(), "seed brokers host:port,... (default $STRATA_BROKERS, else 127.0.0.1:9092)")
		out        = fs.String("out", "", "write the history, the report and the verdict as JSON to this file")
		quiet      = fs.Bool("quiet", false, "no progress line")
		recordSize = fs.String("record-size", "0", "record value size, e.g. 1KiB (at least the self-describing header)")
		cfgs       = kvFlags{}
		tlsCA      = fs.String("tls-ca", "", "connect with TLS (an SSL listener), trusting the CA certificates of this PEM file")
		tlsCert    = fs.String("tls-cert", "", "connect with TLS, presenting this PEM client certificate (with --tls-key)")
		tlsKey     = fs.String("tls-key", "", "the PEM private key of --tls-cert")
		cmdConfig  = fs.String("command-config", "", "Kafka client properties file: security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config (default $STRATA_COMMAND_CONFIG; each property overridden by $STRATA_CLIENT_<NAME>)")
	)
	fs.StringVar(&o.Topic, "topic", "", "topic to create (default verify-<unix ns>; an existing topic is refused)")
	fs.Var(cfgs, "topic-config", "topic config name=value set at creation (repeatable), e.g. min.insync.replicas=2")
	fs.StringVar(&o.Compression, "compression", "none", "producer batch compression: none, gzip, snappy, lz4 or zstd")
	fs.IntVar(&o.Partitions, "partitions", 3, "partitions of the topic")
	fs.IntVar(&o.ReplicationFactor, "replication-factor", 0, "replication factor (default: the cluster's default.replication.factor)")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "producing phase")
	fs.Int64Var(&o.Rate, "rate", 1000, "records/s over all producers")
	fs.IntVar(&o.Producers, "producers", 1, "idempotent acks=all producers")
	fs.IntVar(&o.Groups, "groups", 1, "consumer groups")
	fs.IntVar(&o.Consumers, "consumers", 2, "consumers per group")
	fs.IntVar(&o.PartitionReaders, "partition-readers", 1, "readers of every partition without a group")
	fs.DurationVar(&o.Drain, "drain", 30*time.Second, "max wait for the readers to reach the last acknowledged offsets after producing")
	fs.BoolVar(&o.Keep, "keep", false, "keep the topic and the consumer groups (default: delete them at the end)")
	if err := parse(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	n, err := ParseSize(*recordSize)
	if err != nil || n < 0 {
		fmt.Fprintf(stderr, "strata loadgen verify: --record-size %q: want a size such as 1KiB\n", *recordSize)
		return 2
	}
	o.RecordSize = int(n)
	if len(cfgs) > 0 {
		o.TopicConfigs = cfgs
	}
	if o.TLS, o.SASL, err = clientSecurity(*cmdConfig, *tlsCA, *tlsCert, *tlsKey); err != nil {
		fmt.Fprintf(stderr, "strata loadgen verify: %v\n", err)
		return 2
	}
	for _, b := range strings.Split(*brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			o.Brokers = append(o.Brokers, b)
		}
	}
	err = o.validate()
	if err == nil && len(o.Brokers) == 0 {
		err = errors.New("no brokers (--brokers or STRATA_BROKERS)")
	}
	if err != nil {
		fmt.Fprintf(stderr, "strata loadgen verify: %s\n", strings.TrimPrefix(err.Error(), "loadgen: verify: "))
		return 2
	}
	if !*quiet {
		o.Progress = stderr
	}
	res, err := Verify(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "strata loadgen verify: no verdict: %s\n", strings.TrimPrefix(err.Error(), "loadgen: "))
		return 3
	}
	if err := WriteVerifySummary(stdout, res); err != nil {
		fmt.Fprintf(stderr, "strata loadgen verify: %v\n", err)
		return 3
	}
	if *out != "" {
		if err := WriteFile(*out, func(w io.Writer) error { return json.NewEncoder(w).Encode(res) }); err != nil {
			fmt.Fprintf(stderr, "strata loadgen verify: %v\n", err)
			return 3
		}
	}
	if !res.Clean() {
		return 1
	}
	return 0
}

// clientSecurity is the clients' TLS and SASL: --command-config (or
// $STRATA_COMMAND_CONFIG and $STRATA_CLIENT_*, internal/clientsec), or the
// --tls-* flags; not both.
func clientSecurity(commandConfig, caFile, certFile, keyFile string) (*tls.Config, sasl.Mechanism, error) {
	sec, err := clientsec.Load(commandConfig, os.Environ())
	if err != nil {
		return nil, nil, err
	}
	if caFile != "" || certFile != "" || keyFile != "" {
		if sec.Protocol != "PLAINTEXT" {
			return nil, nil, errors.New("give --command-config (security.protocol " + sec.Protocol + ") or --tls-*, not both")
		}
		tc, err := clientTLS(caFile, certFile, keyFile)
		return tc, nil, err
	}
	return sec.TLS, sec.Mechanism, nil
}

// clientTLS is the clients' TLS configuration of --tls-ca, --tls-cert and
// --tls-key: nil (PLAINTEXT) when none is set.
func clientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" && certFile == "" && keyFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %v", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate", caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	if certFile != "" {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %v", err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg, nil
}
