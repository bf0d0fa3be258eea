package vfs

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
)

// memWithFile returns a MemFS holding /d/f (name durable) with synced
// content followed by unsynced appends, each a separate Write.
func memWithFile(t *testing.T, synced []byte, unsynced ...[]byte) (*MemFS, File) {
	t.Helper()
	m := NewMem()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := m.Create("/d/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(synced); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	for _, b := range unsynced {
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	return m, f
}

func TestMemCrashKeepsOnlySyncedBytesAtZeroPercent(t *testing.T) {
	m, f := memWithFile(t, []byte("durable"), []byte(" lost"), []byte(" also lost"))
	defer f.Close()
	c := m.CrashClone(0, newRand(1))
	mustContain(t, c, "/d/f", []byte("durable"))
	// The original is untouched by the crash.
	mustContain(t, m, "/d/f", []byte("durable lost also lost"))
}

func TestMemCrashKeepsEverythingAtHundredPercent(t *testing.T) {
	m, f := memWithFile(t, []byte("durable"), []byte(" kept"))
	defer f.Close()
	f.Truncate(9)
	if _, err := m.Create("/d/new"); err != nil {
		t.Fatal(err)
	}
	c := m.CrashClone(100, newRand(1))
	mustContain(t, c, "/d/f", []byte("durable k"))
	mustContain(t, c, "/d/new", nil)
}

func TestMemCrashKeepsARandomPrefixOfUnsyncedWrites(t *testing.T) {
	rng := newRand(7)
	synced := randBytes(rng, 1000)
	var writes [][]byte
	for range 20 {
		writes = append(writes, randBytes(rng, 1+rng.IntN(300)))
	}
	full := bytes.Join(append([][]byte{synced}, writes...), nil)
	boundaries := map[int]bool{len(synced): true}
	end := len(synced)
	for _, w := range writes {
		end += len(w)
		boundaries[end] = true
	}

	m, f := memWithFile(t, synced, writes...)
	defer f.Close()
	for _, pct := range []int{10, 50, 90} {
		var torn, whole, total int
		for seed := range uint64(200) {
			c := m.CrashClone(pct, newRand(seed))
			got, ok := readFile(t, c, "/d/f")
			if !ok {
				t.Fatal("a synced file with a durable name vanished")
			}
			if len(got) < len(synced) || !bytes.Equal(got, full[:len(got)]) {
				t.Fatalf("pct=%d seed=%d: %d bytes are not synced bytes plus a prefix of the unsynced writes", pct, seed, len(got))
			}
			if boundaries[len(got)] {
				whole++
			} else {
				torn++
			}
			total += len(got) - len(synced)
		}
		// Writes get torn, and the average kept share tracks pct.
		if torn == 0 || whole == 0 {
			t.Errorf("pct=%d: torn=%d whole=%d, want both", pct, torn, whole)
		}
		mean := float64(total) / 200 / float64(len(full)-len(synced)) * 100
		if want := float64(pct); mean < want-8 || mean > want+8 {
			t.Errorf("pct=%d: kept %.1f%% of unsynced bytes on average, want about %.0f%%", pct, mean, want)
		}
	}
}

func TestMemCrashIsDeterministicForASeed(t *testing.T) {
	rng := newRand(3)
	m, f := memWithFile(t, randBytes(rng, 100), randBytes(rng, 1000), randBytes(rng, 1000))
	defer f.Close()
	a, _ := readFile(t, m.CrashClone(50, newRand(9)), "/d/f")
	b, _ := readFile(t, m.CrashClone(50, newRand(9)), "/d/f")
	if !bytes.Equal(a, b) {
		t.Fatal("two crashes with the same seed differ")
	}
}

func TestMemCrashUnsyncedTruncateCanBeLost(t *testing.T) {
	m, f := memWithFile(t, []byte("0123456789"))
	defer f.Close()
	if err := f.Truncate(4); err != nil {
		t.Fatal(err)
	}
	mustContain(t, m.CrashClone(0, newRand(1)), "/d/f", []byte("0123456789"))
	mustContain(t, m.CrashClone(100, newRand(1)), "/d/f", []byte("0123"))
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	mustContain(t, m.CrashClone(0, newRand(1)), "/d/f", []byte("0123"))
}

func TestMemCrashLosesCreateWithoutSyncDir(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d", 0o755)
	m.SyncDir("/")
	m.SyncDir("/d")
	f, err := m.Create("/d/seg.log")
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("data"))
	f.Sync() // the bytes are durable, the name is not
	mustNotExist(t, m.CrashClone(0, newRand(1)), "/d/seg.log")
	if err := m.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	mustContain(t, m.CrashClone(0, newRand(1)), "/d/seg.log", []byte("data"))
	f.Close()
}

func TestMemCrashLosesMkdirWithoutSyncDirOfParent(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/data/t-0", 0o755)
	writeFile(t, m, "/data/t-0/f", []byte("x"))
	m.SyncDir("/data/t-0")
	mustNotExist(t, m.CrashClone(0, newRand(1)), "/data")
	// Syncing the root makes /data durable, but not /data/t-0: each new
	// directory needs its own parent synced.
	m.SyncDir("/")
	c := m.CrashClone(0, newRand(1))
	if names, err := c.List("/data"); err != nil || len(names) != 0 {
		t.Fatalf("List(/data) = %v %v, want empty", names, err)
	}
	m.SyncDir("/data")
	mustContain(t, m.CrashClone(0, newRand(1)), "/data/t-0/f", nil)
}

func TestMemSyncDirCommitsEarlierOperationsOnTheSameName(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/a", 0o755)
	m.MkdirAll("/b", 0o755)
	durable(t, m, "/a")
	durable(t, m, "/b")
	writeFile(t, m, "/a/x", []byte("x"))
	durable(t, m, "/a/x") // syncs /a too
	writeFile(t, m, "/a/y.tmp", []byte("y"))
	if err := m.Rename("/a/y.tmp", "/b/y"); err != nil {
		t.Fatal(err)
	}
	// Syncing only the destination commits the rename and with it the
	// create of its source, so y.tmp cannot reappear beside y.
	m.SyncDir("/b")
	for seed := range uint64(16) {
		c := m.CrashClone(50, newRand(seed))
		mustNotExist(t, c, "/a/y.tmp")
		if _, err := c.Stat("/b/y"); err != nil {
			t.Fatal(err)
		}
		mustContain(t, c, "/a/x", []byte("x"))
	}
}

func TestMemCrashRenameIsDurableOnlyAfterSyncDir(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d", 0o755)
	writeFile(t, m, "/d/cp", []byte("v1"))
	durable(t, m, "/d/cp")
	// The checkpoint pattern: write a temp file, sync it, rename it over
	// the live one, sync the directory.
	f, _ := m.Create("/d/cp.tmp")
	f.Write([]byte("v2"))
	f.Sync()
	f.Close()
	if err := m.Rename("/d/cp.tmp", "/d/cp"); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for seed := range uint64(64) {
		c := m.CrashClone(50, newRand(seed))
		got, _ := readFile(t, c, "/d/cp")
		_, tmp := readFile(t, c, "/d/cp.tmp")
		// The rename is atomic: either the old file and the temp file, or
		// the new file alone. (cp holds v1 if the create was kept but the
		// rename lost; cp.tmp is absent if the create was lost.)
		switch {
		case string(got) == "v2" && !tmp:
			seen["renamed"] = true
		case string(got) == "v1":
			seen["not renamed"] = true
		default:
			t.Fatalf("seed %d: cp=%q tmp=%v", seed, got, tmp)
		}
	}
	if !seen["renamed"] || !seen["not renamed"] {
		t.Fatalf("crashes at 50%% saw only %v", seen)
	}
	m.SyncDir("/d")
	c := m.CrashClone(0, newRand(1))
	mustContain(t, c, "/d/cp", []byte("v2"))
	mustNotExist(t, c, "/d/cp.tmp")
}

func TestMemCrashUnsyncedRemoveComesBack(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d/sub", 0o755)
	writeFile(t, m, "/d/sub/a", []byte("a"))
	durable(t, m, "/d/sub/a")
	if err := m.RemoveAll("/d/sub"); err != nil {
		t.Fatal(err)
	}
	mustNotExist(t, m, "/d/sub")
	mustContain(t, m.CrashClone(0, newRand(1)), "/d/sub/a", []byte("a"))
	m.SyncDir("/d")
	mustNotExist(t, m.CrashClone(0, newRand(1)), "/d/sub")
}

func TestMemCrashMappedWritesNeedSync(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d", 0o755)
	f, _ := m.Create("/d/x.index")
	defer f.Close()
	f.Truncate(3 * memPageSize)
	durable(t, m, "/d/x.index")
	b, err := f.Mmap(3 * memPageSize)
	if err != nil {
		t.Fatal(err)
	}
	b[0], b[memPageSize], b[2*memPageSize] = 1, 2, 3
	zero := make([]byte, 3*memPageSize)
	mustContain(t, m.CrashClone(0, newRand(1)), "/d/x.index", zero)
	all := bytes.Clone(zero)
	all[0], all[memPageSize], all[2*memPageSize] = 1, 2, 3
	mustContain(t, m.CrashClone(100, newRand(1)), "/d/x.index", all)
	// At 50% pages survive independently: some crash keeps a strict
	// subset of the three dirty pages.
	partial := false
	for seed := range uint64(32) {
		got, _ := readFile(t, m.CrashClone(50, newRand(seed)), "/d/x.index")
		n := int(got[0]) / 1
		n += int(got[memPageSize]) / 2
		n += int(got[2*memPageSize]) / 3
		if n > 0 && n < 3 {
			partial = true
		}
	}
	if !partial {
		t.Fatal("no crash at 50% kept only some dirty mapped pages")
	}
	f.Sync()
	mustContain(t, m.CrashClone(0, newRand(1)), "/d/x.index", all)
	if err := f.Munmap(b); err != nil {
		t.Fatal(err)
	}
}

func TestMemMappingStaysCoherentWhenFileGrows(t *testing.T) {
	m := NewMem()
	f, _ := m.Create("/x")
	defer f.Close()
	m.SyncDir("/")
	f.Truncate(16)
	b, err := f.Mmap(16)
	if err != nil {
		t.Fatal(err)
	}
	// Growing far past the capacity moves the file to a new array; the
	// mapping must still see and feed the first 16 bytes.
	if _, err := f.WriteAt(make([]byte, 1<<20), 16); err != nil {
		t.Fatal(err)
	}
	copy(b, "mapped")
	buf := make([]byte, 6)
	if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "mapped" {
		t.Fatalf("ReadAt after growth = %q %v", buf, err)
	}
	f.WriteAt([]byte("FILE"), 8)
	if string(b[8:12]) != "FILE" {
		t.Fatalf("mapping after growth = %q", b[8:12])
	}
	f.Sync()
	got, _ := readFile(t, m.CrashClone(0, newRand(1)), "/x")
	if string(got[:6]) != "mapped" || string(got[8:12]) != "FILE" {
		t.Fatalf("synced contents = %q", got[:12])
	}
	if err := f.Munmap(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Munmap(b); err == nil {
		t.Fatal("second Munmap of the same mapping succeeded")
	}
}

func TestMemSyncHookCountsAndMayCloneInside(t *testing.T) {
	m, f := memWithFile(t, []byte("a")) // 3 syncs so far
	defer f.Close()
	var events []SyncEvent
	var clones []*MemFS
	m.SetSyncHook(func(e SyncEvent) {
		events = append(events, e)
		clones = append(clones, m.CrashClone(0, newRand(1)))
	})
	f.Write([]byte("b"))
	f.Sync()
	m.SyncDir("/d")
	m.SetSyncHook(nil)
	f.Sync()
	if m.SyncCount() != 6 {
		t.Fatalf("SyncCount = %d, want 6", m.SyncCount())
	}
	want := []SyncEvent{{N: 4, Path: "/d/f"}, {N: 5, Path: "/d", Dir: true}}
	if fmt.Sprint(events) != fmt.Sprint(want) {
		t.Fatalf("events = %v, want %v", events, want)
	}
	// The hook runs before the sync takes effect.
	mustContain(t, clones[0], "/d/f", []byte("a"))
	mustContain(t, clones[1], "/d/f", []byte("ab"))
}

func TestMemCloneKeepsUnsyncedStateAndIsIndependent(t *testing.T) {
	m, f := memWithFile(t, []byte("synced"), []byte("+unsynced"))
	defer f.Close()
	m.Create("/d/pending")
	c := m.Clone()
	f.Write([]byte("+after"))
	mustContain(t, c, "/d/f", []byte("synced+unsynced"))
	mustContain(t, c.CrashClone(0, newRand(1)), "/d/f", []byte("synced"))
	mustNotExist(t, c.CrashClone(0, newRand(1)), "/d/pending")
	mustContain(t, c.CrashClone(100, newRand(1)), "/d/pending", nil)
	mustContain(t, m, "/d/f", []byte("synced+unsynced+after"))
}

func TestMemConcurrentUse(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d", 0o755)
	durable(t, m, "/d")
	base := m.SyncCount()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			name := fmt.Sprintf("/d/f%d", i)
			f, err := m.Create(name)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			for j := range 200 {
				f.Write([]byte{byte(j)})
				buf := make([]byte, 1)
				f.ReadAt(buf, int64(j))
				if buf[0] != byte(j) {
					t.Errorf("%s: read %d at %d", name, buf[0], j)
					return
				}
				if j%20 == 0 {
					f.Sync()
					m.SyncDir("/d")
				}
			}
		})
	}
	wg.Go(func() {
		for seed := range uint64(20) {
			c := m.CrashClone(50, newRand(seed))
			if _, err := c.List("/d"); err != nil {
				t.Error(err)
			}
			m.List("/d")
		}
	})
	wg.Wait()
	if m.SyncCount()-base != 4*10*2 {
		t.Fatalf("SyncCount = %d", m.SyncCount())
	}
}

func TestMemCrashIsDeterministicAcrossManyFiles(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d", 0o755)
	durable(t, m, "/d")
	rng := newRand(5)
	for i := range 20 {
		name := fmt.Sprintf("/d/f%02d", i)
		writeFile(t, m, name, randBytes(rng, 100))
		durable(t, m, name)
		f, _ := m.OpenReadWrite(name)
		f.WriteAt(randBytes(rng, 500), 100)
		f.Close()
	}
	a, b := m.CrashClone(50, newRand(1)).Dump(), m.CrashClone(50, newRand(1)).Dump()
	if a != b {
		t.Fatalf("two crashes with the same seed differ:\n%s\n%s", a, b)
	}
}

func TestMemCrashReorderedKeepsPagesIndependently(t *testing.T) {
	const pages = 6
	old := bytes.Repeat([]byte{'o'}, 2*memPageSize)
	m, f := memWithFile(t, old)
	defer f.Close()
	for i := range pages {
		f.WriteAt(bytes.Repeat([]byte{byte('0' + i)}, memPageSize), int64(i)*memPageSize)
	}
	final := make([]byte, 0, pages*memPageSize)
	for i := range pages {
		final = append(final, bytes.Repeat([]byte{byte('0' + i)}, memPageSize)...)
	}
	mustContain(t, m.CrashCloneReordered(0, newRand(1)), "/d/f", old)
	mustContain(t, m.CrashCloneReordered(100, newRand(1)), "/d/f", final)
	reordered := false
	for seed := range uint64(64) {
		got, _ := readFile(t, m.CrashCloneReordered(50, newRand(seed)), "/d/f")
		if len(got) < len(old) || len(got)%memPageSize != 0 {
			t.Fatalf("seed %d: size %d", seed, len(got))
		}
		sawOld := false
		for p := 0; p < len(got)/memPageSize; p++ {
			page := got[p*memPageSize : (p+1)*memPageSize]
			was := make([]byte, memPageSize)
			if p < 2 {
				was = old[:memPageSize]
			}
			switch {
			case bytes.Equal(page, final[p*memPageSize:(p+1)*memPageSize]):
				if sawOld {
					reordered = true // this page is new, an earlier one is not
				}
			case bytes.Equal(page, was):
				sawOld = true
			default:
				t.Fatalf("seed %d: page %d is neither old nor new", seed, p)
			}
		}
	}
	if !reordered {
		t.Fatal("no crash kept a later page while losing an earlier one")
	}
}
