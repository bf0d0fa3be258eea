package admincli

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// consumedJSON is one line of consume --format json, as a script reads it.
type consumedJSON struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Timestamp int64   `json:"timestamp"`
	Key       *string `json:"key"`
	KeyB64    *string `json:"key_b64"`
	Value     *string `json:"value"`
	ValueB64  *string `json:"value_b64"`
	Headers   []struct {
		Key   string  `json:"key"`
		Value *string `json:"value"`
	} `json:"headers"`
}

func parseConsumed(t *testing.T, out string) []consumedJSON {
	t.Helper()
	var recs []consumedJSON
	for _, l := range lines(out) {
		var c consumedJSON
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		recs = append(recs, c)
	}
	return recs
}

// TestProduceConsumeRoundTrip produces lines with a key delimiter and
// headers through the CLI, reads them back with kgo (what a real consumer
// sees) and with the CLI in a kcat-style format string and in JSON.
func TestProduceConsumeRoundTrip(t *testing.T) {
	createTopic(t, "rt", 1)
	before := time.Now().Add(-time.Second).UnixMilli()
	r := mustOK(t, "alpha:one\nbeta:two:with:colons\n\nno-key-here\n", "produce", "rt", "-K", ":", "-H", "src=cli", "-H", "trace=a=b")
	if !strings.Contains(r.stderr, "produced 3 records to rt") {
		t.Errorf("produce summary: %q", r.stderr)
	}

	// What a franz-go consumer sees.
	cl := newClient(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"rt": {0: kgo.NewOffset().AtStart()}}))
	var got []*kgo.Record
	ctx := testCtx(t)
	for len(got) < 3 && ctx.Err() == nil {
		got = append(got, cl.PollFetches(ctx).Records()...)
	}
	if len(got) != 3 {
		t.Fatalf("kgo consumed %d records", len(got))
	}
	want := []struct {
		key   []byte
		value string
	}{{[]byte("alpha"), "one"}, {[]byte("beta"), "two:with:colons"}, {nil, "no-key-here"}}
	for i, w := range want {
		g := got[i]
		if string(g.Value) != w.value || (w.key == nil) != (g.Key == nil) || string(g.Key) != string(w.key) {
			t.Errorf("record %d: key %q value %q, want %q %q", i, g.Key, g.Value, w.key, w.value)
		}
		if len(g.Headers) != 2 || g.Headers[0].Key != "src" || string(g.Headers[0].Value) != "cli" || g.Headers[1].Key != "trace" || string(g.Headers[1].Value) != "a=b" {
			t.Errorf("record %d headers %v", i, g.Headers)
		}
	}

	r = mustOK(t, "", "consume", "rt", "-e", "-f", `%t|%p|%o|%k|%K|%v|%S|%h\n`)
	wantOut := "rt|0|0|alpha|5|one|3|src=cli,trace=a=b\n" +
		"rt|0|1|beta|4|two:with:colons|15|src=cli,trace=a=b\n" +
		"rt|0|2||-1|no-key-here|11|src=cli,trace=a=b\n"
	if r.stdout != wantOut {
		t.Errorf("format output:\n%s\nwant:\n%s", r.stdout, wantOut)
	}
	r = mustOK(t, "", "consume", "rt", "-e", "-f", `%T %s%%\n`)
	for i, l := range lines(r.stdout) {
		var ts int64
		var v string
		if _, err := fmt.Sscanf(l, "%d %s", &ts, &v); err != nil || ts != got[i].Timestamp.UnixMilli() || ts < before || v != want[i].value+"%" {
			t.Errorf("line %q: ts %d (record %d) value %q err %v", l, ts, got[i].Timestamp.UnixMilli(), v, err)
		}
	}

	// Default text: values only.
	r = mustOK(t, "", "consume", "rt", "-e")
	if r.stdout != "one\ntwo:with:colons\nno-key-here\n" {
		t.Errorf("text output %q", r.stdout)
	}

	r = mustOK(t, "", "consume", "rt", "-e", "--format", "json")
	recs := parseConsumed(t, r.stdout)
	if len(recs) != 3 {
		t.Fatalf("json: %d records: %s", len(recs), r.stdout)
	}
	for i, c := range recs {
		if c.Topic != "rt" || c.Partition != 0 || c.Offset != int64(i) || c.Timestamp != got[i].Timestamp.UnixMilli() || c.Value == nil || *c.Value != want[i].value || c.ValueB64 != nil {
			t.Errorf("json record %d: %+v", i, c)
		}
		if (want[i].key == nil) != (c.Key == nil) || (c.Key != nil && *c.Key != string(want[i].key)) {
			t.Errorf("json record %d key %v", i, c.Key)
		}
		if len(c.Headers) != 2 || c.Headers[1].Key != "trace" || c.Headers[1].Value == nil || *c.Headers[1].Value != "a=b" {
			t.Errorf("json record %d headers %+v", i, c.Headers)
		}
	}
	if !strings.Contains(r.stdout, `"key":null`) {
		t.Errorf("null key not null in json: %s", r.stdout)
	}
}

// TestProduceJSONInputBinaryRoundTrip: --json-input with partitions,
// binary values and header arrays; consume --format json prints bytes that
// are not UTF-8 as base64, and its output fed back to produce reproduces
// the same records.
func TestProduceJSONInputBinaryRoundTrip(t *testing.T) {
	createTopic(t, "jin", 2)
	bin := []byte{0xff, 0x00, 0xfe, 'x'}
	in := fmt.Sprintf(`{"key":"a","value":"<html>&","partition":1,"headers":{"h2":"2","h1":"1"}}
{"key_b64":%q,"value_b64":%q,"partition":0,"headers":[{"key":"dup","value":"x"},{"key":"dup","value_b64":%q}]}
{"value":null,"partition":1}
`, base64.StdEncoding.EncodeToString(bin), base64.StdEncoding.EncodeToString(bin), base64.StdEncoding.EncodeToString(bin))
	r := mustOK(t, in, "produce", "jin", "--json-input")
	if !strings.Contains(r.stderr, "produced 3 records") {
		t.Errorf("summary %q", r.stderr)
	}
	r = mustOK(t, "", "consume", "jin", "-e", "--format", "json")
	recs := parseConsumed(t, r.stdout)
	if len(recs) != 3 {
		t.Fatalf("%d records: %s", len(recs), r.stdout)
	}
	byPart := map[int32][]consumedJSON{}
	for _, c := range recs {
		byPart[c.Partition] = append(byPart[c.Partition], c)
	}
	p0, p1 := byPart[0], byPart[1]
	if len(p0) != 1 || len(p1) != 2 {
		t.Fatalf("by partition %+v", byPart)
	}
	b64 := base64.StdEncoding.EncodeToString(bin)
	if p0[0].KeyB64 == nil || *p0[0].KeyB64 != b64 || p0[0].ValueB64 == nil || *p0[0].ValueB64 != b64 || p0[0].Key != nil || p0[0].Value != nil {
		t.Errorf("binary record %+v", p0[0])
	}
	if !strings.Contains(r.stdout, `"value":"<html>&"`) {
		t.Errorf("value HTML-escaped or lost: %s", r.stdout)
	}
	if h := p1[0].Headers; len(h) != 2 || h[0].Key != "h1" || h[1].Key != "h2" {
		t.Errorf("object headers not in name order: %+v", h)
	}
	if p1[1].Value != nil || p1[1].Key != nil {
		t.Errorf("null record %+v", p1[1])
	}

	// Feed the JSON output back in: identical records in a second topic.
	createTopic(t, "jin-copy", 2)
	mustOK(t, r.stdout, "produce", "jin-copy", "--json-input")
	r2 := mustOK(t, "", "consume", "jin-copy", "-e", "--format", "json")
	norm := func(s string) string {
		var out []string
		for _, l := range lines(s) {
			var m map[string]any
			json.Unmarshal([]byte(l), &m)
			delete(m, "topic")
			delete(m, "timestamp")
			b, _ := json.Marshal(m)
			out = append(out, string(b))
		}
		return strings.Join(out, "\n")
	}
	if norm(r.stdout) != norm(r2.stdout) {
		t.Errorf("round trip differs:\n%s\nvs\n%s", r.stdout, r2.stdout)
	}

	// Bad lines fail one by one; the good ones are produced; exit 1.
	r = cli(t, "{\"value\":\"ok\"}\nnot json\n{\"value\":\"x\",\"partition\":9}\n{\"valeu\":\"typo\"}\n", "produce", "jin", "--json-input")
	if r.code != ExitFail || !strings.Contains(r.stderr, "line 2: bad JSON record") || !strings.Contains(r.stderr, "line 3: partition 9 does not exist") ||
		!strings.Contains(r.stderr, `line 4: bad JSON record: json: unknown field "valeu"`) || !strings.Contains(r.stderr, "produced 1 records") || !strings.Contains(r.stderr, "3 of 4 records failed") {
		t.Errorf("bad lines: %v", r)
	}
}

// TestConsumeStartOffsets checks -o earliest/latest/N/-N/@MS, -p and -c
// against records with known offsets and timestamps.
func TestConsumeStartOffsets(t *testing.T) {
	createTopic(t, "cso", 2)
	cl := newClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var rs []*kgo.Record
	for i := range 10 {
		rs = append(rs, &kgo.Record{Topic: "cso", Partition: 0, Value: fmt.Appendf(nil, "a%d", i), Timestamp: base.Add(time.Duration(i) * time.Minute)})
	}
	rs = append(rs, &kgo.Record{Topic: "cso", Partition: 1, Value: []byte("b0"), Timestamp: base})
	if err := cl.ProduceSync(testCtx(t), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	vals := func(r result) string { return strings.Join(lines(r.stdout), ",") }
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-p", "0", "-o", "earliest"}, "a0,a1,a2,a3,a4,a5,a6,a7,a8,a9"},
		{[]string{"-p", "0", "-o", "7"}, "a7,a8,a9"},
		{[]string{"-p", "0", "-o", "-2"}, "a8,a9"},
		{[]string{"-p", "0", "-o", "-50"}, "a0,a1,a2,a3,a4,a5,a6,a7,a8,a9"},
		{[]string{"-p", "0", "-o", "500"}, ""},
		{[]string{"-p", "0", "-o", "latest"}, ""},
		{[]string{"-p", "0", "-o", fmt.Sprintf("@%d", base.Add(6*time.Minute).UnixMilli())}, "a6,a7,a8,a9"},
		{[]string{"-p", "0", "-o", fmt.Sprintf("@%d", base.Add(time.Hour).UnixMilli())}, ""},
		{[]string{"-p", "1"}, "b0"},
		{[]string{"-p", "0", "-c", "3"}, "a0,a1,a2"},
		{[]string{"-o", "-1", "-f", `%p:%v\n`}, "0:a9,1:b0"},
	} {
		args := append([]string{"cso", "-e"}, c.args...)
		r := mustOK(t, "", "consume", args...)
		got := vals(r)
		if c.args[len(c.args)-2] == "-f" {
			ls := lines(r.stdout)
			if len(ls) == 2 && ls[0] > ls[1] {
				ls[0], ls[1] = ls[1], ls[0]
			}
			got = strings.Join(ls, ",")
		}
		if got != c.want {
			t.Errorf("consume %q: got %q want %q", args, got, c.want)
		}
	}
	// -c without -e exits after the count even though more could come.
	r := mustOK(t, "", "consume", "cso", "-p", "0", "-o", "-3", "-c", "2")
	if vals(r) != "a7,a8" {
		t.Errorf("-c 2: %q", vals(r))
	}
	wantFail(t, cli(t, "", "consume", "cso", "-o", "yesterday"), ExitUsage, `invalid -o "yesterday"`)
	wantFail(t, cli(t, "", "consume", "cso", "-f", "%x"), ExitUsage, "unknown verb %x")
	wantFail(t, cli(t, "", "consume", "cso", "--format", "xml"), ExitUsage, `invalid value "xml" for flag --format`)
	wantFail(t, cli(t, "", "consume", "cso", "-c", "-1"), ExitUsage, "invalid -c")
	wantFail(t, cli(t, "", "consume", "cso", "-g", "g", "-p", "0"), ExitUsage, "-p and -g")
	wantFail(t, cli(t, "", "consume", "cso", "-p", "5", "-e"), ExitFail, "partition 5 does not exist")
	wantFail(t, cli(t, "", "consume", "no-such-topic", "-e"), ExitFail, `consume topic "no-such-topic": UNKNOWN_TOPIC_OR_PARTITION`)
	wantFail(t, cli(t, "x\n", "produce", "no-such-topic"), ExitFail, `produce to topic "no-such-topic": UNKNOWN_TOPIC_OR_PARTITION`)
	wantFail(t, cli(t, "x\n", "produce", "cso", "-p", "2"), ExitFail, "partition 2 does not exist")
	wantFail(t, cli(t, "x\n", "produce", "cso", "-p", "x"), ExitUsage, `invalid value "x" for flag -p`)
	wantFail(t, cli(t, "x\n", "produce", "cso", "-H", "novalue"), ExitUsage, "want name=value")
	wantFail(t, cli(t, "x\n", "produce", "cso", "-K", ":", "--json-input"), ExitUsage, "do not mix")
}

// TestProducePartitionFlag: -p sends every line to one partition, and
// keyed lines without -p are spread by key hash (same key, same partition).
func TestProducePartitionFlag(t *testing.T) {
	createTopic(t, "ppf", 3)
	mustOK(t, "a\nb\nc\n", "produce", "ppf", "-p", "2")
	var in strings.Builder
	for i := range 30 {
		fmt.Fprintf(&in, "key%d:v\nkey%d:w\n", i%10, i%10)
	}
	mustOK(t, in.String(), "produce", "ppf", "-K", ":")
	r := mustOK(t, "", "consume", "ppf", "-e", "-f", `%p %k %v\n`)
	perPart := map[string]int{}
	keyPart := map[string]string{}
	for _, l := range lines(r.stdout) {
		f := strings.Fields(l)
		if len(f) == 2 { // unkeyed from -p 2
			if f[0] != "2" {
				t.Errorf("-p 2 record on partition %s", f[0])
			}
			continue
		}
		perPart[f[0]]++
		if p, ok := keyPart[f[1]]; ok && p != f[0] {
			t.Errorf("key %s on partitions %s and %s", f[1], p, f[0])
		}
		keyPart[f[1]] = f[0]
	}
	if len(keyPart) != 10 || len(perPart) < 2 {
		t.Errorf("keys %v spread %v", keyPart, perPart)
	}
}

// TestProduceRepeatedErrorsAreCounted: a failure that hits every line is
// reported for its first few lines, then counted, not printed thousands
// of times; the exit status still says how many failed.
func TestProduceRepeatedErrorsAreCounted(t *testing.T) {
	createTopic(t, "rep", 1)
	var in strings.Builder
	for range 40 {
		in.WriteString(`{"value":"x","partition":7}` + "\n")
	}
	r := cli(t, in.String(), "produce", "rep", "--json-input")
	if r.code != ExitFail || !strings.Contains(r.stderr, "40 of 40 records failed") {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if n := strings.Count(r.stderr, "partition 7 does not exist"); n != maxSameErrorLines+1 {
		t.Fatalf("the repeated error appears %d times, want %d lines and one count:\n%s", n, maxSameErrorLines, r.stderr)
	}
	if !strings.Contains(r.stderr, "35 more lines failed with") {
		t.Fatalf("no count of the rest:\n%s", r.stderr)
	}
}
