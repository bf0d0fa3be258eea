package objstore

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
)

// Op names an [ObjectStore] operation, for call records, fault rules and
// metric labels.
type Op string

// The operations of [ObjectStore].
const (
	OpPut    Op = "put"
	OpGet    Op = "get"
	OpHead   Op = "head"
	OpList   Op = "list"
	OpDelete Op = "delete"
)

// Call is one recorded call to a [MemStore].
type Call struct {
	Op     Op
	Key    string // the key, or the prefix for List
	Off    int64  // Get only
	Length int64  // Get only: the length asked for (-1: to the end)
	Bytes  int64  // bytes stored (Put) or served (Get, counted as read)
	Mode   PutMode
	Time   time.Time
	Err    error
}

// MemStore is the reference [ObjectStore]: objects live in a map, every
// call is recorded ([MemStore.Calls]) so tests can count requests, and the
// semantics are those every backend must match (objstoretest.Run). ETags
// are the hex MD5 of the content, like S3 single-part uploads.
//
// Safe for concurrent use. Stored bytes are never mutated (an overwrite
// replaces the slice), so a Get reader stays valid across a later Put or
// Delete of its key, like an S3 GET already in flight.
type MemStore struct {
	now func() time.Time

	mu      sync.Mutex // guards objects, calls
	objects map[string]memObject
	calls   []Call
}

type memObject struct {
	data []byte
	etag string
	mod  time.Time
}

// NewMemStore returns an empty [MemStore].
func NewMemStore() *MemStore {
	return &MemStore{now: time.Now, objects: make(map[string]memObject)}
}

// Calls returns a copy of every call recorded so far, in order.
func (m *MemStore) Calls() []Call {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Call(nil), m.calls...)
}

// CountCalls returns how many recorded calls have op (every op if "").
func (m *MemStore) CountCalls(op Op) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, c := range m.calls {
		if op == "" || c.Op == op {
			n++
		}
	}
	return n
}

// ResetCalls forgets the recorded calls.
func (m *MemStore) ResetCalls() {
	m.mu.Lock()
	m.calls = nil
	m.mu.Unlock()
}

// Keys returns every stored key, sorted.
func (m *MemStore) Keys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := make([]string, 0, len(m.objects))
	for k := range m.objects {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (m *MemStore) recordLocked(c Call) int {
	c.Time = m.now()
	m.calls = append(m.calls, c)
	return len(m.calls) - 1
}

func (m *MemStore) record(c Call) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.recordLocked(c)
}

// Put implements [ObjectStore]. The body is read in full before the
// condition is checked, so a failed precondition still consumes it (as an
// S3 PUT sends its body before the answer).
func (m *MemStore) Put(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) (ObjectInfo, error) {
	call := Call{Op: OpPut, Key: key, Mode: opts.Mode}
	if err := CheckKey(key); err != nil {
		call.Err = err
		m.record(call)
		return ObjectInfo{}, err
	}
	data, err := readBody(ctx, r, size)
	if err != nil {
		call.Err = err
		m.record(call)
		return ObjectInfo{}, err
	}
	sum := md5.Sum(data)
	obj := memObject{data: data, etag: hex.EncodeToString(sum[:])}

	m.mu.Lock()
	defer m.mu.Unlock()
	cur, exists := m.objects[key]
	switch opts.Mode {
	case CreateOnly:
		if exists {
			err = ErrPreconditionFailed
		}
	case IfMatch:
		if !exists || cur.etag != opts.ETag {
			err = ErrPreconditionFailed
		}
	case Overwrite:
	default:
		err = fmt.Errorf("objstore: unknown put mode %d", opts.Mode)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		call.Err = err
		m.recordLocked(call)
		return ObjectInfo{}, err
	}
	obj.mod = m.now()
	m.objects[key] = obj
	call.Bytes = size
	m.recordLocked(call)
	return ObjectInfo{Key: key, Size: size, ETag: obj.etag, LastModified: obj.mod}, nil
}

// Get implements [ObjectStore]. The reader honours ctx on every Read.
func (m *MemStore) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	call := Call{Op: OpGet, Key: key, Off: off, Length: length}
	m.mu.Lock()
	defer m.mu.Unlock()
	err := ctx.Err()
	if err == nil {
		err = CheckKey(key)
	}
	obj, ok := m.objects[key]
	if err == nil && !ok {
		err = ErrNotFound
	}
	var lo, hi int64
	if err == nil {
		lo, hi, err = clampRange(int64(len(obj.data)), off, length)
	}
	if err != nil {
		call.Err = err
		m.recordLocked(call)
		return nil, err
	}
	idx := m.recordLocked(call)
	return &memReader{ctx: ctx, r: bytes.NewReader(obj.data[lo:hi]), m: m, idx: idx}, nil
}

// memReader counts what the caller really read into the call record.
type memReader struct {
	ctx context.Context
	r   *bytes.Reader
	m   *MemStore
	idx int
}

func (r *memReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := r.r.Read(p)
	if n > 0 {
		r.m.mu.Lock()
		if r.idx < len(r.m.calls) {
			r.m.calls[r.idx].Bytes += int64(n)
		}
		r.m.mu.Unlock()
	}
	return n, err
}

func (r *memReader) Close() error { return nil }

// Head implements [ObjectStore].
func (m *MemStore) Head(ctx context.Context, key string) (ObjectInfo, error) {
	call := Call{Op: OpHead, Key: key}
	m.mu.Lock()
	defer m.mu.Unlock()
	err := ctx.Err()
	if err == nil {
		err = CheckKey(key)
	}
	obj, ok := m.objects[key]
	if err == nil && !ok {
		err = ErrNotFound
	}
	call.Err = err
	m.recordLocked(call)
	if err != nil {
		return ObjectInfo{}, err
	}
	return ObjectInfo{Key: key, Size: int64(len(obj.data)), ETag: obj.etag, LastModified: obj.mod}, nil
}

// List implements [ObjectStore].
func (m *MemStore) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	call := Call{Op: OpList, Key: prefix}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := ctx.Err(); err != nil {
		call.Err = err
		m.recordLocked(call)
		return nil, err
	}
	var out []ObjectInfo
	for k, obj := range m.objects {
		if strings.HasPrefix(k, prefix) {
			out = append(out, ObjectInfo{Key: k, Size: int64(len(obj.data)), ETag: obj.etag, LastModified: obj.mod})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	m.recordLocked(call)
	return out, nil
}

// Delete implements [ObjectStore].
func (m *MemStore) Delete(ctx context.Context, key string) error {
	call := Call{Op: OpDelete, Key: key}
	m.mu.Lock()
	defer m.mu.Unlock()
	err := ctx.Err()
	if err == nil {
		err = CheckKey(key)
	}
	if err == nil {
		delete(m.objects, key)
	}
	call.Err = err
	m.recordLocked(call)
	return err
}

// CheckKey returns an error wrapping [ErrInvalidKey] unless key keeps the
// rules every backend shares (see the package comment); backends call it
// first.
func CheckKey(key string) error {
	if key == "" || strings.ContainsRune(key, 0) {
		return fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: %q", ErrInvalidKey, key)
		}
	}
	return nil
}

// clampRange turns Get's (off, length) into [lo, hi) of an object of
// size bytes, by the rules in the package comment.
func clampRange(size, off, length int64) (lo, hi int64, err error) {
	if off < 0 || off > size || (off == size && size > 0) {
		return 0, 0, fmt.Errorf("%w: offset %d of %d bytes", ErrInvalidRange, off, size)
	}
	hi = size
	if length >= 0 && length < size-off {
		hi = off + length
	}
	return off, hi, nil
}

// errShortBody is returned by Put when r ends before size bytes.
var errShortBody = errors.New("objstore: body shorter than its size")

// readBody reads exactly size bytes of r, checking ctx between chunks so
// a slow body cannot outlive the caller's deadline.
func readBody(ctx context.Context, r io.Reader, size int64) ([]byte, error) {
	if size < 0 {
		return nil, fmt.Errorf("objstore: negative size %d", size)
	}
	buf := make([]byte, size)
	var n int64
	for n < size {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		end := min(size, n+1<<20)
		k, err := r.Read(buf[n:end])
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("objstore: reading body: %w", err)
		}
	}
	if n < size {
		return nil, fmt.Errorf("%w: %d of %d bytes", errShortBody, n, size)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return buf, nil
}
