package objstore

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// FSStore is an [ObjectStore] in a local directory: the embedded default
// tier (remote.storage.fs.path, default <first log dir>/objects). Key
// "a/b/c" is the file <root>/a/b/c.
//
// Publishing. Put never writes a key's file in place:
//
//  1. create <dir>/<name>.tmp-<random> (same directory: same filesystem)
//  2. copy the body, computing its MD5; set xattr user.strata.etag on the
//     temp file's inode; fsync it
//  3. publish under the per-key lock:
//     CreateOnly  link(tmp, name): EEXIST -> ErrPreconditionFailed
//     IfMatch     compare the current ETag, then rename(tmp, name)
//     Overwrite   rename(tmp, name)
//  4. unlink tmp (after a link), fsync the directory
//
// A crash before step 3 leaves only a temp file, which List ignores and
// [FSStore.Sweep] removes: never a partial object under a real key.
//
// ETags are the hex MD5 of the content, kept in an xattr on the inode, so
// the ETag is published atomically with the bytes by the same link or
// rename (a sidecar file could disagree with its data after a crash).
// Where the filesystem has no user xattrs, or a file was placed by hand,
// the ETag is computed from the content on Head/List and cached by
// (inode, size, mtime); that costs a read of the object once.
//
// IfMatch is atomic only among the FSStore values of one process that
// share the per-key locks, i.e. one FSStore per directory per process.
// Two processes sharing a directory get CreateOnly right (link is atomic)
// but may race on IfMatch.
//
// A key cannot also be the directory of another key ("a/b" and "a/b/c"):
// Put returns an error for the second.
type FSStore struct {
	root    string
	noXattr atomic.Bool // set once the filesystem refuses user xattrs

	locks [64]sync.Mutex // per-key publish locks, by key hash

	cacheMu sync.Mutex // guards cache
	cache   map[string]fsETag
}

// fsETag is a computed ETag and the file identity it was computed for.
type fsETag struct {
	ino, size, mtime int64
	etag             string
}

const (
	// etagXattr holds an object's hex MD5 on its inode.
	etagXattr = "user.strata.etag"
	// tmpMarker is in the name of every temporary file, and refused in
	// the last segment of keys.
	tmpMarker = ".tmp-"
	// maxETagCache bounds the computed-ETag cache; it is cleared when full.
	maxETagCache = 4096
)

// NewFSStore returns an [FSStore] rooted at dir, creating it if needed.
func NewFSStore(dir string) (*FSStore, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("objstore: %w", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("objstore: %w", err)
	}
	return &FSStore{root: abs, cache: make(map[string]fsETag)}, nil
}

// Root returns the store's directory.
func (s *FSStore) Root() string { return s.root }

// path maps a key to its file, after the shared key rules.
func (s *FSStore) path(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	if strings.Contains(key[strings.LastIndexByte(key, '/')+1:], tmpMarker) {
		return "", fmt.Errorf("%w: %q (reserved %q)", ErrInvalidKey, key, tmpMarker)
	}
	return filepath.Join(s.root, filepath.FromSlash(key)), nil
}

func (s *FSStore) lockFor(key string) *sync.Mutex {
	var h uint32 = 2166136261
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	return &s.locks[h%uint32(len(s.locks))]
}

// Put implements [ObjectStore]; see [FSStore] for the publish order.
func (s *FSStore) Put(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) (ObjectInfo, error) {
	p, err := s.path(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	if size < 0 {
		return ObjectInfo{}, fmt.Errorf("objstore: negative size %d", size)
	}
	if opts.Mode != CreateOnly && opts.Mode != IfMatch && opts.Mode != Overwrite {
		return ObjectInfo{}, fmt.Errorf("objstore: unknown put mode %d", opts.Mode)
	}
	if err := ctx.Err(); err != nil {
		return ObjectInfo{}, err
	}
	if opts.Mode == CreateOnly {
		// Cheap early refusal (a retry after a lost acknowledgement should
		// not rewrite a whole segment to learn it exists); link decides.
		if _, err := os.Lstat(p); err == nil {
			return ObjectInfo{}, ErrPreconditionFailed
		}
	}
	f, err := s.createTemp(filepath.Dir(p), filepath.Base(p))
	if err != nil {
		return ObjectInfo{}, err
	}
	tmp := f.Name()
	published := false
	defer func() {
		if !published {
			_ = os.Remove(tmp)
		}
	}()
	etag, err := s.writeTemp(ctx, f, r, size)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("objstore: %w", cerr)
	}
	if err != nil {
		return ObjectInfo{}, err
	}

	mu := s.lockFor(key)
	mu.Lock()
	defer mu.Unlock()
	// Last chance to honour the caller: once published, the object exists.
	if err := ctx.Err(); err != nil {
		return ObjectInfo{}, err
	}
	switch opts.Mode {
	case CreateOnly:
		if err := os.Link(tmp, p); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return ObjectInfo{}, ErrPreconditionFailed
			}
			return ObjectInfo{}, fmt.Errorf("objstore: %w", err)
		}
		_ = os.Remove(tmp)
	case IfMatch:
		cur, err := s.head(p, key)
		if errors.Is(err, ErrNotFound) || (err == nil && cur.ETag != opts.ETag) {
			return ObjectInfo{}, ErrPreconditionFailed
		}
		if err != nil {
			return ObjectInfo{}, err
		}
		fallthrough
	case Overwrite:
		if err := os.Rename(tmp, p); err != nil {
			return ObjectInfo{}, fmt.Errorf("objstore: %w", err)
		}
	}
	published = true
	if err := syncDir(filepath.Dir(p)); err != nil {
		return ObjectInfo{}, err
	}
	info := ObjectInfo{Key: key, Size: size, ETag: etag}
	if st, err := os.Stat(p); err == nil {
		info.LastModified = st.ModTime()
	}
	return info, nil
}

// createTemp makes the key's directories (fsyncing each new one into its
// parent) and a temp file in the last. A concurrent Delete may prune an
// empty directory (the key's own, or a parent between its check and the
// child's mkdir) at any step, so ENOENT is retried; once the temp file
// exists its directory is not empty and cannot be pruned.
func (s *FSStore) createTemp(dir, base string) (*os.File, error) {
	var err error
	for range 10 {
		if err = s.mkdirAll(dir); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // a parent was pruned between its check and the mkdir
			}
			return nil, err
		}
		var f *os.File
		f, err = os.CreateTemp(dir, base+tmpMarker+"*")
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	return nil, fmt.Errorf("objstore: %w", err)
}

// mkdirAll creates dir and its missing parents under root, fsyncing the
// parent of each directory it creates so the new entry survives a crash.
func (s *FSStore) mkdirAll(dir string) error {
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() {
			return fmt.Errorf("objstore: %s is an object, not a directory", dir)
		}
		return nil
	}
	if dir == s.root || len(dir) < len(s.root) {
		return os.MkdirAll(dir, 0o755)
	}
	if err := s.mkdirAll(filepath.Dir(dir)); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		return fmt.Errorf("objstore: %w", err)
	}
	return syncDir(filepath.Dir(dir))
}

// writeTemp copies size bytes of r into f, checking ctx between chunks,
// then records the MD5 in the xattr and fsyncs. It returns the ETag.
func (s *FSStore) writeTemp(ctx context.Context, f *os.File, r io.Reader, size int64) (string, error) {
	h := md5.New()
	buf := make([]byte, min(size, 1<<20)+1)
	var n int64
	for n < size {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		k, err := r.Read(buf[:min(int64(len(buf)-1), size-n)])
		if k > 0 {
			if _, werr := f.Write(buf[:k]); werr != nil {
				return "", fmt.Errorf("objstore: %w", werr)
			}
			h.Write(buf[:k])
			n += int64(k)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("objstore: reading body: %w", err)
		}
	}
	if n < size {
		return "", fmt.Errorf("%w: %d of %d bytes", errShortBody, n, size)
	}
	etag := hex.EncodeToString(h.Sum(nil))
	if !s.noXattr.Load() {
		if err := unix.Fsetxattr(int(f.Fd()), etagXattr, []byte(etag), 0); err != nil {
			if !errors.Is(err, unix.ENOTSUP) && !errors.Is(err, unix.EOPNOTSUPP) {
				return "", fmt.Errorf("objstore: setxattr: %w", err)
			}
			s.noXattr.Store(true)
		}
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("objstore: %w", err)
	}
	return etag, ctx.Err()
}

// Get implements [ObjectStore]. The reader reads the open file (a later
// Delete or Overwrite of the key does not disturb it) and honours ctx on
// every Read; Close closes the file.
func (s *FSStore) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := openObject(p)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("objstore: %w", err)
	}
	lo, hi, err := clampRange(st.Size(), off, length)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &fsReader{ctx: ctx, f: f, r: io.NewSectionReader(f, lo, hi-lo)}, nil
}

type fsReader struct {
	ctx context.Context
	f   *os.File
	r   *io.SectionReader
}

func (r *fsReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

func (r *fsReader) Close() error { return r.f.Close() }

// openObject opens a key's file, mapping a missing file (or a directory,
// which is no object) to ErrNotFound.
func openObject(p string) (*os.File, error) {
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("objstore: %w", err)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("objstore: %w", err)
		}
		return nil, ErrNotFound
	}
	return f, nil
}

// Head implements [ObjectStore].
func (s *FSStore) Head(ctx context.Context, key string) (ObjectInfo, error) {
	p, err := s.path(key)
	if err != nil {
		return ObjectInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return ObjectInfo{}, err
	}
	return s.head(p, key)
}

// head reads size, mtime and ETag from one open file descriptor, so they
// describe the same inode even if the key is replaced meanwhile.
func (s *FSStore) head(p, key string) (ObjectInfo, error) {
	f, err := openObject(p)
	if err != nil {
		return ObjectInfo{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("objstore: %w", err)
	}
	etag, err := s.etag(f, p, st)
	if err != nil {
		return ObjectInfo{}, err
	}
	return ObjectInfo{Key: key, Size: st.Size(), ETag: etag, LastModified: st.ModTime()}, nil
}

// etag returns the file's ETag: the xattr if present, else the MD5 of
// its content, cached by file identity.
func (s *FSStore) etag(f *os.File, p string, st os.FileInfo) (string, error) {
	if !s.noXattr.Load() {
		var buf [64]byte
		n, err := unix.Fgetxattr(int(f.Fd()), etagXattr, buf[:])
		if err == nil && n == 32 {
			return string(buf[:n]), nil
		}
	}
	id := fsETag{size: st.Size(), mtime: st.ModTime().UnixNano()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		id.ino = int64(sys.Ino)
	}
	s.cacheMu.Lock()
	c, ok := s.cache[p]
	s.cacheMu.Unlock()
	if ok && c.ino == id.ino && c.size == id.size && c.mtime == id.mtime {
		return c.etag, nil
	}
	var h hash.Hash = md5.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, st.Size())); err != nil {
		return "", fmt.Errorf("objstore: %w", err)
	}
	id.etag = hex.EncodeToString(h.Sum(nil))
	s.cacheMu.Lock()
	if len(s.cache) >= maxETagCache {
		clear(s.cache)
	}
	s.cache[p] = id
	s.cacheMu.Unlock()
	return id.etag, nil
}

// List implements [ObjectStore]. It walks only the deepest directory the
// prefix names, skips temp files, and sorts the keys (a directory walk's
// order is not key order: "a/b-c" < "a/b/x").
func (s *FSStore) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	start := s.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = filepath.Join(s.root, filepath.FromSlash(prefix[:i]))
		if start != s.root && !strings.HasPrefix(start, s.root+string(filepath.Separator)) {
			return nil, nil
		}
	}
	var out []ObjectInfo
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
				return nil // pruned under us, or prefix names no directory
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !d.Type().IsRegular() || strings.Contains(d.Name(), tmpMarker) {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := s.head(p, key)
		if errors.Is(err, ErrNotFound) {
			return nil // deleted since the directory was read
		}
		if err != nil {
			return err
		}
		out = append(out, info)
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("objstore: list %q: %w", prefix, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Delete implements [ObjectStore]: unlink, fsync the directory, then
// prune directories left empty up to the root (rmdir fails on a
// non-empty one, which ends the pruning).
func (s *FSStore) Delete(ctx context.Context, key string) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	mu := s.lockFor(key)
	mu.Lock()
	err = os.Remove(p)
	mu.Unlock()
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		if st, serr := os.Stat(p); serr == nil && st.IsDir() {
			return nil // a "directory" of other keys is not an object
		}
		return fmt.Errorf("objstore: %w", err)
	}
	s.cacheMu.Lock()
	delete(s.cache, p)
	s.cacheMu.Unlock()
	dir := filepath.Dir(p)
	if err := syncDir(dir); err != nil {
		return err
	}
	pruned := false
	for dir != s.root && strings.HasPrefix(dir, s.root) {
		if os.Remove(dir) != nil {
			break
		}
		pruned = true
		dir = filepath.Dir(dir)
	}
	if pruned {
		return syncDir(dir)
	}
	return nil
}

// Sweep removes temp files (crashed or abandoned Puts) last modified
// before olderThan ago, and returns how many it removed. Choose olderThan
// well above the longest Put, since a live Put's temp file looks the same.
func (s *FSStore) Sweep(olderThan time.Duration) (int, error) {
	cutoff := time.Now().Add(-olderThan)
	n := 0
	err := filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() || !strings.Contains(d.Name(), tmpMarker) {
			return nil
		}
		info, err := d.Info()
		if err != nil || !info.ModTime().Before(cutoff) {
			return nil
		}
		if err := os.Remove(p); err == nil {
			n++
		}
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("objstore: sweep: %w", err)
	}
	return n, nil
}

// syncDir fsyncs a directory so entries created, renamed or removed in
// it survive a crash. A directory already gone was pruned by a racing
// Delete, which found it empty and fsyncs its parent: nothing to do.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("objstore: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("objstore: fsync %s: %w", dir, err)
	}
	return nil
}
