package admincli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// maxLine bounds one input line (a record), so a stream without newlines
// fails with a clear error instead of growing without limit.
const maxLine = 64 << 20

func produceAction() *action {
	return &action{name: "produce", args: "TOPIC", noFormat: true,
		summary: "produce one record per stdin line (acks=all, idempotent); -K splits key from value, -H adds headers, --json-input reads {\"key\",\"value\",\"headers\",\"partition\"} lines",
		define:  defineProduce}
}

// headerFlags collects repeated -H name=value in order (names may repeat,
// as Kafka headers may).
type headerFlags []kgo.RecordHeader

func (h *headerFlags) String() string { return "" }
func (h *headerFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want name=value, got %q", v)
	}
	*h = append(*h, kgo.RecordHeader{Key: k, Value: []byte(val)})
	return nil
}

// jsonRecord is one --json-input line. key/value are UTF-8 strings;
// key_b64/value_b64 carry binary bytes (what consume --format json prints
// for them). headers is an object of name → value, or an array of
// {"key","value"} (or "value_b64") objects, which keeps order and repeats.
type jsonRecord struct {
	Key       *string         `json:"key"`
	KeyB64    *string         `json:"key_b64"`
	Value     *string         `json:"value"`
	ValueB64  *string         `json:"value_b64"`
	Headers   json.RawMessage `json:"headers"`
	Partition *int32          `json:"partition"`
	// Accepted and ignored, so consume --format json output can be fed
	// back in as it is.
	Topic     *string `json:"topic"`
	Offset    *int64  `json:"offset"`
	Timestamp *int64  `json:"timestamp"`
}

type jsonHeader struct {
	Key      string  `json:"key"`
	Value    *string `json:"value"`
	ValueB64 *string `json:"value_b64"`
}

func decodeBytes(s, b64 *string, what string) ([]byte, error) {
	switch {
	case s != nil && b64 != nil:
		return nil, fmt.Errorf("both %s and %s_b64", what, what)
	case b64 != nil:
		b, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return nil, fmt.Errorf("%s_b64: %v", what, err)
		}
		return b, nil
	case s != nil:
		return []byte(*s), nil
	}
	return nil, nil
}

// parseJSONRecord turns one --json-input line into a record (its Partition
// is -1 unless the line names one).
func parseJSONRecord(line []byte) (*kgo.Record, int32, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var jr jsonRecord
	if err := dec.Decode(&jr); err != nil {
		return nil, 0, fmt.Errorf("bad JSON record: %v", err)
	}
	if dec.More() {
		return nil, 0, errors.New("bad JSON record: more than one value on the line")
	}
	r := &kgo.Record{}
	var err error
	if r.Key, err = decodeBytes(jr.Key, jr.KeyB64, "key"); err != nil {
		return nil, 0, err
	}
	if r.Value, err = decodeBytes(jr.Value, jr.ValueB64, "value"); err != nil {
		return nil, 0, err
	}
	if len(jr.Headers) > 0 && !bytes.Equal(bytes.TrimSpace(jr.Headers), []byte("null")) {
		switch bytes.TrimSpace(jr.Headers)[0] {
		case '{':
			var m map[string]string
			if err := json.Unmarshal(jr.Headers, &m); err != nil {
				return nil, 0, fmt.Errorf("headers: %v", err)
			}
			for _, k := range sortedKeys(m) {
				r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(m[k])})
			}
		case '[':
			var hs []jsonHeader
			if err := json.Unmarshal(jr.Headers, &hs); err != nil {
				return nil, 0, fmt.Errorf("headers: %v", err)
			}
			for _, h := range hs {
				v, err := decodeBytes(h.Value, h.ValueB64, "header value")
				if err != nil {
					return nil, 0, err
				}
				r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: v})
			}
		default:
			return nil, 0, errors.New("headers: want an object or an array")
		}
	}
	part := int32(-1)
	if jr.Partition != nil {
		if *jr.Partition < 0 {
			return nil, 0, fmt.Errorf("partition %d: must be >= 0", *jr.Partition)
		}
		part = *jr.Partition
	}
	return r, part, nil
}

// partitionKey marks, in a record's Context, a partition chosen by the
// user (-p or "partition"); records without it go to the default
// partitioner (key hash, sticky for null keys).
type partitionKey struct{}

type mixedPartitioner struct{ def kgo.Partitioner }

func (m mixedPartitioner) ForTopic(t string) kgo.TopicPartitioner {
	return &mixedTopicPartitioner{def: m.def.ForTopic(t)}
}

type mixedTopicPartitioner struct{ def kgo.TopicPartitioner }

func explicitPartition(r *kgo.Record) (int32, bool) {
	if r.Context == nil {
		return 0, false
	}
	p, ok := r.Context.Value(partitionKey{}).(int32)
	return p, ok
}

func (m *mixedTopicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	// Consistent partitioning maps index i to partition i.
	if _, ok := explicitPartition(r); ok {
		return true
	}
	return m.def.RequiresConsistency(r)
}

func (m *mixedTopicPartitioner) Partition(r *kgo.Record, n int) int {
	if p, ok := explicitPartition(r); ok {
		return int(p) // checked against the partition count before producing
	}
	return m.def.Partition(r, n)
}

func (m *mixedTopicPartitioner) OnNewBatch() {
	if nb, ok := m.def.(kgo.TopicPartitionerOnNewBatch); ok {
		nb.OnNewBatch()
	}
}

// maxSameErrorLines is how many lines produce reports per distinct error
// before it only counts them.
const maxSameErrorLines = 5

func defineProduce(fs *flag.FlagSet) runFunc {
	keyDelim := fs.String("K", "", "key delimiter: the line's text before its first occurrence is the key (like kcat -K); no delimiter on a line: null key")
	fs.StringVar(keyDelim, "k", "", "same as -K")
	var headers headerFlags
	fs.Var(&headers, "H", "header name=value added to every record (repeatable)")
	part := fs.Int("p", -1, "produce to this partition (-1: by key hash, sticky for null keys)")
	jsonIn := fs.Bool("json-input", false, `read one JSON object per line: {"key":..,"value":..,"headers":{..},"partition":..} (key_b64/value_b64 for bytes)`)
	return func(e *env, pos []string) error {
		topic, err := oneName(pos, "topic")
		if err != nil {
			return err
		}
		if *part < -1 || *part > 1<<31-1 {
			return usagef("invalid -p %d: want a partition number or -1", *part)
		}
		if *jsonIn && *keyDelim != "" {
			return usagef("-K and --json-input do not mix: JSON lines carry their own key")
		}
		ctx, cancel := context.WithTimeout(context.Background(), e.timeout)
		err = e.connect(ctx,
			kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(mixedPartitioner{def: kgo.StickyKeyPartitioner(nil)}),
			kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.RecordDeliveryTimeout(e.timeout),
			kgo.ProduceRequestTimeout(e.timeout),
		)
		if err != nil {
			cancel()
			return err
		}
		what := fmt.Sprintf("produce to topic %q", topic)
		t, err := e.topicDetail(ctx, what, topic)
		cancel()
		if err != nil {
			return err
		}
		nparts := int32(len(t.Partitions))
		if *part >= int(nparts) {
			return fail(what, fmt.Errorf("partition %d does not exist: the topic has %d", *part, nparts), "")
		}

		var (
			mu       sync.Mutex
			failures int
			produced int
			wg       sync.WaitGroup
		)
		// Each distinct error is printed for its first few lines, then only
		// counted: a broker refusing every batch must not flood stderr
		// with thousands of identical lines.
		seen := map[string]int{}
		recordFailed := func(line int, err error) {
			mu.Lock()
			defer mu.Unlock()
			failures++
			msg := describeErr(err, "")
			if seen[msg]++; seen[msg] <= maxSameErrorLines {
				fmt.Fprintf(e.stderr, "strata: %s: line %d: %s\n", what, line, msg)
			}
		}
		sc := bufio.NewScanner(e.stdin)
		sc.Buffer(make([]byte, 0, 64<<10), maxLine)
		lineNo := 0
		for sc.Scan() {
			lineNo++
			line := sc.Bytes()
			if len(line) == 0 {
				continue // as kcat: an empty line is no record
			}
			var r *kgo.Record
			p := int32(*part)
			if *jsonIn {
				var jp int32
				r, jp, err = parseJSONRecord(line)
				if err != nil {
					recordFailed(lineNo, err)
					continue
				}
				if jp >= 0 {
					p = jp
				}
			} else {
				r = &kgo.Record{Value: append([]byte(nil), line...)}
				if *keyDelim != "" {
					if i := bytes.Index(line, []byte(*keyDelim)); i >= 0 {
						r.Key = append([]byte(nil), line[:i]...)
						r.Value = append([]byte(nil), line[i+len(*keyDelim):]...)
					}
				}
			}
			r.Headers = append(r.Headers, headers...)
			if p >= nparts {
				recordFailed(lineNo, fmt.Errorf("partition %d does not exist: the topic has %d", p, nparts))
				continue
			}
			if p >= 0 {
				r.Context = context.WithValue(context.Background(), partitionKey{}, p)
			}
			n := lineNo
			wg.Add(1)
			e.cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					recordFailed(n, err)
					return
				}
				mu.Lock()
				produced++
				mu.Unlock()
			})
		}
		readErr := sc.Err()
		// Flush is bounded: every record fails after RecordDeliveryTimeout.
		e.cl.Flush(context.Background())
		wg.Wait()
		for msg, k := range seen {
			if k > maxSameErrorLines {
				fmt.Fprintf(e.stderr, "strata: %s: %d more lines failed with %s\n", what, k-maxSameErrorLines, msg)
			}
		}
		fmt.Fprintf(e.stderr, "strata: produced %d records to %s\n", produced, topic)
		if readErr != nil {
			if errors.Is(readErr, bufio.ErrTooLong) {
				readErr = fmt.Errorf("line %d is longer than %d bytes", lineNo+1, maxLine)
			}
			return fail(what+": reading stdin", readErr, "")
		}
		if failures > 0 {
			return fail(what, fmt.Errorf("%d of %d records failed", failures, failures+produced), "")
		}
		return nil
	}
}
