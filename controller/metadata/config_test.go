package metadata

import "testing"

// TestThrottledReplicasLists: the throttled-replicas topic configs take
// "", "*" or partition:broker pairs, and ThrottledReplica matches them.
func TestThrottledReplicasLists(t *testing.T) {
	for _, v := range []string{"", "*", "0:1", "0:1, 1:2,3:3"} {
		if err := ValidateTopicConfig(ConfigLeaderReplicationThrottledReplicas, v); err != nil {
			t.Errorf("%q: %v", v, err)
		}
	}
	for _, v := range []string{"0", "a:1", "0:-1", "0:1,", "**"} {
		if err := ValidateTopicConfig(ConfigFollowerReplicationThrottledReplicas, v); err == nil {
			t.Errorf("%q accepted", v)
		}
	}
	for _, tc := range []struct {
		list       string
		part, brok int32
		want       bool
	}{{"*", 5, 7, true}, {"", 0, 1, false}, {"0:1, 1:2", 1, 2, true}, {"0:1,1:2", 2, 1, false}, {"10:1", 1, 1, false}} {
		if got := ThrottledReplica(tc.list, tc.part, tc.brok); got != tc.want {
			t.Errorf("ThrottledReplica(%q, %d, %d) = %v", tc.list, tc.part, tc.brok, got)
		}
	}
}
