// Package objstore is the object-store seam under tiering/: the
// [ObjectStore] interface, its backends (a filesystem directory, the
// embedded default; S3 through aws-sdk-go-v2 for MinIO, AWS and any
// S3-compatible store; an in-memory reference store for tests), and
// decorators that inject faults and record metrics.
//
// It owns nothing but object I/O. It must never know what a segment, a
// partition or a manifest is: keys are opaque strings built in one place
// by tiering (paths.go).
//
// # Files
//
//	objstore.go   the interface, modes and sentinel errors
//	mem.go        MemStore: the reference store, recording every call
//	fs.go         FSStore: a directory (link/rename publish, MD5 xattr ETags)
//	s3*.go        S3Store: aws-sdk-go-v2 (MinIO, AWS)
//	faults.go     WithFaults: errors, latency, lost PUT acks, torn reads, outages
//	retry.go      WithRetry: bounded retries with backoff and jitter
//	metrics.go    WithMetrics: Prometheus counters and latency histograms
//	objstoretest/ the contract suite every backend runs
//
// Decorators stack; production wiring is
//
//	store, err := objstore.WithMetrics(objstore.WithRetry(backend, objstore.RetryPolicy{}), reg, "s3")
//
// so the metrics count what the caller saw (one request, its total
// latency including retries) while retries stay invisible to callers.
//
// # Semantics every backend keeps (checked by objstoretest.Run)
//
//   - Keys are opaque '/'-separated strings without empty, "." or ".."
//     segments; a key is never also a "directory" of another key.
//   - ETags are opaque strings compared for equality only (MemStore and
//     FSStore use the hex MD5 of the content, as S3 does for single-part
//     uploads; multipart S3 ETags differ). No quotes.
//   - Put stores all size bytes or nothing: a short body, an error from
//     the body or a cancelled context leaves no object (and no partial
//     one) behind. IfMatch on a missing key is ErrPreconditionFailed.
//   - Get ranges: off < 0, off > size, or off == size on a non-empty
//     object is ErrInvalidRange; off+length past the end is cut at the end
//     (as an HTTP Range is); off == 0 on an empty object reads nothing.
package objstore

import (
	"context"
	"errors"
	"io"
	"time"
)

// PutMode says when a Put may write.
type PutMode int

const (
	// CreateOnly writes only if no object has the key (S3 If-None-Match: *).
	// Segment data is always written this way: keys never repeat, so a
	// retried upload never overwrites a finished one.
	CreateOnly PutMode = iota
	// IfMatch writes only if the object's current ETag equals
	// PutOptions.ETag (S3 If-Match): optimistic concurrency for manifests.
	IfMatch
	// Overwrite writes unconditionally.
	Overwrite
)

// PutOptions qualify a Put.
type PutOptions struct {
	Mode PutMode
	ETag string // with IfMatch
}

// ObjectInfo describes a stored object.
type ObjectInfo struct {
	Key          string
	Size         int64
	ETag         string
	LastModified time.Time
}

// ObjectStore is an object store. Implementations are safe for concurrent
// use. Every call honours its context's deadline and cancellation.
//
// Buffers: Put reads r to its end (size bytes) and does not retain it; the
// caller owns the ReadCloser Get returns and must close it.
//
// Idempotence: Get, Head and List are read-only; Delete of a missing key
// succeeds; Put with CreateOnly is safe to retry (a retry after a lost
// acknowledgement returns [ErrPreconditionFailed], which the caller then
// checks with Head).
type ObjectStore interface {
	// Put stores size bytes read from r under key, according to opts.
	// Returns ErrPreconditionFailed when the mode's condition does not hold.
	Put(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) (ObjectInfo, error)
	// Get returns the bytes [off, off+length) of key; length < 0 reads to
	// the end. Returns ErrNotFound for a missing key and ErrInvalidRange
	// when off is past the end.
	Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error)
	// Head returns the object's info, or ErrNotFound.
	Head(ctx context.Context, key string) (ObjectInfo, error)
	// List returns every object whose key starts with prefix, sorted by key.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

var (
	// ErrNotFound is returned by Get and Head for a missing key.
	ErrNotFound = errors.New("objstore: not found")
	// ErrPreconditionFailed is returned by Put when CreateOnly finds the key
	// taken or IfMatch finds another ETag.
	ErrPreconditionFailed = errors.New("objstore: precondition failed")
	// ErrInvalidRange is returned by Get when off lies past the object's end.
	ErrInvalidRange = errors.New("objstore: invalid range")
	// ErrInvalidKey is returned by every backend's calls for a key that is
	// empty, starts or ends with '/', or has an empty, "." or ".." segment.
	// FSStore also refuses a final segment containing ".tmp-" (its temporary
	// files). Tiering builds every key in one place, so this is a bug, never
	// a runtime condition.
	ErrInvalidKey = errors.New("objstore: invalid key")
)
