package controller

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/controller/metadata"
)

// FuzzDecodeEntry: for any bytes, decodeEntry never panics; whatever
// encodeEntry writes decodes to the same ids and payload.
func FuzzDecodeEntry(f *testing.F) {
	f.Add(uint64(1), uint64(42), []byte("payload"), []byte{1, 2})
	f.Add(uint64(0), uint64(0), []byte{}, []byte{})
	f.Add(uint64(1<<63), uint64(1<<62), []byte{0xff}, []byte{1, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, node, id uint64, payload, garbage []byte) {
		decodeEntry(garbage) // must not panic
		n, i, p, err := decodeEntry(encodeEntry(node, id, payload))
		if err != nil || n != node || i != id || !bytes.Equal(p, payload) {
			t.Fatalf("round trip: %d %d %q %v", n, i, p, err)
		}
	})
}

// FuzzReadFrame: for any bytes, readFrame never panics and never returns a
// payload longer than the stream; a written frame reads back unchanged.
func FuzzReadFrame(f *testing.F) {
	f.Add(byte(3), []byte("{}"), []byte{0, 0, 0, 1, 4})
	f.Add(byte(2), []byte{}, []byte{0xff, 0xff, 0xff, 0xff, 1})
	f.Fuzz(func(t *testing.T, kind byte, payload, garbage []byte) {
		k, p, err := readFrame(bufio.NewReader(bytes.NewReader(garbage)))
		if err == nil && len(p)+5 > len(garbage) {
			t.Fatalf("payload of %d from %d bytes (kind %d)", len(p), len(garbage), k)
		}
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		if err := writeFrame(w, kind, payload); err != nil {
			t.Fatal(err)
		}
		w.Flush()
		k, p, err = readFrame(bufio.NewReader(&buf))
		if err != nil || k != kind || !bytes.Equal(p, payload) {
			t.Fatalf("round trip: %d %q %v", k, p, err)
		}
	})
}

func TestWireErrorsKeepTheirKafkaCode(t *testing.T) {
	for _, err := range []error{kerr.TopicAlreadyExists, kerr.InvalidReplicationFactor, kerr.StaleBrokerEpoch} {
		got := fromWireErr(toWireErr(err))
		if !errors.Is(got, err) {
			t.Fatalf("%v became %v", err, got)
		}
	}
	nc := fromWireErr(toWireErr(&NotControllerError{LeaderID: 3, LeaderAddr: "127.0.0.1:1"}))
	var got *NotControllerError
	if !errors.As(nc, &got) || got.LeaderID != 3 || got.LeaderAddr != "127.0.0.1:1" {
		t.Fatalf("NOT_CONTROLLER hint lost: %v", nc)
	}
	if !errors.Is(fromWireErr(toWireErr(ErrStopped)), ErrStopped) {
		t.Fatal("ErrStopped lost")
	}
	if fromWireErr(toWireErr(nil)) != nil {
		t.Fatal("nil error not nil")
	}
}

// TestListenerSurvivesGarbage: junk on the CONTROLLER listener closes that
// connection only; the controller keeps serving.
func TestListenerSurvivesGarbage(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 1})
	ctl := c.leader()
	for _, junk := range [][]byte{
		{0xff, 0xff, 0xff, 0xff, 3},          // oversized frame
		{0, 0, 0, 0},                         // zero length
		{0, 0, 0, 3, kindRequest, 200, 0},    // unknown method
		{0, 0, 0, 4, kindRequest, 1, 0, '{'}, // bad JSON
		{0, 0, 0, 3, kindRaftHello, 0xff, 0xff},
		{0, 0, 0, 2, 99, 0},
	} {
		conn, err := net.Dial("tcp", ctl.Addr())
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(testWait))
		conn.Write(junk)
		conn.(*net.TCPConn).CloseWrite() // the server sees EOF after the junk
		// Read whatever answer (an error response) or EOF.
		buf := make([]byte, 4096)
		conn.Read(buf)
		conn.Close()
	}
	registerBrokers(t, ctl, 1, 0)
	if _, ok := ctl.State().Broker(101); !ok {
		t.Fatal("controller stopped serving after garbage")
	}
}

// TestClientMovesOnFromAStoppingController: a controller answering "stopped"
// (it is shutting down) sends the client to the next address instead of
// failing the call.
func TestClientMovesOnFromAStoppingController(t *testing.T) {
	c := newCtrlCluster(t, clusterOpts{n: 1})
	real := c.leader()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer func() { ln.Close(); wg.Wait() }()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			br, bw := bufio.NewReader(conn), bufio.NewWriter(conn)
			if _, _, err := readFrame(br); err == nil {
				b, _ := json.Marshal(response{Err: toWireErr(ErrStopped)})
				writeFrame(bw, kindResponse, b)
				bw.Flush()
			}
			conn.Close()
		}
	}()
	cl := NewClient(ClientOptions{Addrs: []string{ln.Addr().String(), real.Addr()}, RetryBackoff: time.Millisecond})
	defer cl.Close()
	registerBrokers(t, cl, 1, 0)
	cl.Close()
	if _, err := cl.BrokerHeartbeat(ctx(t), metadata.BrokerHeartbeatRequest{BrokerID: 101}); !errors.Is(err, ErrStopped) {
		t.Fatalf("call on a closed client: %v, want ErrStopped", err)
	}
}

// FuzzClientHello: a client hello decodes to the cluster id it was made
// with; any other payload decodes to some id or an error, never a panic.
func FuzzClientHello(f *testing.F) {
	f.Add([]byte{}, "")
	f.Add(appendClientHello(nil, "MkU3OEVBNTcwNTJENDM2Qg"), "x")
	f.Add([]byte{1, 200}, "")
	f.Add([]byte{0, 1, 'a'}, "")
	f.Fuzz(func(t *testing.T, b []byte, id string) {
		decodeClientHello(b)
		got, err := decodeClientHello(appendClientHello(nil, id))
		if err != nil || got != id {
			t.Fatalf("round trip of %q: %q %v", id, got, err)
		}
	})
}
