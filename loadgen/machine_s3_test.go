package loadgen

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/strata-io/strata/internal/miniotest"
)

// TestMeasureS3Get reads 9 MiB back from a real MinIO in 4 MiB ranged
// GETs (three: the last one short) into a bucket it creates, and leaves
// no object behind; a bad endpoint and a wrong key are errors, not
// figures.
func TestMeasureS3Get(t *testing.T) {
	srv := miniotest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tg := S3Target{Endpoint: srv.Endpoint, Bucket: "loadgen-raw", AccessKey: srv.AccessKey, SecretKey: srv.SecretKey}
	g, err := MeasureS3Get(ctx, tg, 9<<20, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	if g.Bytes != 9<<20 || g.GETs != 3 || g.ChunkBytes != 4<<20 || g.MBPerSec <= 0 {
		t.Fatalf("%+v, want 9 MiB in 3 GETs of 4 MiB at a positive rate", g)
	}
	u, _ := url.Parse(srv.Endpoint)
	cl, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(srv.AccessKey, srv.SecretKey, "")})
	if err != nil {
		t.Fatal(err)
	}
	for o := range cl.ListObjects(ctx, tg.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		t.Errorf("object %s left behind", o.Key)
	}
	// The bucket exists now: a second measurement uses it.
	if _, err := MeasureS3Get(ctx, tg, 1<<20, 1<<20); err != nil {
		t.Fatalf("second measurement into the existing bucket: %v", err)
	}
	bad := tg
	bad.SecretKey = "wrong"
	if _, err := MeasureS3Get(ctx, bad, 1<<20, 1<<20); err == nil {
		t.Error("a wrong secret key measured")
	}
	bad = tg
	bad.Endpoint = "127.0.0.1:9000"
	if _, err := MeasureS3Get(ctx, bad, 1<<20, 1<<20); err == nil {
		t.Error("an endpoint without a scheme measured")
	}
}

// TestCLIMachineS3: `loadgen machine --s3-endpoint` reports the GET rate
// and puts it in the JSON result.
func TestCLIMachineS3(t *testing.T) {
	srv := miniotest.Start(t)
	out := t.TempDir() + "/m.json"
	code, stdout, stderr := runCLI(t, "machine", "--dir", t.TempDir(), "--size", "4MiB", "--out", out,
		"--s3-endpoint", srv.Endpoint, "--s3-bucket", srv.Bucket, "--s3-access-key", srv.AccessKey, "--s3-secret-key", srv.SecretKey,
		"--s3-size", "8MiB", "--s3-chunk", "2MiB")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	res, err := ReadResult(out)
	if err != nil {
		t.Fatal(err)
	}
	if res.Machine == nil || res.Machine.S3Get == nil || res.Machine.S3Get.GETs != 4 || res.Machine.S3Get.MBPerSec <= 0 {
		t.Fatalf("machine result %+v, stdout %q", res.Machine, stdout)
	}
}

// TestSummaryShowsRemoteReads: the text summary gives the remote
// reader's GETs per GiB and hit ratio when it read anything.
func TestSummaryShowsRemoteReads(t *testing.T) {
	var out strings.Builder
	r := &Result{Version: ResultVersion, Scenario: "catch-up", Target: "strata",
		Cost: &Cost{Gets: 10, RemoteReadBytes: 2 << 30, RemoteGets: 513, RemoteGetsPerGiBRead: 256.5, CacheHitRatio: 0.875}}
	if err := WriteSummary(&out, r); err != nil {
		t.Fatal(err)
	}
	if want := "remote reads: 2147.5 MB returned to fetches, 513 GETs (256.5 per GiB read), chunk cache hit ratio 0.88"; !strings.Contains(out.String(), want) {
		t.Fatalf("summary lacks %q:\n%s", want, out.String())
	}
	r.Cost = &Cost{Gets: 10}
	out.Reset()
	if err := WriteSummary(&out, r); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "remote reads") {
		t.Fatalf("remote reads line without remote reads:\n%s", out.String())
	}
}
