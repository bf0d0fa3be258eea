package storage

import (
	"os"
	"testing"
)

// The package's tests run rolls' fsyncs deterministically (deferRollSync);
// the tests of the syncer goroutine itself turn it back on per log.
func TestMain(m *testing.M) {
	deferRollSync = true
	os.Exit(m.Run())
}
