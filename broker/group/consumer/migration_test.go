package consumer

import (
	"strings"
	"testing"
)

func TestMigrationPolicy(t *testing.T) {
	for _, tc := range []struct {
		name               string
		upgrade, downgrade bool
	}{
		{"bidirectional", true, true},
		{"UPGRADE", true, false},
		{" downgrade ", false, true},
		{"Disabled", false, false},
	} {
		p, err := ParseMigrationPolicy(tc.name)
		if err != nil {
			t.Fatalf("%q: %v", tc.name, err)
		}
		if p.UpgradeEnabled() != tc.upgrade || p.DowngradeEnabled() != tc.downgrade {
			t.Errorf("%q (%s): upgrade %v downgrade %v, want %v %v", tc.name, p, p.UpgradeEnabled(), p.DowngradeEnabled(), tc.upgrade, tc.downgrade)
		}
		if q, _ := ParseMigrationPolicy(p.String()); q != p {
			t.Errorf("%q: String %q does not parse back", tc.name, p)
		}
	}
	if _, err := ParseMigrationPolicy("sideways"); err == nil {
		t.Error("sideways parsed")
	}
}

func TestCanUpgrade(t *testing.T) {
	for _, tc := range []struct {
		policy        MigrationPolicy
		protocolType  string
		members, max  int
		want          bool
		reasonContain string
	}{
		{MigrationBidirectional, "consumer", 3, 0, true, ""},
		{MigrationUpgrade, "consumer", 3, 3, true, ""},
		{MigrationDowngrade, "consumer", 3, 0, false, "disabled"},
		{MigrationDisabled, "consumer", 1, 0, false, "disabled"},
		{MigrationBidirectional, "connect", 1, 0, false, `"connect"`},
		{MigrationBidirectional, "consumer", 4, 3, false, "group.consumer.max.size (3)"},
	} {
		ok, reason := CanUpgrade(tc.policy, tc.protocolType, tc.members, tc.max)
		if ok != tc.want || !strings.Contains(reason, tc.reasonContain) || (ok && reason != "") {
			t.Errorf("%s %q %d/%d: %v %q, want %v containing %q", tc.policy, tc.protocolType, tc.members, tc.max, ok, reason, tc.want, tc.reasonContain)
		}
	}
}
