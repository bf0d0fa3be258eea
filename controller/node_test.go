package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestNodeSingleVoterCommits(t *testing.T) {
	c := newNodeCluster(t, 1, 1000)
	lead := c.leader()
	for i := range 10 {
		c.propose(fmt.Sprint("e", i))
	}
	if got := c.fsms[lead].entries(); len(got) != 10 || got[9] != "e9" {
		t.Fatalf("applied %v", got)
	}
}

func TestNodeFollowerProposeRefused(t *testing.T) {
	c := newNodeCluster(t, 3, 1000)
	lead := c.leader()
	for id, n := range c.nodes {
		if id == lead {
			continue
		}
		if _, err := n.Propose(context.Background(), []byte("x")); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("follower %d propose: %v, want ErrNotLeader", id, err)
		}
	}
}

func TestNodeKillLeaderElectsNewLeaderKeepsCommitted(t *testing.T) {
	c := newNodeCluster(t, 3, 1000)
	var want []string
	for i := range 20 {
		p := fmt.Sprint("a", i)
		c.propose(p)
		want = append(want, p)
	}
	old := c.leader()
	start := time.Now()
	c.stop(old)
	lead := c.leader(old)
	// Election timeout is 10-20 ticks; allow a few of them.
	if el := time.Since(start); el > 10*testElectionTicks*testTick {
		t.Fatalf("new leader after %v", el)
	}
	for i := range 5 {
		p := fmt.Sprint("b", i)
		c.propose(p)
		want = append(want, p)
	}
	if got := c.fsms[lead].entries(); !slices.Equal(got, want) {
		t.Fatalf("new leader applied %v, want %v", got, want)
	}
	// The old leader comes back from its storage and catches up.
	c.start(old)
	if !waitFor(testWait, func() bool { return slices.Equal(c.fsms[old].entries(), want) }) {
		t.Fatalf("restarted node has %v", c.fsms[old].entries())
	}
}

func TestNodeMinorityCannotCommit(t *testing.T) {
	c := newNodeCluster(t, 3, 1000)
	lead := c.leader()
	c.propose("before")
	var others []uint64
	for _, id := range c.ids {
		if id != lead {
			others = append(others, id)
		}
	}
	c.net.Partition([]uint64{lead}, others)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_, err := c.nodes[lead].Propose(ctx, []byte("minority"))
	cancel()
	if err == nil {
		t.Fatal("isolated leader committed a proposal")
	}
	newLead := c.leaderAmong(others)
	ctx, cancel = context.WithTimeout(context.Background(), testWait)
	if _, err := c.nodes[newLead].Propose(ctx, []byte("majority")); err != nil {
		t.Fatalf("majority propose: %v", err)
	}
	cancel()
	c.net.Heal()
	if !waitFor(testWait, func() bool {
		return slices.Equal(c.fsms[lead].entries(), []string{"before", "majority"})
	}) {
		t.Fatalf("old leader applied %v", c.fsms[lead].entries())
	}
	for _, id := range c.ids {
		if slices.Contains(c.fsms[id].entries(), "minority") {
			t.Fatalf("node %d applied the minority's entry", id)
		}
	}
}

func TestNodeLaggingFollowerCatchesUpFromSnapshot(t *testing.T) {
	c := newNodeCluster(t, 3, 20)
	lead := c.leader()
	var down uint64
	for _, id := range c.ids {
		if id != lead {
			down = id
			break
		}
	}
	c.stop(down)
	var want []string
	for i := range 100 {
		p := fmt.Sprint("s", i)
		c.propose(p)
		want = append(want, p)
	}
	first, _ := c.storages[lead].FirstIndex()
	if first <= 2 {
		t.Fatalf("leader log not compacted: first index %d", first)
	}
	c.start(down)
	if !waitFor(testWait, func() bool { return slices.Equal(c.fsms[down].entries(), want) }) {
		t.Fatalf("lagging node has %d entries", len(c.fsms[down].entries()))
	}
	if c.nodes[down].snapIndex.Load() == 0 {
		t.Fatal("lagging node caught up without a snapshot")
	}
}
