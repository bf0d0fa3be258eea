package group

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestErrorCodesOfEveryGroupPath pins the Kafka code each error is
// answered with by ErrorCode (every error of this package) and by
// storeErrorCode (a failed Persister write, as Kafka's storeGroup).
func TestErrorCodesOfEveryGroupPath(t *testing.T) {
	cases := []struct {
		name        string
		err         error
		code, store int16
	}{
		{"nil", nil, 0, kerr.CoordinatorNotAvailable.Code},
		{"codeErr", codeErr("g", kerr.IllegalGeneration.Code), kerr.IllegalGeneration.Code, kerr.IllegalGeneration.Code},
		{"kerr", kerr.FencedInstanceID, kerr.FencedInstanceID.Code, kerr.FencedInstanceID.Code},
		{"wrapped kerr", fmt.Errorf("x: %w", kerr.RebalanceInProgress), kerr.RebalanceInProgress.Code, kerr.RebalanceInProgress.Code},
		{"deadline", context.DeadlineExceeded, kerr.UnknownServerError.Code, kerr.CoordinatorNotAvailable.Code},
		{"plain", errors.New("disk gone"), kerr.UnknownServerError.Code, kerr.CoordinatorNotAvailable.Code},
		{"unknown server error", kerr.UnknownServerError, kerr.UnknownServerError.Code, kerr.UnknownServerError.Code},
		{"unknown topic", kerr.UnknownTopicOrPartition, kerr.UnknownTopicOrPartition.Code, kerr.CoordinatorNotAvailable.Code},
		{"not enough replicas", kerr.NotEnoughReplicas, kerr.NotEnoughReplicas.Code, kerr.CoordinatorNotAvailable.Code},
		{"not enough after append", kerr.NotEnoughReplicasAfterAppend, kerr.NotEnoughReplicasAfterAppend.Code, kerr.CoordinatorNotAvailable.Code},
		{"timed out", kerr.RequestTimedOut, kerr.RequestTimedOut.Code, kerr.CoordinatorNotAvailable.Code},
		{"not leader", kerr.NotLeaderForPartition, kerr.NotLeaderForPartition.Code, kerr.NotCoordinator.Code},
		{"storage error", kerr.KafkaStorageError, kerr.KafkaStorageError.Code, kerr.NotCoordinator.Code},
		{"message too large", kerr.MessageTooLarge, kerr.MessageTooLarge.Code, kerr.UnknownServerError.Code},
		{"record list too large", kerr.RecordListTooLarge, kerr.RecordListTooLarge.Code, kerr.UnknownServerError.Code},
		{"invalid fetch size", kerr.InvalidFetchSize, kerr.InvalidFetchSize.Code, kerr.UnknownServerError.Code},
		{"not coordinator", kerr.NotCoordinator, kerr.NotCoordinator.Code, kerr.NotCoordinator.Code},
	}
	for _, c := range cases {
		if got := ErrorCode(c.err); got != c.code {
			t.Errorf("%s: ErrorCode = %d, want %d", c.name, got, c.code)
		}
		if got := storeErrorCode(c.err); got != c.store {
			t.Errorf("%s: storeErrorCode = %d, want %d", c.name, got, c.store)
		}
	}
}
