package txncoord

import (
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestCoordinatorScripts replays the scripts under testdata/scripts: each command
// plays a client request, an append or marker acknowledgement, a timer or a
// failover against a Coordinator and prints what it asked of the broker.
// Regenerate with -rewrite.
func TestCoordinatorScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/scripts", func(t *testing.T, path string) {
		h := newHarness(Config{Partitions: 1})
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			return h.run(t, td)
		})
	})
}
