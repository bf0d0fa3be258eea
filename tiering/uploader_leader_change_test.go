package tiering

import (
	"context"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/strata-io/strata/controller/metadata"
	"github.com/strata-io/strata/tiering/objstore"
)

// gatedStore holds the first Put whose key ends in suffix until open is
// closed (or its context ends): an old leader's copy stuck mid-upload.
type gatedStore struct {
	objstore.ObjectStore
	suffix  string
	open    chan struct{}
	reached chan struct{}
	once    sync.Once
}

func (g *gatedStore) Put(ctx context.Context, key string, r io.Reader, size int64, opts objstore.PutOptions) (objstore.ObjectInfo, error) {
	if strings.HasSuffix(key, g.suffix) {
		first := false
		g.once.Do(func() { first = true })
		if first {
			close(g.reached)
			select {
			case <-g.open:
			case <-ctx.Done():
				return objstore.ObjectInfo{}, ctx.Err()
			}
		}
	}
	return g.ObjectStore.Put(ctx, key, r, size, opts)
}

// A leader change while the old leader's copy is in flight: the new
// leader (another broker) takes the old leader's COPY_STARTED segment for
// an orphan at once, deletes it and copies the segments itself. The old
// leader, not told yet (a zombie: its task still runs), finishes its puts
// afterwards; it must then notice its segment is no longer COPY_STARTED
// and stop, writing nothing to the manifest: otherwise its add drops the
// new leader's segment of the same range from the manifest and names a
// segment the controller no longer has, and a restore from the bucket
// would miss data.
func TestUploaderZombieLeaderCopyLeavesTheNewLeadersManifestAlone(t *testing.T) {
	p, meta, tp := ordersPart(t)
	tp.appendSegments(t, testTs, 2, 2)
	mem := objstore.NewMemStore()
	gate := &gatedStore{ObjectStore: mem, suffix: "." + ExtMeta, open: make(chan struct{}), reached: make(chan struct{})}
	tp.epoch.Store(meta.moveLeader(t, p.TopicID, 0, 2))
	old := newTestUploader(t, gate, meta, nil, func(c *UploaderConfig) { c.BrokerID = 2 })
	old.Lead(tp.LeaderPartition)
	<-gate.reached
	zombie := meta.RemoteSegments(p.TopicID, 0)
	if len(zombie) != 1 || zombie[0].State != metadata.CopyStarted || zombie[0].BrokerID != 2 {
		t.Fatalf("old leader's segments %+v, want one COPY_STARTED", zombie)
	}

	tp.epoch.Store(meta.moveLeader(t, p.TopicID, 0, 3))
	newer := newTestUploader(t, mem, meta, nil, func(c *UploaderConfig) { c.BrokerID = 3 })
	newer.Lead(tp.LeaderPartition)
	waitFor(t, newer, "the new leader's copies, the old leader's orphan gone", func() bool {
		segs := meta.RemoteSegments(p.TopicID, 0)
		return len(segs) == 2 && segs[0].State == metadata.CopyFinished && segs[1].State == metadata.CopyFinished
	})
	settle(t, newer)

	close(gate.open)
	settle(t, old)
	settle(t, newer)

	var want []string
	for _, s := range meta.RemoteSegments(p.TopicID, 0) {
		if s.State != metadata.CopyFinished || s.BrokerID != 3 {
			t.Fatalf("segment %s [%d, %d] %s by broker %d after the old leader's copy ended", s.SegmentID, s.BaseOffset, s.EndOffset, s.State, s.BrokerID)
		}
		want = append(want, s.SegmentID.String())
	}
	m, _, err := NewManifestStore(mem).Load(testCtx(t), ManifestKey("strata", p.Topic, p.TopicID, p.Index))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range m.Segments {
		got = append(got, s.SegmentID.String())
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("manifest names %v, the controller %v (old leader's orphan %s)", got, want, zombie[0].SegmentID)
	}
	checkCoverage(t, meta, p, 0, 39)
}
