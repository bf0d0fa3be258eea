// Package objstore is the object-store seam under tiering/: the
// [ObjectStore] interface, its backends (a filesystem directory, the
// embedded default; S3 through aws-sdk-go-v2 for MinIO, AWS and any
// S3-compatible store; an in-memory reference store for tests), and
// decorators that inject faults and record metrics.
//
// It owns nothing but object I/O. It must never know what a segment, a
// partition or a manifest is: keys are opaque strings built in one place
// by tiering (paths.go).
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
)
