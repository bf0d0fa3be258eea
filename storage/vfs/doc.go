// Package vfs is the file-system seam under storage/: every file the log
// touches is opened through an [FS], so tests can swap the operating system
// for an in-memory file system that models crashes ([MemFS]) or for a
// wrapper that injects faults (package errfs).
//
// vfs owns file access and nothing else. It must never know what a
// segment, an index or a record batch is, and it must never decide what is
// durable on its own: durability is exactly what the caller made durable
// with [File.Sync] (file contents) and [FS.SyncDir] (directory entries).
// [FS.Lock] (an exclusive flock; in-process for MemFS) and [FS.FreeSpace]
// (statfs; settable on MemFS and errfs) let storage keep a second process
// off its directories and see a disk fill up. [WriteFileAtomic] is the one
// way a small file of a data directory is replaced (tmp, fsync, rename,
// directory fsync; the tmp removed on failure), and [ReadFile] the bounded
// way it is read back.
//
// Three implementations exist:
//
//   - [Default], the operating system;
//   - [MemFS] ([NewMem]), in memory, tracking synced and unsynced file
//     bytes and directory entries, with [MemFS.CrashClone] (unsynced writes
//     survive as a torn prefix) and [MemFS.CrashCloneReordered] (unsynced
//     pages survive independently) to produce the file system as it would
//     be found after a power loss, and [MemFS.SetSyncHook] to take such a
//     crash at every sync;
//   - errfs.Wrap, which injects errors, short writes and latency into any
//     FS.
//
// Usage:
//
//	fs := vfs.Default
//	f, err := fs.Create("/data/t-0/00000000000000000000.log")
//	...
//	_, err = f.Write(batch)
//	err = f.Sync()                 // the bytes are durable
//	err = fs.SyncDir("/data/t-0") // the file's name is durable
//
// In tests:
//
//	mem := vfs.NewMem()
//	... run a workload on mem ...
//	after := mem.CrashClone(50, rand.New(rand.NewPCG(1, 2)))
//	... reopen on after, check what survived ...
package vfs
