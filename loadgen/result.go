package loadgen

// ResultVersion is the Version of the results this loadgen writes:
//
//	1: the original fields
//	2: adds Environment, Stability, BrokerResources, Latency.P75/P95 and
//	   per sample Seconds, errors and the broker's CPU and memory
const ResultVersion = 2

// Result is what one run reports: the JSON result file (`--out run.json`),
// the input of the HTML report and of `strata loadgen compare`. Fields are
// only ever added (Version says which were present), so old results stay
// comparable: a field a version lacks reads as its zero value (nil for
// the sections).
type Result struct {
	Version   int       `json:"version"` // ResultVersion
	Scenario  string    `json:"scenario"`
	Workload  Workload  `json:"workload"`          // as run, defaults filled in
	Brokers   []string  `json:"brokers"`           // --brokers
	Target    string    `json:"target"`            // "strata", "kafka-compatible" or "kfake"
	StartedAt string    `json:"startedAt"`         // RFC 3339
	Duration  float64   `json:"durationSeconds"`   // measured phase, warm-up excluded
	Produce   Summary   `json:"produce"`           // publish side
	Consume   Summary   `json:"consume"`           // consume side (zero when no consumers)
	EndToEnd  Latency   `json:"endToEnd"`          // record timestamp → receipt
	CatchUp   *CatchUp  `json:"catchUp,omitempty"` // the catch-up scenario only
	Cost      *Cost     `json:"cost,omitempty"`    // Strata targets only
	Series    []Sample  `json:"series"`            // one per second
	Errors    []string  `json:"errors,omitempty"`  // distinct errors with counts, "n× message"
	Machine   *Machine  `json:"machine,omitempty"` // raw limits measured in the same run, if asked
	Notes     []string  `json:"notes,omitempty"`
	Histogram Histogram `json:"histograms"` // percentile distributions for the report

	Environment     *Environment     `json:"environment,omitempty"`     // version 2: where it ran
	Stability       *Stability       `json:"stability,omitempty"`       // version 2: per-second rates' spread
	BrokerResources *BrokerResources `json:"brokerResources,omitempty"` // version 2: the broker's CPU and memory
	// The load generator's own CPU over the measured phase: on a machine
	// it shares with the broker, broker + load generator near the core
	// count says the run measured the machine, not the broker.
	LoadgenResources *LoadgenResources `json:"loadgenResources,omitempty"`
}

// LoadgenResources is the load generator process's CPU (getrusage: user
// and system) over the measured phase.
type LoadgenResources struct {
	CPUCoresMean            float64 `json:"cpuCoresMean"` // CPU seconds per second
	CPUSeconds              float64 `json:"cpuSeconds"`
	CPUSecondsPerGBProduced float64 `json:"cpuSecondsPerGBProduced,omitempty"`
	MachineCores            int     `json:"machineCores"`
}

// Environment is what a capacity planner needs to compare two runs: the
// machine loadgen ran on, both sides' builds, and the settings that
// change the figures.
type Environment struct {
	Loadgen     Build  `json:"loadgen"`
	Broker      *Build `json:"broker,omitempty"`          // strata_build_info from the metrics URL
	BrokerBuild string `json:"brokerBuildNote,omitempty"` // why Broker is nil
	OS          string `json:"os"`
	Arch        string `json:"arch"`
	Kernel      string `json:"kernel,omitempty"`
	CPUModel    string `json:"cpuModel,omitempty"`
	CPUCores    int    `json:"cpuCores"`
	MemoryBytes int64  `json:"memoryBytes,omitempty"`
	Hostname    string `json:"hostname,omitempty"`
	// The cluster as the run found it.
	ClusterID         string `json:"clusterId,omitempty"`
	Brokers           int    `json:"brokers"`
	ReplicationFactor int    `json:"replicationFactor"` // of the run's first topic, from Metadata
	// Producer settings (also in Workload), repeated so the table is whole.
	Acks        string `json:"acks"`
	Compression string `json:"compression"`
	// DescribeConfigs of the first broker and of the run's first topic,
	// the settings that change throughput, durability and tiering.
	BrokerConfigs map[string]string `json:"brokerConfigs,omitempty"`
	TopicConfigs  map[string]string `json:"topicConfigs,omitempty"`
}

// Build is one binary's version.
type Build struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion,omitempty"`
}

// Stability is the spread of the per-second rates over the measured
// phase (the catch-up's consume side: from the consumers' start).
type Stability struct {
	Produce Rates `json:"produce"`
	Consume Rates `json:"consume"`
}

// Rates summarises per-second rates: Samples full seconds, their min,
// mean, max and population standard deviation, and CV = stddev / mean.
type Rates struct {
	Samples             int     `json:"samples"`
	MinRecordsPerSec    float64 `json:"minRecordsPerSec"`
	MeanRecordsPerSec   float64 `json:"meanRecordsPerSec"`
	MaxRecordsPerSec    float64 `json:"maxRecordsPerSec"`
	StddevRecordsPerSec float64 `json:"stddevRecordsPerSec"`
	CV                  float64 `json:"cv"`
	MinMBPerSec         float64 `json:"minMBPerSec"`
	MeanMBPerSec        float64 `json:"meanMBPerSec"`
	MaxMBPerSec         float64 `json:"maxMBPerSec"`
	StddevMBPerSec      float64 `json:"stddevMBPerSec"`
}

// BrokerResources is the broker process's CPU and memory over the run,
// from process_cpu_seconds_total and process_resident_memory_bytes in
// the metrics URL sampled every second. Sampled false says why not.
type BrokerResources struct {
	MetricsURL   string  `json:"metricsUrl,omitempty"`
	Sampled      bool    `json:"sampled"`
	Reason       string  `json:"reason,omitempty"` // when not sampled
	Samples      int     `json:"samples"`
	CPUCoresMean float64 `json:"cpuCoresMean"` // CPU seconds per second
	CPUCoresMax  float64 `json:"cpuCoresMax"`
	RSSBytesMean float64 `json:"rssBytesMean"`
	RSSBytesMax  float64 `json:"rssBytesMax"`
	// The broker's CPU-seconds over the measured phase (its mean CPU rate
	// in the measured phase's samples × the phase's length) and per GB
	// (10^9 bytes of record keys and values) produced and consumed in it:
	// what a byte costs the broker. Both sides share the CPU, so a
	// scenario with consumers charges each GB produced its consumption
	// too; zero when not sampled or nothing moved.
	CPUSeconds              float64 `json:"cpuSeconds,omitempty"`
	CPUSecondsPerGBProduced float64 `json:"cpuSecondsPerGBProduced,omitempty"`
	CPUSecondsPerGBConsumed float64 `json:"cpuSecondsPerGBConsumed,omitempty"`
}

// Summary is one side's totals over the measured phase.
type Summary struct {
	Records int64 `json:"records"`
	Bytes   int64 `json:"bytes"`
	Errors  int64 `json:"errors"`
	// TxnCommits counts the transactions committed (producers with
	// txnInterval; 0 otherwise), over the whole run.
	TxnCommits    int64   `json:"txnCommits,omitempty"`
	RecordsPerSec float64 `json:"recordsPerSec"`
	MBPerSec      float64 `json:"mbPerSec"` // 10^6 bytes/s of record values+keys
	Latency       Latency `json:"latency"`  // publish: from the intended send time to the ack
}

// Latency is a latency distribution in milliseconds.
type Latency struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P75   float64 `json:"p75"` // version 2
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"` // version 2
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	P9999 float64 `json:"p9999"`
	Max   float64 `json:"max"`
}

// Sample is one second of the run (t seconds since the measured phase
// started; negative during warm-up).
type Sample struct {
	T              float64 `json:"t"`
	Seconds        float64 `json:"seconds,omitempty"` // the interval's length (the last one is partial); 0 in version 1: one second
	ProduceRecords int64   `json:"produceRecords"`    // in this second
	ProduceBytes   int64   `json:"produceBytes"`
	ConsumeRecords int64   `json:"consumeRecords"`
	ConsumeBytes   int64   `json:"consumeBytes"`
	PublishP99     float64 `json:"publishP99Ms"` // of this second
	EndToEndP99    float64 `json:"endToEndP99Ms"`
	Lag            int64   `json:"lag"` // consumer lag in records, summed over groups and partitions
	// Version 2.
	ProduceErrors   int64   `json:"produceErrors,omitempty"`   // failed records in this interval
	ConsumeErrors   int64   `json:"consumeErrors,omitempty"`   // fetch errors in this interval
	BrokerCPUCores  float64 `json:"brokerCpuCores,omitempty"`  // broker CPU seconds per second over the last scrape interval
	BrokerRSSBytes  float64 `json:"brokerRssBytes,omitempty"`  // broker resident memory at the last scrape
	LoadgenCPUCores float64 `json:"loadgenCpuCores,omitempty"` // the load generator's CPU seconds per second over the interval
}

// Histogram holds percentile distributions (HdrHistogram's percentile
// iteration) for the report's latency chart.
type Histogram struct {
	Publish  []Percentile `json:"publish"`
	EndToEnd []Percentile `json:"endToEnd"`
}

// Percentile is one point of a distribution: Percentile (0-100) of the
// values are <= ValueMs.
type Percentile struct {
	Percentile float64 `json:"percentile"`
	ValueMs    float64 `json:"valueMs"`
	Count      int64   `json:"count"`
}

// CatchUp reports the catch-up read scenario: a reader from the earliest
// offset while producers keep writing.
type CatchUp struct {
	BacklogRecords      int64   `json:"backlogRecords"`
	BacklogBytes        int64   `json:"backlogBytes"`
	CaughtUpSeconds     float64 `json:"caughtUpSeconds"`              // -1 if it never caught up
	FirstRecordSeconds  float64 `json:"firstRecordSeconds,omitempty"` // consumers' start to their first record (group join and the first fetch)
	ReadMBPerSec        float64 `json:"readMBPerSec"`
	ReadMBPerSecFirst   float64 `json:"readMBPerSecFromFirstRecord,omitempty"` // from the first record on: the read itself, without the group join
	ProducerP99Before   float64 `json:"producerP99BeforeMs"`                   // producer alone
	ProducerP99During   float64 `json:"producerP99DuringMs"`                   // while the reader catches up
	ProducerP99Increase float64 `json:"producerP99Increase"`                   // During / Before
	// The produce requests' p99 inside the broker over the same two
	// phases (its request-latency histogram, interpolated in its
	// buckets): the node's part of the producers' p99, apart from the
	// client's own (a load generator whose consumers share its cores).
	// Zero when the target exports no such histogram.
	BrokerProduceP99Before float64 `json:"brokerProduceP99BeforeMs,omitempty"`
	BrokerProduceP99During float64 `json:"brokerProduceP99DuringMs,omitempty"`
}

// Cost is the object-store activity the run caused, from the node's
// /metrics before and after, and its estimated request cost.
type Cost struct {
	MetricsURL       string  `json:"metricsUrl"`
	Puts             float64 `json:"puts"`
	Gets             float64 `json:"gets"`
	Lists            float64 `json:"lists"`
	Deletes          float64 `json:"deletes"`
	BytesPut         float64 `json:"bytesPut"`
	BytesGot         float64 `json:"bytesGot"`
	PutsPerGiBIn     float64 `json:"putsPerGiBProduced"` // per GiB of BytesProduced
	GetsPerGiBOut    float64 `json:"getsPerGiBConsumed"` // per GiB of BytesConsumed
	PricePerKPut     float64 `json:"pricePer1000Put"`    // USD, from flags
	PricePerKGet     float64 `json:"pricePer1000Get"`
	EstimatedCostUSD float64 `json:"estimatedCostUsd"`
	// The bytes (record keys and values) produced and consumed between
	// the two scrapes, every phase (warm-up, a catch-up's backlog): what
	// the per-GiB figures divide by. Zero in results before they were
	// recorded, whose per-GiB figures divided the measured phase's bytes.
	BytesProduced int64 `json:"bytesProduced,omitempty"`
	BytesConsumed int64 `json:"bytesConsumed,omitempty"`
	// Backend is the object store's kind (the requests' backend label:
	// fs, s3), empty when the node made no object-store request.
	Backend string `json:"backend,omitempty"`
	// The remote reader (a Strata node's tiering reader): bytes it
	// returned to fetches, its GETs and the bytes they fetched, and its
	// chunk cache's hits and misses; zero when nothing was read remotely.
	RemoteReadBytes      float64 `json:"remoteReadBytes,omitempty"`
	RemoteGets           float64 `json:"remoteGets,omitempty"`
	RemoteGetBytes       float64 `json:"remoteGetBytes,omitempty"`
	RemoteGetsPerGiBRead float64 `json:"remoteGetsPerGiBRead,omitempty"` // per GiB of RemoteReadBytes
	CacheHits            float64 `json:"cacheHits,omitempty"`
	CacheMisses          float64 `json:"cacheMisses,omitempty"`
	CacheHitRatio        float64 `json:"cacheHitRatio,omitempty"` // hits ÷ (hits + misses)
}

// Machine is the machine's raw limits, measured in the same run.
type Machine struct {
	SeqWriteMBPerSec    float64 `json:"seqWriteMBPerSec"`
	LoopbackSendfileMBs float64 `json:"loopbackSendfileMBPerSec"`
	// S3Get is a raw ranged GET from an S3-compatible store (machine
	// --s3-endpoint), nil when none was measured.
	S3Get *S3Get `json:"s3Get,omitempty"`
}

// S3Get is sequential ranged GETs of one object on one stream: the object
// store's raw read rate, the remote tier's catch-up's yardstick.
type S3Get struct {
	Bytes      int64   `json:"bytes"`
	GETs       int64   `json:"gets"`
	ChunkBytes int64   `json:"chunkBytes"` // bytes per ranged GET
	MBPerSec   float64 `json:"mbPerSec"`
}
