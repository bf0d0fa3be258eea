package objstore_test

import (
	"bytes"
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/strata-io/strata/internal/miniotest"
	"github.com/strata-io/strata/tiering/objstore"
)

// writeCounter counts the write requests (anything but GET and HEAD)
// that reach the server.
type writeCounter struct {
	rt     http.RoundTripper
	writes atomic.Int64
}

func (c *writeCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		c.writes.Add(1)
	}
	return c.rt.RoundTrip(r)
}

// S3PutRequests is what an S3Store really sends to a MinIO: one PUT
// below the threshold, create + parts + complete from it.
func TestS3PutRequestsMatchesTheWire(t *testing.T) {
	srv := miniotest.Start(t)
	const part = 5 << 20
	// A plain *http.Client: the SDK cannot add a CA bundle to it, and
	// MinIO here is plain HTTP on loopback.
	t.Setenv("AWS_CA_BUNDLE", "")
	wc := &writeCounter{rt: http.DefaultTransport}
	s := newMinioS3Store(t, srv, func(o *objstore.S3Options) {
		o.MultipartThreshold = 2 * part
		o.PartSize = part
		o.HTTPClient = &http.Client{Transport: wc}
	})
	ctx, cancel := context.WithTimeout(context.Background(), s3TestTimeout)
	defer cancel()
	for i, size := range []int64{0, 1, part, 2*part - 1, 2 * part, 3*part + 17} {
		wc.writes.Store(0)
		data := randBytes(uint64(i), int(size))
		if _, err := s.Put(ctx, "req/"+string(rune('a'+i)), bytes.NewReader(data), size, objstore.PutOptions{Mode: objstore.CreateOnly}); err != nil {
			t.Fatal(err)
		}
		if got, want := int(wc.writes.Load()), objstore.S3PutRequests(size, 2*part, part); got != want {
			t.Errorf("put of %d bytes sent %d write requests, S3PutRequests says %d", size, got, want)
		}
	}
}

func TestS3PutRequestsDefaults(t *testing.T) {
	for _, c := range []struct {
		size int64
		want int
	}{
		{0, 1}, {1 << 20, 1}, {512<<20 - 1, 1}, {512 << 20, 4}, {1 << 30, 6}, {5 << 30, 22},
	} {
		if got := objstore.S3PutRequests(c.size, 0, 0); got != c.want {
			t.Errorf("S3PutRequests(%d) = %d, want %d", c.size, got, c.want)
		}
	}
	// 16 MiB parts, the defaults before: a GiB took 66.
	if got := objstore.S3PutRequests(1<<30, 32<<20, 16<<20); got != 66 {
		t.Errorf("1 GiB in 16 MiB parts = %d requests, want 66", got)
	}
}
