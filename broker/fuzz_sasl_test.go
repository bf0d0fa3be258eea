package broker

// FuzzSASL: the exchange before authentication on a SASL_PLAINTEXT
// listener (PLAIN and OAUTHBEARER), through the same in-process harness as
// FuzzRequest (fuzz_test.go).
//
//	go test ./broker -run '^$' -fuzz '^FuzzSASL$' -fuzztime 60s
//
// The seed corpus under testdata/fuzz/FuzzSASL is hand-built exchanges
// (STRATA_TEST_WRITE_FUZZ_SEEDS=1 go test ./broker -run TestFuzzSASLSeeds
// rewrites it); plain `go test` replays it.

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startSASLFuzzNode is startFuzzNode with a SASL_PLAINTEXT listener.
func startSASLFuzzNode(tb testing.TB) *fuzzNode {
	tb.Helper()
	w := &panicWatch{}
	cfg := testConfig(tb, tb.TempDir(), map[string]string{
		"listeners":                    "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"inter.broker.listener.name":   "PLAINTEXT",
		"sasl.enabled.mechanisms":      "PLAIN,OAUTHBEARER",
		"sasl.jaas.config":             plainJAAS,
		"auto.create.topics.enable":    "false",
		"socket.request.max.bytes":     "1048576",
		"sasl.server.max.receive.size": "65536",
		"queued.max.requests":          "16",
	})
	n, err := Open(Options{Config: cfg, Logger: slog.New(w), StartTimeout: testWait})
	if err != nil {
		tb.Fatalf("open node: %v", err)
	}
	tb.Cleanup(func() { n.Close() })
	createTopic(tb, newAdmin(tb, n), "fuzz", 1, nil)
	cl := newClient(tb, n)
	if err := cl.ProduceSync(testCtx(tb), &kgo.Record{Topic: "fuzz", Value: []byte("seed")}).FirstErr(); err != nil {
		tb.Fatal(err)
	}
	return &fuzzNode{n: n, watch: w, budget: 300 * time.Millisecond}
}

// verifySASL serves input on the SASL listener and checks, besides no
// panic and whole, ordered, decodable responses:
//
//   - before a SaslAuthenticate answered without error and without a
//     challenge (a finished exchange), only ApiVersions, SaslHandshake and
//     SaslAuthenticate are answered;
//   - after a failed SaslHandshake or SaslAuthenticate nothing more is
//     answered, and the connection is closed;
//   - an unauthenticated connection changes no log;
//   - the node still answers ApiVersions on a new connection.
//
// Inputs holding a cluster-mutating request after a SaslAuthenticate are
// only decoded (they could run once authenticated; see clusterMutatingKeys).
func (fz *fuzzNode) verifySASL(input []byte) error {
	frames := splitFrames(input)
	seenAuth := false
	for _, f := range frames {
		seenAuth = seenAuth || f.key == saslAuthenticateKey
		if seenAuth && clusterMutatingKeys[f.key] && decodeRequestFrame(f.body) != nil {
			return nil
		}
	}
	before := logState(fz.n)
	panics := fz.watch.n.Load()
	s := serveBytesOn(fz.n, "SASL_PLAINTEXT", input, fz.budget)
	if fz.watch.n.Load() != panics {
		fz.watch.mu.Lock()
		defer fz.watch.mu.Unlock()
		return fmt.Errorf("panic on input %q: %s", input, fz.watch.last)
	}
	out, fi := s.out, 0
	authed, failed := false, false
	for len(out) > 0 {
		if len(out) < 8 {
			return fmt.Errorf("%d trailing response bytes", len(out))
		}
		size := int(binary.BigEndian.Uint32(out))
		if size < 4 || size > len(out)-4 {
			return fmt.Errorf("response frame size %d with %d bytes left", size, len(out)-4)
		}
		corr, body := int32(binary.BigEndian.Uint32(out[4:])), out[8:4+size]
		out = out[4+size:]
		for fi < len(frames) && frames[fi].corr != corr {
			fi++
		}
		if fi == len(frames) {
			return fmt.Errorf("response with correlation id %d matches no request in order", corr)
		}
		f := frames[fi]
		fi++
		if failed {
			return fmt.Errorf("%s answered after a failed SASL step", kmsg.NameForKey(f.key))
		}
		req := decodeRequestFrame(f.body)
		if req == nil {
			if f.key == apiVersionsKey {
				continue // KIP-511 fallback
			}
			return fmt.Errorf("a response to an undecodable request (key %d v%d)", f.key, f.version)
		}
		switch f.key {
		case apiVersionsKey, saslHandshakeKey, saslAuthenticateKey:
		default:
			if !authed {
				return fmt.Errorf("%s answered before authentication", kmsg.NameForKey(f.key))
			}
		}
		resp := req.ResponseKind()
		resp.SetVersion(req.GetVersion())
		if req.IsFlexible() && req.Key() != apiVersionsKey {
			body = body[1:]
		}
		if err := resp.ReadFrom(body); err != nil {
			return fmt.Errorf("%s v%d response does not decode: %v", kmsg.NameForKey(f.key), f.version, err)
		}
		switch r := resp.(type) {
		case *kmsg.SASLHandshakeResponse:
			failed = r.ErrorCode != 0 && fz.n.saslLns["SASL_PLAINTEXT"] != nil
		case *kmsg.SASLAuthenticateResponse:
			failed = r.ErrorCode != 0
			authed = authed || (r.ErrorCode == 0 && len(r.SASLAuthBytes) == 0)
		}
	}
	if failed && !s.closed {
		return fmt.Errorf("connection left open after a failed SASL step")
	}
	if !authed {
		after := logState(fz.n)
		for k, b := range before {
			if after[k] != b {
				return fmt.Errorf("partition %v changed on an unauthenticated connection: %v -> %v", k, b, after[k])
			}
		}
	}
	if p := serveBytes(fz.n, apiVersionsProbe, testWait); p.closed || len(p.out) < 8 {
		return fmt.Errorf("node no longer answers ApiVersions")
	}
	return nil
}

// FuzzSASL feeds arbitrary bytes to a SASL listener connection.
// Invariants: see verifySASL.
func FuzzSASL(f *testing.F) {
	fz := startSASLFuzzNode(f)
	f.Fuzz(func(t *testing.T, input []byte) {
		if err := fz.verifySASL(input); err != nil {
			t.Fatal(err)
		}
	})
}

// saslSeeds are exchanges the fuzzer starts from: good and bad PLAIN,
// OAUTHBEARER with an expired token (challenge, ^A, failure), an unknown
// mechanism, requests before authentication, a v0 handshake.
func saslSeeds() [][]byte {
	corr := int32(0)
	fr := func(r kmsg.Request, v int16) []byte {
		r.SetVersion(v)
		corr++
		return frameRequest(r, corr)
	}
	hs := func(mech string) []byte {
		r := kmsg.NewPtrSASLHandshakeRequest()
		r.Mechanism = mech
		return fr(r, 1)
	}
	au := func(b string, v int16) []byte {
		r := kmsg.NewPtrSASLAuthenticateRequest()
		r.SASLAuthBytes = []byte(b)
		return fr(r, v)
	}
	md := func() []byte { return fr(kmsg.NewPtrMetadataRequest(), 12) }
	prod := func() []byte {
		r := kmsg.NewPtrProduceRequest()
		r.Acks, r.TimeoutMillis = 1, 1000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "fuzz"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = []byte{}
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		return fr(r, 9)
	}
	cat := func(parts ...[]byte) []byte {
		var out []byte
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	expired := "n,,\x01auth=Bearer " + unsecuredJWS(`{"sub":"svc","exp":1000}`) + "\x01\x01"
	good := "n,,\x01auth=Bearer " + unsecuredJWS(`{"sub":"svc","exp":99999999999}`) + "\x01\x01"
	return [][]byte{
		cat(fr(kmsg.NewPtrApiVersionsRequest(), 3), hs("PLAIN"), au("\x00alice\x00alice-secret", 2), md()),
		cat(hs("PLAIN"), au("\x00alice\x00wrong", 2), md()),
		cat(hs("PLAIN"), au("alice\x00alice\x00alice-secret", 1), md(), hs("PLAIN"), au("\x00alice\x00alice-secret", 0)),
		cat(hs("OAUTHBEARER"), au(expired, 2), au("\x01", 2), md()),
		cat(hs("OAUTHBEARER"), au(good, 1), md()),
		cat(hs("FOO"), md()),
		cat(md(), hs("PLAIN")),
		cat(prod(), hs("PLAIN"), au("\x00alice\x00alice-secret", 2)),
		cat(au("\x00alice\x00alice-secret", 2), md()),
		cat(fr(kmsg.NewPtrSASLHandshakeRequest(), 0)),
	}
}

// TestFuzzSASLSeeds checks each seed's known outcome through verifySASL
// (and, with STRATA_TEST_WRITE_FUZZ_SEEDS=1, writes them as the corpus).
func TestFuzzSASLSeeds(t *testing.T) {
	seeds := saslSeeds()
	if os.Getenv("STRATA_TEST_WRITE_FUZZ_SEEDS") != "" {
		writeCorpus(t, "FuzzSASL", func(add func(...any)) {
			for _, s := range seeds {
				add(s)
			}
		})
	}
	if got := len(readCorpusBytes(t, "FuzzSASL")); got != len(seeds) {
		t.Fatalf("corpus holds %d seeds, want %d: STRATA_TEST_WRITE_FUZZ_SEEDS=1 rewrites it", got, len(seeds))
	}
	fz := startSASLFuzzNode(t)
	fz.budget = testWait
	// answered: how many responses each seed gets.
	for i, want := range []int{4, 2, 5, 3, 3, 1, 0, 0, 1, 0} {
		if err := fz.verifySASL(seeds[i]); err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
		s := serveBytesOn(fz.n, "SASL_PLAINTEXT", seeds[i], testWait)
		got := 0
		for out := s.out; len(out) >= 4; out = out[4+binary.BigEndian.Uint32(out):] {
			got++
		}
		if got != want {
			t.Errorf("seed %d: %d responses, want %d", i, got, want)
		}
	}
}
