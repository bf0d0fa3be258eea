package controller

import (
	"runtime"
	"strings"
	"testing"
)

// TestControllerCloseLeavesNoGoroutines: a TCP cluster with a client, a
// forwarded request and open watches, once closed, leaves no goroutine of
// this package behind (every goroutine has an owner that stops it).
func TestControllerCloseLeavesNoGoroutines(t *testing.T) {
	leaked := func() []string {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var out []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "strata/controller.") && !strings.Contains(g, "TestControllerCloseLeavesNoGoroutines") &&
				!strings.Contains(g, "testing.tRunner") {
				out = append(out, g)
			}
		}
		return out
	}
	func() {
		c := newCtrlCluster(t, clusterOpts{n: 3, tcp: true, disk: true})
		lead := c.leader()
		f := c.follower()
		cl := NewClient(ClientOptions{Addrs: []string{f.Addr()}})
		registerBrokers(t, cl, 1, 0)
		w1, err := cl.Watch(ctx(t), 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w1.Next(ctx(t)); err != nil {
			t.Fatal(err)
		}
		w2, err := lead.Watch(ctx(t), 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w2.Next(ctx(t)); err != nil {
			t.Fatal(err)
		}
		w1.Close()
		w2.Close()
		cl.Close()
		for id := range c.ctrls {
			c.stop(id)
		}
	}()
	var left []string
	if !waitFor(testWait, func() bool { left = leaked(); return len(left) == 0 }) {
		t.Fatalf("%d goroutines left after Close:\n%s", len(left), strings.Join(left, "\n\n"))
	}
}
