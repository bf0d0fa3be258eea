package broker

// BenchmarkProducePipeline: the produce path of one node as one pipelining
// connection sees it. Each op is one ~1 MiB Produce request of 1 KiB
// records spread over P partitions (one batch each), written back to back
// by a writer goroutine while the benchmark reads the responses, so the
// broker always has requests queued (as a producer with max.in.flight > 1).
//
//	go test -run '^$' -bench ProducePipeline -benchtime 100x -count 3 -benchmem ./broker/
//
// MB/s counts the request bytes; B/op and allocs/op include both ends of
// the connection (the client side here allocates only the response reads).
// B/op after the frame pool still shows the pool's warm-up: the reader
// runs ahead of the appends by up to the request budget, so a short run
// reads most frames into new buffers (TestProduceFrameRecycled measures
// the steady state).
//
// Issue 20, 2-core shared machine, medians of 3 interleaved runs of 200
// requests, MB/s before (serial appends, unpooled frames) -> after:
// 6 partitions acks=1 522 -> 1556 (2.98x), acks=-1 529 -> 1201 (2.27x);
// 24 partitions acks=1 732 -> 703 (0.96x), acks=-1 725 -> 766 (1.06x).
//
// CPU profile (-cpuprofile, three runs of 100 requests of 3.5 MiB over
// 12 partitions, acks=1 and -1, merged) before and after the frame read
// grew by 4 instead of 2 (netbuf.Growth): 3.51 -> 3.14 CPU-seconds;
// syscalls (socket reads, pwrite, writes) 60 % -> 66 %, memmove (the
// growing read buffer's copies) 11.4 % -> 3.5 %, CRC-32C (the batch's
// one validation) 10.5 % -> 8.0 %; nothing else above 2.3 %. What is
// left is the kernel's copies in and out and the one CRC.

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// produceFrame is one framed Produce request (correlation id 0: the
// benchmark only counts responses) of about reqBytes of 1 KiB records
// over partitions 0..parts-1 of topic.
func produceFrame(topic string, parts int, reqBytes int, acks int16) []byte {
	perPart := max(reqBytes/parts/benchRecordSize, 1)
	vals := make([]string, perPart)
	for i := range vals {
		vals[i] = string(bytes.Repeat([]byte{byte('a' + i%26)}, benchRecordSize))
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks, req.TimeoutMillis = acks, 30000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = topic
	rb := recordBatch(0, vals...)
	for p := range parts {
		tp := kmsg.NewProduceRequestTopicPartition()
		tp.Partition, tp.Records = int32(p), rb
		t.Partitions = append(t.Partitions, tp)
	}
	req.Topics = append(req.Topics, t)
	return frameRequest(req, 0)
}

func BenchmarkProducePipeline(b *testing.B) {
	// 1 MiB requests, and 3.5 MiB over 12 partitions: what franz-go sends
	// a single node under loadgen's max-throughput (785 requests for
	// 2.7 GB in one run, issue 20), larger than the read's first chunk;
	// and 24 KiB over 6 partitions, a request of fixed-rate's 20k
	// records/s (4 KiB a partition: four 1 KiB records).
	for _, sh := range []struct{ parts, reqBytes int }{{6, 1 << 20}, {24, 1 << 20}, {12, 7 << 19}, {6, 24 << 10}} {
		parts, reqBytes := sh.parts, sh.reqBytes
		for _, acks := range []int16{1, -1} {
			name := fmt.Sprintf("partitions=%d/acks=%d", parts, acks)
			if reqBytes != 1<<20 {
				name = fmt.Sprintf("partitions=%d/request=%dKiB/acks=%d", parts, reqBytes>>10, acks)
			}
			b.Run(name, func(b *testing.B) {
				n := startNode(b, b.TempDir(), nil)
				createTopic(b, newAdmin(b, n), "bench", int32(parts), nil)
				frame := produceFrame("bench", parts, reqBytes, acks)
				c := dialRaw(b, n)
				c.nc.SetDeadline(time.Now().Add(10 * time.Minute))
				req := kmsg.NewPtrProduceRequest()
				req.SetVersion(9)
				b.SetBytes(int64(len(frame)))
				b.ReportAllocs()
				werr := make(chan error, 1)
				b.ResetTimer()
				go func() {
					var err error
					for range b.N {
						if _, err = c.nc.Write(frame); err != nil {
							break
						}
					}
					werr <- err
				}()
				for range b.N {
					_, body, err := c.readFrame()
					if err != nil {
						b.Fatal(err)
					}
					resp := decodeResponse(b, req, body).(*kmsg.ProduceResponse)
					for _, t := range resp.Topics {
						for _, p := range t.Partitions {
							if p.ErrorCode != 0 {
								b.Fatalf("partition %d: error %d", p.Partition, p.ErrorCode)
							}
						}
					}
				}
				b.StopTimer()
				if err := <-werr; err != nil {
					b.Fatal(err)
				}
				want := int64(b.N) * int64(max(reqBytes/parts/benchRecordSize, 1))
				for p := range parts {
					if got := n.partition("bench", int32(p)).log.LogEndOffset(); got != want {
						b.Fatalf("partition %d ends at %d, want %d", p, got, want)
					}
				}
			})
		}
	}
}
