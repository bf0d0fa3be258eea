package group

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// groupErrorCodes is what ErrorCode (every error of this package) and
// storeErrorCode (a failed Persister write, as Kafka's storeGroup) answer.
var groupErrorCodes = []struct {
	err         error
	code, store int16
}{
	{nil, 0, kerr.CoordinatorNotAvailable.Code},
	{codeErr("g", kerr.IllegalGeneration.Code), kerr.IllegalGeneration.Code, kerr.IllegalGeneration.Code},
	{kerr.FencedInstanceID, kerr.FencedInstanceID.Code, kerr.FencedInstanceID.Code},
	{fmt.Errorf("x: %w", kerr.RebalanceInProgress), kerr.RebalanceInProgress.Code, kerr.RebalanceInProgress.Code},
	{context.DeadlineExceeded, kerr.UnknownServerError.Code, kerr.CoordinatorNotAvailable.Code},
	{errors.New("disk gone"), kerr.UnknownServerError.Code, kerr.CoordinatorNotAvailable.Code},
	{kerr.UnknownServerError, kerr.UnknownServerError.Code, kerr.UnknownServerError.Code},
	{kerr.UnknownTopicOrPartition, kerr.UnknownTopicOrPartition.Code, kerr.CoordinatorNotAvailable.Code},
	{kerr.NotEnoughReplicas, kerr.NotEnoughReplicas.Code, kerr.CoordinatorNotAvailable.Code},
	{kerr.NotEnoughReplicasAfterAppend, kerr.NotEnoughReplicasAfterAppend.Code, kerr.CoordinatorNotAvailable.Code},
	{kerr.RequestTimedOut, kerr.RequestTimedOut.Code, kerr.CoordinatorNotAvailable.Code},
	{kerr.NotLeaderForPartition, kerr.NotLeaderForPartition.Code, kerr.NotCoordinator.Code},
	{kerr.KafkaStorageError, kerr.KafkaStorageError.Code, kerr.NotCoordinator.Code},
	{kerr.MessageTooLarge, kerr.MessageTooLarge.Code, kerr.UnknownServerError.Code},
	{kerr.RecordListTooLarge, kerr.RecordListTooLarge.Code, kerr.UnknownServerError.Code},
	{kerr.InvalidFetchSize, kerr.InvalidFetchSize.Code, kerr.UnknownServerError.Code},
	{kerr.NotCoordinator, kerr.NotCoordinator.Code, kerr.NotCoordinator.Code},
}

// TestErrorCodesOfEveryGroupPath pins the Kafka code each error is
// answered with on both paths (groupErrorCodes).
func TestErrorCodesOfEveryGroupPath(t *testing.T) {
	for _, c := range groupErrorCodes {
		if code, store := ErrorCode(c.err), storeErrorCode(c.err); code != c.code || store != c.store {
			t.Errorf("%v: ErrorCode %d storeErrorCode %d, want %d %d", c.err, code, store, c.code, c.store)
		}
	}
}
