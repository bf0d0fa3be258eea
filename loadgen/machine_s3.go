package loadgen

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Target is an S3-compatible store (MinIO) the machine measurement
// reads from: the raw GET rate the remote tier's catch-up is held
// against. It uses minio-go, not the aws SDK Strata's S3 backend uses, so
// the baseline shares no client code with what it measures.
type S3Target struct {
	Endpoint  string // http://127.0.0.1:9000
	Bucket    string // created when missing
	Region    string // empty: us-east-1
	AccessKey string
	SecretKey string
}

// MeasureS3Get writes an object of size bytes to t's bucket and reads it
// back with sequential ranged GETs of chunk bytes on one stream (what
// one remote reader without read-ahead would do, as the remote tier's
// chunks are: remote.log.cache.chunk.bytes), then deletes it. The bucket
// is created when missing (and kept: bench/run's Strata node archives
// into it).
func MeasureS3Get(ctx context.Context, t S3Target, size, chunk int64) (*S3Get, error) {
	if size < 1<<20 || chunk < 1<<10 {
		return nil, fmt.Errorf("loadgen: s3 get: size %d and chunk %d, want at least 1 MiB and 1 KiB", size, chunk)
	}
	u, err := url.Parse(t.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("loadgen: s3 get: endpoint %q, want http://host:port or https://host:port", t.Endpoint)
	}
	region := t.Region
	if region == "" {
		region = "us-east-1"
	}
	cl, err := minio.New(u.Host, &minio.Options{
		Creds:  credentials.NewStaticV4(t.AccessKey, t.SecretKey, ""),
		Secure: u.Scheme == "https",
		Region: region,
	})
	if err != nil {
		return nil, fmt.Errorf("loadgen: s3 get: %w", err)
	}
	ok, err := cl.BucketExists(ctx, t.Bucket)
	if err != nil {
		return nil, fmt.Errorf("loadgen: s3 get: bucket %s: %w", t.Bucket, err)
	}
	if !ok {
		if err := cl.MakeBucket(ctx, t.Bucket, minio.MakeBucketOptions{Region: region}); err != nil {
			return nil, fmt.Errorf("loadgen: s3 get: make bucket %s: %w", t.Bucket, err)
		}
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	key := "loadgen-machine/" + hex.EncodeToString(id[:])
	// Data that does not compress: a store that compresses would
	// otherwise read back less than it serves.
	if _, err := cl.PutObject(ctx, t.Bucket, key, io.LimitReader(rand.Reader, size), size,
		minio.PutObjectOptions{PartSize: 64 << 20, DisableContentSha256: true}); err != nil {
		return nil, fmt.Errorf("loadgen: s3 get: put %s: %w", key, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = cl.RemoveObject(dctx, t.Bucket, key, minio.RemoveObjectOptions{})
	}()
	var got, gets int64
	start := time.Now()
	for off := int64(0); off < size; off += chunk {
		n := min(chunk, size-off)
		var opts minio.GetObjectOptions
		if err := opts.SetRange(off, off+n-1); err != nil {
			return nil, err
		}
		obj, err := cl.GetObject(ctx, t.Bucket, key, opts)
		if err != nil {
			return nil, fmt.Errorf("loadgen: s3 get: %s [%d, +%d): %w", key, off, n, err)
		}
		m, err := io.Copy(io.Discard, obj)
		obj.Close()
		if err != nil {
			return nil, fmt.Errorf("loadgen: s3 get: %s [%d, +%d): %w", key, off, n, err)
		}
		if m != n {
			return nil, fmt.Errorf("loadgen: s3 get: %s [%d, +%d): got %d bytes", key, off, n, m)
		}
		got += m
		gets++
	}
	secs := time.Since(start).Seconds()
	return &S3Get{Bytes: got, GETs: gets, ChunkBytes: chunk, MBPerSec: float64(got) / 1e6 / secs}, nil
}
