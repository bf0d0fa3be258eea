package broker

// DescribeLogDirs (key 35), versions 0 through kmsg's newest (5).
//
// Behaviour: one entry per directory of log.dirs (as an absolute path),
// with every partition log in it, led or followed here (every replica this
// broker hosts) — all of them when Topics is null, else the named topics'
// listed partitions (names or partitions without a log here are left out,
// as Kafka does). Per partition: Size, the bytes of its local segments;
// OffsetLag as Kafka's ReplicaManager.getLogEndOffsetLag for a current
// (not future) log: max(HW - LEO, 0), so 0 for a leader and for a follower
// (whose HW never passes its own LEO), and -1 when the log is on disk but
// not hosted as a partition (Kafka's INVALID_OFFSET_LAG for a replica that
// is not online); IsFuture false (no alter-log-dirs moves). v3+ top-level ErrorCode 0. v4+
// TotalBytes and UsableBytes of the directory's file system from statfs(2)
// (-1 if statfs fails). v5 IsCordoned false.
//
// Differences from Kafka: none known for the listing. A directory that has
// failed is reported with KAFKA_STORAGE_ERROR and no partitions (Kafka
// lists failed dirs the same way); a full one (appends refused) is listed
// normally, its UsableBytes telling why.

import (
	"context"
	"path/filepath"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"

	"github.com/strata-io/strata/broker/authz"
)

func init() { register(35, 0, handleDescribeLogDirs) }

func handleDescribeLogDirs(_ context.Context, n *Node, r *request) (*frame, error) {
	req := r.msg.(*kmsg.DescribeLogDirsRequest)
	resp := kmsg.NewPtrDescribeLogDirsResponse()
	// Kafka's check (authorize.go): DESCRIBE on the cluster, else an empty
	// answer (v3+ CLUSTER_AUTHORIZATION_FAILED).
	if !r.allowedCluster(n.authorizer(), authz.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return encodeResponse(r, resp), nil
	}
	var want map[tpKey]bool // nil: every partition
	if req.Topics != nil {
		want = map[tpKey]bool{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				want[tpKey{t.Topic, p}] = true
			}
		}
	}
	logs := n.store.Logs() // sorted by topic, partition
	for _, st := range n.store.Dirs() {
		dir := kmsg.NewDescribeLogDirsResponseDir()
		dir.Dir = st.Path
		if abs, err := filepath.Abs(st.Path); err == nil {
			dir.Dir = abs
		}
		dir.TotalBytes, dir.UsableBytes = -1, -1
		var fs unix.Statfs_t
		if err := unix.Statfs(st.Path, &fs); err == nil {
			dir.TotalBytes = int64(fs.Blocks) * int64(fs.Bsize)
			dir.UsableBytes = int64(fs.Bavail) * int64(fs.Bsize)
		}
		if st.Failed {
			dir.ErrorCode = kerr.KafkaStorageError.Code
			resp.Dirs = append(resp.Dirs, dir)
			continue
		}
		byTopic := map[string]int{} // topic → index in dir.Topics
		for _, l := range logs {
			k := tpKey{l.Topic(), l.Partition()}
			if (want != nil && !want[k]) || n.store.DirOf(l) != st.Path {
				continue
			}
			i, ok := byTopic[k.topic]
			if !ok {
				t := kmsg.NewDescribeLogDirsResponseDirTopic()
				t.Topic = k.topic
				dir.Topics = append(dir.Topics, t)
				i = len(dir.Topics) - 1
				byTopic[k.topic] = i
			}
			p := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			p.Partition, p.Size = k.partition, l.Size()
			p.OffsetLag = -1
			if hp := n.partition(k.topic, k.partition); hp != nil && hp.log == l {
				p.OffsetLag = max(hp.hw.Load()-l.LogEndOffset(), 0)
			}
			dir.Topics[i].Partitions = append(dir.Topics[i].Partitions, p)
		}
		resp.Dirs = append(resp.Dirs, dir)
	}
	return encodeResponse(r, resp), nil
}
