package loadgen

// Workload is what a run does: from flags or a YAML workload file
// (workloads/*.yaml). Durations are Go durations ("30s"); sizes take
// units ("1KiB"). Zero values take the defaults that Defaults fills in.
type Workload struct {
	Name              string            `json:"name" yaml:"name"`
	Topic             string            `json:"topic" yaml:"topic"`                         // prefix when Topics > 1
	Topics            int               `json:"topics" yaml:"topics"`                       // default 1
	Partitions        int               `json:"partitions" yaml:"partitions"`               // per topic, default 6
	ReplicationFactor int               `json:"replicationFactor" yaml:"replicationFactor"` // default -1: the cluster's default.replication.factor
	CreateTopics      *bool             `json:"createTopics,omitempty" yaml:"createTopics"` // default true
	TopicConfigs      map[string]string `json:"topicConfigs,omitempty" yaml:"topicConfigs"`

	RecordSize SizeDist `json:"recordSize" yaml:"recordSize"` // default fixed 1KiB
	Keys       string   `json:"keys" yaml:"keys"`             // none|round-robin|uniform|zipf (default none)
	KeySpace   int      `json:"keySpace" yaml:"keySpace"`     // distinct keys, default 10000
	ZipfS      float64  `json:"zipfS" yaml:"zipfS"`           // zipf exponent s > 1, default 1.1

	Compression string `json:"compression" yaml:"compression"` // none|gzip|snappy|lz4|zstd
	Acks        string `json:"acks" yaml:"acks"`               // all|1|0, default all
	Linger      string `json:"linger" yaml:"linger"`           // default 5ms
	BatchBytes  string `json:"batchBytes" yaml:"batchBytes"`   // producer batch max, default 976KiB
	Idempotent  *bool  `json:"idempotent,omitempty" yaml:"idempotent"`
	Producers   int    `json:"producers" yaml:"producers"`           // default 1
	Consumers   int    `json:"consumers" yaml:"consumers"`           // per group, default 0
	Groups      int    `json:"groups" yaml:"groups"`                 // default 1 when Consumers > 0
	ConsumeFrom string `json:"consumeFrom" yaml:"consumeFrom"`       // latest|earliest, default latest
	Rate        int64  `json:"rate" yaml:"rate"`                     // records/s over all producers; 0 = as fast as possible
	Duration    string `json:"duration" yaml:"duration"`             // measured phase, default 60s
	Warmup      string `json:"warmup" yaml:"warmup"`                 // default 5s
	FillBytes   string `json:"fillBytes,omitempty" yaml:"fillBytes"` // fill scenario: stop after this many bytes
	MaxInFlight int    `json:"maxInFlight" yaml:"maxInFlight"`       // produce requests per broker

	// Scenario selects a multi-phase run: "" or max-throughput, fixed-rate
	// and e2e-latency run one phase; "fill" writes FillBytes as fast as it
	// can; "catch-up" fills a FillBytes backlog, waits for the remote tier,
	// measures producers alone for Baseline, then starts consumers from the
	// earliest offset and measures until they catch up (Duration at most).
	Scenario   string `json:"scenario,omitempty" yaml:"scenario"`
	Baseline   string `json:"baseline,omitempty" yaml:"baseline"`     // catch-up: producer-alone phase, default 10s
	RemoteWait string `json:"remoteWait,omitempty" yaml:"remoteWait"` // catch-up: max wait for the remote tier, default 2m
	Drain      string `json:"drain,omitempty" yaml:"drain"`           // max wait for consumers to read everything after producing stops, default 30s
	Seed       uint64 `json:"seed,omitempty" yaml:"seed"`             // key and size randomness (0: time-based)
	Window     int    `json:"window,omitempty" yaml:"window"`         // records in flight per producer when Rate is 0, default 10000

	// TxnInterval makes the producers transactional (a transactional id
	// each): every TxnInterval a producer flushes, commits and begins the
	// next transaction. "" (default): not transactional.
	TxnInterval string `json:"txnInterval,omitempty" yaml:"txnInterval"`
	// Isolation of the consumers: read_uncommitted (default) or
	// read_committed (only committed transactions, up to the last stable
	// offset).
	Isolation string `json:"isolation,omitempty" yaml:"isolation"`
}

// SizeDist is a record size distribution: fixed, uniform between Min and
// Max, or normal with Mean and Stddev (clamped to [Min, Max]).
type SizeDist struct {
	Kind   string `json:"kind" yaml:"kind"` // fixed|uniform|normal
	Size   string `json:"size,omitempty" yaml:"size"`
	Min    string `json:"min,omitempty" yaml:"min"`
	Max    string `json:"max,omitempty" yaml:"max"`
	Mean   string `json:"mean,omitempty" yaml:"mean"`
	Stddev string `json:"stddev,omitempty" yaml:"stddev"`
}
