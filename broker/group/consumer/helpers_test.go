package consumer

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/google/uuid"
)

// topicID names a script topic deterministically.
func topicID(name string) uuid.UUID { return uuid.NewSHA1(uuid.NameSpaceOID, []byte("topic/"+name)) }

// names maps topic IDs back to script names for printing.
type names map[uuid.UUID]string

func (n names) of(id uuid.UUID) string {
	if s, ok := n[id]; ok {
		return s
	}
	return id.String()
}

// ranges prints sorted partitions compactly: 0-2,5.
func ranges(ps []int32) string {
	var b strings.Builder
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j > i {
			fmt.Fprintf(&b, "%d-%d", ps[i], ps[j])
		} else {
			fmt.Fprintf(&b, "%d", ps[i])
		}
		i = j + 1
	}
	return b.String()
}

// format prints an assignment as "a:0-2 b:1", topics by name; "-" if empty.
func (n names) format(a Assignment) string {
	var parts []string
	for t, ps := range a {
		if len(ps) > 0 {
			parts = append(parts, n.of(t)+":"+ranges(ps))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// parseAssignment reads "a:0-2,5;b:1" (topics by name; "" or "-" is empty).
func parseAssignment(t testing.TB, s string) Assignment {
	a := Assignment{}
	if s == "" || s == "-" {
		return a
	}
	for _, part := range strings.Split(s, ";") {
		name, ps, ok := strings.Cut(part, ":")
		if !ok {
			t.Fatalf("assignment %q: want topic:partitions", part)
		}
		id := topicID(name)
		a[id] = []int32{} // an owned topic with no partitions is still "sent"
		for _, r := range strings.Split(ps, ",") {
			if r == "" {
				continue
			}
			lo, hi, isRange := strings.Cut(r, "-")
			l, err := strconv.Atoi(lo)
			if err != nil {
				t.Fatalf("assignment %q: %v", part, err)
			}
			h := l
			if isRange {
				if h, err = strconv.Atoi(hi); err != nil {
					t.Fatalf("assignment %q: %v", part, err)
				}
			}
			for p := l; p <= h; p++ {
				a.add(id, int32(p))
			}
		}
	}
	return a
}

// kv parses the "key=value" words of a line.
func kv(t testing.TB, words []string) map[string]string {
	m := map[string]string{}
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			t.Fatalf("word %q: want key=value", w)
		}
		m[k] = v
	}
	return m
}

func atoi(t testing.TB, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("number %q: %v", s, err)
	}
	return n
}

// parseTopic reads "name partitions=N [racks=r1,r2;r2;...] [internal]".
func parseTopic(t testing.TB, line string) Topic {
	f := strings.Fields(line)
	top := Topic{Name: f[0], ID: topicID(f[0])}
	for _, w := range f[1:] {
		if w == "internal" {
			top.Internal = true
			continue
		}
		k, v, _ := strings.Cut(w, "=")
		switch k {
		case "partitions":
			top.Partitions = int32(atoi(t, v))
		case "racks":
			for _, rs := range strings.Split(v, ";") {
				top.Racks = append(top.Racks, strings.Split(rs, ","))
			}
		default:
			t.Fatalf("topic %q: unknown %q", line, k)
		}
	}
	return top
}

func argStr(td *datadriven.TestData, key, def string) string {
	for _, a := range td.CmdArgs {
		if a.Key == key && len(a.Vals) > 0 {
			return a.Vals[0]
		}
	}
	return def
}
