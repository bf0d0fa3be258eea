package share

import "testing"

// TestPartitionHolds: a member holds a record from its acquisition until it
// is acknowledged or released; another member never holds it.
func TestPartitionHolds(t *testing.T) {
	p := New(DefaultConfig(), 0)
	if p.Holds("a") {
		t.Fatal("empty partition: a holds a record")
	}
	if acq := p.Acquire("a", []Batch{{0, 9}}, 10, BatchOptimized, 1); len(acq) == 0 {
		t.Fatal("nothing acquired")
	}
	if !p.Holds("a") || p.Holds("b") {
		t.Fatalf("after a's acquisition: Holds(a)=%v Holds(b)=%v", p.Holds("a"), p.Holds("b"))
	}
	if err := p.Acknowledge("a", []AckBatch{{First: 0, Last: 4, Types: []AckType{AckAccept}}}, 2); err != nil {
		t.Fatal(err)
	}
	if !p.Holds("a") {
		t.Fatal("a acknowledged half: it still holds 5..9")
	}
	if n := p.ReleaseMember("a", 3); n != 5 {
		t.Fatalf("released %d, want 5", n)
	}
	if p.Holds("a") {
		t.Fatal("a released everything yet holds a record")
	}
}
