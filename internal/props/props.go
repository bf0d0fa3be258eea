// Package props parses Kafka-style (Java) properties files, the format of
// server.properties and of a data directory's meta.properties. It is the
// one parser for both: the broker reads its configuration with it, storage
// the meta.properties it owns.
package props

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// SyntaxError is a line of a properties file that does not parse. Msg says
// where and why ("line 3: \"x\" is not key=value").
type SyntaxError struct{ Msg string }

func (e *SyntaxError) Error() string { return e.Msg }

// Parse reads key=value or key:value lines, '#' and '!' comments, blank
// lines, and a trailing backslash continuing a line. Keys and values are
// trimmed. A malformed file gives a [*SyntaxError]; a read failure the
// reader's error.
func Parse(r io.Reader) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var pending string
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := strings.TrimSpace(sc.Text())
		if pending == "" && (line == "" || line[0] == '#' || line[0] == '!') {
			continue
		}
		if strings.HasSuffix(line, "\\") && !strings.HasSuffix(line, "\\\\") {
			pending += strings.TrimSuffix(line, "\\")
			continue
		}
		line, pending = pending+line, ""
		i := strings.IndexAny(line, "=:")
		if i <= 0 {
			return nil, &SyntaxError{Msg: fmt.Sprintf("line %d: %q is not key=value", lineNo, line)}
		}
		out[strings.TrimSpace(line[:i])] = strings.TrimSpace(line[i+1:])
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if pending != "" {
		return nil, &SyntaxError{Msg: "continuation at end of file"}
	}
	return out, nil
}
