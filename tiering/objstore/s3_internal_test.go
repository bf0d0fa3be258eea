package objstore

// S3Store tests that need no MinIO: the requests it sends and how it reads
// the answers, against a scripted S3 on httptest (127.0.0.1).

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"
)

// fakeS3 records each request and answers with respond.
type fakeS3 struct {
	mu      sync.Mutex
	reqs    []*http.Request
	bodies  [][]byte
	respond func(w http.ResponseWriter, r *http.Request)
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	f.bodies = append(f.bodies, body)
	f.mu.Unlock()
	f.respond(w, r)
}

func (f *fakeS3) last(t *testing.T) (*http.Request, []byte) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		t.Fatal("no request reached the fake S3")
	}
	return f.reqs[len(f.reqs)-1], f.bodies[len(f.bodies)-1]
}

func s3Error(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>`+code+`</Code><Message>scripted</Message></Error>`)
}

func newFakeS3Store(t *testing.T, respond func(w http.ResponseWriter, r *http.Request)) (*S3Store, *fakeS3) {
	t.Helper()
	f := &fakeS3{respond: respond}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := NewS3Store(ctx, S3Options{
		Endpoint: srv.URL, Bucket: "b", Prefix: "pre", PathStyle: true,
		AccessKey: "k", SecretKey: "secretsecret",
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, f
}

func TestS3StorePutSendsConditionsUnsignedAndStreamsExactBody(t *testing.T) {
	s, f := newFakeS3Store(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"abc123"`)
		w.WriteHeader(http.StatusOK)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	data := []byte("hello, segment")
	// A reader longer than size: exactly size bytes go, no more.
	info, err := s.Put(ctx, "t-1/0/a.log", io.MultiReader(bytes.NewReader(data), strings.NewReader("TRAILING")), int64(len(data)), PutOptions{Mode: CreateOnly})
	if err != nil {
		t.Fatal(err)
	}
	if info.ETag != "abc123" || info.Size != int64(len(data)) || info.Key != "t-1/0/a.log" {
		t.Fatalf("info = %+v", info)
	}
	req, body := f.last(t)
	if req.Method != http.MethodPut || req.URL.Path != "/b/pre/t-1/0/a.log" {
		t.Fatalf("request %s %s", req.Method, req.URL.Path)
	}
	if !bytes.Equal(body, data) {
		t.Fatalf("body %q, want %q", body, data)
	}
	if got := req.Header.Get("If-None-Match"); got != "*" {
		t.Fatalf("If-None-Match = %q", got)
	}
	if got := req.Header.Get("X-Amz-Content-Sha256"); got != "UNSIGNED-PAYLOAD" {
		t.Fatalf("X-Amz-Content-Sha256 = %q, want UNSIGNED-PAYLOAD", got)
	}
	for h := range req.Header {
		if strings.HasPrefix(strings.ToLower(h), "x-amz-checksum-") || strings.EqualFold(h, "X-Amz-Trailer") {
			t.Fatalf("unexpected checksum header %s", h)
		}
	}

	if _, err := s.Put(ctx, "k", bytes.NewReader(data), int64(len(data)), PutOptions{Mode: IfMatch, ETag: "abc123"}); err != nil {
		t.Fatal(err)
	}
	req, _ = f.last(t)
	if got := req.Header.Get("If-Match"); got != `"abc123"` {
		t.Fatalf("If-Match = %q", got)
	}
	if _, err := s.Put(ctx, "k", bytes.NewReader(data), int64(len(data)), PutOptions{Mode: Overwrite}); err != nil {
		t.Fatal(err)
	}
	req, _ = f.last(t)
	if req.Header.Get("If-Match") != "" || req.Header.Get("If-None-Match") != "" {
		t.Fatalf("Overwrite sent a condition: %v", req.Header)
	}
}

func TestS3StoreMapsErrorsToSentinels(t *testing.T) {
	var (
		mu     sync.Mutex
		status int
		code   string
	)
	s, _ := newFakeS3Store(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method == http.MethodHead {
			w.WriteHeader(status)
			return
		}
		s3Error(w, status, code)
	})
	set := func(st int, c string) { mu.Lock(); status, code = st, c; mu.Unlock() }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	put := func(mode PutMode) error {
		_, err := s.Put(ctx, "k", strings.NewReader("x"), 1, PutOptions{Mode: mode, ETag: "e"})
		return err
	}
	get := func() error {
		rc, err := s.Get(ctx, "k", 5, 10)
		if rc != nil {
			rc.Close()
		}
		return err
	}
	head := func() error { _, err := s.Head(ctx, "k"); return err }
	cases := []struct {
		name   string
		status int
		code   string
		call   func() error
		want   error
	}{
		{"create-only taken", 412, "PreconditionFailed", func() error { return put(CreateOnly) }, ErrPreconditionFailed},
		{"if-match racing", 409, "ConditionalRequestConflict", func() error { return put(IfMatch) }, ErrPreconditionFailed},
		{"if-match missing key", 404, "NoSuchKey", func() error { return put(IfMatch) }, ErrPreconditionFailed},
		{"get missing", 404, "NoSuchKey", get, ErrNotFound},
		{"head missing", 404, "", head, ErrNotFound},
		{"get past end", 416, "InvalidRange", get, ErrInvalidRange},
	}
	for _, c := range cases {
		set(c.status, c.code)
		if err := c.call(); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	// Errors that are no sentinel stay transient for the retry decorator.
	for _, c := range []struct {
		status int
		code   string
	}{{500, "InternalError"}, {503, "SlowDown"}, {404, "NoSuchBucket"}, {403, "AccessDenied"}} {
		set(c.status, c.code)
		err := get()
		if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrPreconditionFailed) || errors.Is(err, ErrInvalidRange) {
			t.Errorf("%d %s: err = %v, want an unmapped error", c.status, c.code, err)
		}
	}
	// A missing key's delete is no error.
	set(404, "NoSuchKey")
	if err := s.Delete(ctx, "k"); err != nil {
		t.Errorf("delete missing: %v", err)
	}
}

func TestS3StoreShortOrFailingBodyIsNotRetryable(t *testing.T) {
	s, _ := newFakeS3Store(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"x"`)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := s.Put(ctx, "k", strings.NewReader("abc"), 10, PutOptions{Mode: Overwrite})
	if !errors.Is(err, errShortBody) || Transient(err) {
		t.Fatalf("short body: err = %v (transient %v), want errShortBody", err, Transient(err))
	}
	boom := errors.New("disk on fire")
	_, err = s.Put(ctx, "k", iotest.ErrReader(boom), 10, PutOptions{Mode: Overwrite})
	if !errors.Is(err, boom) {
		t.Fatalf("failing body: err = %v, want %v", err, boom)
	}
}

func TestS3StoreGetRangeHeaders(t *testing.T) {
	s, f := newFakeS3Store(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, c := range []struct {
		off, length int64
		want        string
	}{{0, -1, ""}, {7, -1, "bytes=7-"}, {7, 3, "bytes=7-9"}, {0, 1, "bytes=0-0"}} {
		rc, err := s.Get(ctx, "a/b", c.off, c.length)
		if err != nil {
			t.Fatal(err)
		}
		rc.Close()
		req, _ := f.last(t)
		if got := req.Header.Get("Range"); got != c.want {
			t.Errorf("Get(%d, %d): Range %q, want %q", c.off, c.length, got, c.want)
		}
		if req.URL.Path != "/b/pre/a/b" {
			t.Errorf("path %q", req.URL.Path)
		}
	}
}

func TestS3StoreRefusesBadKeysAndOptions(t *testing.T) {
	s, f := newFakeS3Store(t, func(w http.ResponseWriter, r *http.Request) {})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, k := range []string{"", "/a", "a/", "a//b", "a/../b", "./a"} {
		if _, err := s.Put(ctx, k, strings.NewReader("x"), 1, PutOptions{}); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Put(%q): %v", k, err)
		}
		if _, err := s.Get(ctx, k, 0, -1); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Get(%q): %v", k, err)
		}
		if _, err := s.Head(ctx, k); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Head(%q): %v", k, err)
		}
		if err := s.Delete(ctx, k); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Delete(%q): %v", k, err)
		}
	}
	f.mu.Lock()
	n := len(f.reqs)
	f.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d requests sent for invalid keys", n)
	}
	for _, o := range []S3Options{
		{},
		{Bucket: "b", AccessKey: "only-one"},
		{Bucket: "b", PartSize: 1 << 20},
		{Bucket: "b", PartSize: 6 << 30},
		{Bucket: "b", MultipartThreshold: 6 << 30},
	} {
		if _, err := NewS3Store(ctx, o); !errors.Is(err, ErrS3Config) {
			t.Errorf("NewS3Store(%+v): %v, want ErrS3Config", o, err)
		}
	}
}

func TestS3StoreHonoursContextDeadline(t *testing.T) {
	release := make(chan struct{})
	s, _ := newFakeS3Store(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Head(ctx, "k")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Head took %v past a 100ms deadline", d)
	}
}

func TestS3StoreChecksumsOptionSendsCRC32(t *testing.T) {
	f := &fakeS3{respond: func(w http.ResponseWriter, r *http.Request) { w.Header().Set("ETag", `"e"`) }}
	srv := httptest.NewServer(f)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := NewS3Store(ctx, S3Options{Endpoint: srv.URL, Bucket: "b", PathStyle: true, AccessKey: "k", SecretKey: "secretsecret", Checksums: true})
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("checksummed body")
	r := bytes.NewReader(data)
	if _, err := s.Put(ctx, "k", r, int64(len(data)), PutOptions{Mode: CreateOnly}); err != nil {
		t.Fatal(err)
	}
	req, body := f.last(t)
	if req.Header.Get("X-Amz-Checksum-Crc32") == "" {
		t.Fatalf("no CRC32 checksum header: %v", req.Header)
	}
	if !bytes.Equal(body, data) {
		t.Fatalf("body %q", body)
	}
	if r.Len() != 0 {
		t.Fatalf("body reader left with %d unread bytes", r.Len())
	}
}
