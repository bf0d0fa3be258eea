// Package errfs wraps a [vfs.FS] so tests can inject faults into chosen
// file operations: an error (EIO, ENOSPC, any errno), a short write (part
// of the buffer lands, then the error), or latency.
//
// errfs owns fault injection and nothing else: it never models durability
// itself (wrap a [vfs.MemFS] for that) and never knows what the files
// hold. It must never be used outside tests and tools.
//
// Every call on the wrapped file system or one of its files is described
// as a [Call] and shown to an [Injector], which answers with a [*Fault] or
// nil. The usual injector is a [Rule], built by chaining:
//
//	full := errfs.On(errfs.OpWrite, errfs.OpWriteAt).Glob("*.log").Nth(3).Err(syscall.ENOSPC)
//	torn := errfs.On(errfs.OpWrite).Nth(2).Short(10, syscall.EIO) // 10 bytes land, then EIO
//	slow := errfs.On(errfs.OpSync).Delay(5 * time.Millisecond)
//	fs := errfs.Wrap(vfs.NewMem(), errfs.Any(full, torn, slow))
//
// An injected error is returned the way the os package returns a real one
// (*os.PathError, or *os.LinkError for Rename), so errors.Is(err,
// syscall.ENOSPC) holds, and errors.Is(err, [ErrInjected]) tells injected
// faults from real ones.
//
// A rule without an action only counts: run a workload once with
// errfs.On(errfs.OpWrite), read [Rule.Matched], then sweep Nth over 1..N.
package errfs
