package tiering

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/minio/minio-go/v7"

	"github.com/strata-io/strata/internal/miniotest"
	"github.com/strata-io/strata/internal/promreg"
	"github.com/strata-io/strata/tiering/objstore"
)

// storeTestWait bounds every call of these tests.
const storeTestWait = 20 * time.Second

func storeCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), storeTestWait)
	t.Cleanup(cancel)
	return ctx
}

func TestOpenStoreRejectsBadConfig(t *testing.T) {
	fsOK := StoreConfig{Backend: BackendFS, FSPath: t.TempDir()}
	for _, tc := range []struct {
		name string
		edit func(*StoreConfig)
		want string
	}{
		{"unknown backend", func(c *StoreConfig) { c.Backend = "gcs" }, `"gcs"`},
		{"empty backend", func(c *StoreConfig) { c.Backend = "" }, "want fs or s3"},
		{"fs without path", func(c *StoreConfig) { c.FSPath = "" }, "remote.storage.fs.path"},
		{"s3 without bucket", func(c *StoreConfig) { c.Backend = BackendS3 }, "needs remote.storage.s3.bucket"},
		{"s3 access key alone", func(c *StoreConfig) {
			c.Backend, c.S3.Bucket, c.S3.AccessKey = BackendS3, "b", "k"
		}, "go together"},
		{"s3 secret key alone", func(c *StoreConfig) {
			c.Backend, c.S3.Bucket, c.S3.SecretKey = BackendS3, "b", "s"
		}, "go together"},
		{"negative timeout", func(c *StoreConfig) { c.RequestTimeout = -time.Second }, "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fsOK
			tc.edit(&c)
			s, err := OpenStore(storeCtx(t), c, nil)
			if !errors.Is(err, ErrStoreConfig) || !strings.Contains(err.Error(), tc.want) || s != nil {
				t.Fatalf("OpenStore = %v, %v; want ErrStoreConfig mentioning %q", s, err, tc.want)
			}
		})
	}
	if err := fsOK.Validate(); err != nil {
		t.Fatalf("valid fs config: %v", err)
	}
}

func TestOpenStoreFSCreatesDirServesAndCountsRequests(t *testing.T) {
	dir := t.TempDir() + "/not/yet/objects"
	reg := prometheus.NewRegistry()
	s, err := OpenStore(storeCtx(t), StoreConfig{Backend: BackendFS, FSPath: dir}, reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := storeCtx(t)
	body := []byte("segment bytes")
	if _, err := s.Put(ctx, "t-x/0/a.log", bytes.NewReader(body), int64(len(body)), objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	// Create-only: a second Put of the key is refused, not overwritten.
	if _, err := s.Put(ctx, "t-x/0/a.log", bytes.NewReader(body), int64(len(body)), objstore.PutOptions{}); !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatalf("second create-only put: %v", err)
	}
	rc, err := s.Get(ctx, "t-x/0/a.log", 8, -1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(got) != "bytes" {
		t.Fatalf("ranged get = %q, %v", got, err)
	}
	// The object really is a file under FSPath: the directory was made.
	fs, err := objstore.NewFSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if infos, err := fs.List(ctx, "t-x/"); err != nil || len(infos) != 1 || infos[0].Size != int64(len(body)) {
		t.Fatalf("list of the directory = %+v, %v", infos, err)
	}
	ok := counterValue(t, reg, "strata_objstore_requests_total", map[string]string{"backend": "fs", "op": "put", "result": "ok"})
	refused := counterValue(t, reg, "strata_objstore_requests_total", map[string]string{"backend": "fs", "op": "put", "result": "precondition_failed"})
	if ok != 1 || refused != 1 {
		t.Fatalf("put requests ok=%v precondition_failed=%v, want 1 and 1", ok, refused)
	}
}

// counterValue returns the counter of name with exactly labels in reg,
// failing the test when there is none.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok, err := promreg.Counter(reg, name, labels)
	if err != nil || !ok {
		t.Fatalf("no %s%v (%v)", name, labels, err)
	}
	return v
}

// stallingStore blocks its first stall calls until their context ends,
// then answers from next: a request that hangs once.
type stallingStore struct {
	objstore.ObjectStore
	stall atomic.Int32
	calls atomic.Int32
}

func (s *stallingStore) Head(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	s.calls.Add(1)
	if s.stall.Add(-1) >= 0 {
		<-ctx.Done()
		return objstore.ObjectInfo{}, ctx.Err()
	}
	return s.ObjectStore.Head(ctx, key)
}

func TestTimeoutStoreRetriesAnAttemptCutByRequestTimeout(t *testing.T) {
	mem := objstore.NewMemStore()
	ctx := storeCtx(t)
	if _, err := mem.Put(ctx, "k", strings.NewReader("v"), 1, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	slow := &stallingStore{ObjectStore: mem}
	slow.stall.Store(2)
	s := objstore.WithRetry(&timeoutStore{next: slow, d: 20 * time.Millisecond},
		objstore.RetryPolicy{MaxAttempts: 5, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond})
	info, err := s.Head(ctx, "k")
	if err != nil || info.Size != 1 {
		t.Fatalf("Head = %+v, %v; want the object after two timed-out attempts", info, err)
	}
	if c := slow.calls.Load(); c != 3 {
		t.Fatalf("%d attempts, want 3", c)
	}

	// Every attempt timing out: the error says so and is not the
	// caller's deadline.
	slow.stall.Store(100)
	slow.calls.Store(0)
	_, err = s.Head(ctx, "k")
	if !errors.Is(err, ErrRequestTimeout) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Head with every attempt stalled = %v; want ErrRequestTimeout only", err)
	}
	if c := slow.calls.Load(); c != 5 {
		t.Fatalf("%d attempts, want 5 (MaxAttempts)", c)
	}

	// The caller's own deadline ends the call at once and is reported as
	// such: it is not retried.
	slow.stall.Store(100)
	slow.calls.Store(0)
	s = objstore.WithRetry(&timeoutStore{next: slow, d: time.Minute}, objstore.RetryPolicy{MaxAttempts: 5})
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err = s.Head(short, "k")
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrRequestTimeout) {
		t.Fatalf("Head under the caller's deadline = %v; want context.DeadlineExceeded", err)
	}
	if c := slow.calls.Load(); c != 1 {
		t.Fatalf("%d attempts under the caller's deadline, want 1", c)
	}
}

// slowBodyStore returns Get bodies that block until their context ends.
type slowBodyStore struct{ objstore.ObjectStore }

func (s slowBodyStore) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	return io.NopCloser(readerFunc(func([]byte) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	})), nil
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func TestTimeoutStoreBoundsGetBodyUntilClose(t *testing.T) {
	ts := &timeoutStore{next: slowBodyStore{objstore.NewMemStore()}, d: 20 * time.Millisecond}
	rc, err := ts.Get(storeCtx(t), "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	start := time.Now()
	_, err = rc.Read(make([]byte, 1))
	if !errors.Is(err, ErrRequestTimeout) {
		t.Fatalf("read of a stalled body = %v, want ErrRequestTimeout", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("stalled read returned after %v", el)
	}
}

// A dead endpoint is an outage: OpenStore says so (ErrStoreUnreachable,
// naming the endpoint) and still returns a store whose calls fail until
// the endpoint answers.
func TestOpenStoreS3DeadEndpointIsUnreachableNotFatal(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	start := time.Now()
	store, err := OpenStore(storeCtx(t), StoreConfig{
		Backend: BackendS3,
		S3:      objstore.S3Options{Endpoint: "http://" + addr, Bucket: "b", PathStyle: true, AccessKey: "a", SecretKey: "s"},
		Retry:   objstore.RetryPolicy{MaxAttempts: 1},
	}, nil)
	if !errors.Is(err, ErrStoreUnreachable) || errors.Is(err, ErrStoreUnavailable) || !strings.Contains(err.Error(), addr) || store == nil {
		t.Fatalf("OpenStore on a dead endpoint = %v, %v; want a store and ErrStoreUnreachable naming %s", store, err, addr)
	}
	if _, err := store.Head(storeCtx(t), "k"); err == nil {
		t.Fatal("Head on a dead endpoint succeeded")
	}
	if el := time.Since(start); el > probeTimeout+5*time.Second {
		t.Fatalf("probe took %v", el)
	}
}

func TestOpenStoreS3AgainstMinIO(t *testing.T) {
	srv := miniotest.Start(t)
	cfg := StoreConfig{
		Backend: BackendS3,
		S3: objstore.S3Options{
			Endpoint: srv.Endpoint, Bucket: srv.Bucket, Prefix: "cluster-a", PathStyle: true,
			AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		},
	}
	reg := prometheus.NewRegistry()
	s, err := OpenStore(storeCtx(t), cfg, reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := storeCtx(t)
	if _, err := s.Put(ctx, "t-x/0/seg.log", strings.NewReader("hello"), 5, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	// Seen by an independent client, under the prefix.
	st, err := srv.Client(t).StatObject(ctx, srv.Bucket, "cluster-a/t-x/0/seg.log", minioStatOpts())
	if err != nil || st.Size != 5 {
		t.Fatalf("minio-go stat = %+v, %v", st, err)
	}
	if v := counterValue(t, reg, "strata_objstore_requests_total", map[string]string{"backend": "s3", "op": "put", "result": "ok"}); v != 1 {
		t.Fatalf("s3 put ok = %v, want 1", v)
	}

	t.Run("missing bucket", func(t *testing.T) {
		c := cfg
		c.S3.Bucket = "no-such-bucket"
		_, err := OpenStore(storeCtx(t), c, nil)
		if !errors.Is(err, ErrStoreUnavailable) || !strings.Contains(err.Error(), `remote.storage.s3.bucket "no-such-bucket": bucket does not exist`) {
			t.Fatalf("OpenStore with a missing bucket = %v", err)
		}
	})
	t.Run("wrong secret", func(t *testing.T) {
		c := cfg
		c.S3.SecretKey = "not-the-secret"
		_, err := OpenStore(storeCtx(t), c, nil)
		if !errors.Is(err, ErrStoreUnavailable) || !strings.Contains(err.Error(), "credentials refused") {
			t.Fatalf("OpenStore with a wrong secret = %v", err)
		}
	})
}

func minioStatOpts() minio.StatObjectOptions { return minio.StatObjectOptions{} }

// TestOpenStoreGetOfAMissingObjectIsNotFoundAtOnce: a Get of a key the
// bucket lacks answers objstore.ErrNotFound after one attempt, not a
// request timeout retried for the whole retry budget (Get cancels its
// per-request context on failure; that must not read as its deadline).
func TestOpenStoreGetOfAMissingObjectIsNotFoundAtOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := OpenStore(context.Background(), StoreConfig{Backend: BackendFS, FSPath: t.TempDir(),
		Retry: objstore.RetryPolicy{MaxAttempts: 5, BaseDelay: 200 * time.Millisecond, MaxDelay: time.Second}}, reg)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = s.Get(context.Background(), "t-0f8fad5b-d9cb-469f-a165-70867728950e/0/manifest.json", 0, 100)
	if !errors.Is(err, objstore.ErrNotFound) || errors.Is(err, ErrRequestTimeout) {
		t.Fatalf("Get of a missing key: %v, want ErrNotFound", err)
	}
	if d := time.Since(start); d > 150*time.Millisecond {
		t.Fatalf("Get of a missing key took %v: retried", d)
	}
}
