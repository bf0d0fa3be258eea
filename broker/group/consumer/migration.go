package consumer

import (
	"fmt"
	"strings"
)

// MigrationPolicy is group.consumer.migration.policy (KIP-848's online
// migration between classic and consumer groups): which conversions a
// group id may go through while it has members.
type MigrationPolicy uint8

// Migration policies, Kafka's names.
const (
	// MigrationBidirectional (Kafka's default) allows both conversions.
	MigrationBidirectional MigrationPolicy = iota
	// MigrationUpgrade allows classic → consumer only.
	MigrationUpgrade
	// MigrationDowngrade allows consumer → classic only.
	MigrationDowngrade
	// MigrationDisabled allows neither: a group id with members keeps its
	// type (empty groups still change type, as in Kafka).
	MigrationDisabled
)

var migrationNames = [...]string{"bidirectional", "upgrade", "downgrade", "disabled"}

// ParseMigrationPolicy parses a policy name, case-insensitively as Kafka.
func ParseMigrationPolicy(s string) (MigrationPolicy, error) {
	for i, n := range migrationNames {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return MigrationPolicy(i), nil
		}
	}
	return 0, fmt.Errorf("consumer: migration policy %q is not one of %s", s, strings.Join(migrationNames[:], ", "))
}

func (p MigrationPolicy) String() string {
	if int(p) < len(migrationNames) {
		return migrationNames[p]
	}
	return fmt.Sprintf("MigrationPolicy(%d)", uint8(p))
}

// UpgradeEnabled reports whether a classic group with members may become a
// consumer group.
func (p MigrationPolicy) UpgradeEnabled() bool {
	return p == MigrationBidirectional || p == MigrationUpgrade
}

// DowngradeEnabled reports whether a consumer group whose remaining members
// all speak the classic protocol may become a classic group.
func (p MigrationPolicy) DowngradeEnabled() bool {
	return p == MigrationBidirectional || p == MigrationDowngrade
}

// CanUpgrade decides, as Kafka's validateOnlineUpgrade, whether a classic
// group with members (protocolType its protocol type, members its member
// count) may be converted into a consumer group when a consumer-protocol
// member joins it: the policy allows upgrades, the group is a consumer
// group of the classic protocol (protocol type "consumer": its members'
// subscriptions and assignments are ConsumerProtocol bytes the conversion
// reads), and its members fit group.consumer.max.size (maxSize, 0
// unbounded). The reason says why not; the caller then answers the joining
// member as for any classic group with members (GROUP_ID_NOT_FOUND, "Group
// %s is not a consumer group").
func CanUpgrade(p MigrationPolicy, protocolType string, members, maxSize int) (ok bool, reason string) {
	switch {
	case !p.UpgradeEnabled():
		return false, "online upgrade is disabled (group.consumer.migration.policy=" + p.String() + ")"
	case protocolType != "consumer":
		return false, fmt.Sprintf("the classic group's protocol type is %q, not consumer", protocolType)
	case maxSize > 0 && members > maxSize:
		return false, fmt.Sprintf("its %d members exceed group.consumer.max.size (%d)", members, maxSize)
	}
	return true, ""
}
