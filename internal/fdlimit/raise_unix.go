//go:build unix

package fdlimit

import "syscall"

// Raise sets the soft RLIMIT_NOFILE to the hard limit and returns both.
// Go's runtime does the same at start on Linux, but only for the soft
// limit it found; calling it again makes the node's own log say what it
// got, and covers platforms and exec paths where the runtime did not.
func Raise() (Limit, error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return Limit{}, err
	}
	l := Limit{Was: r.Cur, Soft: r.Cur, Hard: r.Max}
	if r.Cur >= r.Max {
		return l, nil
	}
	r.Cur = r.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return l, err
	}
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return l, err
	}
	l.Soft, l.Hard = r.Cur, r.Max
	return l, nil
}
