package tiering

import (
	"slices"
	"testing"

	"github.com/strata-io/strata/controller/metadata"
)

// FuzzDecodeEpochs: any bytes give entries or an error, never a panic;
// whatever decodes re-encodes to a canonical form that decodes to the
// same entries (the .epochs object is read back at restore).
func FuzzDecodeEpochs(f *testing.F) {
	f.Add([]byte("0\n0\n"))
	f.Add([]byte("0\n2\n0 0\n3 1500\n"))
	f.Add([]byte("0\n1\n7 42"))
	f.Add([]byte("1\n0\n"))
	f.Add([]byte("0\n2\n3 10\n2 20\n"))
	f.Add([]byte("0\n-1\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := DecodeEpochs(data)
		if err != nil {
			return
		}
		in := make([]metadata.EpochStart, len(es))
		for i, e := range es {
			in[i] = metadata.EpochStart{Epoch: e.Epoch, StartOffset: e.StartOffset}
		}
		again, err := DecodeEpochs(encodeEpochs(in))
		if err != nil || !slices.Equal(again, es) {
			t.Fatalf("decoded %v, re-encoded and decoded %v, %v", es, again, err)
		}
	})
}
