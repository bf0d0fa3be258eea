package storage

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-io/strata/storage/vfs"
)

// TestLogScripts runs the scenarios under testdata/log. Commands:
//
//	open [clean=<bool>] [rp=<off>] [lso=<off>] [segment-bytes=<n>] [retention-ms=<n>] (rp, lso: the previous log's)
//	     [retention-bytes=<n>] [remote] [local-retention-ms=<n>] [log-append-time]
//	append [batches=<n>] [records=<n>] [size=<bytes>] [ts=<ms after base>] [epoch=<e>] [base=<off> (follower)]
//	garbage bytes=<n>             raw bytes after the active segment's end (a torn write)
//	read off=<o> [max-bytes=<n>] [max-offset=<o>]
//	timestamp ts=<ms after base>  OffsetForTimestamp
//	roll | flush | close | segments | epochs
//	truncate off=<o> | truncate-fully off=<o> | set-start off=<o> | uploaded off=<o>
//	retention now=<hours after base>
//	crash keep=<pct>              power loss (MemFS CrashClone), then an unclean open from the recovery point
//
// Regenerate expectations with -rewrite, then read the diff.
func TestLogScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/log", func(t *testing.T, path string) {
		mem := vfs.NewMem()
		e := &testEnv{tb: t, fs: mem, dir: "/data/t-0", clock: newFakeClock()}
		defer func() {
			if e.log != nil {
				e.log.Close()
			}
		}()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			e.tb = t
			return runScriptCmd(t, e, d)
		})
	})
}

func intArg(t *testing.T, d *datadriven.TestData, key string, def int64) int64 {
	if !d.HasArg(key) {
		return def
	}
	var v int
	d.ScanArgs(t, key, &v)
	return int64(v)
}

func logState(l *Log) string {
	r := l.Recovery()
	s := fmt.Sprintf("start=%d local-start=%d leo=%d rp=%d segments=%d size=%d",
		l.LogStartOffset(), l.LocalLogStartOffset(), l.LogEndOffset(), l.RecoveryPoint(), l.NumSegments(), l.Size())
	if r.Recovered {
		s += fmt.Sprintf("\nrecovered: scanned=%d truncated-bytes=%d dropped-from=%d dropped-segments=%d rebuilt=%d",
			r.SegmentsScanned, r.TruncatedBytes, r.DroppedFromOffset, r.DroppedSegments, r.RebuiltIndexes)
	}
	return s
}

func errCode(err error) string {
	for _, c := range []*kerr.Error{kerr.CorruptMessage, kerr.InvalidRecord, kerr.MessageTooLarge, kerr.OffsetOutOfRange,
		kerr.KafkaStorageError, kerr.InvalidTimestamp, kerr.UnsupportedForMessageFormat} {
		if errors.Is(err, c) {
			return "error: " + c.Message
		}
	}
	if errors.Is(err, ErrClosed) {
		return "error: closed"
	}
	return "error: " + err.Error()
}

func runScriptCmd(t *testing.T, e *testEnv, d *datadriven.TestData) string {
	if e.log == nil && d.Cmd != "open" {
		return "no open log"
	}
	switch d.Cmd {
	case "open":
		// rp and lso default to what the previous log had (what the
		// Manager's checkpoints would say).
		prevRP, prevLSO := int64(0), int64(0)
		if e.log != nil {
			prevRP, prevLSO = e.log.RecoveryPoint(), e.log.LogStartOffset()
			e.log.Close()
		}
		cfg := DefaultConfig()
		cfg.IndexIntervalBytes = 100
		cfg.SegmentIndexBytes = 4096
		cfg.FileDeleteDelayMs = 0
		cfg.SegmentBytes = intArg(t, d, "segment-bytes", cfg.SegmentBytes)
		cfg.RetentionMs = intArg(t, d, "retention-ms", cfg.RetentionMs)
		cfg.RetentionBytes = intArg(t, d, "retention-bytes", cfg.RetentionBytes)
		cfg.LocalRetentionMs = intArg(t, d, "local-retention-ms", cfg.LocalRetentionMs)
		cfg.RemoteStorageEnable = d.HasArg("remote")
		if d.HasArg("log-append-time") {
			cfg.TimestampType = logAppendTime
		}
		e.cfg = cfg
		clean := true
		if d.HasArg("clean") {
			d.ScanArgs(t, "clean", &clean)
		}
		l, err := OpenLog(e.options(clean, intArg(t, d, "rp", prevRP), intArg(t, d, "lso", prevLSO)))
		if err != nil {
			e.log = nil
			return errCode(err)
		}
		e.log = l
		return logState(l)
	case "append":
		var out []string
		n := int(intArg(t, d, "batches", 1))
		var set []byte
		for i := 0; i < n; i++ {
			set = append(set, makeBatch(t, int(intArg(t, d, "records", 1)), int(intArg(t, d, "size", 10)), baseTs+intArg(t, d, "ts", 0))...)
		}
		o := AppendOptions{LeaderEpoch: int32(intArg(t, d, "epoch", 0)), AssignOffsets: true}
		if d.HasArg("base") {
			set = withBase(set[:len(set)/n], intArg(t, d, "base", 0))
			o.AssignOffsets = false
		}
		info, err := e.log.Append(set, o)
		if err != nil {
			out = append(out, errCode(err))
		} else {
			out = append(out, fmt.Sprintf("offsets %d-%d batches=%d", info.FirstOffset, info.LastOffset, info.Batches))
		}
		out = append(out, logState(e.log))
		return strings.Join(out, "\n")
	case "garbage":
		segs := e.log.Segments()
		b := make([]byte, intArg(t, d, "bytes", 10))
		for i := range b {
			b[i] = byte(i * 7)
		}
		appendBytes(t, e.fs, segs[len(segs)-1].LogPath, b)
		return "ok"
	case "read":
		v, err := e.log.Read(intArg(t, d, "off", 0), int(intArg(t, d, "max-bytes", 1<<20)), intArg(t, d, "max-offset", math.MaxInt64))
		if err != nil {
			return errCode(err)
		}
		defer v.Release()
		if v.Size == 0 {
			return "empty"
		}
		b, err := v.Bytes()
		if err != nil {
			return errCode(err)
		}
		var parts []string
		for rest := b; len(rest) > 0; {
			first, r, err := splitForScript(rest)
			if err != nil {
				return errCode(err)
			}
			parts = append(parts, first)
			rest = r
		}
		return fmt.Sprintf("[%d,%d) bytes=%d batches: %s", v.FirstOffset, v.NextOffset, v.Size, strings.Join(parts, " "))
	case "timestamp":
		off, ts, ok, err := e.log.OffsetForTimestamp(baseTs + intArg(t, d, "ts", 0))
		if err != nil {
			return errCode(err)
		}
		if !ok {
			return "none"
		}
		return fmt.Sprintf("offset=%d ts=+%d", off, ts-baseTs)
	case "roll":
		if err := e.log.Roll(); err != nil {
			return errCode(err)
		}
		return logState(e.log)
	case "flush":
		if err := e.log.Flush(); err != nil {
			return errCode(err)
		}
		return logState(e.log)
	case "close":
		err := e.log.Close()
		e.log = nil
		if err != nil {
			return errCode(err)
		}
		return "ok"
	case "segments":
		var out []string
		for _, s := range e.log.Segments() {
			line := fmt.Sprintf("[%d,%d) size=%d max-ts=+%d", s.BaseOffset, s.NextOffset, s.Size, s.MaxTimestamp-baseTs)
			if s.MaxTimestamp < 0 {
				line = fmt.Sprintf("[%d,%d) size=%d empty", s.BaseOffset, s.NextOffset, s.Size)
			}
			if s.Sealed {
				line += " sealed"
			}
			if s.SnapshotPath != "" {
				line += " snapshot"
			}
			out = append(out, line)
		}
		return strings.Join(out, "\n")
	case "epochs":
		var out []string
		for _, ep := range e.log.LeaderEpochs().Entries() {
			out = append(out, fmt.Sprintf("epoch %d from %d", ep.Epoch, ep.StartOffset))
		}
		if len(out) == 0 {
			return "none"
		}
		return strings.Join(out, "\n")
	case "truncate", "truncate-fully", "set-start":
		off := intArg(t, d, "off", 0)
		var err error
		switch d.Cmd {
		case "truncate":
			err = e.log.Truncate(off)
		case "truncate-fully":
			err = e.log.TruncateFullyAndStartAt(off)
		default:
			err = e.log.SetLogStartOffset(off)
		}
		if err != nil {
			return errCode(err)
		}
		return logState(e.log)
	case "uploaded":
		e.log.SetRemoteUploadedOffset(intArg(t, d, "off", 0))
		return "ok"
	case "retention":
		now := time.UnixMilli(baseTs + intArg(t, d, "now", 0)*3600_000)
		n, err := e.log.EnforceRetention(now)
		if err != nil {
			return errCode(err)
		}
		return fmt.Sprintf("deleted=%d\n%s", n, logState(e.log))
	case "crash":
		mem := e.fs.(*vfs.MemFS)
		rp, lso := e.log.RecoveryPoint(), e.log.LogStartOffset()
		crashed := mem.CrashClone(int(intArg(t, d, "keep", 0)), rand.New(rand.NewPCG(1, 2)))
		e.log.Close()
		e.fs = crashed
		l, err := OpenLog(e.options(false, rp, lso))
		if err != nil {
			e.log = nil
			return errCode(err)
		}
		e.log = l
		return logState(l)
	}
	t.Fatalf("unknown command %q", d.Cmd)
	return ""
}
