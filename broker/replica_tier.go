package broker

// Tiered topics with followers (KIP-405 with replication, issue 14).
//
// Only the leader uploads (tier.track hands the uploader the partitions
// this broker leads, and resigns them the moment it stops leading). A
// follower keeps a full local copy above the leader's local log start, and
// its local retention (local.retention.*) may delete only what the remote
// tier holds: its remote-uploaded offset follows the controller's
// COPY_FINISHED records, set here from every metadata delta
// (tier.applied) and, for a partition it starts following, from the image
// (tier.followUploaded). The leader's own copies set the same offset on
// the leader.

import (
	"github.com/strata-io/strata/controller"
	"github.com/strata-io/strata/controller/metadata"
)

// followUploaded sets the remote-uploaded offset of a partition this
// broker has just started to follow (or follows again after a restart)
// from the image: the end of its COPY_FINISHED segments + 1. Later
// segments arrive through applied.
func (t *tier) followUploaded(p *partition) {
	if _, end, ok := t.remoteRange(p); ok {
		p.log.SetRemoteUploadedOffset(end + 1)
	}
}

// applied follows a metadata delta the node has just applied and
// reconciled: each COPY_FINISHED segment in it raises the remote-uploaded
// offset of the partition on this broker, leader or follower (the
// uploader raised it already on the leader that copied it; raising is
// idempotent), so local retention on every replica deletes what is
// safely remote and nothing else. A whole image (a metadata snapshot)
// recomputes every followed partition. Cheap: one type switch per record
// of the delta, one image read per COPY_FINISHED record.
func (t *tier) applied(d controller.Delta) {
	if t == nil || !t.ready.Load() {
		return
	}
	if d.Image != nil {
		t.mu.Lock()
		keys := make([]tpKey, 0, len(t.followed))
		for k := range t.followed {
			keys = append(keys, k)
		}
		t.mu.Unlock()
		for _, k := range keys {
			if p := t.n.partition(k.topic, k.partition); p != nil {
				t.followUploaded(p)
			}
		}
		return
	}
	for _, rec := range d.Records {
		r, ok := rec.(*metadata.RemoteSegmentRecord)
		if !ok || r.State != metadata.CopyFinished {
			continue
		}
		var name string
		var exists bool
		t.n.view(func(st *metadata.State) { name, exists, _ = st.TopicNameByID(r.TopicID) })
		if !exists {
			continue
		}
		if p := t.n.partition(name, r.Partition); p != nil && p.topicID == r.TopicID {
			p.log.SetRemoteUploadedOffset(r.EndOffset + 1)
		}
	}
}
