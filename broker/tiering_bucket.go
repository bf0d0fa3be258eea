package broker

// The bucket-wide admin endpoints (`strata tier list|verify|restore
// --all`) and the JSON rows of `tier status`: what the bucket holds next
// to what the metadata knows, and whether what the metadata registered is
// really in the bucket.

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/tiering"
)

// TierStatusRow is one partition of /v1/tier/status: tiering's
// PartitionStatus with snake_case names and the topic id as Kafka prints
// it, plus the remote segments whose objects reads found missing.
type TierStatusRow struct {
	Topic             string `json:"topic"`
	TopicID           string `json:"topic_id"`
	Partition         int32  `json:"partition"`
	LogStart          int64  `json:"log_start"`
	LocalStart        int64  `json:"local_start"`
	LogEnd            int64  `json:"log_end"`
	RemoteStart       int64  `json:"remote_start"`
	RemoteEnd         int64  `json:"remote_end"`
	LocalBytes        int64  `json:"local_bytes"`
	RemoteBytes       int64  `json:"remote_bytes"`
	RemoteSegments    int    `json:"remote_segments"`
	UploadLagBytes    int64  `json:"upload_lag_bytes"`
	UploadLagSegments int    `json:"upload_lag_segments"`
	// MissingSegments are remote segments a read found objects of missing
	// from the bucket (reads of their offsets answer KAFKA_STORAGE_ERROR).
	MissingSegments []MissingSegmentRow `json:"missing_segments"`
}

// MissingSegmentRow is a remote segment with a missing object.
type MissingSegmentRow struct {
	SegmentID  string `json:"segment_id"`
	BaseOffset int64  `json:"base_offset"`
	EndOffset  int64  `json:"end_offset"`
	Key        string `json:"key"`
	Error      string `json:"error"`
}

func (n *Node) tierStatusRows(topic string) ([]TierStatusRow, error) {
	st, err := n.TierStatus(topic)
	if err != nil {
		return nil, err
	}
	rows := make([]TierStatusRow, 0, len(st))
	for _, s := range st {
		r := TierStatusRow{
			Topic: s.Topic, TopicID: encodeTopicID(s.TopicID), Partition: s.Index,
			LogStart: s.LogStart, LocalStart: s.LocalStart, LogEnd: s.LogEnd,
			RemoteStart: s.RemoteStart, RemoteEnd: s.RemoteEnd,
			LocalBytes: s.LocalBytes, RemoteBytes: s.RemoteBytes, RemoteSegments: s.RemoteSegments,
			UploadLagBytes: s.UploadLagBytes, UploadLagSegments: s.UploadLagSegments,
			MissingSegments: []MissingSegmentRow{},
		}
		live := map[uuid.UUID]bool{}
		for _, seg := range n.tier.finished(s.TopicID, s.Index) {
			live[seg.SegmentID] = true
		}
		for _, m := range n.tier.rd.Missing(s.Partition) {
			if !live[m.SegmentID] {
				continue // deleted since (retention): nothing to read any more
			}
			r.MissingSegments = append(r.MissingSegments, MissingSegmentRow{
				SegmentID: m.SegmentID.String(), BaseOffset: m.BaseOffset, EndOffset: m.EndOffset, Key: m.Key, Error: m.Err,
			})
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// Bucket topic states, as /v1/tier/list reports them.
const (
	bucketPresent  = "present"  // the cluster has the topic under this id
	bucketLost     = "lost"     // the cluster has no topic of this name: restorable
	bucketReplaced = "replaced" // the cluster has the name under another id
	bucketDeleting = "deleting" // deleted; its objects are being removed
)

// BucketTopicRow is one topic incarnation of /v1/tier/list.
type BucketTopicRow struct {
	Topic      string               `json:"topic"`
	TopicID    string               `json:"topic_id"`
	State      string               `json:"state"` // present, lost, replaced or deleting
	UpdatedAt  int64                `json:"updated_at"`
	Partitions []BucketPartitionRow `json:"partitions"`
}

// BucketPartitionRow is one partition of a BucketTopicRow.
type BucketPartitionRow struct {
	Partition int32 `json:"partition"`
	Segments  int   `json:"segments"`
	Objects   int   `json:"objects"`
	Bytes     int64 `json:"bytes"`
	LogStart  int64 `json:"log_start"`
	EndOffset int64 `json:"end_offset"` // last offset in the bucket, -1 if none
	Manifest  bool  `json:"manifest"`
}

// TierList lists the bucket's topic incarnations (newest first per name)
// with what the metadata says of each.
func (n *Node) TierList(ctx context.Context) ([]BucketTopicRow, error) {
	if n.tier == nil {
		return nil, ErrTierDisabled
	}
	bts, err := tiering.ListBucket(ctx, n.remote, "")
	if err != nil {
		return nil, err
	}
	rows := make([]BucketTopicRow, 0, len(bts))
	for _, bt := range bts {
		r := BucketTopicRow{Topic: bt.Topic, TopicID: encodeTopicID(bt.TopicID), State: n.bucketState(bt.Topic, bt.TopicID), UpdatedAt: bt.UpdatedAt}
		for _, p := range bt.Partitions {
			r.Partitions = append(r.Partitions, BucketPartitionRow{
				Partition: p.Partition, Segments: p.Segments, Objects: p.Objects, Bytes: p.Bytes,
				LogStart: p.LogStart, EndOffset: p.EndOffset, Manifest: p.HasManif,
			})
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func (n *Node) bucketState(topic string, id uuid.UUID) string {
	state := bucketLost
	n.view(func(st *metadata.State) {
		if _, exists, known := st.TopicNameByID(id); known && !exists {
			state = bucketDeleting
			return
		}
		if t, ok := st.TopicByName(topic); ok {
			state = bucketReplaced
			if t.ID == id {
				state = bucketPresent
			}
		}
	})
	return state
}

// RestoreAllResult says what RestoreAll did.
type RestoreAllResult struct {
	Restored []RestoreResult `json:"restored"`
	Skipped  []RestoreSkip   `json:"skipped"`
	Failed   []RestoreSkip   `json:"failed"`
}

// RestoreSkip is a bucket topic RestoreAll did not restore, and why.
type RestoreSkip struct {
	Topic   string `json:"topic"`
	TopicID string `json:"topic_id"`
	Reason  string `json:"reason"` // the bucket state (present, replaced, deleting), an older incarnation, or the error
	Detail  string `json:"detail,omitempty"`
}

var skipDetail = map[string]string{
	bucketPresent:  "the cluster has it (tier restore --topic registers segments it lacks)",
	bucketReplaced: "the cluster has the name under another id; delete that topic to restore this one",
	bucketDeleting: "deleted through DeleteTopics; its objects are being removed",
}

// RestoreAll restores every topic of the bucket the metadata lost (state
// lost: the cluster has no topic of its name), each as RestoreTopic does,
// from its newest incarnation. Topics the cluster has, under this id or
// another, and topics being deleted are skipped; a topic that fails is
// reported and the others still restored. Idempotent.
func (n *Node) RestoreAll(ctx context.Context) (RestoreAllResult, error) {
	res := RestoreAllResult{Restored: []RestoreResult{}, Skipped: []RestoreSkip{}, Failed: []RestoreSkip{}}
	rows, err := n.TierList(ctx)
	if err != nil {
		return res, err
	}
	seen := map[string]bool{}
	for _, r := range rows {
		if seen[r.Topic] {
			res.Skipped = append(res.Skipped, RestoreSkip{Topic: r.Topic, TopicID: r.TopicID, Reason: "older", Detail: "an older incarnation of the name; the newest is restored"})
			continue
		}
		seen[r.Topic] = true
		if r.State != bucketLost {
			res.Skipped = append(res.Skipped, RestoreSkip{Topic: r.Topic, TopicID: r.TopicID, Reason: r.State, Detail: skipDetail[r.State]})
			continue
		}
		rr, err := n.RestoreTopic(ctx, r.Topic, nil)
		if err != nil {
			res.Failed = append(res.Failed, RestoreSkip{Topic: r.Topic, TopicID: r.TopicID, Reason: err.Error()})
			continue
		}
		res.Restored = append(res.Restored, rr)
	}
	return res, nil
}

// VerifyResult is /v1/tier/verify's answer.
type VerifyResult struct {
	Partitions int          `json:"partitions"`
	Segments   int          `json:"segments"`
	Problems   []VerifyItem `json:"problems"`
}

// VerifyItem is one object not as recorded.
type VerifyItem struct {
	Topic      string `json:"topic"`
	TopicID    string `json:"topic_id"`
	Partition  int32  `json:"partition"`
	SegmentID  string `json:"segment_id"`
	BaseOffset int64  `json:"base_offset"`
	EndOffset  int64  `json:"end_offset"`
	Key        string `json:"key"`
	Problem    string `json:"problem"`
}

// TierVerify checks that every COPY_FINISHED remote segment the metadata
// registers for existing topics (topic "" for all) has its objects
// in the bucket with the recorded sizes: one List per partition.
func (n *Node) TierVerify(ctx context.Context, topic string) (VerifyResult, error) {
	res := VerifyResult{Problems: []VerifyItem{}}
	if n.tier == nil {
		return res, ErrTierDisabled
	}
	meta := tierMeta{n}
	for _, tp := range meta.RemotePartitions() {
		name, exists, _ := meta.TopicName(tp.TopicID)
		if !exists || (topic != "" && name != topic) {
			continue
		}
		p := tiering.Partition{Topic: name, TopicID: tp.TopicID, Index: tp.Partition}
		probs, checked, err := tiering.VerifyPartition(ctx, n.remote, "", p, meta.RemoteSegments(tp.TopicID, tp.Partition))
		if err != nil {
			return res, err
		}
		res.Partitions++
		res.Segments += checked
		for _, pr := range probs {
			res.Problems = append(res.Problems, VerifyItem{
				Topic: name, TopicID: encodeTopicID(tp.TopicID), Partition: tp.Partition, SegmentID: pr.SegmentID.String(),
				BaseOffset: pr.BaseOffset, EndOffset: pr.EndOffset, Key: pr.Key, Problem: pr.Problem,
			})
		}
	}
	return res, nil
}

func (n *Node) serveTierList(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeJSONError(w, http.StatusMethodNotAllowed, errors.New("use GET"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Minute)
	defer cancel()
	rows, err := n.TierList(ctx)
	if err != nil {
		writeJSONError(w, tierErrorCode(err), err)
		return
	}
	writeJSON(w, http.StatusOK, rows)
}

func (n *Node) serveTierVerify(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeJSONError(w, http.StatusMethodNotAllowed, errors.New("use GET"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Minute)
	defer cancel()
	res, err := n.TierVerify(ctx, r.URL.Query().Get("topic"))
	if err != nil {
		writeJSONError(w, tierErrorCode(err), err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (n *Node) serveTierRestoreAll(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Minute)
	defer cancel()
	res, err := n.RestoreAll(ctx)
	if err != nil {
		writeJSONError(w, tierErrorCode(err), err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// tierErrorCode is the HTTP status of a tier operation's error.
func tierErrorCode(err error) int {
	switch {
	case errors.Is(err, ErrTierDisabled):
		return http.StatusConflict
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}
