package txncoord

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestErrorMappings pins every Kafka error mapping of the package: the
// append errors (TransactionStateManager), PRODUCER_FENCED by request
// version (KIP-588), marker errors (TransactionMarkerRequestCompletionHandler)
// and allocator errors.
func TestErrorMappings(t *testing.T) {
	for in, want := range map[int16]int16{
		0:                                      0,
		kerr.UnknownTopicOrPartition.Code:      kerr.CoordinatorNotAvailable.Code,
		kerr.NotEnoughReplicas.Code:            kerr.CoordinatorNotAvailable.Code,
		kerr.NotEnoughReplicasAfterAppend.Code: kerr.CoordinatorNotAvailable.Code,
		kerr.RequestTimedOut.Code:              kerr.CoordinatorNotAvailable.Code,
		kerr.NotLeaderForPartition.Code:        kerr.NotCoordinator.Code,
		kerr.KafkaStorageError.Code:            kerr.NotCoordinator.Code,
		kerr.MessageTooLarge.Code:              kerr.UnknownServerError.Code,
		kerr.RecordListTooLarge.Code:           kerr.UnknownServerError.Code,
		kerr.InvalidRecord.Code:                kerr.InvalidRecord.Code,
		kerr.CoordinatorLoadInProgress.Code:    kerr.CoordinatorLoadInProgress.Code,
		kerr.ClusterAuthorizationFailed.Code:   kerr.ClusterAuthorizationFailed.Code,
	} {
		if got := appendCode(in); got != want {
			t.Errorf("appendCode(%s) = %s, want %s", codeName(in), codeName(got), codeName(want))
		}
	}

	fenced := kerr.ProducerFenced.Code
	for _, c := range []struct {
		api     kmsg.Key
		version int16
		want    int16
	}{
		{kmsg.InitProducerID, 3, kerr.InvalidProducerEpoch.Code},
		{kmsg.InitProducerID, 4, fenced},
		{kmsg.InitProducerID, 5, fenced},
		{kmsg.AddPartitionsToTxn, 1, kerr.InvalidProducerEpoch.Code},
		{kmsg.AddPartitionsToTxn, 2, fenced},
		{kmsg.AddOffsetsToTxn, 1, kerr.InvalidProducerEpoch.Code},
		{kmsg.AddOffsetsToTxn, 2, fenced},
		{kmsg.EndTxn, 0, kerr.InvalidProducerEpoch.Code},
		{kmsg.EndTxn, 1, kerr.InvalidProducerEpoch.Code},
		{kmsg.EndTxn, 2, fenced},
		{kmsg.EndTxn, 4, fenced},
	} {
		if got := clientCode(c.api, c.version, fenced); got != c.want {
			t.Errorf("%s v%d: %s, want %s", c.api.Name(), c.version, codeName(got), codeName(c.want))
		}
		if got := clientCode(c.api, c.version, kerr.ConcurrentTransactions.Code); got != kerr.ConcurrentTransactions.Code {
			t.Errorf("%s v%d maps CONCURRENT_TRANSACTIONS to %s", c.api.Name(), c.version, codeName(got))
		}
	}

	for in, want := range map[int16]markerClass{
		0:                                      markerDone,
		kerr.UnknownTopicOrPartition.Code:      markerRetry,
		kerr.NotLeaderForPartition.Code:        markerRetry,
		kerr.NotEnoughReplicas.Code:            markerRetry,
		kerr.NotEnoughReplicasAfterAppend.Code: markerRetry,
		kerr.RequestTimedOut.Code:              markerRetry,
		kerr.KafkaStorageError.Code:            markerRetry,
		kerr.NetworkException.Code:             markerRetry,
		kerr.UnsupportedForMessageFormat.Code:  markerDrop,
		kerr.UnsupportedVersion.Code:           markerDrop,
		kerr.InvalidProducerEpoch.Code:         markerStop,
		kerr.TransactionCoordinatorFenced.Code: markerStop,
		kerr.CorruptMessage.Code:               markerStop,
		kerr.MessageTooLarge.Code:              markerStop,
		kerr.RecordListTooLarge.Code:           markerStop,
		kerr.InvalidRequiredAcks.Code:          markerStop,
		kerr.UnknownServerError.Code:           markerStop,
	} {
		if got := classifyMarker(in); got != want {
			t.Errorf("classifyMarker(%s) = %d, want %d", codeName(in), got, want)
		}
	}

	for _, c := range []struct {
		err  error
		want int16
	}{
		{kerr.CoordinatorLoadInProgress, kerr.CoordinatorLoadInProgress.Code},
		{fmt.Errorf("pids: %w", kerr.CoordinatorNotAvailable), kerr.CoordinatorNotAvailable.Code},
		{errors.New("disk gone"), kerr.KafkaStorageError.Code},
	} {
		if got := allocCode(c.err); got != c.want {
			t.Errorf("allocCode(%v) = %s, want %s", c.err, codeName(got), codeName(c.want))
		}
	}
}
