package loadgen

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Defaults of a [Workload]'s zero fields.
const (
	DefaultTopic      = "loadgen"
	DefaultPartitions = 6
	DefaultKeySpace   = 10000
	DefaultZipfS      = 1.1
	DefaultLinger     = "5ms"
	DefaultBatchBytes = "976KiB" // franz-go's own default (1,000,012 B) rounded down: a batch must fit max.message.bytes (1,048,588) and a 1 MiB segment.bytes, which refuses larger batches (RECORD_LIST_TOO_LARGE)
	DefaultDuration   = "60s"
	DefaultWarmup     = "5s"
	DefaultRecordSize = "1KiB"
	DefaultBaseline   = "10s"
	DefaultRemoteWait = "2m"
	DefaultDrain      = "30s"
	// DefaultWindow bounds the records a producer has in flight (buffered
	// or unacknowledged) when Rate is 0.
	DefaultWindow = 10000
	// minRecordSize is the 8-byte send timestamp each value starts with.
	minRecordSize = 8
)

// ParseWorkload decodes a YAML workload strictly: an unknown field is an
// error (a misspelt "parititons" must not silently run the default).
// Defaults are not filled in; call [Workload.Defaults].
func ParseWorkload(b []byte) (Workload, error) {
	var w Workload
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&w); err != nil {
		if errors.Is(err, io.EOF) {
			return w, nil // an empty file is the all-defaults workload
		}
		return w, fmt.Errorf("loadgen: workload: %w", err)
	}
	return w, nil
}

// LoadWorkload reads and parses a YAML workload file.
func LoadWorkload(path string) (Workload, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Workload{}, fmt.Errorf("loadgen: %w", err)
	}
	w, err := ParseWorkload(b)
	if err != nil {
		return w, fmt.Errorf("%w (in %s)", err, path)
	}
	return w, nil
}

// Defaults fills every zero field with its default and validates the
// result: the returned error names the first bad field.
func (w *Workload) Defaults() error {
	if w.Topic == "" {
		w.Topic = DefaultTopic
	}
	if w.Topics == 0 {
		w.Topics = 1
	}
	if w.Partitions == 0 {
		w.Partitions = DefaultPartitions
	}
	if w.ReplicationFactor == 0 {
		// The cluster's default.replication.factor (CreateTopics -1,
		// KIP-464): on a three-node cluster a run measures what its
		// topics would get, RF 3, not a replication-free figure.
		w.ReplicationFactor = -1
	}
	if w.CreateTopics == nil {
		t := true
		w.CreateTopics = &t
	}
	if w.RecordSize.Kind == "" {
		w.RecordSize.Kind = "fixed"
	}
	if w.RecordSize.Kind == "fixed" && w.RecordSize.Size == "" {
		w.RecordSize.Size = DefaultRecordSize
	}
	if w.Keys == "" {
		w.Keys = "none"
	}
	if w.KeySpace == 0 {
		w.KeySpace = DefaultKeySpace
	}
	if w.ZipfS == 0 {
		w.ZipfS = DefaultZipfS
	}
	if w.Compression == "" {
		w.Compression = "none"
	}
	if w.Acks == "" {
		w.Acks = "all"
	}
	if w.Idempotent == nil {
		v := w.Acks == "all" || w.Acks == "-1"
		w.Idempotent = &v
	}
	if w.Linger == "" {
		w.Linger = DefaultLinger
	}
	if w.BatchBytes == "" {
		w.BatchBytes = DefaultBatchBytes
	}
	if w.Producers == 0 {
		w.Producers = 1
	}
	if w.Groups == 0 && w.Consumers > 0 {
		w.Groups = 1
	}
	if w.ConsumeFrom == "" {
		w.ConsumeFrom = "latest"
	}
	if w.Duration == "" {
		w.Duration = DefaultDuration
	}
	if w.Warmup == "" {
		w.Warmup = DefaultWarmup
	}
	if w.Scenario == "catch-up" {
		if w.Baseline == "" {
			w.Baseline = DefaultBaseline
		}
		if w.RemoteWait == "" {
			w.RemoteWait = DefaultRemoteWait
		}
	}
	if w.Window == 0 {
		w.Window = DefaultWindow
	}
	if w.Drain == "" {
		w.Drain = DefaultDrain
	}
	if w.Isolation == "" {
		w.Isolation = "read_uncommitted"
	}
	return w.validate()
}

func (w *Workload) validate() error {
	bad := func(field string, format string, args ...any) error {
		return fmt.Errorf("loadgen: workload %s: %s", field, fmt.Sprintf(format, args...))
	}
	switch {
	case w.Topics < 1:
		return bad("topics", "%d, want >= 1", w.Topics)
	case w.Partitions < 1:
		return bad("partitions", "%d, want >= 1", w.Partitions)
	case (w.ReplicationFactor < 1 && w.ReplicationFactor != -1) || w.ReplicationFactor > math.MaxInt16:
		return bad("replicationFactor", "%d, want >= 1, or -1 for the cluster's default", w.ReplicationFactor)
	case w.Producers < 0 || w.Consumers < 0 || w.Groups < 0:
		return bad("producers/consumers/groups", "negative")
	case w.Producers == 0 && w.Consumers == 0:
		return bad("producers", "no producers and no consumers: nothing to do")
	case w.Rate < 0:
		return bad("rate", "%d, want >= 0 (0: as fast as possible)", w.Rate)
	case w.KeySpace < 1:
		return bad("keySpace", "%d, want >= 1", w.KeySpace)
	case w.ZipfS <= 1:
		return bad("zipfS", "%v, want > 1", w.ZipfS)
	case w.Window < 1:
		return bad("window", "%d, want >= 1", w.Window)
	case w.MaxInFlight < 0:
		return bad("maxInFlight", "%d, want >= 0", w.MaxInFlight)
	}
	switch w.Keys {
	case "none", "round-robin", "uniform", "zipf":
	default:
		return bad("keys", "%q, want none, round-robin, uniform or zipf", w.Keys)
	}
	switch w.Compression {
	case "none", "gzip", "snappy", "lz4", "zstd":
	default:
		return bad("compression", "%q, want none, gzip, snappy, lz4 or zstd", w.Compression)
	}
	switch w.Acks {
	case "all", "-1", "1", "0":
	default:
		return bad("acks", "%q, want all, 1 or 0", w.Acks)
	}
	if *w.Idempotent && w.Acks != "all" && w.Acks != "-1" {
		return bad("idempotent", "an idempotent producer needs acks=all (Kafka's rule), have acks=%s", w.Acks)
	}
	switch w.Isolation {
	case "read_uncommitted", "read_committed":
	default:
		return bad("isolation", "%q, want read_uncommitted or read_committed", w.Isolation)
	}
	if w.TxnInterval != "" {
		d, err := time.ParseDuration(w.TxnInterval)
		switch {
		case err != nil || d <= 0:
			return bad("txnInterval", "%q, want a positive duration such as 100ms", w.TxnInterval)
		case !*w.Idempotent:
			return bad("txnInterval", "a transactional producer is idempotent (needs acks=all and idempotent)")
		}
	}
	switch w.ConsumeFrom {
	case "latest", "earliest":
	default:
		return bad("consumeFrom", "%q, want latest or earliest", w.ConsumeFrom)
	}
	switch w.Scenario {
	case "", "max-throughput", "fixed-rate", "e2e-latency", "catch-up", "fill":
	default:
		return bad("scenario", "%q, want max-throughput, fixed-rate, e2e-latency, catch-up or fill", w.Scenario)
	}
	for _, d := range []struct{ name, v string }{
		{"linger", w.Linger}, {"duration", w.Duration}, {"warmup", w.Warmup},
		{"baseline", w.Baseline}, {"remoteWait", w.RemoteWait}, {"drain", w.Drain},
	} {
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil || v < 0 {
			return bad(d.name, "%q is not a duration like 30s", d.v)
		}
	}
	if v, err := ParseSize(w.BatchBytes); err != nil || v < 1 || v > math.MaxInt32 {
		return bad("batchBytes", "%q is not a size like 1MiB", w.BatchBytes)
	}
	if w.FillBytes != "" {
		if v, err := ParseSize(w.FillBytes); err != nil || v < 1 {
			return bad("fillBytes", "%q is not a size like 10GiB", w.FillBytes)
		}
	}
	if w.Scenario == "fill" && w.FillBytes == "" {
		return bad("fillBytes", "the fill scenario needs fillBytes")
	}
	if w.Scenario == "catch-up" && (w.FillBytes == "" || w.Consumers == 0 || w.Producers == 0) {
		return bad("fillBytes", "the catch-up scenario needs fillBytes (the backlog), producers and consumers")
	}
	if _, err := NewSizeSampler(w.RecordSize, 1); err != nil {
		return err
	}
	return nil
}

// dur returns a validated duration field (zero when empty).
func dur(s string) time.Duration {
	d, _ := time.ParseDuration(s)
	return d
}

// size returns a validated size field (zero when empty).
func size(s string) int64 {
	v, _ := ParseSize(s)
	return v
}

// ParseSize parses a byte size: a number with an optional unit B, KB, MB,
// GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') && t[i-1] != '.' {
		i--
	}
	num, unit := strings.TrimSpace(t[:i]), strings.TrimSpace(t[i:])
	mult := map[string]float64{
		"": 1, "B": 1,
		"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
		"K": 1 << 10, "M": 1 << 20, "G": 1 << 30,
	}[unit]
	f, err := strconv.ParseFloat(num, 64)
	if mult == 0 || err != nil || f < 0 || math.IsInf(f*mult, 0) || f*mult > math.MaxInt64/2 {
		return 0, fmt.Errorf("loadgen: size %q: want a number with an optional unit (B, KB, KiB, MB, MiB, GB, GiB)", s)
	}
	return int64(f * mult), nil
}
