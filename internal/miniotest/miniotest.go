// Package miniotest starts a real MinIO server for tests: on 127.0.0.1, on
// a free port, over a temporary directory, with a bucket made ready, and
// stopped by t.Cleanup. It owns nothing but that process; it must never be
// imported by non-test code, and it creates buckets with minio-go (not the
// aws SDK the S3 backend uses), so it shares no client code with what it
// tests.
//
// The binary is found through $STRATA_TEST_MINIO, then
// $(go env GOPATH)/bin/minio (where .ci/run installs it), then $PATH. When
// it is missing the test is skipped on a developer machine and fails when
// CI=true.
//
//	srv := miniotest.Start(t)
//	store, _ := objstore.NewS3Store(ctx, objstore.S3Options{
//		Endpoint: srv.Endpoint, Bucket: srv.Bucket, PathStyle: true,
//		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
//	})
package miniotest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Credentials and the bucket every server starts with.
const (
	AccessKey = "strata-test"
	SecretKey = "strata-test-secret"
	Bucket    = "strata"
)

// readyTimeout bounds how long Start waits for the server to answer.
const readyTimeout = 60 * time.Second

// ErrNoBinary is returned by Binary when no minio executable is found.
var ErrNoBinary = errors.New("miniotest: minio binary not found")

// Server is a running MinIO. Its fields are fixed for its life, across
// Stop and Restart.
type Server struct {
	Endpoint  string // http://127.0.0.1:port
	Addr      string // 127.0.0.1:port
	AccessKey string
	SecretKey string
	Bucket    string
	Dir       string // data directory

	bin    string
	logf   string
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Binary returns the path of the minio executable, or ErrNoBinary.
func Binary() (string, error) {
	if p := os.Getenv("STRATA_TEST_MINIO"); p != "" {
		if isExec(p) {
			return p, nil
		}
		return "", fmt.Errorf("%w: $STRATA_TEST_MINIO=%q is not an executable", ErrNoBinary, p)
	}
	if gopath := goPath(); gopath != "" {
		for _, dir := range filepath.SplitList(gopath) {
			if p := filepath.Join(dir, "bin", "minio"); isExec(p) {
				return p, nil
			}
		}
	}
	if p, err := exec.LookPath("minio"); err == nil {
		return p, nil
	}
	return "", ErrNoBinary
}

func goPath() string {
	if gp := os.Getenv("GOPATH"); gp != "" {
		return gp
	}
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err == nil {
		return strings.TrimSpace(string(out))
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, "go")
	}
	return ""
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// Start starts a MinIO server with the bucket Bucket, and stops it when
// the test ends. Without a binary it skips the test, or fails it when
// CI=true.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (CI=true: .ci/run installs it with go install github.com/minio/minio@latest)", err)
		}
		t.Skipf("%v: set $STRATA_TEST_MINIO or go install github.com/minio/minio@latest", err)
	}
	dir := t.TempDir()
	s := &Server{
		AccessKey: AccessKey,
		SecretKey: SecretKey,
		Bucket:    Bucket,
		Dir:       filepath.Join(dir, "data"),
		bin:       bin,
		logf:      filepath.Join(dir, "minio.log"),
	}
	// A free port can be taken by someone else between our probe and
	// minio's bind: try a few.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		addr, err := freeAddr()
		if err != nil {
			t.Fatalf("miniotest: %v", err)
		}
		s.Addr = addr
		s.Endpoint = "http://" + addr
		if lastErr = s.start(); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		t.Fatalf("miniotest: %v\n%s", lastErr, s.logTail())
	}
	t.Cleanup(s.Stop)
	s.CreateBucket(t, s.Bucket)
	return s
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// start runs the process on s.Addr and waits until it is ready.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	logFile, err := os.OpenFile(s.logf, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, "server", "--quiet", "--address", s.Addr, s.Dir)
	cmd.Env = append(os.Environ(),
		"MINIO_ROOT_USER="+s.AccessKey,
		"MINIO_ROOT_PASSWORD="+s.SecretKey,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
		"MINIO_CALLHOME_ENABLE=off",
	)
	cmd.SysProcAttr = procAttr()
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited

	deadline := time.Now().Add(readyTimeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-exited:
			s.cmd = nil
			return fmt.Errorf("minio exited before it was ready")
		default:
		}
		resp, err := client.Get(s.Endpoint + "/minio/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				// health/ready can answer 200 while the object layer
				// still refuses S3 calls (503 XMinioServerNotInitialized,
				// seen right after a restart): ready means a signed S3
				// call succeeds.
				if err = s.s3Answers(); err == nil {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			s.stopLocked()
			return fmt.Errorf("minio not ready on %s after %v (last: %v)", s.Addr, readyTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// s3Answers makes one signed S3 call (ListBuckets) and returns its error.
func (s *Server) s3Answers() error {
	c, err := s.newClient()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = c.ListBuckets(ctx)
	return err
}

// Stop stops the server (SIGTERM, then SIGKILL after 10s). It is safe to
// call twice; the data directory stays for Restart.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *Server) stopLocked() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT) // a paused server handles no signal but SIGKILL
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
}

// Pause stops the server's process (SIGSTOP): connections stay open and
// requests hang, as an object store looks whose network went away.
// Resume continues it.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return errors.New("miniotest: not running")
	}
	return s.cmd.Process.Signal(sig)
}

// Restart starts a stopped server again on the same address and data, as
// after an outage.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatalf("miniotest: restart: %v\n%s", err, s.logTail())
	}
}

// Client returns a minio-go client for the server: an S3 client
// independent of the one under test.
func (s *Server) Client(t testing.TB) *minio.Client {
	t.Helper()
	c, err := s.newClient()
	if err != nil {
		t.Fatalf("miniotest: client: %v", err)
	}
	return c
}

func (s *Server) newClient() (*minio.Client, error) {
	return minio.New(s.Addr, &minio.Options{
		Creds:  credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Secure: false,
	})
}

// CreateBucket creates bucket name.
func (s *Server) CreateBucket(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Client(t).MakeBucket(ctx, name, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("miniotest: make bucket %q: %v", name, err)
	}
}

func (s *Server) logTail() string {
	b, err := os.ReadFile(s.logf)
	if err != nil {
		return ""
	}
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return "minio log tail:\n" + string(bytes.TrimSpace(b))
}
