package broker

// ApiVersions (key 18), versions 0 through kmsg's newest (5).
//
// Behaviour: lists every API key in the registry with the version range its
// NN_*.go file registered (first version using record batch v2, or 0 for
// APIs that carry no records, up to kmsg's MaxVersion), so what is
// advertised is exactly what the dispatcher accepts. v3+ adds
// FinalizedFeaturesEpoch -1 and no features.
//
// One deliberate exception, as in Kafka 4.0 (KAFKA-18659): Produce is
// advertised from v0 although only v3+ is served. librdkafka before 2.10
// compresses with gzip, snappy or lz4 only if the broker lists Produce v0,
// and otherwise sends every batch uncompressed without a word (found by
// compat_kcat_test.go with Debian's librdkafka 2.0.2). Clients pick the
// highest version both sides know, so none sends v0-v2; one that does is
// closed like any version outside the registered range.
//
// A request whose version is above the newest known gets Kafka's KIP-511
// fallback: a v0 response with UNSUPPORTED_VERSION and only the ApiVersions
// range, so the client can retry with a version both sides know. The
// response header is always v0 (no tagged fields), as in Kafka.
//
// Differences from Kafka: no supported/finalized features (no
// metadata.version negotiation yet); ClientSoftwareName/Version are not
// validated.

import (
	"context"
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	apiVersionsKey = 18
	produceKey     = 0
)

func init() { register(apiVersionsKey, 0, handleAPIVersions) }

func handleAPIVersions(_ context.Context, n *Node, r *request) (*frame, error) {
	resp := kmsg.NewPtrApiVersionsResponse()
	for _, a := range supportedAPIs() {
		if (a.key == consumerGroupHeartbeatKey || a.key == consumerGroupDescribeKey) && !n.cfg.GroupConsumerProtocol {
			continue // group.coordinator.rebalance.protocols without consumer
		}
		if (a.key == shareGroupHeartbeatKey || a.key == shareGroupDescribeKey || a.key == shareFetchKey || a.key == shareAcknowledgeKey ||
			a.key == describeShareGroupOffsetsKey || a.key == alterShareGroupOffsetsKey || a.key == deleteShareGroupOffsetsKey) && !n.shareGroupsOn() {
			continue // share groups off (share_groups.go)
		}
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
		if a.key == produceKey {
			k.MinVersion = 0 // KAFKA-18659: see above
		}
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	resp.FinalizedFeaturesEpoch = -1
	return encodeResponse(r, resp), nil
}

// apiVersionsFallback answers an ApiVersions request of a version this
// broker does not know (its body is not decoded: its layout is unknown).
func apiVersionsFallback(r *request) *frame {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	a := apis[apiVersionsKey]
	k := kmsg.NewApiVersionsResponseApiKey()
	k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
	resp.ApiKeys = append(resp.ApiKeys, k)
	buf := make([]byte, sizeLen, 64)
	buf = binary.BigEndian.AppendUint32(buf, uint32(r.correlationID))
	buf = resp.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-sizeLen))
	return &frame{buf: buf}
}
