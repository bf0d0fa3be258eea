package objstore_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/strata-io/strata/tiering/objstore"
	"github.com/strata-io/strata/tiering/objstore/objstoretest"
)

func TestMemStoreRecordsEveryCall(t *testing.T) {
	m := objstore.NewMemStore()
	data := []byte("0123456789")
	info := mustPutBytes(t, m, "a/k", data)
	if info.ETag != objstoretest.MD5Hex(data) {
		t.Fatalf("ETag %q, want MD5 %q", info.ETag, objstoretest.MD5Hex(data))
	}
	if _, err := putBytes(t, m, "a/k", data, objstore.CreateOnly); !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatal(err)
	}
	rc, err := m.Get(tctx(t), "a/k", 2, 5)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadFull(rc, make([]byte, 3)) // read only part of the range
	rc.Close()
	m.Head(tctx(t), "a/missing")
	m.List(tctx(t), "a/")
	m.Delete(tctx(t), "a/k")

	calls := m.Calls()
	want := []objstore.Call{
		{Op: objstore.OpPut, Key: "a/k", Bytes: 10, Mode: objstore.CreateOnly},
		{Op: objstore.OpPut, Key: "a/k", Mode: objstore.CreateOnly, Err: objstore.ErrPreconditionFailed},
		{Op: objstore.OpGet, Key: "a/k", Off: 2, Length: 5, Bytes: 3},
		{Op: objstore.OpHead, Key: "a/missing", Err: objstore.ErrNotFound},
		{Op: objstore.OpList, Key: "a/"},
		{Op: objstore.OpDelete, Key: "a/k"},
	}
	if len(calls) != len(want) {
		t.Fatalf("%d calls recorded, want %d: %+v", len(calls), len(want), calls)
	}
	for i, c := range calls {
		w := want[i]
		if c.Op != w.Op || c.Key != w.Key || c.Off != w.Off || c.Length != w.Length || c.Bytes != w.Bytes || c.Mode != w.Mode || !errors.Is(c.Err, w.Err) || (w.Err == nil && c.Err != nil) || c.Time.IsZero() {
			t.Fatalf("call %d = %+v, want %+v", i, c, w)
		}
		if i > 0 && c.Time.Before(calls[i-1].Time) {
			t.Fatalf("call %d recorded before call %d", i, i-1)
		}
	}
	if m.CountCalls(objstore.OpPut) != 2 || m.CountCalls("") != 6 {
		t.Fatalf("CountCalls: put %d, all %d", m.CountCalls(objstore.OpPut), m.CountCalls(""))
	}
	m.ResetCalls()
	if len(m.Calls()) != 0 {
		t.Fatal("ResetCalls kept calls")
	}
}

// Stored bytes belong to the store: the caller's buffer may be reused
// after Put, and a reader keeps its bytes across an overwrite.
func TestMemStoreOwnsItsBytes(t *testing.T) {
	m := objstore.NewMemStore()
	buf := []byte("original")
	mustPutBytes(t, m, "k", buf)
	copy(buf, "XXXXXXXX")
	rc, err := m.Get(tctx(t), "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := putBytes(t, m, "k", []byte("replaced"), objstore.Overwrite); err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	if !bytes.Equal(got, []byte("original")) {
		t.Fatalf("reader saw %q, want %q", got, "original")
	}
	if keys := m.Keys(); len(keys) != 1 || keys[0] != "k" {
		t.Fatalf("Keys = %v", keys)
	}
}
