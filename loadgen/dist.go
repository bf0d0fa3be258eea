package loadgen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
)

// SizeSampler draws record value sizes from a [SizeDist]. Not safe for
// concurrent use: each producer has its own.
type SizeSampler struct {
	kind            string
	fixed, min, max int
	mean, stddev    float64
	rng             *rand.Rand
}

// NewSizeSampler checks d and returns its sampler, seeded with seed.
// Every size is at least 8 bytes (the send timestamp the value carries).
// normal draws are clamped to [Min, Max] (defaults: 8 and Mean+4×Stddev).
func NewSizeSampler(d SizeDist, seed uint64) (*SizeSampler, error) {
	s := &SizeSampler{kind: d.Kind, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	get := func(field, v string, def int64) (int, error) {
		if v == "" {
			if def < 0 {
				return 0, fmt.Errorf("loadgen: workload recordSize.%s: needed for kind %s", field, d.Kind)
			}
			return int(def), nil
		}
		n, err := ParseSize(v)
		if err != nil {
			return 0, fmt.Errorf("loadgen: workload recordSize.%s: %w", field, err)
		}
		if n < minRecordSize || n > 256<<20 {
			return 0, fmt.Errorf("loadgen: workload recordSize.%s: %d bytes, want 8 B to 256 MiB (each value starts with an 8-byte send timestamp)", field, n)
		}
		return int(n), nil
	}
	var err error
	switch d.Kind {
	case "fixed":
		s.fixed, err = get("size", d.Size, -1)
	case "uniform":
		if s.min, err = get("min", d.Min, -1); err == nil {
			s.max, err = get("max", d.Max, -1)
		}
		if err == nil && s.max < s.min {
			err = fmt.Errorf("loadgen: workload recordSize: max %d < min %d", s.max, s.min)
		}
	case "normal":
		var mean, sd int
		if mean, err = get("mean", d.Mean, -1); err != nil {
			return nil, err
		}
		if d.Stddev == "" {
			return nil, fmt.Errorf("loadgen: workload recordSize.stddev: needed for kind normal")
		}
		var sd64 int64
		if sd64, err = ParseSize(d.Stddev); err != nil {
			return nil, fmt.Errorf("loadgen: workload recordSize.stddev: %w", err)
		}
		sd = int(sd64)
		s.mean, s.stddev = float64(mean), float64(sd)
		if s.min, err = get("min", d.Min, minRecordSize); err == nil {
			s.max, err = get("max", d.Max, int64(min(mean+4*sd, 256<<20)))
		}
		if err == nil && (s.max < s.min || mean < s.min || mean > s.max) {
			err = fmt.Errorf("loadgen: workload recordSize: want min <= mean <= max, have %d, %d, %d", s.min, mean, s.max)
		}
	default:
		err = fmt.Errorf("loadgen: workload recordSize.kind %q, want fixed, uniform or normal", d.Kind)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Max is the largest size Next can return (the value buffers' capacity).
func (s *SizeSampler) Max() int {
	if s.kind == "fixed" {
		return s.fixed
	}
	return s.max
}

// Next draws one size.
func (s *SizeSampler) Next() int {
	switch s.kind {
	case "uniform":
		return s.min + s.rng.IntN(s.max-s.min+1)
	case "normal":
		v := int(math.Round(s.rng.NormFloat64()*s.stddev + s.mean))
		return min(max(v, s.min), s.max)
	default:
		return s.fixed
	}
}

// KeyGen draws record keys: none (nil keys; the client's sticky
// partitioner spreads batches), round-robin over the key space, uniform,
// or zipf (rank 0 the most frequent). Not safe for concurrent use.
type KeyGen struct {
	kind  string
	space uint64
	n     uint64
	rng   *rand.Rand
	zipf  *rand.Zipf
}

// NewKeyGen returns the key generator of kind over space distinct keys.
func NewKeyGen(kind string, space int, zipfS float64, seed uint64) (*KeyGen, error) {
	if space < 1 {
		return nil, fmt.Errorf("loadgen: key space %d, want >= 1", space)
	}
	g := &KeyGen{kind: kind, space: uint64(space), rng: rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d))}
	switch kind {
	case "none", "round-robin", "uniform":
	case "zipf":
		if zipfS <= 1 {
			return nil, fmt.Errorf("loadgen: zipf exponent %v, want > 1", zipfS)
		}
		g.zipf = rand.NewZipf(g.rng, zipfS, 1, uint64(space-1))
	default:
		return nil, fmt.Errorf("loadgen: keys %q, want none, round-robin, uniform or zipf", kind)
	}
	return g, nil
}

// NextIndex returns the next key's index in [0, space), or -1 for none.
func (g *KeyGen) NextIndex() int64 {
	switch g.kind {
	case "round-robin":
		i := g.n % g.space
		g.n++
		return int64(i)
	case "uniform":
		return int64(g.rng.Uint64N(g.space))
	case "zipf":
		return int64(g.zipf.Uint64())
	default:
		return -1
	}
}

// AppendKey appends the next key ("k" and the decimal index) to dst, or
// returns nil for none. Producers pass the key buffer of a record whose
// promise has fired, so keys cost no allocation.
func (g *KeyGen) AppendKey(dst []byte) []byte {
	i := g.NextIndex()
	if i < 0 {
		return nil
	}
	return strconv.AppendInt(append(dst, 'k'), i, 10)
}
