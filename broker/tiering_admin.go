package broker

// The remote tier's admin endpoints, on the admin listener next to
// /metrics (`strata tier status|list|verify|restore` call them):
//
//	GET  /v1/tier/status[?topic=T]   JSON [TierStatusRow], the partitions
//	                                 this node leads with remote storage,
//	                                 sorted
//	GET  /v1/tier/list               JSON [BucketTopicRow]: every topic
//	                                 incarnation in the bucket and whether
//	                                 the cluster still has it
//	GET  /v1/tier/verify[?topic=T]   JSON VerifyResult: every registered
//	                                 remote segment's objects exist with
//	                                 the recorded sizes
//	POST /v1/tier/restore?topic=T[&config=k=v...]
//	                                 rebuild topic T from the bucket's
//	                                 manifests (RestoreTopic); JSON
//	                                 RestoreResult
//	POST /v1/tier/restore?all=true   restore every topic of the bucket the
//	                                 metadata lost (RestoreAll); JSON
//	                                 RestoreAllResult
//
// JSON field names are snake_case and topic ids are printed as Kafka
// prints them (URL-safe base64 without padding). Errors answer with a
// status code and a JSON {"error": "..."}.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/tiering"
	"github.com/strata-io/strata/tiering/objstore"
)

// ErrTierDisabled is returned by tier operations on a node started with
// remote.log.storage.system.enable=false.
var ErrTierDisabled = errors.New("broker: remote storage is disabled on this node (remote.log.storage.system.enable=false)")

// ErrRestoreConflict is returned by RestoreTopic when the topic exists
// under another id than the bucket's.
var ErrRestoreConflict = errors.New("broker: restore conflict")

// TierStatus returns the remote-tier status of the partitions this node
// leads with remote storage (all topics when topic is ""), sorted by topic
// and partition.
func (n *Node) TierStatus(topic string) ([]tiering.PartitionStatus, error) {
	if n.tier == nil {
		return nil, ErrTierDisabled
	}
	var out []tiering.PartitionStatus
	for _, s := range n.tier.up.Statuses() {
		if topic == "" || s.Topic == topic {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b tiering.PartitionStatus) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Index - b.Index)
	})
	return out, nil
}

// RestoreResult says what RestoreTopic did.
type RestoreResult struct {
	Topic      string              `json:"topic"`
	TopicID    string              `json:"topic_id"`
	Created    bool                `json:"created"` // the topic did not exist and was created with its old id
	Partitions []RestoredPartition `json:"partitions"`
}

// RestoredPartition is one partition of a RestoreResult.
type RestoredPartition struct {
	Partition  int32 `json:"partition"`
	Segments   int   `json:"segments"`   // COPY_FINISHED segments in the bucket's manifest
	Registered int   `json:"registered"` // of which the controller did not know
	LogStart   int64 `json:"log_start"`
	LogEnd     int64 `json:"log_end"` // next offset; -1 when this node does not lead it
}

// RestoreTopic rebuilds topic from the bucket's manifests: it finds the
// topic's newest id under the bucket, creates the topic with that id when
// the cluster does not have it (with the topic configs the manifests
// recorded — or retention.ms=retention.bytes=-1 when they recorded none,
// so nothing restored expires before the operator says how long to keep
// it — then configs on top, and remote.storage.enable=true), registers
// every COPY_FINISHED segment of every manifest the controller lacks, and
// restarts this node's empty local logs of the topic after the remote end,
// so consumers read the old data back from the bucket. It refuses a topic
// that exists under another id. Idempotent.
//
// While it runs, the topic's partitions are kept from the uploader, whose
// orphan scan would otherwise delete the objects of segments not yet
// registered.
func (n *Node) RestoreTopic(ctx context.Context, topic string, configs map[string]string) (RestoreResult, error) {
	res := RestoreResult{Topic: topic}
	if n.tier == nil {
		return res, ErrTierDisabled
	}
	t := n.tier
	t.mu.Lock()
	t.restoring[topic]++
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		if t.restoring[topic]--; t.restoring[topic] <= 0 {
			delete(t.restoring, topic)
		}
		t.mu.Unlock()
		n.partsMu.RLock()
		var ps []*partition
		for k, p := range n.parts {
			if k.topic == topic {
				ps = append(ps, p)
			}
		}
		n.partsMu.RUnlock()
		for _, p := range ps {
			t.track(p, p.leader.Load(), p.log.Config().RemoteStorageEnable)
		}
	}()
	id, manifests, err := tiering.FindTopicManifests(ctx, n.remote, "", topic)
	if err != nil {
		return res, err
	}
	res.TopicID = encodeTopicID(id)
	var cur metadata.TopicInfo
	var exists bool
	n.view(func(st *metadata.State) { cur, exists = st.TopicByName(topic) })
	if exists && cur.ID != id {
		return res, fmt.Errorf("%w: topic %q exists with id %s but the bucket holds id %s; delete the topic first", ErrRestoreConflict, topic, cur.ID, id)
	}
	parts := int32(0)
	for _, m := range manifests {
		parts = max(parts, m.Partition+1)
	}
	if !exists {
		// The topic's configs as the bucket last saw them; a manifest
		// written before configs were kept gives retention -1, so that
		// nothing restored expires before the operator says how long to
		// keep it. Then --config on top.
		cfgs := manifestConfigs(manifests)
		if cfgs == nil {
			cfgs = map[string]string{metadata.ConfigRetentionMs: "-1", metadata.ConfigRetentionBytes: "-1"}
		}
		for k, v := range configs {
			cfgs[k] = v
		}
		cfgs[metadata.ConfigRemoteStorageEnable] = "true"
		results, err := n.svc.CreateTopics(ctx, metadata.CreateTopicsRequest{
			Topics: []metadata.CreateTopic{{
				Name: topic, TopicID: id, NumPartitions: parts, ReplicationFactor: -1,
				Configs: cfgs,
			}},
			DefaultPartitions: n.cfg.NumPartitions, DefaultReplicationFactor: n.cfg.DefaultReplicationFactor,
		})
		if err == nil && len(results) == 1 {
			err = results[0].Err
		}
		if err != nil {
			return res, fmt.Errorf("broker: restore %q: create topic: %w", topic, err)
		}
		res.Created = true
		if !n.waitMetadata(ctx, func(st *metadata.State) bool { _, ok := st.TopicByID(id); return ok }) {
			return res, ctx.Err()
		}
	}
	meta := tierMeta{n}
	for _, m := range manifests {
		known := map[uuid.UUID]bool{}
		for _, s := range meta.RemoteSegments(id, m.Partition) {
			known[s.SegmentID] = true
		}
		rp := RestoredPartition{Partition: m.Partition, LogStart: -1, LogEnd: -1}
		for _, rec := range tiering.RestoreRecords(m, n.cfg.NodeID, time.Now().UnixMilli()) {
			if rec.State == metadata.CopyFinished {
				rp.Segments++
			}
			if known[rec.SegmentID] {
				continue
			}
			if err := meta.CommitRemoteSegment(ctx, rec); err != nil {
				return res, fmt.Errorf("broker: restore %q partition %d: register segment %s: %w", topic, m.Partition, rec.SegmentID, err)
			}
			if rec.State == metadata.CopyFinished {
				rp.Registered++
			}
		}
		if p := n.partition(topic, m.Partition); p != nil && p.leader.Load() {
			if err := n.tier.restartEmpty(p); err != nil {
				return res, fmt.Errorf("broker: restore %q partition %d: %w", topic, m.Partition, err)
			}
			rp.LogStart, rp.LogEnd = p.log.LogStartOffset(), p.log.LogEndOffset()
		}
		res.Partitions = append(res.Partitions, rp)
	}
	n.tier.up.Kick()
	n.logger.Info("broker: topic restored from the remote tier", "topic", topic, "id", id, "created", res.Created, "partitions", len(res.Partitions))
	return res, nil
}

// manifestConfigs returns the topic configs of the most recently written
// manifest that has any (nil if none has).
func manifestConfigs(ms []tiering.Manifest) map[string]string {
	var best *tiering.Manifest
	for i := range ms {
		if ms[i].Configs != nil && (best == nil || ms[i].UpdatedAt > best.UpdatedAt) {
			best = &ms[i]
		}
	}
	if best == nil {
		return nil
	}
	out := make(map[string]string, len(best.Configs))
	for k, v := range best.Configs {
		out[k] = v
	}
	return out
}

func (n *Node) serveTierStatus(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeJSONError(w, http.StatusMethodNotAllowed, errors.New("use GET"))
		return
	}
	rows, err := n.tierStatusRows(r.URL.Query().Get("topic"))
	if err != nil {
		writeJSONError(w, http.StatusConflict, err)
		return
	}
	writeJSON(w, http.StatusOK, rows)
}

func (n *Node) serveTierRestore(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeJSONError(w, http.StatusMethodNotAllowed, errors.New("use POST"))
		return
	}
	topic := r.URL.Query().Get("topic")
	if all := r.URL.Query().Get("all"); all == "true" || all == "1" {
		if topic != "" {
			writeJSONError(w, http.StatusBadRequest, errors.New("give topic or all, not both"))
			return
		}
		n.serveTierRestoreAll(w, r)
		return
	}
	if topic == "" {
		writeJSONError(w, http.StatusBadRequest, errors.New("topic (or all=true) is required"))
		return
	}
	configs := map[string]string{}
	for _, kv := range r.URL.Query()["config"] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			writeJSONError(w, http.StatusBadRequest, fmt.Errorf("config %q: want name=value", kv))
			return
		}
		configs[k] = v
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Minute)
	defer cancel()
	res, err := n.RestoreTopic(ctx, topic, configs)
	if err != nil {
		code := http.StatusInternalServerError
		switch {
		case errors.Is(err, ErrTierDisabled), errors.Is(err, ErrRestoreConflict):
			code = http.StatusConflict
		case errors.Is(err, objstore.ErrNotFound), errors.Is(err, tiering.ErrTopicNotInBucket):
			code = http.StatusNotFound
		}
		writeJSONError(w, code, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func writeJSONError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, map[string]string{"error": err.Error()})
}
