package broker

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestConnLimitsDecisions(t *testing.T) {
	ov, err := parseConnOverrides("127.0.0.1:1, [::1]:0, db.local:7", func(h string) ([]string, error) {
		if h == "db.local" {
			return []string{"10.0.0.7", "fd00::7"}, nil
		}
		return nil, errors.New("no such host")
	})
	if err != nil {
		t.Fatal(err)
	}
	l := connLimits{Max: 3, PerIP: 2, Overrides: ov}
	for _, c := range []struct {
		ip   string
		have int
		want bool
	}{
		{"10.0.0.1", 0, true}, {"10.0.0.1", 1, true}, {"10.0.0.1", 2, false},
		{"127.0.0.1", 0, true}, {"127.0.0.1", 1, false},
		{"::1", 0, false},
		{"10.0.0.7", 6, true}, {"10.0.0.7", 7, false}, {"fd00::7", 6, true},
	} {
		if got := l.admitIP(c.ip, c.have); got != c.want {
			t.Errorf("admitIP(%s, %d) = %v, want %v", c.ip, c.have, got, c.want)
		}
	}
	if !l.slotFree(2) || l.slotFree(3) {
		t.Error("slotFree: want free below max.connections only")
	}
	for _, bad := range []string{"127.0.0.1", "127.0.0.1:x", "127.0.0.1:-1", "nowhere:1", ":3"} {
		if _, err := parseConnOverrides(bad, func(string) ([]string, error) { return nil, errors.New("no such host") }); err == nil {
			t.Errorf("override %q accepted", bad)
		}
	}
	if _, err := ParseConfig(map[string]string{"max.connections.per.ip": "0"}); err == nil {
		t.Error("max.connections.per.ip=0 without overrides accepted")
	}
}

// answers reports whether c answers an ApiVersions within d.
func answers(c *rawConn, d time.Duration) bool {
	c.nc.SetReadDeadline(time.Now().Add(d))
	defer c.nc.SetReadDeadline(time.Now().Add(testWait))
	c.send(kmsg.NewPtrApiVersionsRequest())
	_, _, err := c.readFrame()
	return err == nil
}

// TestMaxConnectionsPerIP: a connection beyond max.connections.per.ip
// (here an override for 127.0.0.1) is closed at once; once one closes, a
// new one is served.
func TestMaxConnectionsPerIP(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"max.connections.per.ip.overrides": "127.0.0.1:2"})
	a, b := dialRaw(t, n), dialRaw(t, n)
	if !answers(a, testWait) || !answers(b, testWait) {
		t.Fatal("connections within the limit not served")
	}
	c := dialRaw(t, n)
	c.expectClosed()
	a.nc.Close()
	eventually(t, "a new connection served after one closed", func() bool {
		d := dialRaw(t, n)
		defer d.nc.Close()
		return answers(d, time.Second)
	})
}

// TestMaxConnections: at max.connections the listener accepts nothing
// more: a third connection is not served (it waits in the backlog) until
// one of the two closes, then it is.
func TestMaxConnections(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"max.connections": "2"})
	a, b := dialRaw(t, n), dialRaw(t, n)
	if !answers(a, testWait) || !answers(b, testWait) {
		t.Fatal("connections within the limit not served")
	}
	c := dialRaw(t, n)
	c.nc.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	c.send(kmsg.NewPtrApiVersionsRequest())
	if _, _, err := c.readFrame(); err == nil {
		t.Fatal("a connection beyond max.connections was served")
	} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("connection beyond max.connections: %v, want it held unserved", err)
	}
	b.nc.Close()
	c.nc.SetReadDeadline(time.Now().Add(testWait))
	if _, _, err := c.readFrame(); err != nil {
		t.Fatalf("held connection not served once a slot freed: %v", err)
	}
}

// TestConnectionCreationRate (KIP-612): with connection_creation_rate 2
// for 127.0.0.1 (2 windows of 1 s) two new connections are served, a
// third at once is not, and is closed after its throttle (500 ms).
func TestConnectionCreationRate(t *testing.T) {
	n := startNode(t, t.TempDir(), map[string]string{"quota.window.num": "2"})
	setQuota(t, newAdmin(t, n), "ip=127.0.0.1", "connection_creation_rate", 2)
	// The admin client's connection(s) counted too: wait for the window
	// to be free again.
	eventually(t, "a connection served", func() bool {
		c := dialRaw(t, n)
		defer c.nc.Close()
		return answers(c, time.Second)
	})
	start := time.Now()
	var served, refused int
	var closedAfter time.Duration
	for range 4 {
		c := dialRaw(t, n)
		if answers(c, 300*time.Millisecond) {
			served++
			continue
		}
		refused++
		c.nc.SetReadDeadline(time.Now().Add(testWait))
		if _, _, err := c.readFrame(); err == nil {
			t.Fatal("a throttled connection was answered")
		}
		closedAfter = time.Since(start)
		break
	}
	if refused != 1 || served > 2 {
		t.Fatalf("%d connections served before one was refused", served)
	}
	if closedAfter > 2*time.Second {
		t.Errorf("throttled connection closed after %v, want about its throttle", closedAfter)
	}
	if got := counterValue(t, n.metrics.quotaThrottled.WithLabelValues("connection")); got == 0 {
		t.Error("no throttle counted for type=connection")
	}
}
