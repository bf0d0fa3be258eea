package metadata

import (
	"errors"

	"github.com/strata-io/strata/internal/errcode"
)

// ErrIllegalSegmentTransition is wrapped (beside a Kafka error) by
// [State.PlanRemoteSegment] for a remote-segment state change the lifecycle
// does not allow.
var ErrIllegalSegmentTransition = errors.New("metadata: illegal remote segment state transition")

// ErrorCode returns the Kafka error code a planner's error carries: 0 for
// nil, the code of the wrapped [kerr.Error], or UNKNOWN_SERVER_ERROR (-1)
// for anything else (the shared mapping of internal/errcode).
func ErrorCode(err error) int16 { return errcode.Code(err) }

// ErrorName returns the Kafka name of the error code [ErrorCode] gives, or
// "NONE" for nil.
func ErrorName(err error) string { return errcode.Name(err) }
