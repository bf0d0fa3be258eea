package loadgen

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/strata-io/strata/internal/buildinfo"
)

// The broker and topic settings an Environment records (when the cluster
// describes them): what changes throughput, durability and tiering.
var (
	envBrokerConfigs = []string{
		"num.partitions", "default.replication.factor", "min.insync.replicas",
		"log.segment.bytes", "log.retention.ms", "log.retention.hours", "log.retention.bytes",
		"log.flush.interval.messages", "log.flush.interval.ms", "compression.type",
		"message.max.bytes", "num.io.threads", "num.network.threads",
		"remote.log.storage.system.enable", "remote.storage.enable", "log.local.retention.ms", "log.local.retention.bytes",
		"unclean.leader.election.enable", "group.initial.rebalance.delay.ms",
	}
	envTopicConfigs = []string{
		"cleanup.policy", "compression.type", "min.insync.replicas", "max.message.bytes",
		"retention.ms", "retention.bytes", "segment.bytes", "segment.ms",
		"remote.storage.enable", "local.retention.ms", "local.retention.bytes",
		"message.timestamp.type", "flush.messages", "flush.ms", "unclean.leader.election.enable",
	}
)

// localEnvironment is the machine loadgen runs on and its own build.
func localEnvironment() *Environment {
	e := &Environment{
		Loadgen:  Build{Version: buildinfo.Version(), Commit: buildinfo.Commit(), GoVersion: runtime.Version()},
		OS:       runtime.GOOS,
		Arch:     runtime.GOARCH,
		CPUCores: runtime.NumCPU(),
	}
	e.Hostname, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		e.Kernel = strings.TrimSpace(string(b))
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if ok && strings.TrimSpace(k) == "model name" {
				e.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					e.MemoryBytes = kb << 10
				}
				break
			}
		}
		f.Close()
	}
	return e
}

// buildOf reads a strata_build_info label set.
func buildOf(info map[string]string) *Build {
	if info == nil {
		return nil
	}
	return &Build{Version: info["version"], Commit: info["commit"], GoVersion: info["goversion"]}
}

// describeCluster fills in what the cluster says about itself: its id and
// brokers, the first topic's replication factor, and the broker and topic
// settings that matter (DescribeConfigs). What it cannot read is noted,
// not fatal: the run is measured either way.
func (r *runner) describeCluster(ctx context.Context, meta kadm.Metadata) {
	e := r.res.Environment
	e.ClusterID = meta.Cluster
	e.Brokers = len(meta.Brokers)
	e.Acks, e.Compression = r.w.Acks, r.w.Compression
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if tm, err := r.adm.Metadata(ctx, r.topics[0]); err == nil {
		if td, ok := tm.Topics[r.topics[0]]; ok {
			for _, p := range td.Partitions {
				e.ReplicationFactor = max(e.ReplicationFactor, len(p.Replicas))
			}
		}
	}
	pick := func(rc kadm.ResourceConfig, names []string) map[string]string {
		want := map[string]bool{}
		for _, n := range names {
			want[n] = true
		}
		out := map[string]string{}
		for _, c := range rc.Configs {
			if want[c.Key] && c.Value != nil {
				out[c.Key] = *c.Value
			}
		}
		return out
	}
	if len(meta.Brokers) > 0 {
		ids := make([]int32, 0, len(meta.Brokers))
		for _, b := range meta.Brokers {
			ids = append(ids, b.NodeID)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		rcs, err := r.adm.DescribeBrokerConfigs(ctx, ids[0])
		if err == nil && len(rcs) > 0 && rcs[0].Err == nil {
			e.BrokerConfigs = pick(rcs[0], envBrokerConfigs)
		} else {
			r.res.Notes = append(r.res.Notes, fmt.Sprintf("broker configs not described: %v", firstErr(err, rcs)))
		}
	}
	rcs, err := r.adm.DescribeTopicConfigs(ctx, r.topics[0])
	if err == nil && len(rcs) > 0 && rcs[0].Err == nil {
		e.TopicConfigs = pick(rcs[0], envTopicConfigs)
	} else {
		r.res.Notes = append(r.res.Notes, fmt.Sprintf("topic %s configs not described: %v", r.topics[0], firstErr(err, rcs)))
	}
}

func firstErr(err error, rcs kadm.ResourceConfigs) error {
	if err != nil {
		return err
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			return rc.Err
		}
	}
	return fmt.Errorf("no answer")
}

// LocalEnvironment is the machine this process runs on (OS, kernel, CPU
// model and cores, memory, hostname) and its build, as run results
// record it; bench/faultbench puts it on docs/reliability.md.
func LocalEnvironment() *Environment { return localEnvironment() }
