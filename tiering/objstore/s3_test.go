package objstore_test

// S3Store against a real MinIO (internal/miniotest), checked with a second,
// independent S3 client (minio-go) so a mistake in how we drive the aws
// SDK cannot hide itself.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/strata-io/strata/internal/miniotest"
	"github.com/strata-io/strata/tiering/objstore"
	"github.com/strata-io/strata/tiering/objstore/objstoretest"
)

// s3TestTimeout bounds each MinIO test's requests.
const s3TestTimeout = 60 * time.Second

func newMinioS3Store(t testing.TB, srv *miniotest.Server, mod func(*objstore.S3Options)) *objstore.S3Store {
	t.Helper()
	o := objstore.S3Options{
		Endpoint:  srv.Endpoint,
		Bucket:    srv.Bucket,
		PathStyle: true,
		AccessKey: srv.AccessKey,
		SecretKey: srv.SecretKey,
	}
	if mod != nil {
		mod(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := objstore.NewS3Store(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// s3Get reads [off, off+length) of key through s, failing t on error.
func s3Get(t testing.TB, s objstore.ObjectStore, key string, off, length int64) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), s3TestTimeout)
	defer cancel()
	rc, err := s.Get(ctx, key, off, length)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func minioGet(t testing.TB, c *minio.Client, bucket, key string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), s3TestTimeout)
	defer cancel()
	obj, err := c.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		t.Fatalf("minio-go get %q: %v", key, err)
	}
	return b
}

// The shared contract, on one MinIO with a fresh prefix per subtest, with
// a small multipart threshold so both upload paths keep it.
func TestS3StoreContract(t *testing.T) {
	srv := miniotest.Start(t)
	n := 0
	objstoretest.Run(t, func(t *testing.T) objstore.ObjectStore {
		n++
		prefix := fmt.Sprintf("contract-%d", n)
		return newMinioS3Store(t, srv, func(o *objstore.S3Options) { o.Prefix = prefix })
	})
}

func TestS3StoreContractMultipart(t *testing.T) {
	srv := miniotest.Start(t)
	n := 0
	objstoretest.Run(t, func(t *testing.T) objstore.ObjectStore {
		n++
		prefix := fmt.Sprintf("contract-mp-%d", n)
		return newMinioS3Store(t, srv, func(o *objstore.S3Options) {
			o.Prefix = prefix
			o.MultipartThreshold = 1 // every non-empty object goes up in parts
			o.PartSize = 5 << 20
		})
	})
}

func TestS3StoreObjectsReadBackByMinioGoAndBack(t *testing.T) {
	srv := miniotest.Start(t)
	s := newMinioS3Store(t, srv, func(o *objstore.S3Options) { o.Prefix = "cluster-a" })
	mc := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), s3TestTimeout)
	defer cancel()

	// Ours → theirs: byte-exact, under the prefix, and only there.
	data := randBytes(1, 3<<20+17)
	info, err := s.Put(ctx, "orders-x/0/00000000000000000000-u.log", bytes.NewReader(data), int64(len(data)), objstore.PutOptions{Mode: objstore.CreateOnly})
	if err != nil {
		t.Fatal(err)
	}
	if got := minioGet(t, mc, srv.Bucket, "cluster-a/orders-x/0/00000000000000000000-u.log"); !bytes.Equal(got, data) {
		t.Fatalf("minio-go read %d bytes differing from the %d put", len(got), len(data))
	}
	st, err := mc.StatObject(ctx, srv.Bucket, "cluster-a/orders-x/0/00000000000000000000-u.log", minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.ETag != info.ETag || st.Size != int64(len(data)) {
		t.Fatalf("minio-go sees etag %q size %d; Put said %q %d", st.ETag, st.Size, info.ETag, info.Size)
	}
	var rootKeys []string
	for o := range mc.ListObjects(ctx, srv.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		rootKeys = append(rootKeys, o.Key)
	}
	if len(rootKeys) != 1 || !strings.HasPrefix(rootKeys[0], "cluster-a/") {
		t.Fatalf("bucket holds %v, want one key under cluster-a/", rootKeys)
	}

	// Theirs → ours: an object minio-go puts under the prefix is read,
	// ranged, headed and listed by the S3Store under its own key.
	theirs := randBytes(2, 1<<20+5)
	if _, err := mc.PutObject(ctx, srv.Bucket, "cluster-a/orders-x/0/manifest.json", bytes.NewReader(theirs), int64(len(theirs)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	// And one outside the prefix, which the S3Store must not see.
	if _, err := mc.PutObject(ctx, srv.Bucket, "cluster-b/orders-x/0/manifest.json", bytes.NewReader(theirs), int64(len(theirs)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	got := s3Get(t, s, "orders-x/0/manifest.json", 0, -1)
	if !bytes.Equal(got, theirs) {
		t.Fatal("S3Store read differs from what minio-go put")
	}
	got = s3Get(t, s, "orders-x/0/manifest.json", 1000, 4096)
	if !bytes.Equal(got, theirs[1000:5096]) {
		t.Fatal("ranged read differs")
	}
	got = s3Get(t, s, "orders-x/0/manifest.json", int64(len(theirs))-3, 100)
	if !bytes.Equal(got, theirs[len(theirs)-3:]) {
		t.Fatalf("range past the end: got %d bytes, want the last 3", len(got))
	}
	list, err := s.List(ctx, "orders-x/")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range list {
		keys = append(keys, o.Key)
	}
	want := []string{"orders-x/0/00000000000000000000-u.log", "orders-x/0/manifest.json"}
	if fmt.Sprint(keys) != fmt.Sprint(want) {
		t.Fatalf("List = %v, want %v", keys, want)
	}
	if list[0].Size != int64(len(data)) || list[0].ETag != info.ETag || list[0].LastModified.IsZero() {
		t.Fatalf("List info %+v", list[0])
	}

	// Delete through ours; gone for theirs; deleting again is fine.
	if err := s.Delete(ctx, "orders-x/0/manifest.json"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "orders-x/0/manifest.json"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := mc.StatObject(ctx, srv.Bucket, "cluster-a/orders-x/0/manifest.json", minio.StatObjectOptions{}); err == nil {
		t.Fatal("minio-go still sees the deleted object")
	}
	if _, err := mc.StatObject(ctx, srv.Bucket, "cluster-b/orders-x/0/manifest.json", minio.StatObjectOptions{}); err != nil {
		t.Fatalf("object outside the prefix was touched: %v", err)
	}
}

func TestS3StoreConditionalWritesAgainstMinio(t *testing.T) {
	srv := miniotest.Start(t)
	s := newMinioS3Store(t, srv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), s3TestTimeout)
	defer cancel()
	put := func(body string, opts objstore.PutOptions) (objstore.ObjectInfo, error) {
		return s.Put(ctx, "p/manifest.json", strings.NewReader(body), int64(len(body)), opts)
	}
	v1, err := put("v1", objstore.PutOptions{Mode: objstore.IfMatch, ETag: "0123456789abcdef0123456789abcdef"})
	if !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatalf("IfMatch on a missing key: %v, want ErrPreconditionFailed", err)
	}
	if v1, err = put("v1", objstore.PutOptions{Mode: objstore.CreateOnly}); err != nil {
		t.Fatal(err)
	}
	if _, err := put("v1-again", objstore.PutOptions{Mode: objstore.CreateOnly}); !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatalf("second CreateOnly: %v, want ErrPreconditionFailed", err)
	}
	if _, err := put("v2-stale", objstore.PutOptions{Mode: objstore.IfMatch, ETag: "ffffffffffffffffffffffffffffffff"}); !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatalf("IfMatch with a wrong ETag: %v", err)
	}
	v2, err := put("v2", objstore.PutOptions{Mode: objstore.IfMatch, ETag: v1.ETag})
	if err != nil {
		t.Fatalf("IfMatch with the current ETag: %v", err)
	}
	if _, err := put("v3-lost-race", objstore.PutOptions{Mode: objstore.IfMatch, ETag: v1.ETag}); !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatalf("IfMatch with the previous ETag: %v", err)
	}
	if got := string(s3Get(t, s, "p/manifest.json", 0, -1)); got != "v2" {
		t.Fatalf("content %q, want v2", got)
	}
	h, err := s.Head(ctx, "p/manifest.json")
	if err != nil || h.ETag != v2.ETag || h.Size != 2 {
		t.Fatalf("Head = %+v, %v; want ETag %q", h, err, v2.ETag)
	}
	if _, err := put("v3", objstore.PutOptions{Mode: objstore.Overwrite}); err != nil {
		t.Fatal(err)
	}
	if got := string(s3Get(t, s, "p/manifest.json", 0, -1)); got != "v3" {
		t.Fatalf("content %q, want v3", got)
	}
	// Sentinels for reads.
	if _, err := s.Get(ctx, "p/missing", 0, -1); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get missing: %v", err)
	}
	if _, err := s.Head(ctx, "p/missing"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Head missing: %v", err)
	}
	for _, off := range []int64{2, 3, 100} {
		if _, err := s.Get(ctx, "p/manifest.json", off, 10); !errors.Is(err, objstore.ErrInvalidRange) {
			t.Fatalf("Get at %d of 2 bytes: %v, want ErrInvalidRange", off, err)
		}
		if _, err := s.Get(ctx, "p/manifest.json", off, 0); !errors.Is(err, objstore.ErrInvalidRange) {
			t.Fatalf("Get(len 0) at %d of 2 bytes: %v, want ErrInvalidRange", off, err)
		}
	}
	if _, err := s.Put(ctx, "p/empty", strings.NewReader(""), 0, objstore.PutOptions{Mode: objstore.CreateOnly}); err != nil {
		t.Fatal(err)
	}
	for _, length := range []int64{-1, 0, 10} {
		if got := s3Get(t, s, "p/empty", 0, length); len(got) != 0 {
			t.Fatalf("empty object read %d bytes", len(got))
		}
	}
}

// onlyReader hides every method but Read, forcing the buffered part path.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestS3StoreMultipartUploadsInPartsAndKeepsCreateOnly(t *testing.T) {
	srv := miniotest.Start(t)
	const part = 5 << 20
	s := newMinioS3Store(t, srv, func(o *objstore.S3Options) {
		o.MultipartThreshold = part
		o.PartSize = part
		o.PartConcurrency = 2
	})
	mc := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), s3TestTimeout)
	defer cancel()
	data := randBytes(3, 3*part+12345) // 4 parts, the last short

	// A file read in place from a non-zero position, left at its end.
	path := filepath.Join(t.TempDir(), "seg.log")
	if err := os.WriteFile(path, append([]byte("HEADER--"), data...), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(8, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	bodies := []struct {
		name string
		r    func() io.Reader
	}{
		{"file", func() io.Reader { return f }},
		{"plain-reader", func() io.Reader { return onlyReader{bytes.NewReader(data)} }},
	}
	for _, b := range bodies {
		key := "mp/" + b.name
		info, err := s.Put(ctx, key, b.r(), int64(len(data)), objstore.PutOptions{Mode: objstore.CreateOnly})
		if err != nil {
			t.Fatalf("%s: %v", b.name, err)
		}
		if !strings.HasSuffix(info.ETag, "-4") {
			t.Fatalf("%s: ETag %q is not a 4-part multipart ETag", b.name, info.ETag)
		}
		if got := minioGet(t, mc, srv.Bucket, key); !bytes.Equal(got, data) {
			t.Fatalf("%s: minio-go read differs (%d bytes)", b.name, len(got))
		}
		if got := s3Get(t, s, key, part-10, 20); !bytes.Equal(got, data[part-10:part+10]) {
			t.Fatalf("%s: read across the part boundary differs", b.name)
		}
	}
	if pos, _ := f.Seek(0, io.SeekCurrent); pos != int64(8+len(data)) {
		t.Fatalf("file left at %d, want %d", pos, 8+len(data))
	}

	// CreateOnly holds for multipart: the finished object is untouched.
	other := randBytes(4, len(data))
	if _, err := s.Put(ctx, "mp/file", bytes.NewReader(other), int64(len(other)), objstore.PutOptions{Mode: objstore.CreateOnly}); !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatalf("second multipart CreateOnly: %v", err)
	}
	// IfMatch multipart with the current ETag replaces it.
	cur, err := s.Head(ctx, "mp/plain-reader")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "mp/plain-reader", bytes.NewReader(other), int64(len(other)), objstore.PutOptions{Mode: objstore.IfMatch, ETag: cur.ETag}); err != nil {
		t.Fatalf("multipart IfMatch: %v", err)
	}
	if got := minioGet(t, mc, srv.Bucket, "mp/plain-reader"); !bytes.Equal(got, other) {
		t.Fatal("multipart IfMatch did not replace the object")
	}
	if _, err := s.Put(ctx, "mp/plain-reader", bytes.NewReader(data), int64(len(data)), objstore.PutOptions{Mode: objstore.IfMatch, ETag: cur.ETag}); !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatalf("multipart IfMatch with a stale ETag: %v", err)
	}

	// A body that ends early: no object, and the upload aborted.
	_, err = s.Put(ctx, "mp/short", onlyReader{bytes.NewReader(data[:2*part])}, int64(len(data)), objstore.PutOptions{Mode: objstore.CreateOnly})
	if err == nil || objstore.Transient(err) {
		t.Fatalf("short multipart body: %v (transient %v), want a permanent error", err, objstore.Transient(err))
	}
	if _, err := s.Head(ctx, "mp/short"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("short body left an object: %v", err)
	}
	// A cancelled upload: no object either.
	cctx, ccancel := context.WithCancel(ctx)
	slow := onlyReader{io.MultiReader(bytes.NewReader(data[:part]), readerFunc(func(p []byte) (int, error) {
		ccancel()
		<-cctx.Done()
		return 0, cctx.Err()
	}))}
	if _, err := s.Put(cctx, "mp/cancelled", slow, int64(len(data)), objstore.PutOptions{Mode: objstore.CreateOnly}); err == nil {
		t.Fatal("cancelled multipart put succeeded")
	}
	if _, err := s.Head(ctx, "mp/cancelled"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("cancelled put left an object: %v", err)
	}
	for u := range mc.ListIncompleteUploads(ctx, srv.Bucket, "mp/", true) {
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		t.Errorf("multipart upload %s of %q left open", u.UploadID, u.Key)
	}
}

func TestS3StoreChecksumsOptionAgainstMinio(t *testing.T) {
	srv := miniotest.Start(t)
	s := newMinioS3Store(t, srv, func(o *objstore.S3Options) {
		o.Checksums = true
		o.MultipartThreshold = 5 << 20
		o.PartSize = 5 << 20
	})
	mc := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), s3TestTimeout)
	defer cancel()
	for _, n := range []int{1 << 20, 11 << 20} { // single PUT, then 3 parts
		data := randBytes(uint64(n), n)
		key := fmt.Sprintf("ck/%d", n)
		if _, err := s.Put(ctx, key, bytes.NewReader(data), int64(n), objstore.PutOptions{Mode: objstore.CreateOnly}); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if got := minioGet(t, mc, srv.Bucket, key); !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: minio-go read differs", n)
		}
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func TestS3StoreUsesDefaultCredentialChainWhenKeysEmpty(t *testing.T) {
	srv := miniotest.Start(t)
	// Keep the chain to the environment: no shared files, no instance role.
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "credentials"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_SESSION_TOKEN", "")
	ctx, cancel := context.WithTimeout(context.Background(), s3TestTimeout)
	defer cancel()

	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	s := newMinioS3Store(t, srv, func(o *objstore.S3Options) { o.AccessKey, o.SecretKey = "", "" })
	if _, err := s.Put(ctx, "env/ok", strings.NewReader("x"), 1, objstore.PutOptions{}); err != nil {
		t.Fatalf("put with credentials from the environment: %v", err)
	}

	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-key")
	bad := newMinioS3Store(t, srv, func(o *objstore.S3Options) { o.AccessKey, o.SecretKey = "", "" })
	_, err := bad.Head(ctx, "env/ok")
	if err == nil {
		t.Fatal("a wrong secret from the environment was accepted: the chain is not what signs")
	}
	if errors.Is(err, objstore.ErrNotFound) || !objstore.Transient(err) {
		t.Fatalf("bad credentials: %v; want an error that is no sentinel", err)
	}
}

func TestS3StoreServerDownIsTransientAndRecovers(t *testing.T) {
	srv := miniotest.Start(t)
	s := newMinioS3Store(t, srv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), s3TestTimeout)
	defer cancel()
	if _, err := s.Put(ctx, "d/a", strings.NewReader("abc"), 3, objstore.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := s.Put(rctx, "d/b", strings.NewReader("abc"), 3, objstore.PutOptions{Mode: objstore.CreateOnly})
	rcancel()
	if err == nil || !objstore.Transient(err) {
		t.Fatalf("put while down: %v, want a transient error", err)
	}
	srv.Restart(t)
	if got := string(s3Get(t, s, "d/a", 0, -1)); got != "abc" {
		t.Fatalf("after restart read %q", got)
	}
	if _, err := s.Put(ctx, "d/b", strings.NewReader("abc"), 3, objstore.PutOptions{Mode: objstore.CreateOnly}); err != nil {
		t.Fatalf("put after restart: %v", err)
	}
}

func TestS3StoreListPagesPastOneThousandKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("puts 1,100 objects")
	}
	srv := miniotest.Start(t)
	s := newMinioS3Store(t, srv, func(o *objstore.S3Options) { o.Prefix = "pg/" })
	mc := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), s3TestTimeout)
	defer cancel()
	const n = 1100
	// Put through minio-go's parallel-friendly path, one goroutine each
	// batch, to keep this fast.
	errc := make(chan error, n)
	sem := make(chan struct{}, 16)
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		go func(i int) {
			defer func() { <-sem }()
			_, err := mc.PutObject(ctx, srv.Bucket, fmt.Sprintf("pg/t/%05d", i), strings.NewReader("x"), 1, minio.PutObjectOptions{})
			errc <- err
		}(i)
	}
	for i := 0; i < n; i++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	list, err := s.List(ctx, "t/")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != n {
		t.Fatalf("List returned %d keys, want %d", len(list), n)
	}
	for i, o := range list {
		if want := fmt.Sprintf("t/%05d", i); o.Key != want {
			t.Fatalf("List[%d] = %q, want %q", i, o.Key, want)
		}
	}
}

// Benchmarks: PUT and ranged GET of 16 MiB objects against a loopback
// MinIO (b.SetBytes gives MB/s).
const benchObject = 16 << 20

func BenchmarkS3Put16MiB(b *testing.B) {
	srv := miniotest.Start(b)
	s := newMinioS3Store(b, srv, nil)
	data := randBytes(5, benchObject)
	ctx := context.Background()
	b.SetBytes(benchObject)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := s.Put(ctx, fmt.Sprintf("bench/%d", i), bytes.NewReader(data), benchObject, objstore.PutOptions{Mode: objstore.CreateOnly}); err != nil {
			b.Fatal(err)
		}
	}
}

// The same with S3Options.Checksums: the price of the SDK's CRC32 (and,
// over plain HTTP, its SHA-256 payload signature).
func BenchmarkS3Put16MiBChecksums(b *testing.B) {
	srv := miniotest.Start(b)
	s := newMinioS3Store(b, srv, func(o *objstore.S3Options) { o.Checksums = true })
	data := randBytes(5, benchObject)
	ctx := context.Background()
	b.SetBytes(benchObject)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := s.Put(ctx, fmt.Sprintf("bench/%d", i), bytes.NewReader(data), benchObject, objstore.PutOptions{Mode: objstore.CreateOnly}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkS3Put16MiBMultipart(b *testing.B) {
	srv := miniotest.Start(b)
	s := newMinioS3Store(b, srv, func(o *objstore.S3Options) { o.MultipartThreshold = 8 << 20; o.PartSize = 8 << 20 })
	data := randBytes(5, benchObject)
	ctx := context.Background()
	b.SetBytes(benchObject)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := s.Put(ctx, fmt.Sprintf("bench/%d", i), bytes.NewReader(data), benchObject, objstore.PutOptions{Mode: objstore.CreateOnly}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkS3RangedGet16MiB(b *testing.B) {
	srv := miniotest.Start(b)
	s := newMinioS3Store(b, srv, nil)
	ctx := context.Background()
	data := randBytes(6, 2*benchObject)
	if _, err := s.Put(ctx, "bench/src", bytes.NewReader(data), int64(len(data)), objstore.PutOptions{}); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	b.SetBytes(benchObject)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		off := int64(i%16) * (1 << 20)
		rc, err := s.Get(ctx, "bench/src", off, benchObject)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.CopyBuffer(io.Discard, rc, buf)
		rc.Close()
		if err != nil || n != benchObject {
			b.Fatalf("read %d, %v", n, err)
		}
	}
}

// Baselines with minio-go on the same server, to compare our SDK setup
// against an independent client's.
func BenchmarkMinioGoPut16MiB(b *testing.B) {
	srv := miniotest.Start(b)
	mc := srv.Client(b)
	data := randBytes(5, benchObject)
	ctx := context.Background()
	b.SetBytes(benchObject)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := mc.PutObject(ctx, srv.Bucket, fmt.Sprintf("bench/%d", i), bytes.NewReader(data), benchObject, minio.PutObjectOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMinioGoRangedGet16MiB(b *testing.B) {
	srv := miniotest.Start(b)
	mc := srv.Client(b)
	ctx := context.Background()
	data := randBytes(6, 2*benchObject)
	if _, err := mc.PutObject(ctx, srv.Bucket, "bench/src", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	b.SetBytes(benchObject)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		off := int64(i%16) * (1 << 20)
		opts := minio.GetObjectOptions{}
		if err := opts.SetRange(off, off+benchObject-1); err != nil {
			b.Fatal(err)
		}
		obj, err := mc.GetObject(ctx, srv.Bucket, "bench/src", opts)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.CopyBuffer(io.Discard, obj, buf)
		obj.Close()
		if err != nil || n != benchObject {
			b.Fatalf("read %d, %v", n, err)
		}
	}
}
