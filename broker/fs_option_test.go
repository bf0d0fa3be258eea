package broker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-io/strata/storage"
	"github.com/strata-io/strata/storage/vfs"
)

// TestNodeDataDirOnMemFS: Options.FS puts every file of a broker's data
// dir on the given file system (the seam the page-cache-loss fault tests
// use): with broker 2 on a MemFS, its meta.properties, producer ids and
// partition logs are there and none is on the OS; restarted on a crash
// clone that keeps every unsynced byte, it serves every record.
func TestNodeDataDirOnMemFS(t *testing.T) {
	c := startMemCluster(t, 2, nil, 2)
	cl := c.client()
	const topic, n = "onmem", 200
	createAssigned(t, cl, topic, nil, []int32{2})
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%03d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	mem := c.fss[2].(*vfs.MemFS)
	dir := c.dirs[2]
	for _, f := range []string{storage.MetaPropertiesFile, filepath.Join(topic+"-0", "00000000000000000000.log")} {
		if _, err := mem.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("%s not on the MemFS: %v", f, err)
		}
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Fatalf("%s on the OS", f)
		}
	}
	// The tier's object store and remote-read cache (objects/,
	// remote-cache/) are tiering's, on the OS by their own options.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != "objects" && e.Name() != "remote-cache" {
			t.Fatalf("broker 2 wrote %s on the OS", e.Name())
		}
	}

	c.crash(2, 100, rand.New(rand.NewPCG(1, 1)))
	c.start(2)
	consumer := c.client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	for got := 0; got < n; {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d after the crash", got, n)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if want := fmt.Sprintf("v%03d", r.Offset); string(r.Value) != want {
				t.Fatalf("offset %d holds %q, want %q", r.Offset, r.Value, want)
			}
			got++
		})
	}
}
