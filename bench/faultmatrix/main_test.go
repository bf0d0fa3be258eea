package main

import (
	"strings"
	"testing"
)

func TestMatrixMergesRunsOfOneFault(t *testing.T) {
	in := `{"fault":"kill -9 the leader","runs":3,"acked":1000,"reelection_ns":[1000000000,2000000000,3000000000],"isr_recovery_ns":[5000000000]}
{"fault":"SIGSTOP","runs":1,"acked":10,"lost":1,"reelection_ns":[2500000000]}

{"fault":"kill -9 the leader","runs":2,"acked":500,"duplicates":2,"reelection_ns":[4000000000,5000000000],"isr_recovery_ns":[6000000000]}
`
	var out strings.Builder
	if err := matrix(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		"| kill -9 the leader | 5 | 1500 | 0 | 2 | 0 | 0 | 3s / 5s | 5s / 6s |",
		"| SIGSTOP | 1 | 10 | 1 | 0 | 0 | 0 | 2.5s / 2.5s | – |",
	}
	if len(lines) != 4 || lines[2] != want[0] || lines[3] != want[1] {
		t.Fatalf("matrix:\n%s\nwant rows\n%s", out.String(), strings.Join(want, "\n"))
	}
	if err := matrix(strings.NewReader("{bad\n"), &out); err == nil {
		t.Fatal("a bad line accepted")
	}
}
