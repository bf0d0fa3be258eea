package metadata

import (
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestStateScripts replays the scripts under testdata/state: each command
// plans a request against the image, prints the planned records and the
// result, and applies the records. Regenerate with -rewrite.
func TestStateScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/state", func(t *testing.T, path string) {
		h := newHarness()
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			return h.run(t, td)
		})
	})
}
