package broker

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handlerFunc serves one decoded request. It returns the frame to send
// (nil: no response, as for Produce with acks=0) or an error, which closes
// the connection (Kafka's reaction to a request it cannot process).
type handlerFunc func(ctx context.Context, n *Node, r *request) (*frame, error)

// api is one registered API key: its version range and handler. Every
// handler runs on its connection's executor, one request at a time in
// arrival order (conn.go).
type api struct {
	key      int16
	min, max int16
	fn       handlerFunc
}

// apis is the registry, filled by each NN_*.go file's init. Reads after
// init need no lock.
var apis = map[int16]*api{}

// register adds an API served from minVersion up to the newest version kmsg
// knows (ApiVersions advertises exactly this range).
func register(key, minVersion int16, fn handlerFunc) {
	if _, dup := apis[key]; dup {
		panic("broker: api key registered twice")
	}
	req := kmsg.RequestForKey(key)
	if req == nil {
		panic("broker: kmsg does not know api key")
	}
	apis[key] = &api{key: key, min: minVersion, max: req.MaxVersion(), fn: authorizeFirst(key, fn)}
}

// registerMax adds an API served from minVersion up to maxVersion, for an
// API whose newer versions kmsg knows but Strata does not build yet (say
// EndTxn v5, transaction version 2): ApiVersions advertises only the
// range served, and a request above it is refused like any unknown version.
func registerMax(key, minVersion, maxVersion int16, fn handlerFunc) {
	register(key, minVersion, fn)
	if a := apis[key]; maxVersion < a.max {
		if maxVersion < minVersion {
			panic("broker: api max version below its min")
		}
		a.max = maxVersion
	}
}

// supportedAPIs returns the registry sorted by key (ApiVersions' order).
func supportedAPIs() []*api {
	out := make([]*api, 0, len(apis))
	for _, a := range apis {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}
