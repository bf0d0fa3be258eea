package broker

// Connection limits, as Kafka's ConnectionQuotas:
//
//   - max.connections.per.ip (and its max.connections.per.ip.overrides,
//     host:count,...): a new connection from an address already holding
//     its limit is closed at once, after the accept.
//   - max.connections: the broker-wide bound on client connections. At the
//     bound the listener stops accepting (new connections wait in the
//     kernel's backlog, unserved) until one closes. The inter-broker
//     listener is exempt when there are other client listeners (Kafka's
//     protected listener; Kafka also closes the least recently used
//     connection of another listener then, which Strata does not).
//
// The CONTROLLER listener is the controller's and not counted. The
// decisions are connLimits' pure methods; connCounts holds the counts.
//
//   - connection_creation_rate of an ip entity (KIP-612; the address's own,
//     else the default ip entity's): a new connection over the rate is not
//     counted, not served, and closed once its throttle has passed.
//
// Differences from Kafka: no listener.name.<l>.max.connections, no
// broker-wide max.connection.creation.rate; an override's host name is
// resolved once, at start.

import (
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-io/strata/broker/quota"
	"github.com/strata-io/strata/controller/metadata"
)

// connLimits are the configured limits.
type connLimits struct {
	Max       int            // max.connections
	PerIP     int            // max.connections.per.ip
	Overrides map[string]int // by IP address: max.connections.per.ip.overrides
}

// limitFor is the most connections ip may hold.
func (l connLimits) limitFor(ip string) int {
	if n, ok := l.Overrides[ip]; ok {
		return n
	}
	return l.PerIP
}

// admitIP reports whether a new connection from ip, which holds have
// already, is kept.
func (l connLimits) admitIP(ip string, have int) bool { return have < l.limitFor(ip) }

// slotFree reports whether a listener counted against max.connections may
// accept while total client connections are open.
func (l connLimits) slotFree(total int) bool { return total < l.Max }

// parseConnOverrides reads max.connections.per.ip.overrides: host:count
// pairs, comma-separated; a host name is resolved with resolve (every
// address it has gets the count).
func parseConnOverrides(v string, resolve func(string) ([]string, error)) (map[string]int, error) {
	out := map[string]int{}
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		i := strings.LastIndexByte(part, ':')
		if i <= 0 {
			return nil, fmt.Errorf("%q: want host:count", part)
		}
		host, count := strings.Trim(part[:i], "[]"), part[i+1:]
		n, err := strconv.Atoi(count)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q: count is not a non-negative integer", part)
		}
		addrs := []string{host}
		if ip := net.ParseIP(host); ip != nil {
			addrs = []string{ip.String()}
		} else if addrs, err = resolve(host); err != nil {
			return nil, fmt.Errorf("%q: %v", part, err)
		}
		for _, a := range addrs {
			if ip := net.ParseIP(a); ip != nil {
				a = ip.String()
			}
			out[a] = n
		}
	}
	return out, nil
}

// connCounts are the node's open client connections, in all and by
// address.
type connCounts struct {
	limits connLimits

	mu      sync.Mutex
	total   int
	byIP    map[string]int
	changed chan struct{} // closed and replaced whenever total falls
}

func newConnCounts(l connLimits) *connCounts {
	return &connCounts{limits: l, byIP: map[string]int{}, changed: make(chan struct{})}
}

// waitSlot returns once a counted listener may accept, or done closes
// (false).
func (c *connCounts) waitSlot(done <-chan struct{}) bool {
	for {
		c.mu.Lock()
		free, ch := c.limits.slotFree(c.total), c.changed
		c.mu.Unlock()
		if free {
			return true
		}
		select {
		case <-ch:
		case <-done:
			return false
		}
	}
}

// open counts a new connection from ip; false (nothing counted) when ip
// holds its limit: the caller closes it.
func (c *connCounts) open(ip string, counted bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.limits.admitIP(ip, c.byIP[ip]) {
		return false
	}
	c.byIP[ip]++
	if counted {
		c.total++
	}
	return true
}

// close uncounts a connection open admitted.
func (c *connCounts) close(ip string, counted bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byIP[ip]--; c.byIP[ip] <= 0 {
		delete(c.byIP, ip)
	}
	if counted {
		c.total--
		close(c.changed)
		c.changed = make(chan struct{})
	}
}

// remoteIP is a connection's peer address as the limits key it.
func remoteIP(nc net.Conn) string {
	a := nc.RemoteAddr().String()
	h, _, err := net.SplitHostPort(a)
	if err != nil {
		return a
	}
	if ip := net.ParseIP(h); ip != nil {
		return ip.String()
	}
	return h
}

// maxConnDefault is Kafka's default of both limits (Int.MaxValue).
const maxConnDefault = math.MaxInt32

// countedListener reports whether max.connections counts and bounds the
// listener: every client listener, but the inter-broker one when there
// are others (Kafka's protected listener).
func (n *Node) countedListener(name string) bool {
	if len(n.lnNames) < 2 {
		return true
	}
	ib, ok := n.cfg.interBrokerListener()
	return !ok || ib.Name != name
}

// connectionThrottled applies the connection_creation_rate of ip to a new
// connection: over it, nc is closed after the throttle and true returned.
func (n *Node) connectionThrottled(nc net.Conn, ip string) bool {
	t := n.quotaTab.Load()
	if t == nil || !t.has[metadata.QuotaConnectionCreationRate] {
		return false
	}
	d := n.quotas.RecordConnection(t.lookup, ip, time.Now())
	if d.Throttle <= 0 {
		return false
	}
	n.metrics.quotaThrottle(quota.Connection, d.Throttle)
	n.logger.Debug("broker: connection throttled: connection_creation_rate", "remote", ip, "throttle", d.Throttle)
	time.AfterFunc(d.Throttle, func() { nc.Close() })
	return true
}
