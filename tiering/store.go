package tiering

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/smithy-go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strata-io/strata/tiering/objstore"
)

// Backends [StoreConfig.Backend] accepts.
const (
	// BackendFS is a directory on the node (objstore.FSStore): the embedded
	// default, so a single node tiers without any server.
	BackendFS = "fs"
	// BackendS3 is an S3 bucket (objstore.S3Store): AWS S3, MinIO or any
	// S3-compatible store.
	BackendS3 = "s3"
)

// Defaults for StoreConfig's zero fields.
const (
	DefaultRequestTimeout = 30 * time.Second
	// probeTimeout caps the start-up reachability check: a node must not
	// hang at start behind an unreachable endpoint, whatever the request
	// timeout says.
	probeTimeout = 10 * time.Second
	// probePrefix is listed at start to check bucket and credentials. No
	// key tiering builds starts with it, so the listing is one empty page
	// whatever the bucket holds (listing the real prefix could page
	// through months of segments).
	probePrefix = "__strata_probe__/"
)

var (
	// ErrStoreConfig is returned by [OpenStore] for a configuration that
	// cannot work (unknown backend, s3 without a bucket, fs without a path).
	ErrStoreConfig = errors.New("tiering: bad remote storage configuration")
	// ErrStoreUnavailable is returned by [OpenStore] when the s3 backend's
	// start-up check fails: missing bucket, refused credentials, endpoint
	// down.
	ErrStoreUnavailable = errors.New("tiering: remote storage unavailable")
	// ErrStoreUnreachable is returned by OpenStore, together with a
	// usable store, when the S3 endpoint did not answer the start-up probe
	// (refused, timed out, a 5xx): an outage, not a configuration error.
	// The broker starts anyway (local data is served, uploads retry): a
	// broker restarted during an object-store outage must not take its
	// partitions offline.
	ErrStoreUnreachable = errors.New("tiering: remote storage unreachable at start")
	// ErrRequestTimeout is returned by the stores [OpenStore] builds when
	// one request (one attempt) outlives StoreConfig.RequestTimeout while
	// the caller's own context is still live. Unlike the caller's deadline
	// it is transient, so the retry layer above tries again.
	ErrRequestTimeout = errors.New("tiering: object store request timed out")
)

// StoreConfig says which object store tiering writes to, built by the
// broker from the remote.storage.* settings.
type StoreConfig struct {
	// Backend is BackendFS or BackendS3.
	Backend string
	// FSPath is the fs backend's directory (remote.storage.fs.path),
	// created if missing.
	FSPath string
	// S3 configures the s3 backend (remote.storage.s3.*). Bucket is
	// required; empty keys mean the AWS default credential chain; MinIO
	// needs PathStyle. S3.MaxAttempts is left 0 so the SDK does not retry
	// under Retry.
	S3 objstore.S3Options
	// RequestTimeout bounds each attempt of each call
	// (remote.storage.request.timeout.ms); 0 means DefaultRequestTimeout.
	// A Get's attempt lasts until its body is closed.
	RequestTimeout time.Duration
	// Retry bounds retries of transient failures
	// (remote.storage.retry.*); zero fields take objstore's defaults.
	Retry objstore.RetryPolicy
}

// Validate checks c without touching the network or the disk.
func (c StoreConfig) Validate() error {
	switch c.Backend {
	case BackendFS:
		if c.FSPath == "" {
			return fmt.Errorf("%w: remote.storage.fs.path is empty", ErrStoreConfig)
		}
	case BackendS3:
		if c.S3.Bucket == "" {
			return fmt.Errorf("%w: remote.storage.backend=s3 needs remote.storage.s3.bucket", ErrStoreConfig)
		}
		if (c.S3.AccessKey == "") != (c.S3.SecretKey == "") {
			return fmt.Errorf("%w: remote.storage.s3.access.key and remote.storage.s3.secret.key go together (both empty: the AWS default credential chain)", ErrStoreConfig)
		}
	default:
		return fmt.Errorf("%w: remote.storage.backend %q: want %s or %s", ErrStoreConfig, c.Backend, BackendFS, BackendS3)
	}
	if c.RequestTimeout < 0 {
		return fmt.Errorf("%w: remote.storage.request.timeout.ms is negative", ErrStoreConfig)
	}
	return nil
}

// OpenStore builds the object store c describes, stacked as
//
//	metrics(backend) → retry → per-attempt timeout → backend
//
// so metrics count what tiering saw (one request and its whole latency,
// retries included), each retry gets a fresh RequestTimeout, and a timed
// out attempt is retried rather than ending the call. Metrics go to reg
// (nil: none) as strata_objstore_* with the backend label.
//
// The fs backend creates its directory. The s3 backend lists an unused
// prefix of the bucket once, bounded by ctx and at most 10s, so a missing
// bucket or refused credentials fail here with one clear line wrapping
// [ErrStoreUnavailable] rather than at the first upload. An endpoint that
// does not answer (refused, timed out, 5xx) is an outage, not a mistake:
// the store is returned with an error wrapping [ErrStoreUnreachable], and
// the caller starts anyway and warns.
//
// Neither backend holds anything that needs closing (the S3 client's idle
// connections are reclaimed by its transport), so there is no Close.
func OpenStore(ctx context.Context, c StoreConfig, reg prometheus.Registerer) (objstore.ObjectStore, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	var backend objstore.ObjectStore
	var probeErr error // ErrStoreUnreachable: returned with the store
	switch c.Backend {
	case BackendFS:
		fs, err := objstore.NewFSStore(c.FSPath)
		if err != nil {
			return nil, fmt.Errorf("%w: remote.storage.fs.path %q: %v", ErrStoreUnavailable, c.FSPath, err)
		}
		backend = fs
	case BackendS3:
		opts := c.S3
		opts.MaxAttempts = 0 // Retry below retries; the SDK's would multiply
		s3, err := objstore.NewS3Store(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrStoreConfig, err)
		}
		probeErr = probeS3(ctx, s3, c)
		if probeErr != nil && !errors.Is(probeErr, ErrStoreUnreachable) {
			return nil, probeErr
		}
		backend = s3
	}
	store := objstore.ObjectStore(objstore.WithRetry(&timeoutStore{next: backend, d: c.RequestTimeout}, c.Retry))
	m, err := objstore.WithMetrics(store, reg, c.Backend)
	if err != nil {
		return nil, fmt.Errorf("tiering: object store metrics: %w", err)
	}
	return m, probeErr
}

// probeS3 lists probePrefix once and turns a failure into one line naming
// the setting to fix.
func probeS3(ctx context.Context, s objstore.ObjectStore, c StoreConfig) error {
	pctx, cancel := context.WithTimeout(ctx, min(probeTimeout, c.RequestTimeout))
	defer cancel()
	_, err := s.List(pctx, probePrefix)
	if err == nil {
		return nil
	}
	var apiErr smithy.APIError
	code := ""
	if errors.As(err, &apiErr) {
		code = apiErr.ErrorCode()
	}
	switch code {
	case "NoSuchBucket":
		return fmt.Errorf("%w: remote.storage.s3.bucket %q: bucket does not exist at %s", ErrStoreUnavailable, c.S3.Bucket, endpointName(c.S3.Endpoint))
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken":
		return fmt.Errorf("%w: remote.storage.s3.bucket %q: credentials refused (%s): check remote.storage.s3.access.key/secret.key or the AWS credential chain", ErrStoreUnavailable, c.S3.Bucket, code)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %v", ErrStoreUnavailable, ctx.Err())
	}
	if pctx.Err() != nil {
		return fmt.Errorf("%w: remote.storage.s3.endpoint %s: no answer within %v", ErrStoreUnreachable, endpointName(c.S3.Endpoint), min(probeTimeout, c.RequestTimeout))
	}
	if objstore.Transient(err) {
		return fmt.Errorf("%w: remote.storage.s3.bucket %q at %s: %v", ErrStoreUnreachable, c.S3.Bucket, endpointName(c.S3.Endpoint), err)
	}
	return fmt.Errorf("%w: remote.storage.s3.bucket %q at %s: %v", ErrStoreUnavailable, c.S3.Bucket, endpointName(c.S3.Endpoint), err)
}

func endpointName(ep string) string {
	if ep == "" {
		return "AWS S3"
	}
	return ep
}

// timeoutStore gives each call its own deadline of d under the caller's
// context, and reports a call cut by that deadline (not by the caller's)
// as ErrRequestTimeout, which objstore.Transient counts as retryable:
// context.DeadlineExceeded is not, since it normally means the caller has
// given up.
type timeoutStore struct {
	next objstore.ObjectStore
	d    time.Duration
}

// timedOut rewrites err when the per-request deadline, not the caller's
// context, ended the call.
func (t *timeoutStore) timedOut(parent, ctx context.Context, op, key string, err error) error {
	// Only the deadline counts: a context cancelled after the call (Get
	// cancels its own on failure) says nothing about why it failed.
	if err == nil || parent.Err() != nil || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	// %v, not %w: the call must not look like the caller's deadline.
	return fmt.Errorf("%w: %s %q after %v (%v)", ErrRequestTimeout, op, key, t.d, err)
}

func (t *timeoutStore) Put(ctx context.Context, key string, r io.Reader, size int64, opts objstore.PutOptions) (objstore.ObjectInfo, error) {
	c, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	info, err := t.next.Put(c, key, r, size, opts)
	return info, t.timedOut(ctx, c, "put", key, err)
}

func (t *timeoutStore) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	c, cancel := context.WithTimeout(ctx, t.d)
	rc, err := t.next.Get(c, key, off, length)
	if err != nil {
		// Classified before cancel: once cancelled, c.Err() is set
		// whatever the failure was, and a missing object would be
		// retried as a timeout (about 500 ms of retries per read).
		err = t.timedOut(ctx, c, "get", key, err)
		cancel()
		return nil, err
	}
	return &timeoutBody{rc: rc, t: t, parent: ctx, ctx: c, cancel: cancel, key: key}, nil
}

func (t *timeoutStore) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	c, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	info, err := t.next.Head(c, key)
	return info, t.timedOut(ctx, c, "head", key, err)
}

func (t *timeoutStore) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	c, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	infos, err := t.next.List(c, prefix)
	return infos, t.timedOut(ctx, c, "list", prefix, err)
}

func (t *timeoutStore) Delete(ctx context.Context, key string) error {
	c, cancel := context.WithTimeout(ctx, t.d)
	defer cancel()
	return t.timedOut(ctx, c, "delete", key, t.next.Delete(c, key))
}

// timeoutBody keeps a Get's deadline alive until the body is closed: the
// bytes are read under the same per-request deadline as the open.
type timeoutBody struct {
	rc          io.ReadCloser
	t           *timeoutStore
	parent, ctx context.Context
	cancel      context.CancelFunc
	key         string
}

func (b *timeoutBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if err != nil && err != io.EOF {
		err = b.t.timedOut(b.parent, b.ctx, "get", b.key, err)
	}
	return n, err
}

func (b *timeoutBody) Close() error {
	err := b.rc.Close()
	b.cancel()
	return err
}
