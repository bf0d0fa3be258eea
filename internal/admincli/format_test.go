package admincli

import (
	"encoding/json"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestRecordFormat(t *testing.T) {
	r := &kgo.Record{Topic: "t", Partition: 3, Offset: 42, Key: []byte("k"), Value: []byte("v\x00"), Timestamp: time.UnixMilli(1700000000123),
		Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: nil}}}
	for _, c := range []struct{ f, want string }{
		{`%t %p %o %k %v %T\n`, "t 3 42 k v\x00 1700000000123\n"},
		{`%K/%S|%s|%h\t100%%\\`, "1/2|v\x00|a=1,b=\t100%\\"},
		{`plain`, "plain"},
	} {
		f, err := parseRecordFormat(c.f)
		if err != nil {
			t.Fatalf("%q: %v", c.f, err)
		}
		if got := string(f.appendRecord(nil, r)); got != c.want {
			t.Errorf("%q: got %q want %q", c.f, got, c.want)
		}
	}
	null := &kgo.Record{}
	f, _ := parseRecordFormat(`%K %S [%k][%v]`)
	if got := string(f.appendRecord(nil, null)); got != "-1 -1 [][]" {
		t.Errorf("null record: %q", got)
	}
	for _, bad := range []string{`%x`, `%`, `\`, `\q`, `ok %`} {
		if _, err := parseRecordFormat(bad); err == nil || !strings.Contains(err.Error(), "invalid -f") {
			t.Errorf("%q: err %v", bad, err)
		}
	}
}

func TestJSONPrinterEscapesAndBinary(t *testing.T) {
	r := &kgo.Record{Topic: "t", Key: []byte{0xc3, 0x28}, Value: []byte("\"quoted\"\n<é>"), Timestamp: time.UnixMilli(5),
		Headers: []kgo.RecordHeader{{Key: "h", Value: []byte{0xff}}}}
	got := string(jsonPrinter{}.appendRecord(nil, r))
	want := `{"topic":"t","partition":0,"offset":0,"timestamp":5,"key_b64":"wyg=","value":"\"quoted\"\n<é>","headers":[{"key":"h","value_b64":"/w=="}]}` + "\n"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	back, part, err := parseJSONRecord([]byte(strings.TrimSpace(got)))
	if err != nil || part != 0 || string(back.Key) != string(r.Key) || string(back.Value) != string(r.Value) || len(back.Headers) != 1 || string(back.Headers[0].Value) != "\xff" {
		t.Errorf("read back: %+v part %d err %v", back, part, err)
	}
}

func TestParseStart(t *testing.T) {
	for _, c := range []struct {
		in                   string
		logStart, end, after int64
		want                 int64
	}{
		{"earliest", 5, 10, -1, 5}, {"beginning", 5, 10, -1, 5}, {"latest", 5, 10, -1, 10}, {"end", 5, 10, -1, 10},
		{"7", 5, 10, -1, 7}, {"2", 5, 10, -1, 5}, {"99", 5, 10, -1, 10},
		{"-3", 5, 10, -1, 7}, {"-30", 5, 10, -1, 5},
		{"@1000", 5, 10, 8, 8}, {"@1000", 5, 10, -1, 10},
	} {
		s, err := parseStart(c.in)
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		if got := s.resolve(c.logStart, c.end, c.after); got != c.want {
			t.Errorf("%q over [%d,%d) after %d: %d, want %d", c.in, c.logStart, c.end, c.after, got, c.want)
		}
	}
	for _, bad := range []string{"", "soon", "-0", "-x", "@", "@-1", "1.5", "--1"} {
		if _, err := parseStart(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseJSONRecordErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"value":"a","value_b64":"YQ=="}`, "both value and value_b64"},
		{`{"value_b64":"!!"}`, "value_b64"},
		{`{"headers":"x"}`, "want an object or an array"},
		{`{"partition":-2}`, "must be >= 0"},
		{`{"value":"a"} {"value":"b"}`, "more than one value"},
		{`[1]`, "bad JSON record"},
	} {
		if _, _, err := parseJSONRecord([]byte(c.in)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.in, err, c.want)
		}
	}
}

// TestJSONKeysSnakeCase: every --format json output of the (non-tier)
// client commands uses snake_case keys, one convention for scripts.
func TestJSONKeysSnakeCase(t *testing.T) {
	createTopic(t, "jsnake", 2)
	produceN(t, "jsnake", 0, 3)
	mustOK(t, "", "consume", "jsnake", "-g", "jsnake-g", "-e")
	runs := [][]string{
		{"cluster", "info"},
		{"topic", "create", "jsnake-new", "-p", "1"},
		{"topic", "list"},
		{"topic", "describe", "jsnake"},
		{"topic", "alter-config", "jsnake", "--set", "retention.ms=3600000"},
		{"topic", "add-partitions", "jsnake", "--total", "3"},
		{"group", "list"},
		{"group", "describe", "jsnake-g"},
		{"group", "reset-offsets", "jsnake-g", "--topic", "jsnake", "--to-earliest"},
		{"consume", "jsnake", "-e"},
		{"topic", "delete", "jsnake-new"},
		{"group", "delete", "jsnake-g"},
	}
	key := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if !key.MatchString(k) {
					t.Errorf("%s: key %q is not snake_case", where, k)
				}
				if m, ok := e.(map[string]any); ok && (k == "set" || k == "configs") {
					for name, v := range m { // data: config names as keys
						if _, ok := v.(string); !ok {
							t.Errorf("%s: %s.%s is not a config value", where, k, name)
						}
					}
					continue
				}
				walk(where, e)
			}
		case []any:
			for _, e := range x {
				walk(where, e)
			}
		}
	}
	for _, args := range runs {
		r := mustOK(t, "", args[0], append(args[1:], "--format", "json")...)
		dec := json.NewDecoder(strings.NewReader(r.stdout))
		n := 0
		for {
			var v any
			if err := dec.Decode(&v); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%v: %v\n%s", args, err, r.stdout)
			}
			walk(strings.Join(args, " "), v)
			n++
		}
		if n == 0 {
			t.Errorf("%v printed no JSON", args)
		}
	}
}
