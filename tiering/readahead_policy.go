package tiering

import "time"

// The read-ahead depth policy: how many chunks ahead of a sequential
// reader are fetched, decided afresh each time the reader moves into a
// new chunk. Pure: the shell (reader_readahead.go) measures, this decides.
//
// A reader consuming R bytes/s from a store that answers a chunk GET in L
// seconds needs R·L/ChunkBytes chunks in the air to never wait, plus the
// one it is reading: that is the depth the measurements ask for. Measured
// rates lag, so the window also reacts to what happened: a read that
// waited for a chunk (a miss: read-ahead was not far enough ahead)
// doubles it at once, as Linux's readahead ramps up; a reader that never
// waits lets it shrink back one chunk at a time towards what its rate
// needs (once its rate is measured), so a slow consumer holds few chunks; read-ahead chunks evicted
// before anyone read them (the cache is too small for the windows) halve
// it. The result stays in [Min, Max].

// raInput is what the depth decision sees.
type raInput struct {
	Depth      int     // the current depth, chunks
	Stalled    bool    // the foreground read waited for a GET of a chunk
	Wasted     int64   // read-ahead chunks evicted unread since the last decision
	Rate       float64 // the reader's bytes per second (0: not measured yet)
	GetLatency time.Duration
	ChunkBytes int64
	Min, Max   int
}

// readAheadDepth returns the depth for the reader's next chunks.
func readAheadDepth(in raInput) int {
	need := 0
	if in.Rate > 0 && in.GetLatency > 0 && in.ChunkBytes > 0 {
		inFlight := in.Rate * in.GetLatency.Seconds() / float64(in.ChunkBytes)
		need = int(inFlight+0.999) + 1
	}
	d := in.Depth
	switch {
	case in.Wasted > 0:
		d /= 2
	case in.Stalled:
		d = max(2*d, need)
	case need > 0 && d > need+1:
		d--
	default:
		d = max(d, need)
	}
	return min(max(d, in.Min), in.Max)
}
