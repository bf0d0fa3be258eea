package broker

import (
	"math"
	"slices"
	"testing"

	"github.com/google/uuid"
)

// TestFollowerSessionSendsOnlyWhatChanged walks the follower's session
// through Kafka's FetchSessionHandler states: a full request creates the
// session, incremental ones carry only partitions whose fields changed and
// forget the ones no longer fetched, a failure makes the next request a
// full one closing the old session, a leader that keeps no session leaves
// every request full, and the epoch wraps to 1.
func TestFollowerSessionSendsOnlyWhatChanged(t *testing.T) {
	id := uuid.New()
	a, b, c := tpKey{"t", 0}, tpKey{"t", 1}, tpKey{"u", 0}
	f := func(off int64) sessionFields {
		return sessionFields{topicID: id, fetchOffset: off, logStart: 0, leaderEpoch: 3, lastFetchedEpoch: 3, maxBytes: 1 << 20}
	}
	keys := func(m map[tpKey]bool) []tpKey {
		var ks []tpKey
		for k, ok := range m {
			if ok {
				ks = append(ks, k)
			}
		}
		slices.SortFunc(ks, func(x, y tpKey) int {
			if x.topic != y.topic {
				if x.topic < y.topic {
					return -1
				}
				return 1
			}
			return int(x.partition - y.partition)
		})
		return ks
	}
	var s followerSession
	step := func(want map[tpKey]sessionFields, wantID, wantEpoch int32, wantSend, wantForget []tpKey) {
		t.Helper()
		gotID, gotEpoch, send, forget := s.next(want)
		slices.SortFunc(forget, func(x, y tpKey) int { return int(x.partition - y.partition) })
		if gotID != wantID || gotEpoch != wantEpoch || !slices.Equal(keys(send), wantSend) || !slices.Equal(forget, wantForget) {
			t.Fatalf("next = (%d, %d, send %v, forget %v), want (%d, %d, send %v, forget %v)",
				gotID, gotEpoch, keys(send), forget, wantID, wantEpoch, wantSend, wantForget)
		}
	}
	// No session: full, asking for one.
	step(map[tpKey]sessionFields{a: f(10), b: f(20), c: f(5)}, 0, 0, []tpKey{a, b, c}, nil)
	s.accepted(7)
	// Nothing changed: an empty incremental request.
	step(map[tpKey]sessionFields{a: f(10), b: f(20), c: f(5)}, 7, 1, nil, nil)
	s.accepted(7)
	// a moved on; c is no longer fetched (backing off): forgotten.
	step(map[tpKey]sessionFields{a: f(12), b: f(20)}, 7, 2, []tpKey{a}, []tpKey{c})
	s.accepted(7)
	// c is back: it enters the session again; b's leader epoch changed.
	bNew := f(20)
	bNew.leaderEpoch = 4
	step(map[tpKey]sessionFields{a: f(12), b: bNew, c: f(5)}, 7, 3, []tpKey{b, c}, nil)
	// That request failed: the next is full, closing session 7.
	s.failed()
	step(map[tpKey]sessionFields{a: f(12), b: bNew, c: f(5)}, 7, 0, []tpKey{a, b, c}, nil)
	s.accepted(9)
	step(map[tpKey]sessionFields{a: f(12), b: bNew, c: f(5)}, 9, 1, nil, nil)
	// A leader without sessions (cache full or disabled) answers id 0:
	// every request stays full.
	s.failed()
	step(map[tpKey]sessionFields{a: f(12)}, 9, 0, []tpKey{a}, nil)
	s.accepted(0)
	step(map[tpKey]sessionFields{a: f(13)}, 0, 0, []tpKey{a}, nil)
	s.accepted(0)
	step(map[tpKey]sessionFields{a: f(13)}, 0, 0, []tpKey{a}, nil)
	// A partition the leader answered with an error goes out again (or
	// is forgotten when it backs off).
	s.resend(a)
	step(map[tpKey]sessionFields{a: f(13)}, 0, 0, []tpKey{a}, nil) // still no session: full
	s.accepted(12)
	s.resend(a)
	step(map[tpKey]sessionFields{a: f(13), b: bNew}, 12, 1, []tpKey{a, b}, nil)
	s.accepted(12)
	s.resend(b)
	step(map[tpKey]sessionFields{a: f(13)}, 12, 2, nil, []tpKey{b})
	s.accepted(12)
	s.resend(c) // not in the session: nothing
	step(map[tpKey]sessionFields{a: f(13)}, 12, 3, nil, nil)
	// The epoch wraps to 1 after MaxInt32, as the leader's does.
	s.accepted(12)
	s.epoch = math.MaxInt32
	step(map[tpKey]sessionFields{a: f(13)}, 12, math.MaxInt32, nil, nil)
	s.accepted(12)
	step(map[tpKey]sessionFields{a: f(14)}, 12, 1, []tpKey{a}, nil)
	// An incremental answer without our session (the leader closed it)
	// makes the next request full.
	s.accepted(0)
	step(map[tpKey]sessionFields{a: f(14)}, 0, 0, []tpKey{a}, nil)
}
