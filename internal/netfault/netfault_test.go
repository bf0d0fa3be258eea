package netfault

import (
	"bufio"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-io/strata/internal/testutil"
)

const wait = 5 * time.Second

// echo is a target that echoes lines and counts its connections.
type echo struct {
	ln    net.Listener
	conns atomic.Int64
}

func startEcho(t *testing.T, addr string) *echo {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.conns.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return e
}

func newNet(t *testing.T, mode Mode) *Network {
	nw := New(mode)
	t.Cleanup(func() { nw.Close() })
	return nw
}

func proxy(t *testing.T, nw *Network, ip string, target string) *Proxy {
	t.Helper()
	p, err := nw.Proxy(ip+":0", target)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// dialFrom connects to addr from source IP ip.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: wait, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip sends a line and reads it back within timeout.
func roundTrip(c net.Conn, timeout time.Duration) error {
	c.SetDeadline(time.Now().Add(timeout))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return errors.New("bad echo " + line)
	}
	return nil
}

// closedWithin reports whether c is closed by the other end within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	return testutil.ClosedWithin(c, d) == nil
}

func TestProxyForwards(t *testing.T) {
	e := startEcho(t, "127.0.0.2:0")
	nw := newNet(t, Blackhole)
	p := proxy(t, nw, "127.0.0.2", e.ln.Addr().String())
	c := dialFrom(t, "127.0.0.3", p.Addr())
	for range 3 {
		if err := roundTrip(c, wait); err != nil {
			t.Fatal(err)
		}
	}
	if st := p.Stats(); st.Accepted != 1 || st.Forwarded != 1 || e.conns.Load() != 1 {
		t.Fatalf("stats %+v, target saw %d", st, e.conns.Load())
	}
}

// TestCutBlackholeKillsAndHoldsThenHeals: a cut closes the link's open
// connection, a new one is accepted but never reaches the target nor gets
// an answer, other sources still pass; a heal lets new connections through
// and closes the blackholed one.
func TestCutBlackholeKillsAndHoldsThenHeals(t *testing.T) {
	e := startEcho(t, "127.0.0.2:0")
	nw := newNet(t, Blackhole)
	p := proxy(t, nw, "127.0.0.2", e.ln.Addr().String())
	from3 := dialFrom(t, "127.0.0.3", p.Addr())
	from4 := dialFrom(t, "127.0.0.4", p.Addr())
	if err := roundTrip(from3, wait); err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(from4, wait); err != nil {
		t.Fatal(err)
	}

	nw.Cut("127.0.0.3", "127.0.0.2")
	if !closedWithin(from3, wait) {
		t.Fatal("open connection on the cut link not closed")
	}
	if err := roundTrip(from4, wait); err != nil {
		t.Fatalf("other source after the cut: %v", err)
	}
	before := e.conns.Load()
	held := dialFrom(t, "127.0.0.3", p.Addr()) // the dial succeeds
	if err := roundTrip(held, 300*time.Millisecond); err == nil {
		t.Fatal("blackholed connection answered")
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("blackholed connection: %v, want a timeout", err)
	}
	if got := e.conns.Load(); got != before {
		t.Fatalf("target saw %d connections during the cut, had %d", got, before)
	}
	if st := p.Stats(); st.Blackholed != 1 {
		t.Fatalf("stats %+v", st)
	}

	nw.Heal()
	if !closedWithin(held, wait) {
		t.Fatal("blackholed connection not closed by the heal")
	}
	if err := roundTrip(dialFrom(t, "127.0.0.3", p.Addr()), wait); err != nil {
		t.Fatalf("after heal: %v", err)
	}
}

// TestCutRefuseResetsNewConnections: in refuse mode a new connection on a
// cut link is reset at once.
func TestCutRefuseResetsNewConnections(t *testing.T) {
	e := startEcho(t, "127.0.0.2:0")
	nw := newNet(t, Refuse)
	p := proxy(t, nw, "127.0.0.2", e.ln.Addr().String())
	nw.Cut("127.0.0.3", "127.0.0.2")
	start := time.Now()
	d := net.Dialer{Timeout: wait, LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}
	c, err := d.Dial("tcp", p.Addr()) // may already see the reset
	if err == nil {
		defer c.Close()
		err = roundTrip(c, wait)
	}
	if err == nil {
		t.Fatal("refused connection answered")
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("refused connection timed out (%v), want a reset", err)
	}
	if time.Since(start) > wait/2 {
		t.Fatalf("refusal took %v", time.Since(start))
	}
	if st := p.Stats(); st.Refused != 1 || e.conns.Load() != 0 {
		t.Fatalf("stats %+v, target saw %d", st, e.conns.Load())
	}
	// One direction only: the proxy of .3 still takes connections from .2.
	e3 := startEcho(t, "127.0.0.3:0")
	p3 := proxy(t, nw, "127.0.0.3", e3.ln.Addr().String())
	if err := roundTrip(dialFrom(t, "127.0.0.2", p3.Addr()), wait); err != nil {
		t.Fatalf("reverse direction: %v", err)
	}
}

// TestPartitionAndIsolate: Partition cuts both directions; Isolate cuts a
// node from every other node's proxy and theirs from it, but not clients
// dialing from elsewhere; CutAll cuts those too.
func TestPartitionAndIsolate(t *testing.T) {
	nw := newNet(t, Refuse)
	ips := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
	px := map[string]*Proxy{}
	for _, ip := range ips {
		px[ip] = proxy(t, nw, ip, startEcho(t, ip+":0").ln.Addr().String())
	}
	ok := func(from, to string) bool {
		d := net.Dialer{Timeout: wait, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", px[to].Addr())
		if err != nil {
			return false
		}
		defer c.Close()
		return roundTrip(c, wait) == nil
	}
	nw.Partition("127.0.0.2", "127.0.0.3")
	if ok("127.0.0.2", "127.0.0.3") || ok("127.0.0.3", "127.0.0.2") {
		t.Fatal("partitioned pair still connects")
	}
	if !ok("127.0.0.2", "127.0.0.4") || !ok("127.0.0.4", "127.0.0.3") {
		t.Fatal("a link outside the partition is cut")
	}
	nw.Heal()
	if !ok("127.0.0.2", "127.0.0.3") {
		t.Fatal("not healed")
	}

	nw.Isolate("127.0.0.4")
	for _, o := range ips[:2] {
		if ok(o, "127.0.0.4") || ok("127.0.0.4", o) {
			t.Fatalf("isolated node still connects with %s", o)
		}
	}
	if !ok("127.0.0.1", "127.0.0.4") || !ok("127.0.0.2", "127.0.0.3") {
		t.Fatal("isolating one node cut a client or the others")
	}
	nw.CutAll("127.0.0.4")
	if ok("127.0.0.1", "127.0.0.4") {
		t.Fatal("CutAll left a client through")
	}
	if !ok("127.0.0.2", "127.0.0.3") {
		t.Fatal("CutAll cut other nodes")
	}
	nw.Heal()
	if !ok("127.0.0.1", "127.0.0.4") || !ok("127.0.0.4", "127.0.0.2") {
		t.Fatal("not healed after CutAll")
	}
}

func TestDelay(t *testing.T) {
	e := startEcho(t, "127.0.0.2:0")
	nw := newNet(t, Blackhole)
	p := proxy(t, nw, "127.0.0.2", e.ln.Addr().String())
	c := dialFrom(t, "127.0.0.3", p.Addr())
	const d = 100 * time.Millisecond
	nw.Delay("127.0.0.3", "127.0.0.2", d)
	start := time.Now()
	if err := roundTrip(c, wait); err != nil {
		t.Fatal(err)
	}
	// The request and its answer are each held d.
	if rt := time.Since(start); rt < 2*d {
		t.Fatalf("round trip %v with a delay of %v each way", rt, d)
	}
	nw.Delay("127.0.0.3", "127.0.0.2", 0)
	start = time.Now()
	if err := roundTrip(c, wait); err != nil {
		t.Fatal(err)
	}
	if rt := time.Since(start); rt >= d {
		t.Fatalf("round trip %v after the delay was removed", rt)
	}
}

// TestStallKillsOpenConnectionsSilently: a stalled connection stays open
// at both ends but carries nothing either way, even after a heal; a new
// connection on the same link passes, and other links are untouched.
func TestStallKillsOpenConnectionsSilently(t *testing.T) {
	e := startEcho(t, "127.0.0.2:0")
	nw := newNet(t, Blackhole)
	p := proxy(t, nw, "127.0.0.2", e.ln.Addr().String())
	stalled := dialFrom(t, "127.0.0.3", p.Addr())
	other := dialFrom(t, "127.0.0.4", p.Addr())
	for _, c := range []net.Conn{stalled, other} {
		if err := roundTrip(c, wait); err != nil {
			t.Fatal(err)
		}
	}
	nw.Stall("127.0.0.3", "127.0.0.2")
	nw.Heal() // changes nothing for a stalled connection
	for range 2 {
		if err := roundTrip(stalled, 200*time.Millisecond); err == nil {
			t.Fatal("stalled connection answered")
		} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			t.Fatalf("stalled connection: %v, want a timeout (open, silent)", err)
		}
	}
	if err := roundTrip(other, wait); err != nil {
		t.Fatalf("other link after the stall: %v", err)
	}
	if err := roundTrip(dialFrom(t, "127.0.0.3", p.Addr()), wait); err != nil {
		t.Fatalf("new connection on the stalled link: %v", err)
	}
}

// TestIsolateSilentlyStallsOpenConnections: the isolated node's open
// connections stay open but dead, new ones are blackholed; after the
// heal new connections pass and the stalled ones stay dead.
func TestIsolateSilentlyStallsOpenConnections(t *testing.T) {
	e := startEcho(t, "127.0.0.2:0")
	nw := newNet(t, Refuse)
	p := proxy(t, nw, "127.0.0.2", e.ln.Addr().String())
	open := dialFrom(t, "127.0.0.3", p.Addr())
	if err := roundTrip(open, wait); err != nil {
		t.Fatal(err)
	}
	nw.IsolateSilently("127.0.0.3")
	if closedWithin(open, 200*time.Millisecond) {
		t.Fatal("open connection closed by a silent isolation")
	}
	if err := roundTrip(open, 200*time.Millisecond); err == nil {
		t.Fatal("stalled connection answered")
	}
	held := dialFrom(t, "127.0.0.3", p.Addr())
	if err := roundTrip(held, 200*time.Millisecond); err == nil {
		t.Fatal("new connection during the isolation answered")
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("new connection during the isolation: %v, want a timeout (blackholed, not refused)", err)
	}
	nw.Heal()
	if err := roundTrip(open, 200*time.Millisecond); err == nil {
		t.Fatal("stalled connection revived by the heal")
	}
	if err := roundTrip(dialFrom(t, "127.0.0.3", p.Addr()), wait); err != nil {
		t.Fatalf("new connection after the heal: %v", err)
	}
}

// TestCloseEndsEverything: Close closes open and blackholed connections
// and returns once every goroutine ended; new proxies are refused.
func TestCloseEndsEverything(t *testing.T) {
	e := startEcho(t, "127.0.0.2:0")
	nw := New(Blackhole)
	p := proxy(t, nw, "127.0.0.2", e.ln.Addr().String())
	open := dialFrom(t, "127.0.0.3", p.Addr())
	if err := roundTrip(open, wait); err != nil {
		t.Fatal(err)
	}
	nw.Cut("127.0.0.4", "127.0.0.2")
	held := dialFrom(t, "127.0.0.4", p.Addr())
	testutil.Eventually(t, wait, func() bool { return p.Stats().Blackholed == 1 }, "blackholed")
	closed := make(chan struct{})
	go func() { nw.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(wait):
		t.Fatal("Close did not return")
	}
	if !closedWithin(open, wait) || !closedWithin(held, wait) {
		t.Fatal("connections left open by Close")
	}
	if _, err := nw.Proxy("127.0.0.2:0", e.ln.Addr().String()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Proxy after Close: %v", err)
	}
}
