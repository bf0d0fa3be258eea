package metadata

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrIllegalSegmentTransition is wrapped (beside a Kafka error) by
// [State.PlanRemoteSegment] for a remote-segment state change the lifecycle
// does not allow.
var ErrIllegalSegmentTransition = errors.New("metadata: illegal remote segment state transition")

// ErrorCode returns the Kafka error code a planner's error carries: 0 for
// nil, the code of the wrapped [kerr.Error], or UNKNOWN_SERVER_ERROR (-1)
// for anything else.
func ErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return kerr.UnknownServerError.Code
}

// ErrorName returns the Kafka name of the error code [ErrorCode] gives, or
// "NONE" for nil.
func ErrorName(err error) string {
	if err == nil {
		return "NONE"
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return kerr.UnknownServerError.Message
}
