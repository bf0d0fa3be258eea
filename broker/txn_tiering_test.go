package broker

import (
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-io/strata/internal/testutil"
	"github.com/strata-io/strata/storage/producer"
	"github.com/strata-io/strata/tiering"
)

// TestTxnTieringStopsAtLSOAndServesRemoteAborted: with a transaction open
// at offset 0, the uploader copies nothing however many sealed segments
// follow (the tier never holds data at or past the LSO); once it is
// aborted the segments go up with their .txnindex, local retention
// deletes them, and a read_committed fetch served by the remote tier
// lists the aborted transaction from the remote index, so franz-go drops
// its records.
func TestTxnTieringStopsAtLSOAndServesRemoteAborted(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, dir, tierSettings(nil))
	s := func(v string) *string { return &v }
	createTopic(t, newAdmin(t, n), "ttx", 1, map[string]*string{
		"remote.storage.enable": s("true"), "segment.bytes": s("16384"),
		"local.retention.bytes": s("16384"), "retention.ms": s("-1"),
	})
	allowVerify(n, 0)
	c := dialRaw(t, n)
	aborter, plain := initProducerID(t, c), initProducerID(t, c)
	val := func() string {
		b := make([]byte, 500) // incompressible: segments fill as their bytes say
		crand.Read(b)
		return hex.EncodeToString(b)
	}
	if code, _ := txnProduce(t, c, 9, kmsg.StringPtr("tx"), "ttx", txnBatch(aborter, 0, 0, "aborted-"+val())); code != 0 {
		t.Fatalf("txn produce: code %d", code)
	}
	var want []string
	seq := int32(0)
	producePlain := func(k int) {
		for range k {
			v := "plain-" + val()
			expectProduce(t, c, "ttx", producerBatch(plain, 0, seq, v), nil, leo(n, "ttx"))
			want = append(want, v)
			seq++
		}
	}
	producePlain(40)
	p := n.partition("ttx", 0)
	if err := p.log.Roll(); err != nil {
		t.Fatal(err)
	}
	if lso := p.log.LastStableOffset(); lso != 0 {
		t.Fatalf("LSO %d with the transaction open at 0", lso)
	}
	passes := n.tier.up.Passes()
	testutil.Eventually(t, testWait, func() bool {
		n.tier.up.Kick()
		return n.tier.up.Passes() >= passes+3
	}, "three uploader passes")
	if segs := n.tier.finished(p.topicID, 0); len(segs) != 0 {
		t.Fatalf("uploaded past the LSO: %+v", segs)
	}

	if code := writeMarker(t, c, "ttx", producer.Marker{ProducerID: aborter}); code != 0 {
		t.Fatalf("abort marker: code %d", code)
	}
	producePlain(40)
	if err := p.log.Roll(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, testWait, func() error {
		n.tier.up.Kick()
		if ls := p.log.LocalLogStartOffset(); ls <= 45 {
			return fmt.Errorf("local log start %d, want the abort marker (41) tiered and deleted locally", ls)
		}
		return nil
	}, "the aborted transaction tiered")
	txnIndexes := 0
	for _, b := range tierSegmentFiles(t, filepath.Join(dir, "objects"), tiering.ExtTxnIndex) {
		if len(b) > 0 {
			txnIndexes++
		}
	}
	if txnIndexes != 1 {
		t.Fatalf("%d non-empty .txnindex objects in the bucket, want 1", txnIndexes)
	}

	fp := fetchIso(t, c, "ttx", 0, 1)
	if len(fp.AbortedTransactions) != 1 || fp.AbortedTransactions[0].ProducerID != aborter || fp.AbortedTransactions[0].FirstOffset != 0 {
		t.Fatalf("remote read_committed fetch: aborted %+v (%d bytes)", fp.AbortedTransactions, len(fp.RecordBatches))
	}
	got := consumeIso(t, []kgo.Opt{kgo.SeedBrokers(n.Addr())}, "ttx", true, len(want))
	if !slices.Equal(got, want) {
		t.Fatalf("read_committed over the tier: %d records, first %.20q, want %d plain ones", len(got), got[0], len(want))
	}
}
