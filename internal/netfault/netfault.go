// Package netfault is a fault-injecting TCP proxy for clusters on
// loopback: each node's listener sits behind a [Proxy], peers dial the
// proxy, and the [Network] the proxies belong to cuts, heals and delays
// links between nodes.
//
// A node is named by its IP. The "from" end of a link is the source IP
// of the connection the proxy accepts (every node dials from its own
// 127.0.0.x: the broker's dialContext, the controller's client and Raft
// transport with a local address set), the "to" end is the IP of the
// proxy's target. So nodes on 127.0.0.2, .3, .4 behind proxies on the
// same IPs are told apart with no cooperation beyond their source
// address.
//
// Cutting a link closes its open connections at once (both sockets), and
// new connections on it are either refused (accepted and reset at once,
// as a closed port looks) or blackholed (accepted, read and dropped,
// never forwarded nor answered, as a partition looks to TCP), by
// [Mode]. Healing lets new connections through; blackholed ones stay
// dead and are closed. A delay holds every chunk forwarded on a link for
// that long before writing it. A stall ([Network.Stall]) kills a link's
// open connections silently: they stay open at both ends but forward
// nothing ever again, as a connection looks whose path lost its state (a
// NAT or firewall entry dropped, a peer gone without a reset) — only a
// read deadline or a keepalive of the endpoints tells them.
//
// It owns no processes and knows nothing of Kafka. All methods are safe
// for concurrent use.
//
//	nw := netfault.New(netfault.Blackhole)
//	defer nw.Close()
//	p, _ := nw.Proxy("127.0.0.2:0", "127.0.0.2:9092") // node 127.0.0.2's listener
//	// peers are told p.Addr() (advertised.listeners)
//	nw.Isolate("127.0.0.2")                          // cut it from the other nodes, both ways
//	nw.Heal()
package netfault

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"sync"
	"time"
)

// Mode is what a cut link does with new connections.
type Mode int8

const (
	// Blackhole accepts and holds new connections without forwarding or
	// answering anything: dials succeed, requests time out.
	Blackhole Mode = iota
	// Refuse accepts and resets new connections at once: dials fail fast
	// (as from a port with no listener).
	Refuse
)

func (m Mode) String() string {
	if m == Refuse {
		return "refuse"
	}
	return "blackhole"
}

// ErrClosed is returned by [Network.Proxy] after [Network.Close].
var ErrClosed = errors.New("netfault: network closed")

type link struct{ from, to string }

// Network is a set of proxies sharing one table of link faults.
type Network struct {
	mode Mode

	// mu guards everything below.
	mu      sync.Mutex
	cuts    map[link]Mode
	delays  map[link]time.Duration
	proxies []*Proxy
	conns   map[*pconn]struct{}
	closed  bool
	wg      sync.WaitGroup // accept loops and connection pumps
}

// New returns a network whose [Network.Cut] uses mode.
func New(mode Mode) *Network {
	return &Network{mode: mode, cuts: map[link]Mode{}, delays: map[link]time.Duration{}, conns: map[*pconn]struct{}{}}
}

// Proxy is one listener forwarding to one target.
type Proxy struct {
	nw     *Network
	ln     net.Listener
	target string
	to     string // target's IP: the "to" end of its links

	// Counters, under nw.mu.
	accepted, forwarded, refused, blackholed int
}

// Stats are a proxy's connection counts so far.
type Stats struct {
	// Accepted counts every connection; Forwarded those that reached the
	// target; Refused and Blackholed those a cut link stopped at accept.
	Accepted, Forwarded, Refused, Blackholed int
}

// Proxy listens on listen (host:port, port 0 picks one) and forwards
// every connection to target (host:port; the host must be an IP).
func (nw *Network) Proxy(listen, target string) (*Proxy, error) {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return nil, fmt.Errorf("netfault: target %q: %w", target, err)
	}
	if net.ParseIP(host) == nil {
		return nil, fmt.Errorf("netfault: target %q: host is not an IP", target)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("netfault: listen: %w", err)
	}
	p := &Proxy{nw: nw, ln: ln, target: target, to: host}
	nw.mu.Lock()
	if nw.closed {
		nw.mu.Unlock()
		ln.Close()
		return nil, ErrClosed
	}
	nw.proxies = append(nw.proxies, p)
	nw.wg.Add(1)
	nw.mu.Unlock()
	go func() { defer nw.wg.Done(); p.acceptLoop() }()
	return p, nil
}

// Addr is the proxy's listening address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Stats returns the proxy's counts.
func (p *Proxy) Stats() Stats {
	p.nw.mu.Lock()
	defer p.nw.mu.Unlock()
	return Stats{Accepted: p.accepted, Forwarded: p.forwarded, Refused: p.refused, Blackholed: p.blackholed}
}

// pconn is one accepted connection and, once dialed, its upstream.
type pconn struct {
	l        link
	down, up net.Conn // up is nil until dialed
	dead     bool     // killed by a cut or Close; under nw.mu
	hole     bool     // blackholed at accept
	stalled  bool     // silently dead ([Network.Stall]); under nw.mu
}

func (c *pconn) closeLocked() {
	c.dead = true
	c.down.Close()
	if c.up != nil {
		c.up.Close()
	}
}

func (p *Proxy) acceptLoop() {
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		from := ""
		if a, ok := down.RemoteAddr().(*net.TCPAddr); ok {
			from = a.IP.String()
		}
		c := &pconn{l: link{from, p.to}, down: down}
		nw := p.nw
		nw.mu.Lock()
		p.accepted++
		if nw.closed {
			nw.mu.Unlock()
			down.Close()
			return
		}
		mode, cut := nw.cutLocked(c.l)
		switch {
		case cut && mode == Refuse:
			p.refused++
			nw.mu.Unlock()
			reset(down)
			continue
		case cut:
			p.blackholed++
			c.hole = true
		}
		nw.conns[c] = struct{}{}
		nw.wg.Add(1)
		nw.mu.Unlock()
		go func() { defer nw.wg.Done(); p.serve(c) }()
	}
}

// reset closes c with an RST (linger 0), as a refused connection looks.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

func (p *Proxy) serve(c *pconn) {
	nw := p.nw
	defer func() {
		nw.mu.Lock()
		c.closeLocked()
		delete(nw.conns, c)
		nw.mu.Unlock()
	}()
	if c.hole {
		io.Copy(io.Discard, c.down) // until the peer gives up, a heal or Close
		return
	}
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		reset(c.down)
		return
	}
	nw.mu.Lock()
	if c.dead { // cut while dialing
		nw.mu.Unlock()
		up.Close()
		return
	}
	c.up = up
	p.forwarded++
	nw.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { nw.pump(c, c.up, c.down, link{c.l.to, c.l.from}); done <- struct{}{} }()
	nw.pump(c, c.down, c.up, c.l)
	// One side finished: close both so the other pump ends too.
	nw.mu.Lock()
	c.closeLocked()
	nw.mu.Unlock()
	<-done
}

// pump copies src to dst, holding each chunk for the delay of l; once c
// is stalled, chunks are read and dropped.
func (nw *Network) pump(c *pconn, dst, src net.Conn, l link) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			nw.mu.Lock()
			d, stalled := nw.delays[l], c.stalled
			nw.mu.Unlock()
			if d > 0 && !stalled {
				time.Sleep(d)
			}
			if stalled {
				continue
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// cutLocked says whether l is cut, by its own entry or a wildcard one
// ([Network.CutAll]), and how.
func (nw *Network) cutLocked(l link) (Mode, bool) {
	for _, k := range []link{l, {"*", l.to}, {l.from, "*"}} {
		if m, ok := nw.cuts[k]; ok {
			return m, true
		}
	}
	return 0, false
}

// Cut cuts the link from → to (IPs) in the network's mode: its open
// connections are closed, new ones refused or blackholed. One direction
// only: a connection's direction is who dialed whom; [Network.Partition]
// cuts both.
func (nw *Network) Cut(from, to string) { nw.CutMode(from, to, nw.mode) }

// CutMode is [Network.Cut] with mode for this link.
func (nw *Network) CutMode(from, to string, mode Mode) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.cutLinkLocked(link{from, to}, mode, false)
}

// cutLinkLocked cuts l in mode; its open connections are closed, or with
// silently stalled ([Network.Stall]).
func (nw *Network) cutLinkLocked(l link, mode Mode, silently bool) {
	nw.cuts[l] = mode
	for c := range nw.conns {
		if c.l != l {
			continue
		}
		if silently {
			c.stalled = true
		} else {
			c.closeLocked()
		}
	}
}

// Partition cuts a → b and b → a.
func (nw *Network) Partition(a, b string) {
	nw.Cut(a, b)
	nw.Cut(b, a)
}

// Isolate partitions ip from every other IP a proxy of the network
// targets (the other nodes), both ways; clients dialing from elsewhere
// (127.0.0.1) still reach it. [Network.CutAll] cuts those too.
func (nw *Network) Isolate(ip string) { nw.isolate(ip, false) }

// IsolateSilently is [Network.Isolate] as a firewall dropping packets
// (iptables DROP) does it: the open connections are not closed but
// stalled ([Network.Stall]), so only the endpoints' own deadlines and
// keepalives tell them, and they stay dead after the heal; new
// connections are blackholed until then, whatever the network's mode.
func (nw *Network) IsolateSilently(ip string) { nw.isolate(ip, true) }

func (nw *Network) isolate(ip string, silently bool) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	peers := map[string]bool{}
	for _, p := range nw.proxies {
		peers[p.to] = true
	}
	delete(peers, ip)
	mode := nw.mode
	if silently {
		mode = Blackhole
	}
	for _, o := range sortedKeys(peers) {
		nw.cutLinkLocked(link{ip, o}, mode, silently)
		nw.cutLinkLocked(link{o, ip}, mode, silently)
	}
}

// CutAll cuts every connection to ip's proxies whatever its source,
// present and future (a wildcard "from"), and every connection from ip.
func (nw *Network) CutAll(ip string) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.cuts[link{"*", ip}] = nw.mode
	nw.cuts[link{ip, "*"}] = nw.mode
	for c := range nw.conns {
		if c.l.to == ip || c.l.from == ip {
			c.closeLocked()
		}
	}
}

// Stall silently kills the open connections of from → to (IPs, who
// dialed whom): from now on they forward nothing, either way, and stay
// open until an endpoint closes them or [Network.Close]; nothing tells
// the endpoints (no FIN, no reset), and a heal does not revive them. New
// connections on the link are not affected: a stall is not a cut.
func (nw *Network) Stall(from, to string) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	l := link{from, to}
	for c := range nw.conns {
		if c.l == l {
			c.stalled = true
		}
	}
}

// Heal removes every cut and delay; blackholed connections are closed
// (their peers saw a dead connection, as after a real partition).
func (nw *Network) Heal() {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	nw.cuts = map[link]Mode{}
	nw.delays = map[link]time.Duration{}
	for c := range nw.conns {
		if c.hole {
			c.closeLocked()
		}
	}
}

// HealLink removes the cut and delay of from → to (wildcards included
// only as set: CutAll's are healed by Heal).
func (nw *Network) HealLink(from, to string) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	l := link{from, to}
	delete(nw.cuts, l)
	delete(nw.delays, l)
	for c := range nw.conns {
		if c.hole && c.l == l {
			c.closeLocked()
		}
	}
}

// Delay holds every chunk on from → to for d, both directions of the
// link's connections (requests from → to and their answers); 0 removes it.
func (nw *Network) Delay(from, to string, d time.Duration) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	for _, l := range []link{{from, to}, {to, from}} {
		if d <= 0 {
			delete(nw.delays, l)
		} else {
			nw.delays[l] = d
		}
	}
}

// Close closes every proxy and connection and waits for their goroutines.
func (nw *Network) Close() error {
	nw.mu.Lock()
	nw.closed = true
	for _, p := range nw.proxies {
		p.ln.Close()
	}
	for c := range nw.conns {
		c.closeLocked()
	}
	nw.mu.Unlock()
	nw.wg.Wait()
	return nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
