package objstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/strata-io/strata/tiering/objstore"
	"github.com/strata-io/strata/tiering/objstore/objstoretest"
)

func TestFSStoreKeysMapToFilesUnderRoot(t *testing.T) {
	s := newFS(t)
	mustPutBytes(t, s, "pre/orders-abc/0/00000000000000000000-u.log", []byte("batch"))
	b, err := os.ReadFile(filepath.Join(s.Root(), "pre", "orders-abc", "0", "00000000000000000000-u.log"))
	if err != nil || string(b) != "batch" {
		t.Fatalf("file content = %q, %v", b, err)
	}
	for _, k := range []string{"../escape", "a/../../escape", "/etc/passwd", "a/seg.log.tmp-123"} {
		if _, err := putBytes(t, s, k, []byte("x"), objstore.Overwrite); !errors.Is(err, objstore.ErrInvalidKey) {
			t.Fatalf("Put(%q) err = %v, want ErrInvalidKey", k, err)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(s.Root()), "escape")); !os.IsNotExist(err) {
		t.Fatalf("a key escaped the root: %v", err)
	}
	// A directory segment may contain the temp marker (a topic may be named so).
	mustPutBytes(t, s, "x.tmp-y/0/manifest.json", []byte("{}"))
	if got := listKeys(t, s, "x.tmp-y/"); fmt.Sprint(got) != "[x.tmp-y/0/manifest.json]" {
		t.Fatalf("List = %v", got)
	}
}

func TestFSStoreETagIsMD5AndSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := objstore.NewFSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("manifest v1")
	info := mustPutBytes(t, s, "m/manifest.json", data)
	if info.ETag != objstoretest.MD5Hex(data) {
		t.Fatalf("ETag = %q, want MD5 %q", info.ETag, objstoretest.MD5Hex(data))
	}
	s2, err := objstore.NewFSStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	h, err := s2.Head(tctx(t), "m/manifest.json")
	if err != nil || h.ETag != info.ETag {
		t.Fatalf("Head after reopen = %+v, %v; want ETag %q", h, err, info.ETag)
	}
	// A conditional write works across the reopen.
	if _, err := s2.Put(tctx(t), "m/manifest.json", bytes.NewReader([]byte("v2")), 2, objstore.PutOptions{Mode: objstore.IfMatch, ETag: info.ETag}); err != nil {
		t.Fatal(err)
	}
}

// A file placed without the xattr (copied in by hand, or a filesystem
// without user xattrs) gets its ETag computed from content, and a
// replaced file is not served a stale cached ETag.
func TestFSStoreComputesETagOfFileWithoutXattr(t *testing.T) {
	for _, noXattr := range []bool{false, true} {
		t.Run(fmt.Sprintf("noXattr=%v", noXattr), func(t *testing.T) {
			s := newFS(t)
			if noXattr {
				s.DisableXattr()
			}
			p := filepath.Join(s.Root(), "hand", "placed")
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("one"), 0o644); err != nil {
				t.Fatal(err)
			}
			h, err := s.Head(tctx(t), "hand/placed")
			if err != nil || h.ETag != objstoretest.MD5Hex([]byte("one")) {
				t.Fatalf("Head = %+v, %v", h, err)
			}
			// Replace by rename (a new inode), as a hand copy would.
			tmp := p + "-new"
			if err := os.WriteFile(tmp, []byte("two, longer"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, p); err != nil {
				t.Fatal(err)
			}
			h, err = s.Head(tctx(t), "hand/placed")
			if err != nil || h.ETag != objstoretest.MD5Hex([]byte("two, longer")) {
				t.Fatalf("Head after replace = %+v, %v (stale ETag?)", h, err)
			}
			info, err := s.Put(tctx(t), "hand/placed", bytes.NewReader([]byte("3")), 1, objstore.PutOptions{Mode: objstore.IfMatch, ETag: h.ETag})
			if err != nil || info.ETag != objstoretest.MD5Hex([]byte("3")) {
				t.Fatalf("IfMatch over a hand-placed file = %+v, %v", info, err)
			}
		})
	}
}

// A Put that crashed before publishing leaves only a temp file: never
// listed, never readable under the key, removed by Sweep once old.
func TestFSStoreSweepRemovesOnlyOldTempFiles(t *testing.T) {
	s := newFS(t)
	mustPutBytes(t, s, "p/0/seg.log", []byte("live"))
	dir := filepath.Join(s.Root(), "p", "0")
	old := filepath.Join(dir, "seg2.log.tmp-111")
	fresh := filepath.Join(dir, "seg3.log.tmp-222")
	for _, f := range []string{old, fresh} {
		if err := os.WriteFile(f, []byte("torn"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	if got := listKeys(t, s, ""); fmt.Sprint(got) != "[p/0/seg.log]" {
		t.Fatalf("List = %v, want only the published object", got)
	}
	if _, err := s.Head(tctx(t), "p/0/seg2.log"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Head of the crashed key = %v, want ErrNotFound", err)
	}
	n, err := s.Sweep(time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("Sweep(1h) = %d, %v; want 1", n, err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Fatalf("old temp file still there: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("fresh temp file (maybe a live Put) was swept: %v", err)
	}
	if n, err := s.Sweep(0); err != nil || n != 1 {
		t.Fatalf("Sweep(0) = %d, %v; want 1", n, err)
	}
	if got := mustReadKey(t, s, "p/0/seg.log"); got != "live" {
		t.Fatalf("published object after sweeps = %q", got)
	}
}

// Failed Puts (refused precondition, short body, cancelled) leave no
// temp file behind.
func TestFSStoreFailedPutsLeaveNoTempFiles(t *testing.T) {
	s := newFS(t)
	mustPutBytes(t, s, "k", []byte("v"))
	if _, err := putBytes(t, s, "k", []byte("w"), objstore.CreateOnly); !errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatal(err)
	}
	if _, err := s.Put(tctx(t), "k2", bytes.NewReader([]byte("ab")), 3, objstore.PutOptions{}); err == nil {
		t.Fatal("short body accepted")
	}
	if n, err := s.Sweep(0); err != nil || n != 0 {
		t.Fatalf("Sweep found %d temp files (%v), want 0", n, err)
	}
}

func TestFSStoreDeletePrunesEmptyDirectories(t *testing.T) {
	s := newFS(t)
	mustPutBytes(t, s, "t-1/0/a", []byte("a"))
	mustPutBytes(t, s, "t-1/1/b", []byte("b"))
	if err := s.Delete(tctx(t), "t-1/0/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), "t-1", "0")); !os.IsNotExist(err) {
		t.Fatalf("empty directory t-1/0 kept: %v", err)
	}
	if err := s.Delete(tctx(t), "t-1/1/b"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), "t-1")); !os.IsNotExist(err) {
		t.Fatalf("empty directory t-1 kept: %v", err)
	}
	if _, err := os.Stat(s.Root()); err != nil {
		t.Fatalf("root pruned: %v", err)
	}
}

// Puts and Deletes in one directory race its pruning: a Put must never
// fail because a Delete removed the directory it was about to use.
func TestFSStoreConcurrentPutDeleteInOneDirectory(t *testing.T) {
	s := newFS(t)
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := range 50 {
				key := fmt.Sprintf("t/0/w%d-%d", w, i)
				if _, err := putBytes(t, s, key, []byte(key), objstore.CreateOnly); err != nil {
					errc <- fmt.Errorf("put %s: %w", key, err)
					return
				}
				if err := s.Delete(tctx(t), key); err != nil {
					errc <- fmt.Errorf("delete %s: %w", key, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if got := listKeys(t, s, ""); len(got) != 0 {
		t.Fatalf("left %v", got)
	}
}

// An open reader keeps reading the object it opened across a Delete or
// an Overwrite of the key (as an S3 GET in flight does).
func TestFSStoreReaderSurvivesDeleteAndOverwrite(t *testing.T) {
	s := newFS(t)
	data := bytes.Repeat([]byte("0123456789"), 1000)
	mustPutBytes(t, s, "k", data)
	rc, err := s.Get(tctx(t), "k", 10, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := putBytes(t, s, "k", []byte("new"), objstore.Overwrite); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(tctx(t), "k"); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, data[10:]) {
		t.Fatalf("read %d bytes, %v; want the original %d", len(got), err, len(data)-10)
	}
}

func TestFSStoreKeyUnderAnObjectFails(t *testing.T) {
	s := newFS(t)
	mustPutBytes(t, s, "a", []byte("file"))
	if _, err := putBytes(t, s, "a/b", []byte("x"), objstore.CreateOnly); err == nil || errors.Is(err, objstore.ErrPreconditionFailed) {
		t.Fatalf("Put under an object: err = %v, want a plain error", err)
	}
	if got := mustReadKey(t, s, "a"); got != "file" {
		t.Fatalf("object a = %q", got)
	}
}

func mustReadKey(t *testing.T, s objstore.ObjectStore, key string) string {
	t.Helper()
	b, err := readAll(t, s, key, 0, -1)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return string(b)
}
