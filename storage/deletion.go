package storage

// Delayed deletion (Kafka's file.delete.delay.ms): a segment leaves the
// log's list renamed .deleted, and its files are unlinked once the log's
// reference is dropped and no read view holds it. Retention and
// compaction's swap wait file.delete.delay.ms; truncation and the
// replacement of an empty active segment drop it at once. Close performs
// every pending deletion now.

import "time"

// scheduleDeleteLocked drops the log's reference to a segment already
// renamed to .deleted after delay; open read views keep it alive longer.
// The segment counts as pending (PendingDeletions) until its files are
// unlinked, not merely until the timer fired.
func (l *Log) scheduleDeleteLocked(s *segment, delay time.Duration) {
	if delay <= 0 {
		s.drop()
		return
	}
	l.delMu.Lock()
	defer l.delMu.Unlock()
	if l.pending == nil {
		l.pending = make(map[*segment]*pendingDeletion)
	}
	p := &pendingDeletion{}
	l.pending[s] = p
	s.gone = func() {
		l.delMu.Lock()
		delete(l.pending, s)
		l.delMu.Unlock()
	}
	p.timer = time.AfterFunc(delay, func() {
		if l.takeDeletion(s) {
			s.drop()
		}
	})
}

// pendingDeletion is a segment removed from the log whose files are not
// unlinked yet: the timer drops the log's reference (released), and the
// segment's gone hook removes the entry once the files are unlinked.
type pendingDeletion struct {
	timer    *time.Timer
	released bool // the log's reference was dropped (by the timer or drainDeletions)
}

// takeDeletion reports whether the caller is the one to drop the log's
// reference to s (the timer and drainDeletions race for it).
func (l *Log) takeDeletion(s *segment) bool {
	l.delMu.Lock()
	defer l.delMu.Unlock()
	p, ok := l.pending[s]
	if !ok || p.released {
		return false
	}
	p.released = true
	return true
}

// drainDeletions performs every pending delayed deletion now (files under
// an open ReadView go when it is released).
func (l *Log) drainDeletions() {
	l.delMu.Lock()
	var todo []*segment
	for s, p := range l.pending {
		if !p.released {
			p.released = true
			p.timer.Stop()
			todo = append(todo, s)
		}
	}
	l.delMu.Unlock()
	for _, s := range todo {
		s.drop()
	}
}

// PendingDeletions returns how many removed segments still have files on
// disk: waiting for file.delete.delay.ms, or for a ReadView holding them.
// Zero means every deleted segment's files are gone.
func (l *Log) PendingDeletions() int {
	l.delMu.Lock()
	defer l.delMu.Unlock()
	return len(l.pending)
}
