package loadgen

// Workload is what a run does: from flags or a YAML workload file
// (workloads/*.yaml). Durations are Go durations ("30s"); sizes take
// units ("1KiB"). Zero values take the defaults that Defaults fills in.
type Workload struct {
	Name              string            `json:"name" yaml:"name"`
	Topic             string            `json:"topic" yaml:"topic"`                         // prefix when Topics > 1
	Topics            int               `json:"topics" yaml:"topics"`                       // default 1
	Partitions        int               `json:"partitions" yaml:"partitions"`               // per topic, default 6
	ReplicationFactor int               `json:"replicationFactor" yaml:"replicationFactor"` // default 1
	CreateTopics      *bool             `json:"createTopics,omitempty" yaml:"createTopics"` // default true
	TopicConfigs      map[string]string `json:"topicConfigs,omitempty" yaml:"topicConfigs"`

	RecordSize SizeDist `json:"recordSize" yaml:"recordSize"` // default fixed 1KiB
	Keys       string   `json:"keys" yaml:"keys"`             // none|round-robin|uniform|zipf (default none)
	KeySpace   int      `json:"keySpace" yaml:"keySpace"`     // distinct keys, default 10000
	ZipfS      float64  `json:"zipfS" yaml:"zipfS"`           // zipf exponent s > 1, default 1.1

	Compression string `json:"compression" yaml:"compression"` // none|gzip|snappy|lz4|zstd
	Acks        string `json:"acks" yaml:"acks"`               // all|1|0, default all
	Linger      string `json:"linger" yaml:"linger"`           // default 5ms
	BatchBytes  string `json:"batchBytes" yaml:"batchBytes"`   // producer batch max, default 1MiB
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
