package admincli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// recordPrinter renders one consumed record, newline included.
type recordPrinter interface {
	appendRecord(dst []byte, r *kgo.Record) []byte
}

// textValue prints the value alone, one per line (kcat's default).
type textValue struct{}

func (textValue) appendRecord(dst []byte, r *kgo.Record) []byte {
	return append(append(dst, r.Value...), '\n')
}

// recordFormat is a parsed kcat-style -f string: literals and verbs.
type recordFormat []fmtPart

type fmtPart struct {
	lit  string
	verb byte // 0: lit
}

// parseRecordFormat parses a kcat-style format string. Verbs: %t topic,
// %p partition, %o offset, %k key, %K key length (-1 for null), %v and %s
// value, %S value length (-1 for null), %h headers as k=v,k=v, %T timestamp
// in ms, %% a percent sign. Escapes: \n \t \r \\. Anything else is an
// error, so a typo is never printed literally.
func parseRecordFormat(s string) (recordFormat, error) {
	var out recordFormat
	var lit []byte
	flush := func() {
		if len(lit) > 0 {
			out = append(out, fmtPart{lit: string(lit)})
			lit = nil
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\':
			if i+1 >= len(s) {
				return nil, fmt.Errorf("invalid -f %q: trailing backslash", s)
			}
			i++
			switch s[i] {
			case 'n':
				lit = append(lit, '\n')
			case 't':
				lit = append(lit, '\t')
			case 'r':
				lit = append(lit, '\r')
			case '\\':
				lit = append(lit, '\\')
			default:
				return nil, fmt.Errorf("invalid -f %q: unknown escape \\%c (want \\n, \\t, \\r or \\\\)", s, s[i])
			}
		case '%':
			if i+1 >= len(s) {
				return nil, fmt.Errorf("invalid -f %q: trailing %%", s)
			}
			i++
			switch v := s[i]; v {
			case '%':
				lit = append(lit, '%')
			case 't', 'p', 'o', 'k', 'K', 'v', 's', 'S', 'h', 'T':
				flush()
				out = append(out, fmtPart{verb: v})
			default:
				return nil, fmt.Errorf("invalid -f %q: unknown verb %%%c (want %%t %%p %%o %%k %%K %%v %%s %%S %%h %%T %%%%)", s, v)
			}
		default:
			lit = append(lit, c)
		}
	}
	flush()
	return out, nil
}

func lenOrNull(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}

func (f recordFormat) appendRecord(dst []byte, r *kgo.Record) []byte {
	for _, p := range f {
		switch p.verb {
		case 0:
			dst = append(dst, p.lit...)
		case 't':
			dst = append(dst, r.Topic...)
		case 'p':
			dst = strconv.AppendInt(dst, int64(r.Partition), 10)
		case 'o':
			dst = strconv.AppendInt(dst, r.Offset, 10)
		case 'k':
			dst = append(dst, r.Key...)
		case 'K':
			dst = strconv.AppendInt(dst, int64(lenOrNull(r.Key)), 10)
		case 'v', 's':
			dst = append(dst, r.Value...)
		case 'S':
			dst = strconv.AppendInt(dst, int64(lenOrNull(r.Value)), 10)
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, h.Key...)
				dst = append(dst, '=')
				dst = append(dst, h.Value...)
			}
		case 'T':
			dst = strconv.AppendInt(dst, r.Timestamp.UnixMilli(), 10)
		}
	}
	return dst
}

// jsonPrinter prints one JSON object per record:
//
//	{"topic":"t","partition":0,"offset":5,"timestamp":1700000000000,
//	 "key":"k","value":"v","headers":[{"key":"h","value":"x"}]}
//
// key, value and header values are UTF-8 strings when valid UTF-8 (null
// when null), else base64 under key_b64 / value_b64, so bytes are never
// silently replaced. produce --json-input reads these lines back.
type jsonPrinter struct{}

func (jsonPrinter) appendRecord(dst []byte, r *kgo.Record) []byte {
	dst = append(dst, `{"topic":`...)
	dst = appendJSONString(dst, r.Topic)
	dst = append(dst, `,"partition":`...)
	dst = strconv.AppendInt(dst, int64(r.Partition), 10)
	dst = append(dst, `,"offset":`...)
	dst = strconv.AppendInt(dst, r.Offset, 10)
	dst = append(dst, `,"timestamp":`...)
	dst = strconv.AppendInt(dst, r.Timestamp.UnixMilli(), 10)
	dst = append(dst, ',')
	dst = appendJSONBytes(dst, "key", r.Key)
	dst = append(dst, ',')
	dst = appendJSONBytes(dst, "value", r.Value)
	dst = append(dst, `,"headers":[`...)
	for i, h := range r.Headers {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"key":`...)
		dst = appendJSONString(dst, h.Key)
		dst = append(dst, ',')
		dst = appendJSONBytes(dst, "value", h.Value)
		dst = append(dst, '}')
	}
	return append(dst, "]}\n"...)
}

// appendJSONBytes appends `"name":"utf-8"`, `"name":null` or
// `"name_b64":"base64"`.
func appendJSONBytes(dst []byte, name string, b []byte) []byte {
	switch {
	case b == nil:
		return append(append(appendJSONString(dst, name), ':'), "null"...)
	case utf8.Valid(b):
		dst = append(appendJSONString(dst, name), ':')
		return appendJSONString(dst, string(b))
	default:
		dst = append(appendJSONString(dst, name+"_b64"), ':')
		return appendJSONString(dst, base64.StdEncoding.EncodeToString(b))
	}
}

// appendJSONString appends s (valid UTF-8) as a JSON string without HTML
// escaping (a value "<a>" stays readable).
func appendJSONString(dst []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s) // a string always encodes
	return append(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}
