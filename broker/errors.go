package broker

import "errors"

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
