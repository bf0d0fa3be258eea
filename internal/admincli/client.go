package admincli

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// connect opens the kgo client (and its kadm admin) of this invocation and
// checks that a broker answers within --timeout, so an unreachable cluster
// is one line (`cannot reach brokers ...: dial tcp ...: connection
// refused`) in seconds instead of franz-go's retries against a dead seed.
//
// Every request is bounded twice: by the caller's context and by
// RetryTimeout, so a retriable error cannot keep a command past --timeout.
func (e *env) connect(ctx context.Context, extra ...kgo.Opt) error {
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(e.brokers...),
		kgo.ClientID("strata-cli"),
		kgo.DialTimeout(e.timeout),
		kgo.RetryTimeout(e.timeout),
		kgo.RequestTimeoutOverhead(e.timeout),
	}, e.sec.KgoOpts()...)
	opts = append(opts, extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("bad --brokers %q: %v", strings.Join(e.brokers, ","), err)
	}
	pctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		cl.Close()
		return fmt.Errorf("cannot reach brokers %s: %v", strings.Join(e.brokers, ","), err)
	}
	e.cl = cl
	e.adm = kadm.NewClient(cl)
	e.adm.SetTimeoutMillis(int32(min(e.timeout.Milliseconds(), 1<<31-1)))
	return nil
}

// admin connects and returns a context bounded by --timeout for the
// action's requests; cancel releases it.
func (e *env) admin() (context.Context, context.CancelFunc, error) {
	ctx, cancel := context.WithTimeout(context.Background(), e.timeout)
	if err := e.connect(ctx); err != nil {
		cancel()
		return nil, nil, err
	}
	return ctx, cancel, nil
}

func (e *env) close() {
	if e.cl != nil {
		e.cl.Close()
		e.cl, e.adm = nil, nil
	}
}

// topicDetail looks one topic up in the cluster's metadata, internal
// topics included (a command that names one means it). A topic the
// answer lacks is Kafka's UNKNOWN_TOPIC_OR_PARTITION; every error comes
// back reported as what's.
func (e *env) topicDetail(ctx context.Context, what, topic string) (kadm.TopicDetail, error) {
	details, err := e.adm.ListTopicsWithInternal(ctx, topic)
	if err != nil {
		return kadm.TopicDetail{}, fail(what, err, "")
	}
	t, ok := details[topic]
	if !ok {
		return kadm.TopicDetail{}, fail(what, errUnknownTopic, "")
	}
	if t.Err != nil {
		return kadm.TopicDetail{}, fail(what, t.Err, "")
	}
	return t, nil
}
