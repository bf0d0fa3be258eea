package admincli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func consumeAction() *action {
	return &action{name: "consume", args: "TOPIC", noFormat: true,
		summary: "print records: -o earliest|latest|N|-N|@MS, -p partition, -c count, -g group (commits), -e exit at end, --format text|json, -f '%k %v %p %o %T\\n'",
		define:  defineConsume}
}

// startSpec is a parsed -o.
type startSpec struct {
	kind string // "earliest", "latest", "offset", "tail", "timestamp"
	n    int64
}

// parseStart parses -o: earliest (beginning, start), latest (end), an
// absolute offset N, -N (the last N records of each partition) or @MS (the
// first record with a timestamp at or after MS milliseconds).
func parseStart(s string) (startSpec, error) {
	switch s {
	case "earliest", "beginning", "start", "oldest":
		return startSpec{kind: "earliest"}, nil
	case "latest", "end", "newest":
		return startSpec{kind: "latest"}, nil
	}
	bad := fmt.Errorf("invalid -o %q: want earliest, latest, an offset N, -N (last N records) or @MS (timestamp in ms)", s)
	switch {
	case strings.HasPrefix(s, "@"):
		n, err := strconv.ParseInt(s[1:], 10, 64)
		if err != nil || n < 0 {
			return startSpec{}, bad
		}
		return startSpec{kind: "timestamp", n: n}, nil
	case strings.HasPrefix(s, "-"):
		n, err := strconv.ParseInt(s[1:], 10, 64)
		if err != nil || n <= 0 {
			return startSpec{}, bad
		}
		return startSpec{kind: "tail", n: n}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return startSpec{}, bad
	}
	return startSpec{kind: "offset", n: n}, nil
}

// resolve returns where spec starts in a partition whose log spans
// [logStart, end); after is the ListOffsetsAfterMilli answer (-1: no
// record that late). Offsets are clamped to the log.
func (s startSpec) resolve(logStart, end, after int64) int64 {
	var o int64
	switch s.kind {
	case "earliest":
		o = logStart
	case "latest":
		o = end
	case "offset":
		o = s.n
	case "tail":
		o = end - s.n
	case "timestamp":
		o = end
		if after >= 0 {
			o = after
		}
	}
	return max(logStart, min(o, end))
}

func defineConsume(fs *flag.FlagSet) runFunc {
	from := fs.String("o", "earliest", "start: earliest|latest|N|-N (last N per partition)|@MS (timestamp ms); with -g, where a partition without a committed offset starts")
	part := fs.Int("p", -1, "consume only this partition (-1: all)")
	count := fs.Int("c", 0, "exit after printing this many records (0: no limit)")
	group := fs.String("g", "", "consume as this consumer group, committing what was printed (none: no group, nothing committed)")
	exitEnd := fs.Bool("e", false, "exit once every consumed partition reaches the end it had at start (like kcat -e)")
	format := fs.String("format", "text", "output: text (value per line, or -f) or json (one object per line; key/value as UTF-8 strings, key_b64/value_b64 when not UTF-8)")
	fmtStr := fs.String("f", "", `text format: %t topic, %p partition, %o offset, %k key, %K key length, %v or %s value, %S value length, %h headers (k=v,...), %T timestamp ms, %% percent; \n \t \r \\ escapes`)
	return func(e *env, pos []string) error {
		topic, err := oneName(pos, "topic")
		if err != nil {
			return err
		}
		spec, err := parseStart(*from)
		if err != nil {
			return usageError{err.Error()}
		}
		if *format != "text" && *format != "json" {
			return usagef("invalid value %q for flag --format: want text or json", *format)
		}
		if *fmtStr != "" && *format == "json" {
			return usagef("-f is a text format; it does not mix with --format json")
		}
		var pr recordPrinter = textValue{}
		if *fmtStr != "" {
			f, err := parseRecordFormat(*fmtStr)
			if err != nil {
				return usageError{err.Error()}
			}
			pr = f
		} else if *format == "json" {
			pr = jsonPrinter{}
		}
		if *count < 0 {
			return usagef("invalid -c %d: want a count >= 0", *count)
		}
		if *part < -1 || *part > 1<<31-1 {
			return usagef("invalid -p %d: want a partition number or -1", *part)
		}
		if *group != "" && *part >= 0 {
			return usagef("-p and -g do not mix: a group's partitions are assigned by the group")
		}
		if *group != "" && (spec.kind == "tail" || spec.kind == "offset") {
			return usagef("with -g, -o is where partitions without a committed offset start: earliest, latest or @MS")
		}

		ctx, cancel := context.WithTimeout(context.Background(), e.timeout)
		defer cancel()
		if err := e.connect(ctx); err != nil {
			return err
		}
		what := fmt.Sprintf("consume topic %q", topic)
		t, err := e.topicDetail(ctx, what, topic)
		if err != nil {
			return err
		}
		parts := t.Partitions.Numbers()
		if *part >= 0 {
			if *part >= len(parts) {
				return fail(what, fmt.Errorf("partition %d does not exist: the topic has %d", *part, len(parts)), "")
			}
			parts = []int32{int32(*part)}
		}
		list := func(name string) func(kadm.ListedOffsets, error) (kadm.ListedOffsets, error) {
			return func(l kadm.ListedOffsets, err error) (kadm.ListedOffsets, error) {
				if err == nil {
					err = l.Error()
				}
				if err != nil {
					return nil, fail(what+": "+name, err, "")
				}
				return l, nil
			}
		}
		starts, err := list("log start offsets")(e.adm.ListStartOffsets(ctx, topic))
		if err != nil {
			return err
		}
		ends, err := list("log end offsets")(e.adm.ListEndOffsets(ctx, topic))
		if err != nil {
			return err
		}
		var after kadm.ListedOffsets
		if spec.kind == "timestamp" {
			if after, err = list("offsets for timestamp")(e.adm.ListOffsetsAfterMilli(ctx, spec.n, topic)); err != nil {
				return err
			}
		}
		var committed kadm.OffsetResponses
		if *group != "" {
			if committed, err = e.adm.FetchOffsetsForTopics(ctx, *group, topic); err != nil {
				return fail(what+": committed offsets of group "+strconv.Quote(*group), err, "")
			}
		}

		// next is the next offset to print per partition, end the end each
		// had at start (what -e waits for).
		next := map[int32]int64{}
		end := map[int32]int64{}
		offsets := map[int32]kgo.Offset{}
		for _, p := range parts {
			s, _ := starts.Lookup(topic, p)
			en, _ := ends.Lookup(topic, p)
			af := int64(-1)
			if a, ok := after.Lookup(topic, p); ok {
				af = a.Offset
			}
			next[p] = spec.resolve(s.Offset, en.Offset, af)
			if c, ok := committed.Lookup(topic, p); ok && c.Err == nil && c.At >= 0 {
				next[p] = c.At
			}
			end[p] = en.Offset
			offsets[p] = kgo.NewOffset().At(next[p])
		}

		var (
			assignMu sync.Mutex
			assigned = map[int32]bool{} // with -g: what the group gave us
		)
		opts := []kgo.Opt{
			kgo.SeedBrokers(e.brokers...),
			kgo.ClientID("strata-cli"),
			kgo.DialTimeout(e.timeout),
			kgo.RetryTimeout(e.timeout),
		}
		opts = append(opts, e.sec.KgoOpts()...)
		if *group == "" {
			opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
		} else {
			reset := kgo.NewOffset().AtStart()
			switch spec.kind {
			case "latest":
				reset = kgo.NewOffset().AtEnd()
			case "timestamp":
				reset = kgo.NewOffset().AfterMilli(spec.n)
			}
			opts = append(opts,
				kgo.ConsumerGroup(*group),
				kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(reset),
				kgo.DisableAutoCommit(),
				kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
					assignMu.Lock()
					defer assignMu.Unlock()
					for _, p := range m[topic] {
						assigned[p] = true
					}
				}),
				kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
					assignMu.Lock()
					defer assignMu.Unlock()
					for _, p := range m[topic] {
						delete(assigned, p)
					}
				}),
				kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
					assignMu.Lock()
					defer assignMu.Unlock()
					for _, p := range m[topic] {
						delete(assigned, p)
					}
				}),
			)
		}
		cons, err := kgo.NewClient(opts...)
		if err != nil {
			return fail(what, err, "")
		}
		defer cons.Close()

		printed := 0
		done := func() bool {
			if *count > 0 && printed >= *count {
				return true
			}
			if !*exitEnd {
				return false
			}
			check := parts
			if *group != "" {
				assignMu.Lock()
				check = nil
				for p := range assigned {
					check = append(check, p)
				}
				assignMu.Unlock()
				if len(check) == 0 {
					return false
				}
			}
			for _, p := range check {
				if next[p] < end[p] {
					return false
				}
			}
			return true
		}

		sctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		var buf []byte
		for !done() {
			limit := -1
			if *count > 0 {
				limit = *count - printed
			}
			fetches := cons.PollRecords(sctx, limit)
			if sctx.Err() != nil || fetches.IsClientClosed() {
				break // interrupted: what was printed stays printed (and committed)
			}
			for _, fe := range fetches.Errors() {
				if fe.Err == context.Canceled {
					continue
				}
				return fail(fmt.Sprintf("%s: partition %d", what, fe.Partition), fe.Err, "")
			}
			var toCommit []*kgo.Record
			for _, r := range fetches.Records() {
				buf = pr.appendRecord(buf[:0], r)
				if _, err := e.stdout.Write(buf); err != nil {
					return fail(what+": writing output", err, "")
				}
				next[r.Partition] = r.Offset + 1
				printed++
				toCommit = append(toCommit, r)
			}
			if *group != "" && len(toCommit) > 0 {
				cctx, ccancel := context.WithTimeout(context.Background(), e.timeout)
				err := cons.CommitRecords(cctx, toCommit...)
				ccancel()
				if err != nil {
					return fail(fmt.Sprintf("%s: commit for group %q", what, *group), err, "")
				}
			}
		}
		return nil
	}
}
