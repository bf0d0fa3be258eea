package miniotest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

func TestBinaryHonoursEnvOverride(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "minio")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STRATA_TEST_MINIO", notExec)
	if _, err := Binary(); !errors.Is(err, ErrNoBinary) {
		t.Fatalf("non-executable override: %v, want ErrNoBinary", err)
	}
	if err := os.Chmod(notExec, 0o755); err != nil {
		t.Fatal(err)
	}
	if p, err := Binary(); err != nil || p != notExec {
		t.Fatalf("Binary() = %q, %v; want %q", p, err, notExec)
	}
}

func TestBinaryFallsBackToGopathBin(t *testing.T) {
	gopath := t.TempDir()
	bin := filepath.Join(gopath, "bin", "minio")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STRATA_TEST_MINIO", "")
	t.Setenv("GOPATH", gopath)
	if p, err := Binary(); err != nil || p != bin {
		t.Fatalf("Binary() = %q, %v; want %q", p, err, bin)
	}
}

func TestStartServesBucketAndStopRestartKeepsData(t *testing.T) {
	srv := Start(t)
	c := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ok, err := c.BucketExists(ctx, srv.Bucket)
	if err != nil || !ok {
		t.Fatalf("bucket %q exists = %v, %v", srv.Bucket, ok, err)
	}
	if host, _, _ := net.SplitHostPort(srv.Addr); host != "127.0.0.1" {
		t.Fatalf("listening on %q, want loopback", srv.Addr)
	}
	data := []byte("survives a restart")
	if _, err := c.PutObject(ctx, srv.Bucket, "k", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	if conn, err := net.DialTimeout("tcp", srv.Addr, time.Second); err == nil {
		conn.Close()
		t.Fatal("server still accepts connections after Stop")
	}
	srv.Stop() // twice is fine

	srv.Restart(t)
	obj, err := c.GetObject(ctx, srv.Bucket, "k", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	got, err := io.ReadAll(obj)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after restart read %q, %v", got, err)
	}
}
