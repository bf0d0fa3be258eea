package index

import (
	"errors"
	"syscall"
	"testing"

	"github.com/strata-io/strata/storage/vfs"
	"github.com/strata-io/strata/storage/vfs/errfs"
)

// The first entry in each page of the sparse index file allocates the page
// with a write before storing through the mapping, so a full disk is an
// ENOSPC error from Append, with nothing published, not SIGBUS on the
// store. Entries inside an allocated page need no write.
func TestAppendAllocatesEachPageBeforeStoring(t *testing.T) {
	for _, kind := range []string{"offset", "time"} {
		t.Run(kind, func(t *testing.T) {
			rule := errfs.On(errfs.OpWrite, errfs.OpWriteAt).Glob("*.ix").Err(syscall.ENOSPC)
			rule.Disable()
			fs := errfs.Wrap(vfs.NewMem(), rule)
			if err := fs.MkdirAll("/d", 0o755); err != nil {
				t.Fatal(err)
			}
			var (
				add     func(i int64) error
				entries func() int
			)
			if kind == "offset" {
				ix, err := OpenOffsetIndex(fs, "/d/a.ix", 0, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				defer ix.Close()
				add = func(i int64) error { return ix.Append(i, int32(i)) }
				entries = ix.Entries
			} else {
				ix, err := OpenTimeIndex(fs, "/d/a.ix", 0, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				defer ix.Close()
				add = func(i int64) error { return ix.Append(1000+i, i) }
				entries = ix.Entries
			}
			rule.Enable()
			if err := add(1); !errors.Is(err, syscall.ENOSPC) || entries() != 0 {
				t.Fatalf("first entry on a full disk: %v, %d entries; want ENOSPC and none", err, entries())
			}
			rule.Disable()
			if err := add(1); err != nil {
				t.Fatal(err)
			}
			writes := rule.Matched()
			for i := int64(2); i <= 100; i++ { // all within the first page
				if err := add(i); err != nil {
					t.Fatal(err)
				}
			}
			if rule.Matched() != writes {
				t.Fatalf("%d writes for entries inside an allocated page, want 0", rule.Matched()-writes)
			}
			rule.Enable()
			var err error
			i := int64(101)
			for ; err == nil && i < 10000; i++ {
				err = add(i)
			}
			if !errors.Is(err, syscall.ENOSPC) || int64(entries()) != i-2 {
				t.Fatalf("at the next page on a full disk: %v after %d entries (%d published)", err, i-1, entries())
			}
		})
	}
}
