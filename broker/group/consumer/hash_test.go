package consumer

import (
	"fmt"
	"testing"

	"github.com/google/uuid"
)

// TestMetadataHashSeesOppositeCountChanges: one topic's partition count
// going up by one while another's goes down by one changes the group's
// metadata hash. Summing raw FNV-1a digests left it unchanged for many
// such pairs (FNV-1a is linear in its last byte, the count's), so the
// group epoch did not move and no member saw the new partitions.
func TestMetadataHashSeesOppositeCountChanges(t *testing.T) {
	collisions := 0
	for i := 0; i < 64; i++ {
		a, b := fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)
		g := &Group{subNames: map[string]int{a: 1, b: 1}}
		ida, idb := uuid.NewSHA1(uuid.Nil, []byte(a)), uuid.NewSHA1(uuid.Nil, []byte(b))
		for c := int32(2); c < 40; c++ {
			before := TopicImage{a: {ID: ida, Name: a, Partitions: c}, b: {ID: idb, Name: b, Partitions: c + 1}}
			after := TopicImage{a: {ID: ida, Name: a, Partitions: c + 1}, b: {ID: idb, Name: b, Partitions: c}}
			if g.metadataHash(before) == g.metadataHash(after) {
				collisions++
			}
		}
	}
	if collisions > 0 {
		t.Fatalf("%d of %d opposite count changes left the metadata hash unchanged", collisions, 64*38)
	}
}
