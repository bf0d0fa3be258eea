// Package smalldisk mounts a small, size-limited tmpfs for tests of what
// happens when a disk fills up (ENOSPC from writes, SIGBUS from stores
// into a mapping the file system cannot back). It needs root and mount(8):
// without them the test is skipped, except under CI=true, where it fails
// (CI runs as root).
package smalldisk

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Mount mounts a tmpfs of sizeMiB MiB on a fresh directory under
// t.TempDir and unmounts it at cleanup.
func Mount(t testing.TB, sizeMiB int) string {
	t.Helper()
	dir, err := TryMount(t, sizeMiB)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return dir
}

// TryMount is Mount returning the failure to mount (no root, no
// mount(8)) instead of skipping, for a test that runs on without the
// small disk.
func TryMount(t testing.TB, sizeMiB int) (string, error) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "smalldisk")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", sizeMiB), "tmpfs", dir).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("cannot mount a %d MiB tmpfs (needs root): %v: %s", sizeMiB, err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir, nil
}

// Fill writes path until the file system is full (ENOSPC) and returns the
// bytes written. Remove the file to free the space again.
func Fill(t testing.TB, path string) int64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = byte(i) | 1
	}
	var n int64
	for chunk := len(buf); chunk > 0; {
		k, err := f.Write(buf[:chunk])
		n += int64(k)
		if err != nil {
			chunk /= 2 // fill the last pages too
		}
	}
	return n
}
