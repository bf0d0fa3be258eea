package loadgen

import "fmt"

// The shipped scenario workloads, byte for byte the files in the
// repository's workloads/ directory (a test keeps them equal), so the
// scenario shortcuts work from any directory.
var presets = map[string]string{
	"catch-up": `# Catch-up read: fill a 2 GiB backlog on a tiered topic with small segments
# and small local retention (so, on Strata, the backlog sits in the remote
# tier), measure producers alone, then start consumers from the earliest
# offset while the producers go on: how long until the reader catches up,
# and how much the producers' p99 suffers meanwhile.
name: catch-up
scenario: catch-up
topic: loadgen-catchup
partitions: 6
topicConfigs:
  remote.storage.enable: "true"
  segment.bytes: "16777216"
  local.retention.bytes: "33554432"
recordSize:
  kind: fixed
  size: 1KiB
acks: all
linger: 5ms
producers: 1
consumers: 2
groups: 1
rate: 10000
fillBytes: 2GiB
remoteWait: 5m
warmup: 5s
baseline: 30s
duration: 10m
`,
	"e2e-latency": `# End-to-end latency: a modest open-loop rate, one consumer group; latency
# runs from the send time each record carries to its receipt.
name: e2e-latency
scenario: e2e-latency
topic: loadgen-e2e
partitions: 6
recordSize:
  kind: fixed
  size: 256B
keys: round-robin
keySpace: 600
compression: none
acks: all
linger: 0s
producers: 1
consumers: 1
groups: 1
consumeFrom: latest
rate: 2000
duration: 60s
warmup: 10s
`,
	"fill": `# Fill: write 10 GiB as fast as the cluster takes it, to build a
# long-retention archive quickly (tiered topic, large records, zstd).
name: fill
scenario: fill
topic: loadgen-archive
partitions: 12
topicConfigs:
  remote.storage.enable: "true"
  retention.ms: "-1"
recordSize:
  kind: fixed
  size: 16KiB
compression: zstd
acks: all
linger: 20ms
batchBytes: 4MiB
producers: 4
rate: 0
fillBytes: 10GiB
duration: 24h
warmup: 0s
`,
	"fixed-rate": `# Fixed-rate publish latency: an open-loop schedule of 20,000 records/s over
# 2 producers; every latency counts from the record's scheduled send time,
# so a stall shows up in the tail instead of slowing the schedule.
name: fixed-rate
scenario: fixed-rate
topic: loadgen-rate
partitions: 6
recordSize:
  kind: uniform
  min: 512B
  max: 2KiB
keys: uniform
keySpace: 10000
compression: lz4
acks: all
linger: 1ms
batchBytes: 976KiB
producers: 2
rate: 20000
duration: 60s
warmup: 10s
`,
	"max-throughput": `# Maximum throughput: producers as fast as the cluster acknowledges (rate 0,
# each producer bounded by its in-flight window), one consumer group reading
# along. Publish latency here is service time under saturation, not a
# latency target: use fixed-rate.yaml for latency.
name: max-throughput
scenario: max-throughput
topic: loadgen-max
partitions: 12
recordSize:
  kind: fixed
  size: 1KiB
keys: none
compression: none
acks: all
linger: 5ms
batchBytes: 976KiB
producers: 2
consumers: 2
groups: 1
rate: 0
duration: 60s
warmup: 10s
`,
}

// Scenarios lists the shipped scenario names.
func Scenarios() []string {
	return []string{"max-throughput", "fixed-rate", "e2e-latency", "catch-up", "fill"}
}

// Preset returns a shipped scenario's workload (defaults not filled in).
func Preset(name string) (Workload, error) {
	s, ok := presets[name]
	if !ok {
		return Workload{}, fmt.Errorf("loadgen: no scenario %q", name)
	}
	return ParseWorkload([]byte(s))
}
