package broker

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/binary"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkFetchTLS consumes the 64 MiB log with raw Fetch requests of
// 1 MiB per partition (a consumer's loop) over the PLAINTEXT listener and
// over the SSL one of the same node, alternating which goes first, and
// reports each one's throughput and their ratio (tls/plaintext). PLAINTEXT
// answers with sendfile(2); TLS (no kTLS) encrypts through a pooled
// buffer.
func BenchmarkFetchTLS(b *testing.B) {
	ca := newTestCA(b, "bench CA")
	k, c := ca.issue(b, pkix.Name{CommonName: "broker"})
	n := startNode(b, b.TempDir(), map[string]string{
		"listeners":             "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
		"ssl.keystore.type":     "PEM",
		"ssl.keystore.location": writeKeystore(b, filepath.Join(b.TempDir(), "ks.pem"), k, c),
	})
	end := fillTopic(b, n, "bench")
	size := n.partition("bench", 0).log.Size()
	plain, err := net.Dial("tcp", n.Addrs()["PLAINTEXT"])
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	tc, err := tls.Dial("tcp", n.Addrs()["SSL"], clientTLS(b, ca, nil, nil))
	if err != nil {
		b.Fatal(err)
	}
	defer tc.Close()
	buf := make([]byte, 0, 2<<20)
	fetchAll := func(conn net.Conn) time.Duration {
		start := time.Now()
		for off := int64(0); off < end; {
			req := fetchReq(11, "bench", [16]byte{}, 0, off, 0, 0, 1<<20)
			req.MaxBytes = 1 << 30
			if _, err := conn.Write(frameRequest(req, 1)); err != nil {
				b.Fatal(err)
			}
			var sz [4]byte
			if _, err := io.ReadFull(conn, sz[:]); err != nil {
				b.Fatal(err)
			}
			s := int(binary.BigEndian.Uint32(sz[:]))
			if cap(buf) < s {
				buf = make([]byte, 0, s)
			}
			buf = buf[:s]
			if _, err := io.ReadFull(conn, buf); err != nil {
				b.Fatal(err)
			}
			next := nextFetchOffset(b, req, buf[4:])
			if next <= off {
				b.Fatalf("no progress at offset %d", off)
			}
			off = next
		}
		return time.Since(start)
	}
	var plainT, tlsT time.Duration
	b.SetBytes(2 * size)
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			plainT += fetchAll(plain)
			tlsT += fetchAll(tc)
		} else {
			tlsT += fetchAll(tc)
			plainT += fetchAll(plain)
		}
	}
	b.StopTimer()
	mbps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / (1 << 20) }
	b.ReportMetric(mbps(plainT), "plaintext-MiB/s")
	b.ReportMetric(mbps(tlsT), "tls-MiB/s")
	b.ReportMetric(plainT.Seconds()/tlsT.Seconds(), "tls/plaintext")
}
