package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/controller"
	"github.com/strata-io/strata/storage"
)

// TestErrorCodesOfEveryBrokerPath pins the Kafka code each error the
// broker's handlers see is answered with: errCode (every handler) and
// commitErrCode (OffsetCommit's failed append, as Kafka's storeOffsets).
func TestErrorCodesOfEveryBrokerPath(t *testing.T) {
	cases := []struct {
		name         string
		err          error
		code, commit int16
	}{
		{"nil", nil, 0, kerr.CoordinatorNotAvailable.Code},
		{"kerr", kerr.TopicAlreadyExists, kerr.TopicAlreadyExists.Code, kerr.CoordinatorNotAvailable.Code},
		{"wrapped kerr", fmt.Errorf("x: %w", kerr.InvalidPartitions), kerr.InvalidPartitions.Code, kerr.CoordinatorNotAvailable.Code},
		{"kerr beside deadline", fmt.Errorf("%w (%w)", kerr.NotEnoughReplicas, context.DeadlineExceeded), kerr.NotEnoughReplicas.Code, kerr.CoordinatorNotAvailable.Code},
		{"deadline", context.DeadlineExceeded, kerr.RequestTimedOut.Code, kerr.RequestTimedOut.Code},
		{"wrapped deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), kerr.RequestTimedOut.Code, kerr.RequestTimedOut.Code},
		{"canceled", context.Canceled, kerr.UnknownServerError.Code, kerr.CoordinatorNotAvailable.Code},
		{"storage closed", storage.ErrClosed, kerr.NotLeaderForPartition.Code, kerr.NotCoordinator.Code},
		{"wrapped storage closed", fmt.Errorf("x: %w", storage.ErrClosed), kerr.NotLeaderForPartition.Code, kerr.NotCoordinator.Code},
		{"closed beside deadline", errors.Join(storage.ErrClosed, context.DeadlineExceeded), kerr.RequestTimedOut.Code, kerr.RequestTimedOut.Code},
		{"broker closed", ErrClosed, kerr.UnknownServerError.Code, kerr.CoordinatorNotAvailable.Code},
		{"eof", io.EOF, kerr.UnknownServerError.Code, kerr.CoordinatorNotAvailable.Code},
		{"plain", errors.New("disk on fire"), kerr.UnknownServerError.Code, kerr.CoordinatorNotAvailable.Code},
		{"unknown server error", kerr.UnknownServerError, kerr.UnknownServerError.Code, kerr.CoordinatorNotAvailable.Code},
		{"not leader", kerr.NotLeaderForPartition, kerr.NotLeaderForPartition.Code, kerr.NotCoordinator.Code},
		{"not coordinator", kerr.NotCoordinator, kerr.NotCoordinator.Code, kerr.NotCoordinator.Code},
		{"message too large", kerr.MessageTooLarge, kerr.MessageTooLarge.Code, kerr.InvalidCommitOffsetSize.Code},
		{"record list too large", kerr.RecordListTooLarge, kerr.RecordListTooLarge.Code, kerr.InvalidCommitOffsetSize.Code},
		{"timed out", kerr.RequestTimedOut, kerr.RequestTimedOut.Code, kerr.RequestTimedOut.Code},
		{"storage error", kerr.KafkaStorageError, kerr.KafkaStorageError.Code, kerr.CoordinatorNotAvailable.Code},
		{"not controller", &controller.NotControllerError{LeaderID: 2, LeaderAddr: "127.0.0.1:1"}, kerr.NotController.Code, kerr.CoordinatorNotAvailable.Code},
		{"remote", &controller.RemoteError{Code: kerr.InvalidTopicException.Code, Msg: "bad"}, kerr.InvalidTopicException.Code, kerr.CoordinatorNotAvailable.Code},
		{"remote unknown code", &controller.RemoteError{Code: 9999, Msg: "?"}, kerr.UnknownServerError.Code, kerr.CoordinatorNotAvailable.Code},
		{"controller stopped", controller.ErrStopped, kerr.UnknownServerError.Code, kerr.CoordinatorNotAvailable.Code},
	}
	for _, c := range cases {
		if got := errCode(c.err); got != c.code {
			t.Errorf("%s: errCode = %d, want %d", c.name, got, c.code)
		}
		if got := commitErrCode(c.err); got != c.commit {
			t.Errorf("%s: commitErrCode = %d, want %d", c.name, got, c.commit)
		}
	}
}
