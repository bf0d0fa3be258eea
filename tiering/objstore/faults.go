package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path"
	"sync"
	"time"
)

var (
	// ErrInjected is the error a [Rule] without Err injects.
	ErrInjected = errors.New("objstore: injected fault")
	// ErrUnavailable is returned by every call of a [Faults] store that
	// is [Faults.Down].
	ErrUnavailable = errors.New("objstore: store unavailable")
)

// Rule says which calls a [Faults] store disturbs and how. A call matches
// when its op and key match; among matching calls the rule fires on the
// Nth (or every one, with probability Prob), at most Times times.
//
// What firing does, in order: sleep Latency (cut short by the caller's
// context, which is then returned); then
//   - LostAck (Put only): perform the Put, then return Err as if the
//     acknowledgement was lost on the way back;
//   - FailReadAfter > 0 (Get only): the Get succeeds but its reader
//     returns Err after that many bytes (a connection cut mid-body);
//   - Err != nil: return Err without calling the store;
//   - none of these: only the latency.
type Rule struct {
	Op  Op     // "" matches every op
	Key string // a path.Match glob ("*" stops at '/'); "" matches every key
	// Nth fires the rule on the Nth matching call (1-based); 0 fires on
	// every matching call (subject to Prob and Times).
	Nth int
	// Prob, if > 0, fires the rule on a matching call with this probability
	// (drawn from the store's seeded source, so a run is reproducible).
	Prob  float64
	Times int // fire at most this many times; 0: no bound

	Latency       time.Duration
	Err           error // for LostAck and FailReadAfter too; nil: ErrInjected
	LostAck       bool
	FailReadAfter int64
}

// Faults is an [ObjectStore] decorator for tests: it injects errors,
// latency, lost PUT acknowledgements and torn reads by [Rule], and an
// outage switch ([Faults.Down], [Faults.Up]). Safe for concurrent use.
type Faults struct {
	next ObjectStore

	mu    sync.Mutex // guards rules, seen, fired, down, rng
	rules []Rule
	seen  []int // matching calls per rule
	fired []int // firings per rule
	down  bool
	rng   *rand.Rand
}

// WithFaults wraps store with the given rules (more can be added with
// [Faults.Add]). Its random source is seeded with 1; see [Faults.Seed].
func WithFaults(store ObjectStore, rules ...Rule) *Faults {
	f := &Faults{next: store, rng: rand.New(rand.NewPCG(1, 1))}
	for _, r := range rules {
		f.Add(r)
	}
	return f
}

// Add appends a rule and returns its index, for [Faults.Fired].
func (f *Faults) Add(r Rule) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, r)
	f.seen = append(f.seen, 0)
	f.fired = append(f.fired, 0)
	return len(f.rules) - 1
}

// Clear removes every rule (the outage switch is left as it is).
func (f *Faults) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules, f.seen, f.fired = nil, nil, nil
}

// Seed reseeds the source Prob draws from.
func (f *Faults) Seed(seed uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rng = rand.New(rand.NewPCG(seed, seed))
}

// Fired returns how many times rule i has fired.
func (f *Faults) Fired(i int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fired[i]
}

// Down makes every call fail with [ErrUnavailable] until [Faults.Up].
// Readers already returned by Get fail their next Read too.
func (f *Faults) Down() { f.mu.Lock(); f.down = true; f.mu.Unlock() }

// Up ends an outage begun by [Faults.Down].
func (f *Faults) Up() { f.mu.Lock(); f.down = false; f.mu.Unlock() }

func (f *Faults) isDown() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.down }

// match returns the effect of the first rule that fires on this call,
// folding the latencies of every firing rule into it.
func (f *Faults) match(op Op, key string) (eff Rule, fired, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return Rule{}, false, true
	}
	for i, r := range f.rules {
		if r.Op != "" && r.Op != op {
			continue
		}
		if r.Key != "" {
			if ok, _ := path.Match(r.Key, key); !ok {
				continue
			}
		}
		f.seen[i]++
		if r.Times > 0 && f.fired[i] >= r.Times {
			continue
		}
		if r.Nth > 0 && f.seen[i] != r.Nth {
			continue
		}
		if r.Prob > 0 && f.rng.Float64() >= r.Prob {
			continue
		}
		f.fired[i]++
		lat := eff.Latency + r.Latency
		if !fired || (eff.Err == nil && !eff.LostAck && eff.FailReadAfter == 0) {
			eff = r
		}
		eff.Latency = lat
		fired = true
	}
	if fired && eff.Err == nil && (eff.LostAck || eff.FailReadAfter > 0) {
		eff.Err = ErrInjected
	}
	return eff, fired, false
}

// before applies the latency and the outage; it returns the effect and
// a non-nil error when the call must not reach the store.
func (f *Faults) before(ctx context.Context, op Op, key string) (Rule, error) {
	eff, fired, down := f.match(op, key)
	if down {
		return eff, fmt.Errorf("%w (%s %q)", ErrUnavailable, op, key)
	}
	if !fired {
		return eff, nil
	}
	if err := sleepCtx(ctx, eff.Latency); err != nil {
		return eff, err
	}
	if eff.Err != nil && !eff.LostAck && eff.FailReadAfter == 0 {
		return eff, eff.Err
	}
	return eff, nil
}

// Put implements [ObjectStore].
func (f *Faults) Put(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) (ObjectInfo, error) {
	eff, err := f.before(ctx, OpPut, key)
	if err != nil {
		return ObjectInfo{}, err
	}
	info, err := f.next.Put(ctx, key, r, size, opts)
	if err == nil && eff.LostAck {
		return ObjectInfo{}, eff.Err
	}
	return info, err
}

// Get implements [ObjectStore].
func (f *Faults) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	eff, err := f.before(ctx, OpGet, key)
	if err != nil {
		return nil, err
	}
	rc, err := f.next.Get(ctx, key, off, length)
	if err != nil {
		return nil, err
	}
	fr := &faultReader{rc: rc, f: f, left: -1}
	if eff.FailReadAfter > 0 {
		fr.left, fr.err = eff.FailReadAfter, eff.Err
	}
	return fr, nil
}

// faultReader tears a body after left bytes, or when the store goes down.
type faultReader struct {
	rc   io.ReadCloser
	f    *Faults
	left int64 // bytes before err; -1: no tear
	err  error
}

func (r *faultReader) Read(p []byte) (int, error) {
	if r.f.isDown() {
		return 0, ErrUnavailable
	}
	if r.left == 0 {
		return 0, r.err
	}
	if r.left > 0 && int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.rc.Read(p)
	if r.left > 0 {
		r.left -= int64(n)
	}
	return n, err
}

func (r *faultReader) Close() error { return r.rc.Close() }

// Head implements [ObjectStore].
func (f *Faults) Head(ctx context.Context, key string) (ObjectInfo, error) {
	if _, err := f.before(ctx, OpHead, key); err != nil {
		return ObjectInfo{}, err
	}
	return f.next.Head(ctx, key)
}

// List implements [ObjectStore]; rules match the prefix as the key.
func (f *Faults) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if _, err := f.before(ctx, OpList, prefix); err != nil {
		return nil, err
	}
	return f.next.List(ctx, prefix)
}

// Delete implements [ObjectStore].
func (f *Faults) Delete(ctx context.Context, key string) error {
	if _, err := f.before(ctx, OpDelete, key); err != nil {
		return err
	}
	return f.next.Delete(ctx, key)
}

// sleepCtx sleeps d or until ctx ends, returning ctx's error then.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
