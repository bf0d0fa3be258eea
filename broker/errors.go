package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/internal/errcode"
	"github.com/strata-io/strata/storage"
)

// Sentinel errors. Each says who returns it.
var (
	// ErrInvalidConfig is wrapped by [ParseConfig], [ReadProperties] and
	// [ParseListeners] for a bad setting.
	ErrInvalidConfig = errors.New("broker: invalid config")
	// ErrClosed is returned by [Open] when the node is closed while
	// starting, and by calls on a closed [Node].
	ErrClosed = errors.New("broker: closed")
	// ErrMalformedRequest is logged when a connection is closed for a
	// request that does not decode (a truncated frame, a bad header, an
	// unsupported version of an API other than ApiVersions).
	ErrMalformedRequest = errors.New("broker: malformed request")
	// ErrRequestTooLarge is logged when a size prefix exceeds
	// socket.request.max.bytes; the connection is closed before the body is
	// allocated.
	ErrRequestTooLarge = errors.New("broker: request too large")
	// ErrUnknownAPI is logged when a request names an API key the broker
	// does not serve; Kafka closes the connection and so does Strata.
	ErrUnknownAPI = errors.New("broker: unknown api key")
)

// codes is how the broker answers an error: the shared mapping
// (internal/errcode: the wrapped *kerr.Error, else UNKNOWN_SERVER_ERROR),
// plus the sentinels below that stand for a Kafka error here.
var codes = errcode.Mapping{
	// The request's deadline passed.
	{Err: context.DeadlineExceeded, Code: kerr.RequestTimedOut},
	// The partition was dropped (deleted, or moved away) under the
	// request: the client refreshes metadata and retries.
	{Err: storage.ErrClosed, Code: kerr.NotLeaderForPartition},
}

// errCode returns the Kafka error code err is answered with (see codes).
func errCode(err error) int16 { return codes.Code(err) }
