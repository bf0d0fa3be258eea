package objstore_test

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/strata-io/strata/tiering/objstore"
)

func newFS(t *testing.T) *objstore.FSStore {
	t.Helper()
	s, err := objstore.NewFSStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func tctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func putBytes(t *testing.T, s objstore.ObjectStore, key string, data []byte, mode objstore.PutMode) (objstore.ObjectInfo, error) {
	t.Helper()
	return s.Put(tctx(t), key, bytes.NewReader(data), int64(len(data)), objstore.PutOptions{Mode: mode})
}

func mustPutBytes(t *testing.T, s objstore.ObjectStore, key string, data []byte) objstore.ObjectInfo {
	t.Helper()
	info, err := putBytes(t, s, key, data, objstore.CreateOnly)
	if err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	return info
}

func readAll(t *testing.T, s objstore.ObjectStore, key string, off, length int64) ([]byte, error) {
	t.Helper()
	rc, err := s.Get(tctx(t), key, off, length)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func listKeys(t *testing.T, s objstore.ObjectStore, prefix string) []string {
	t.Helper()
	l, err := s.List(tctx(t), prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	var keys []string
	for _, o := range l {
		keys = append(keys, o.Key)
	}
	return keys
}

// nopStore answers every call at once without allocating, so tests can
// measure a decorator's own allocations.
type nopStore struct{}

func (nopStore) Put(_ context.Context, key string, _ io.Reader, size int64, _ objstore.PutOptions) (objstore.ObjectInfo, error) {
	return objstore.ObjectInfo{Key: key, Size: size}, nil
}
func (nopStore) Get(context.Context, string, int64, int64) (io.ReadCloser, error) {
	return io.NopCloser(eofReader{}), nil
}
func (nopStore) Head(_ context.Context, key string) (objstore.ObjectInfo, error) {
	return objstore.ObjectInfo{Key: key}, nil
}
func (nopStore) List(context.Context, string) ([]objstore.ObjectInfo, error) { return nil, nil }
func (nopStore) Delete(context.Context, string) error                        { return nil }

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
