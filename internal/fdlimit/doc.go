// Package fdlimit raises the process's open-file limit (RLIMIT_NOFILE) and
// turns it into a budget of partitions a broker can host.
//
// It owns no state: [Raise] changes the process limit once at start and
// reports it; [Plan] is pure arithmetic. It does not count open files.
//
//	lim, err := fdlimit.Raise()
//	b := fdlimit.Plan(lim.Soft)
//	// b.Partitions: how many partitions fit; b.SealedSegments: the cap for
//	// storage.ManagerOptions.MaxOpenSealedSegments
package fdlimit
