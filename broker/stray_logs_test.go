package broker

import (
	"testing"

	"github.com/google/uuid"

	"github.com/strata-io/strata/controller/metadata"
)

// TestJudgeLog: the decision removeStrayLogs takes for each log on disk,
// broker 2's. Only a partition that exists under the log's own topic id
// and lists 2 nowhere among its replicas (adding and removing included),
// and that is online, is deleted; whatever the metadata does not prove redundant is set
// aside, and a hosted partition is kept. An empty image deletes nothing.
func TestJudgeLog(t *testing.T) {
	moved, during, here, offline := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	other := uuid.New()
	st := metadata.NewState()
	recs := []metadata.Record{
		&metadata.TopicRecord{Name: "moved", TopicID: moved},
		&metadata.PartitionRecord{TopicID: moved, Partition: 0, Replicas: []int32{3, 1}, ISR: []int32{3, 1}, Leader: 3},
		// mid-reassignment [2 3] → [3 1]: 2 is a removing replica
		&metadata.TopicRecord{Name: "during", TopicID: during},
		&metadata.PartitionRecord{TopicID: during, Partition: 0, Replicas: []int32{3, 1, 2}, ISR: []int32{3, 2}, Leader: 3,
			AddingReplicas: []int32{1}, RemovingReplicas: []int32{2}},
		&metadata.TopicRecord{Name: "offline", TopicID: offline},
		&metadata.PartitionRecord{TopicID: offline, Partition: 0, Replicas: []int32{3, 1}, ISR: []int32{3}, Leader: metadata.NoLeader},
		&metadata.TopicRecord{Name: "here", TopicID: here},
		&metadata.PartitionRecord{TopicID: here, Partition: 0, Replicas: []int32{2, 3}, ISR: []int32{2, 3}, Leader: 2},
	}
	if err := st.ApplyBatch(1, recs); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		st    *metadata.State
		topic string
		part  int32
		id    uuid.UUID
		hasID bool
		want  strayAction
	}{
		{"reassigned away", st, "moved", 0, moved, true, deleteLog},
		{"reassigned away, another topic id", st, "moved", 0, other, true, strayLog},
		{"reassigned away, no partition.metadata", st, "moved", 0, uuid.Nil, false, strayLog},
		{"reassigned away, the partition offline: maybe the last copy", st, "offline", 0, offline, true, strayLog},
		{"a removing replica is still hosted", st, "during", 0, during, true, keepLog},
		{"hosted", st, "here", 0, here, true, keepLog},
		{"hosted, no partition.metadata yet", st, "here", 0, uuid.Nil, false, keepLog},
		{"hosted name, another topic id", st, "here", 0, other, true, strayLog},
		{"no such partition", st, "moved", 1, moved, true, strayLog},
		{"no such topic", st, "deleted", 0, other, true, strayLog},
		{"empty image", metadata.NewState(), "moved", 0, moved, true, strayLog},
	} {
		if got, why := judgeLog(tc.st, 2, tc.topic, tc.part, tc.id, tc.hasID); got != tc.want {
			t.Errorf("%s: %v (%s), want %v", tc.name, got, why, tc.want)
		}
	}
}
