package admincli

import (
	"fmt"
	"io"
	"strings"
)

// deleted is one name of a delete's JSON output: {"<kind>": name} plus
// "error" when it failed.
type deleted map[string]string

// reportDeletes prints what deleting names of kind ("topic", "group")
// did: a NAME/STATUS table or one JSON object per name, and each failure
// also as one line on stderr. outcome tells, per name, whether the
// cluster answered for it and with what error. It returns reported{}
// (exit 1, already said) when any name failed.
func (e *env) reportDeletes(kind string, names []string, outcome func(name string) (answered bool, err error, msg string)) error {
	out := make([]deleted, 0, len(names))
	failed := false
	for _, name := range names {
		d := deleted{kind: name}
		answered, err, msg := outcome(name)
		switch {
		case !answered:
			d["error"] = "no answer for this " + kind
		case err != nil:
			d["error"] = describeErr(err, msg)
		}
		if d["error"] != "" {
			failed = true
			fmt.Fprintf(e.stderr, "strata: delete %s %q: %s\n", kind, name, d["error"])
		}
		out = append(out, d)
	}
	if err := e.emit(out, func(w io.Writer) {
		row(w, strings.ToUpper(kind), "STATUS")
		for _, d := range out {
			row(w, d[kind], statusOf(d["error"], "deleted"))
		}
	}); err != nil {
		return err
	}
	if failed {
		return reported{}
	}
	return nil
}
