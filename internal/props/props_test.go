package props

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	m, err := Parse(strings.NewReader("# c\n! c\n\na = 1\nb:2\nc=x\\\n  y\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 3 || m["a"] != "1" || m["b"] != "2" || m["c"] != "xy" {
		t.Fatalf("parsed %v", m)
	}
	for in, want := range map[string]string{
		"a=1\nnovalue\n": `line 2: "novalue" is not key=value`,
		"a=1\\\n":        "continuation at end of file",
		"=1\n":           `line 1: "=1" is not key=value`,
	} {
		var se *SyntaxError
		if _, err := Parse(strings.NewReader(in)); !errors.As(err, &se) || se.Msg != want {
			t.Fatalf("%q: %v, want %q", in, err, want)
		}
	}
}
