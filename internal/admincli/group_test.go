package admincli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func committedOf(t *testing.T, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	os, err := adm.FetchOffsets(testCtx(t), group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	os.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out
}

// TestGroupDescribeShowsLag consumes part of a topic with a group through
// the CLI (which commits what it printed), produces more, and checks group
// list and describe (table and JSON): committed offset, end and lag per
// partition and the total.
func TestGroupDescribeShowsLag(t *testing.T) {
	createTopic(t, "glag", 2)
	produceN(t, "glag", 0, 6)
	produceN(t, "glag", 1, 2)
	r := mustOK(t, "", "consume", "glag", "-g", "glag-g", "-c", "4", "-f", `%p %o\n`)
	if len(lines(r.stdout)) != 4 {
		t.Fatalf("consumed %q", r.stdout)
	}
	adm := newAdmin(t)
	c := committedOf(t, adm, "glag-g", "glag")
	if c[0]+c[1] != 4 {
		t.Fatalf("committed %v, want 4 records' worth", c)
	}
	produceN(t, "glag", 0, 3) // more than consumed: lag grows

	r = mustOK(t, "", "group", "describe", "glag-g", "--format", "json")
	var d groupDescribed
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if d.Group != "glag-g" || d.State != "Empty" || d.ProtocolType != "consumer" || d.Coordinator != 1 || len(d.Members) != 0 || len(d.Offsets) != 2 {
		t.Fatalf("describe %+v", d)
	}
	ends := map[int32]int64{0: 9, 1: 2}
	// committed is -1 for a partition the group never committed; its lag
	// is then counted from the log start (0), as kadm and Kafka's tool do.
	commit := func(p int32) int64 {
		if o, ok := c[p]; ok {
			return o
		}
		return -1
	}
	var total int64
	for i, o := range d.Offsets {
		if o.Topic != "glag" || o.Partition != int32(i) || o.Committed != commit(o.Partition) || o.LogEndOffset != ends[o.Partition] || o.Lag != ends[o.Partition]-max(0, commit(o.Partition)) || o.Error != "" {
			t.Errorf("offsets row %+v (committed %v)", o, c)
		}
		total += o.Lag
	}
	if d.TotalLag != 11-4 || total != d.TotalLag {
		t.Errorf("total lag %d (sum %d), want 7", d.TotalLag, total)
	}

	r = mustOK(t, "", "group", "describe", "glag-g")
	if !tableRow(r.stdout, "glag-g", "Empty", "-", "0", "7") {
		t.Errorf("describe header row: %s", r.stdout)
	}
	for p, end := range ends {
		if !tableRow(r.stdout, "glag", itoa(int64(p)), offsetText(commit(p)), itoa(end), itoa(end-max(0, commit(p))), "-", "-") {
			t.Errorf("describe lacks partition %d row: %s", p, r.stdout)
		}
	}

	r = mustOK(t, "", "group", "list")
	if !tableRow(r.stdout, "glag-g", "Empty", "consumer", "1", "classic", "-") {
		t.Errorf("group list: %s", r.stdout)
	}
	r = mustOK(t, "", "group", "list", "--format", "json")
	var gl []groupListed
	if err := json.Unmarshal([]byte(r.stdout), &gl); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range gl {
		found = found || (g.Group == "glag-g" && g.State == "Empty" && g.ProtocolType == "consumer" && g.Coordinator == 1)
	}
	if !found {
		t.Errorf("json group list %s", r.stdout)
	}

	// A second run of the group continues where the commit left off.
	r = mustOK(t, "", "consume", "glag", "-g", "glag-g", "-e", "-f", `%p %o\n`)
	if len(lines(r.stdout)) != 7 {
		t.Errorf("second run printed %d records, want the 7 of lag: %q", len(lines(r.stdout)), r.stdout)
	}
	if c := committedOf(t, adm, "glag-g", "glag"); c[0] != 9 || c[1] != 2 {
		t.Errorf("committed after -e run: %v", c)
	}

	wantFail(t, cli(t, "", "group", "describe", "no-such-group"), ExitFail, `describe group "no-such-group": GROUP_ID_NOT_FOUND`)
	wantFail(t, cli(t, "", "group", "describe"), ExitUsage, "group name")
}

func itoa(v int64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestGroupResetOffsets moves an inactive group's offsets every way and
// checks the result with kadm; a group with a live member is refused with
// Kafka's error and an explanation; delete refuses a live group too.
func TestGroupResetOffsets(t *testing.T) {
	createTopic(t, "grst", 2)
	produceN(t, "grst", 0, 10)
	produceN(t, "grst", 1, 4)
	adm := newAdmin(t)
	const g = "grst-g"
	if err := adm.CommitAllOffsets(testCtx(t), g, kadm.OffsetsFromRecords(
		kgo.Record{Topic: "grst", Partition: 0, Offset: 4}, kgo.Record{Topic: "grst", Partition: 1, Offset: 0})); err != nil {
		t.Fatal(err)
	}
	check := func(want map[int32]int64) {
		t.Helper()
		if got := committedOf(t, adm, g, "grst"); got[0] != want[0] || got[1] != want[1] {
			t.Fatalf("committed %v, want %v", got, want)
		}
	}
	check(map[int32]int64{0: 5, 1: 1})

	r := mustOK(t, "", "group", "reset-offsets", g, "--topic", "grst", "--to-earliest", "--dry-run")
	if !tableRow(r.stdout, "grst", "0", "5", "0", "dry", "run") {
		t.Errorf("dry run table %s", r.stdout)
	}
	check(map[int32]int64{0: 5, 1: 1})
	// Without --execute only the plan is shown, as Kafka's tool does.
	r = mustOK(t, "", "group", "reset-offsets", g, "--topic", "grst", "--to-earliest")
	if !tableRow(r.stdout, "grst", "0", "5", "0", "dry", "run") || !strings.Contains(r.stderr, "add --execute") {
		t.Errorf("reset without --execute: %v", r)
	}
	check(map[int32]int64{0: 5, 1: 1})
	wantFail(t, cli(t, "", "group", "reset-offsets", g, "--topic", "grst", "--to-earliest", "--dry-run", "--execute"), ExitUsage, "one of --dry-run and --execute")

	mustOK(t, "", "group", "reset-offsets", g, "--topic", "grst", "--to-earliest", "--execute")
	check(map[int32]int64{0: 0, 1: 0})
	mustOK(t, "", "group", "reset-offsets", g, "--topic", "grst", "--to-latest", "--execute")
	check(map[int32]int64{0: 10, 1: 4})
	mustOK(t, "", "group", "reset-offsets", g, "--topic", "grst", "--shift-by", "-3", "--execute")
	check(map[int32]int64{0: 7, 1: 1})
	mustOK(t, "", "group", "reset-offsets", g, "--topic", "grst", "--shift-by", "-100", "--execute")
	check(map[int32]int64{0: 0, 1: 0}) // clamped to the log start
	r = mustOK(t, "", "group", "reset-offsets", g, "--topic", "grst", "--to-offset", "6", "--format", "json", "--execute")
	var rs offsetsReset
	if err := json.Unmarshal([]byte(r.stdout), &rs); err != nil {
		t.Fatal(err)
	}
	if rs.Group != g || rs.DryRun || len(rs.Offsets) != 2 || rs.Offsets[0].Previous != 0 || rs.Offsets[0].New != 6 || rs.Offsets[1].New != 4 || rs.Offsets[1].Error != "" {
		t.Errorf("reset json %+v", rs)
	}
	check(map[int32]int64{0: 6, 1: 4}) // partition 1 clamped to its end

	// By timestamp: records produced now; a future time means the end, a
	// past one the start.
	mustOK(t, "", "group", "reset-offsets", g, "--topic", "grst", "--to-timestamp", "0", "--execute")
	check(map[int32]int64{0: 0, 1: 0})
	mustOK(t, "", "group", "reset-offsets", g, "--topic", "grst", "--to-timestamp", itoa(time.Now().Add(time.Hour).UnixMilli()), "--execute")
	check(map[int32]int64{0: 10, 1: 4})

	wantFail(t, cli(t, "", "group", "reset-offsets", g, "--topic", "grst"), ExitUsage, "exactly one of")
	wantFail(t, cli(t, "", "group", "reset-offsets", g, "--topic", "grst", "--to-earliest", "--to-latest"), ExitUsage, "exactly one of")
	wantFail(t, cli(t, "", "group", "reset-offsets", g, "--to-earliest"), ExitUsage, "--topic is required")
	wantFail(t, cli(t, "", "group", "reset-offsets", g, "--topic", "grst", "--to-offset", "x"), ExitUsage, `invalid value "x" for flag -to-offset`)
	wantFail(t, cli(t, "", "group", "reset-offsets", g, "--topic", "nope", "--to-earliest"), ExitFail, `topic "nope": UNKNOWN_TOPIC_OR_PARTITION`)
	wantFail(t, cli(t, "", "group", "reset-offsets", "fresh-group", "--topic", "grst", "--shift-by", "1"), ExitFail, "no committed offset")

	// A live member: Kafka refuses an admin commit; the CLI says why.
	member := newClient(t, kgo.ConsumerGroup(g), kgo.ConsumeTopics("grst"))
	ctx := testCtx(t)
	for ctx.Err() == nil {
		ds, err := adm.DescribeGroups(ctx, g)
		if err == nil && ds[g].State == "Stable" {
			break
		}
		pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
		member.PollRecords(pctx, 1)
		pcancel()
	}
	r = cli(t, "", "group", "describe", g, "--format", "json")
	var d groupDescribed
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || d.State != "Stable" || len(d.Members) != 1 || len(d.Members[0].Assigned) != 1 ||
		d.Members[0].Assigned[0].Topic != "grst" || len(d.Members[0].Assigned[0].Partitions) != 2 || d.Offsets[0].MemberID != d.Members[0].MemberID {
		t.Errorf("describe of a live group %+v %v: %s", d, err, r.stdout)
	}
	r = cli(t, "", "group", "describe", g)
	if !strings.Contains(r.stdout, "grst[0,1]") || !tableRow(r.stdout, "MEMBER-ID", "CLIENT-ID", "HOST", "ASSIGNED") {
		t.Errorf("describe table of a live group: %s", r.stdout)
	}
	r = cli(t, "", "group", "reset-offsets", g, "--topic", "grst", "--to-earliest", "--execute")
	wantFail(t, r, ExitFail, `reset offsets of group "grst-g"`, "Stable with 1 members", "inactive")
	if !strings.Contains(r.stderr, "ILLEGAL_GENERATION") && !strings.Contains(r.stderr, "UNKNOWN_MEMBER_ID") {
		t.Errorf("Kafka's error not relayed: %s", r.stderr)
	}
	wantFail(t, cli(t, "", "group", "delete", g), ExitFail, `delete group "grst-g"`, "NON_EMPTY_GROUP")

	member.Close() // leaves the group: now Empty
	r = mustOK(t, "", "group", "delete", g, "--format", "json")
	var del []struct {
		Group string `json:"group"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &del); err != nil || len(del) != 1 || del[0].Group != g || del[0].Error != "" {
		t.Errorf("delete json %s %v", r.stdout, err)
	}
	if gs, err := adm.ListGroups(testCtx(t)); err != nil || len(gs[g].Group) != 0 {
		t.Errorf("group still listed after delete: %v %v", gs, err)
	}
	wantFail(t, cli(t, "", "group", "delete", g), ExitFail, "GROUP_ID_NOT_FOUND")
	wantFail(t, cli(t, "", "group", "delete"), ExitUsage, "name the groups")
}

// TestGroupDescribeConsumerGroup: a KIP-848 group (franz-go with
// kgo.ServerSideBalancer) is described with its group and assignment
// epochs, the assignor, each member's epoch, state and current vs target
// partitions, and its committed offsets and lag; group list shows its type.
func TestGroupDescribeConsumerGroup(t *testing.T) {
	createTopic(t, "g848", 2)
	produceN(t, "g848", 0, 5)
	produceN(t, "g848", 1, 3)
	cl := newClient(t, kgo.ConsumerGroup("g848-g"), kgo.ConsumeTopics("g848"), kgo.ServerSideBalancer(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	got := 0
	for got < 8 {
		fs := cl.PollFetches(testCtx(t))
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	produceN(t, "g848", 1, 2) // lag 2 on partition 1

	var d consumerGroupDescribed
	deadline := time.Now().Add(testWait)
	for {
		r := mustOK(t, "", "group", "describe", "g848-g", "--format", "json")
		d = consumerGroupDescribed{}
		if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
			t.Fatalf("%v: %s", err, r.stdout)
		}
		if d.State == "Stable" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // poll until the group settles (bounded above)
	}
	if d.Type != "consumer" || d.State != "Stable" || d.Epoch < 1 || d.AssignmentEpoch != d.Epoch || d.Assignor != "uniform" ||
		len(d.Members) != 1 || len(d.Offsets) != 2 || d.TotalLag != 2 {
		t.Fatalf("describe %+v", d)
	}
	m := d.Members[0]
	if m.Epoch != d.Epoch || m.State != "STABLE" || len(m.Assigned) != 1 || int32s(m.Assigned[0].Partitions) != "0,1" ||
		!samePartitions(m.Assigned, m.Target) || strings.Join(m.Subscribed, ",") != "g848" {
		t.Fatalf("member %+v", m)
	}
	for _, o := range d.Offsets {
		if o.MemberID != m.MemberID || o.Lag != map[int32]int64{0: 0, 1: 2}[o.Partition] {
			t.Errorf("offsets row %+v", o)
		}
	}
	r := mustOK(t, "", "group", "describe", "g848-g")
	if !tableRow(r.stdout, "g848-g", "consumer", "Stable", itoa(int64(d.Epoch)), itoa(int64(d.Epoch)), "uniform", "1", "2") {
		t.Errorf("describe header: %s", r.stdout)
	}
	if !tableRow(r.stdout, m.MemberID, m.ClientID, m.Host, itoa(int64(m.Epoch)), "STABLE", "g848[0,1]", "g848[0,1]") {
		t.Errorf("describe member row: %s", r.stdout)
	}
	r = mustOK(t, "", "group", "list")
	if !tableRow(r.stdout, "g848-g", "Stable", "consumer", "1", "consumer", "-") {
		t.Errorf("group list: %s", r.stdout)
	}
}

// TestGroupDescribeShareGroup: a share group (members joined with
// ShareGroupHeartbeat) is described with its epochs, the simple assignor
// and each member's epoch, subscription and partitions (two members
// sharing a one-partition topic both hold it); group list shows type
// share.
func TestGroupDescribeShareGroup(t *testing.T) {
	createTopic(t, "sq", 1)
	cl := newClient(t)
	for _, m := range []string{"m1", "m2"} {
		var epoch int32
		for i := 0; i < 2; i++ { // join, then pick up the target of the group's epoch
			hb := kmsg.NewPtrShareGroupHeartbeatRequest()
			hb.GroupID, hb.MemberID, hb.MemberEpoch = "sq-g", m, epoch
			if epoch == 0 {
				hb.SubscribedTopicNames = []string{"sq"}
			}
			r, err := hb.RequestWith(testCtx(t), cl)
			if err == nil {
				err = kerr.ErrorForCode(r.ErrorCode)
			}
			if err != nil {
				t.Fatalf("heartbeat %s: %v", m, err)
			}
			epoch = r.MemberEpoch
		}
	}
	r := mustOK(t, "", "group", "describe", "sq-g", "--format", "json")
	var d shareGroupDescribed
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if d.Type != "share" || d.State != "Stable" || d.Epoch != 2 || d.AssignmentEpoch != 2 || d.Assignor != "simple" || len(d.Members) != 2 {
		t.Fatalf("describe %+v", d)
	}
	for _, m := range d.Members {
		if len(m.Assigned) != 1 || m.Assigned[0].Topic != "sq" || int32s(m.Assigned[0].Partitions) != "0" || strings.Join(m.Subscribed, ",") != "sq" {
			t.Errorf("member %+v", m)
		}
	}
	r = mustOK(t, "", "group", "describe", "sq-g")
	if !tableRow(r.stdout, "sq-g", "share", "Stable", "2", "2", "simple", "2") || !tableRow(r.stdout, "m1", d.Members[0].ClientID, d.Members[0].Host, itoa(int64(d.Members[0].Epoch)), "sq", "sq[0]") {
		t.Errorf("describe table: %s", r.stdout)
	}
	r = mustOK(t, "", "group", "list")
	if !tableRow(r.stdout, "sq-g", "Stable", "share", "1", "share", "0") {
		t.Errorf("group list: %s", r.stdout)
	}
}

// TestGroupDescribeShareGroupOffsets: an empty share group whose offsets
// were set (AlterShareGroupOffsets) is described with each share-partition's
// start offset and lag (DescribeShareGroupOffsets).
func TestGroupDescribeShareGroupOffsets(t *testing.T) {
	createTopic(t, "sqo", 2)
	produceN(t, "sqo", 1, 10)
	cl := newClient(t)
	for _, epoch := range []int32{0, -1} { // join, then leave: an empty share group
		hb := kmsg.NewPtrShareGroupHeartbeatRequest()
		hb.GroupID, hb.MemberID, hb.MemberEpoch = "sqo-g", "m1", epoch
		if epoch == 0 {
			hb.SubscribedTopicNames = []string{"sqo"}
		}
		r, err := hb.RequestWith(testCtx(t), cl)
		if err == nil {
			err = kerr.ErrorForCode(r.ErrorCode)
		}
		if err != nil {
			t.Fatalf("heartbeat epoch %d: %v", epoch, err)
		}
	}
	res, err := kadm.NewClient(cl).AlterShareGroupOffsets(testCtx(t), "sqo-g", kadm.Offsets{"sqo": {1: {At: 4}}})
	if err != nil || res.Error() != nil {
		t.Fatalf("alter share group offsets: %v %v", err, res.Error())
	}
	r := mustOK(t, "", "group", "describe", "sqo-g", "--format", "json")
	var d shareGroupDescribed
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if len(d.Offsets) != 1 || d.Offsets[0] != (shareOffsetDescribed{Topic: "sqo", Partition: 1, StartOffset: 4, Lag: 6}) {
		t.Fatalf("offsets %+v", d.Offsets)
	}
	r = mustOK(t, "", "group", "describe", "sqo-g")
	if !tableRow(r.stdout, "sqo", "1", "4", "6", "0", "-") {
		t.Errorf("describe table: %s", r.stdout)
	}
}

// TestGroupListShareGroupInFlight: group list shows a share group's
// in-flight records (delivered, not yet acknowledged or archived) summed
// over its share-partitions, from one DescribeShareGroupOffsets per share
// group; other groups have none ("-", no in_flight in the JSON).
func TestGroupListShareGroupInFlight(t *testing.T) {
	createTopic(t, "sqi", 2)
	produceN(t, "sqi", 0, 10)
	produceN(t, "sqi", 1, 6)
	mustOK(t, "", "consume", "sqi", "-g", "sqi-classic", "-e")
	cl := newClient(t)
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "sqi-g"
	for k, v := range map[string]string{"share.auto.offset.reset": "earliest", "share.delivery.count.limit": "10"} {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Resources[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("group configs: %v", err)
	}

	// Every record delivered once and released: all 16 are in flight
	// (available again, delivery count 1) once the releases are durable.
	sc := newClient(t, kgo.ShareGroup("sqi-g"), kgo.ConsumeTopics("sqi"))
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	seen := map[[2]int64]bool{}
	for len(seen) < 16 && ctx.Err() == nil {
		for _, r := range sc.PollFetches(ctx).Records() {
			seen[[2]int64{int64(r.Partition), r.Offset}] = true
			r.Ack(kgo.AckRelease)
		}
	}
	if len(seen) != 16 {
		t.Fatalf("the share consumer got %d of 16 records", len(seen))
	}
	if err := sc.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	var share, classic groupListed
	for {
		var gl []groupListed
		r := mustOK(t, "", "group", "list", "--format", "json")
		if err := json.Unmarshal([]byte(r.stdout), &gl); err != nil {
			t.Fatalf("%v: %s", err, r.stdout)
		}
		for _, g := range gl {
			switch g.Group {
			case "sqi-g":
				share = g
			case "sqi-classic":
				classic = g
			}
		}
		if share.InFlight != nil && *share.InFlight == 16 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("share group listed as %+v (in flight %v), want 16 in flight", share, share.InFlight)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if share.Type != "share" || classic.Type != "classic" || classic.InFlight != nil {
		t.Fatalf("listed %+v and %+v", share, classic)
	}
	r := mustOK(t, "", "group", "list")
	if !tableRow(r.stdout, "sqi-g", share.State, "share", "1", "share", "16") || !tableRow(r.stdout, "sqi-classic", "Empty", "consumer", "1", "classic", "-") {
		t.Errorf("group list: %s", r.stdout)
	}
}
