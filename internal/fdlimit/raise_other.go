//go:build !unix

package fdlimit

// Raise reports no limit where RLIMIT_NOFILE does not exist.
func Raise() (Limit, error) { return Limit{}, nil }
