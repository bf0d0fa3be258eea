package admincli

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cluster reassign and cluster drain: partition reassignment (KIP-455,
// AlterPartitionReassignments / ListPartitionReassignments) as
// kafka-reassign-partitions.sh runs it — generate a plan, execute it,
// watch it, cancel it — and draining a broker of every replica. The plans
// are pure functions (generatePlan, drainPlan); the rest is kadm.

// reassignPlan is Kafka's reassignment JSON: {"version":1,"partitions":[...]}.
type reassignPlan struct {
	Version    int                `json:"version"`
	Partitions []plannedPartition `json:"partitions"`
}

type plannedPartition struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
}

// brokerRack is a broker as plans weigh it ("" rack: none).
type brokerRack struct {
	id   int32
	rack string
}

// arrangeByRack orders brokers so that consecutive ones alternate racks
// (Kafka's getRackAlternatedBrokerList): racks in name order, each rack's
// brokers by id, taken one from each rack in turn.
func arrangeByRack(brokers []brokerRack) []int32 {
	byRack := map[string][]int32{}
	var racks []string
	for _, b := range brokers {
		if _, ok := byRack[b.rack]; !ok {
			racks = append(racks, b.rack)
		}
		byRack[b.rack] = append(byRack[b.rack], b.id)
	}
	sort.Strings(racks)
	for _, r := range racks {
		slices.Sort(byRack[r])
	}
	var out []int32
	for i := 0; len(out) < len(brokers); i++ {
		for _, r := range racks {
			if i < len(byRack[r]) {
				out = append(out, byRack[r][i])
			}
		}
	}
	return out
}

// generatePlan assigns rf replicas to each partition over brokers, as
// Kafka's rack-aware assignment balances them: partition i's first
// replica (its preferred leader) is the i-th broker of the rack-alternated
// order, so leaders spread evenly; its followers follow in that order,
// shifted by one more every full round (so the pairs vary), skipping a
// rack already holding a replica while another rack has none.
func generatePlan(brokers []brokerRack, parts []plannedPartition, rf int) ([]plannedPartition, error) {
	if rf < 1 || rf > len(brokers) {
		return nil, fmt.Errorf("replication factor %d with %d brokers", rf, len(brokers))
	}
	order := arrangeByRack(brokers)
	rack := map[int32]string{}
	racks := map[string]bool{}
	for _, b := range brokers {
		rack[b.id] = b.rack
		racks[b.rack] = true
	}
	n := len(order)
	out := make([]plannedPartition, len(parts))
	for i, p := range parts {
		first := i % n
		shift := 1 + (i/n)%max(n-1, 1)
		reps := []int32{order[first]}
		used := map[string]bool{rack[order[first]]: true}
		for k := 0; len(reps) < rf && k < 2*n; k++ {
			b := order[(first+shift+k)%n]
			if slices.Contains(reps, b) {
				continue
			}
			if used[rack[b]] && len(used) < len(racks) && k < n {
				continue // another rack has no replica yet
			}
			reps = append(reps, b)
			used[rack[b]] = true
		}
		out[i] = plannedPartition{Topic: p.Topic, Partition: p.Partition, Replicas: reps}
	}
	return out, nil
}

// drainPlan moves every replica off node: in each partition holding it,
// the replica is replaced by the broker (not already a replica, not node)
// of node's rack if there is one, else any, holding the fewest replicas
// so far, placed last; a partition node led keeps its other replicas in
// order, so its next replica becomes the preferred leader.
func drainPlan(node int32, brokers []brokerRack, parts []plannedPartition) ([]plannedPartition, error) {
	load := map[int32]int{}
	rack := map[int32]string{}
	for _, b := range brokers {
		if b.id != node {
			load[b.id] = 0
		}
		rack[b.id] = b.rack
	}
	for _, p := range parts {
		for _, r := range p.Replicas {
			if _, ok := load[r]; ok {
				load[r]++
			}
		}
	}
	var out []plannedPartition
	for _, p := range parts {
		if !slices.Contains(p.Replicas, node) {
			continue
		}
		best := int32(-1)
		for _, b := range brokers {
			if b.id == node || slices.Contains(p.Replicas, b.id) {
				continue
			}
			better := best < 0 ||
				(b.rack == rack[node]) != (rack[best] == rack[node]) && b.rack == rack[node] ||
				(b.rack == rack[node]) == (rack[best] == rack[node]) && (load[b.id] < load[best] || load[b.id] == load[best] && b.id < best)
			if better {
				best = b.id
			}
		}
		if best < 0 {
			return nil, fmt.Errorf("%s-%d: no broker to take broker %d's replica (replication factor %d, %d brokers)", p.Topic, p.Partition, node, len(p.Replicas), len(brokers))
		}
		load[best]++
		var reps []int32
		for _, r := range p.Replicas {
			if r != node {
				reps = append(reps, r)
			}
		}
		out = append(out, plannedPartition{Topic: p.Topic, Partition: p.Partition, Replicas: append(reps, best)})
	}
	return out, nil
}

// clusterLayout reads the brokers and the partitions' current replicas.
func (e *env) clusterLayout(topics []string) ([]brokerRack, []plannedPartition, error) {
	ctx, cancel, err := e.admin()
	if err != nil {
		return nil, nil, err
	}
	defer cancel()
	m, err := e.adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, nil, fail("describe cluster", err, "")
	}
	var brokers []brokerRack
	for _, b := range m.Brokers {
		r := ""
		if b.Rack != nil {
			r = *b.Rack
		}
		brokers = append(brokers, brokerRack{b.NodeID, r})
	}
	sort.Slice(brokers, func(i, j int) bool { return brokers[i].id < brokers[j].id })
	var parts []plannedPartition
	names := m.Topics.Names()
	sort.Strings(names)
	for _, name := range names {
		t := m.Topics[name]
		if t.Err != nil {
			return nil, nil, fail("describe topic "+name, t.Err, "")
		}
		for _, p := range t.Partitions.Sorted() {
			parts = append(parts, plannedPartition{Topic: name, Partition: p.Partition, Replicas: nonNil(p.Replicas)})
		}
	}
	return brokers, parts, nil
}

func readPlan(path string, stdin io.Reader) (reassignPlan, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return reassignPlan{}, usagef("reassignment plan: %v", err)
	}
	var p reassignPlan
	if err := json.Unmarshal(b, &p); err != nil {
		return reassignPlan{}, usagef("reassignment plan %s: %v", path, err)
	}
	if len(p.Partitions) == 0 {
		return reassignPlan{}, usagef("reassignment plan %s names no partitions", path)
	}
	return p, nil
}

// reassignResult is one partition's answer to execute or cancel.
type reassignResult struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Error     string `json:"error,omitempty"`
}

// reassignStatus is one partition's state in status and drain.
type reassignStatus struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Target    []int32 `json:"target"`
	Replicas  []int32 `json:"replicas"`
	Adding    []int32 `json:"adding"`
	Removing  []int32 `json:"removing"`
	// State is "in-progress", "complete" (replicas are the target) or
	// "not-running" (no reassignment and replicas differ).
	State string `json:"state"`
}

func (e *env) alterAssignments(plan []plannedPartition, cancelIt bool) ([]reassignResult, error) {
	ctx, cancel, err := e.admin()
	if err != nil {
		return nil, err
	}
	defer cancel()
	var req kadm.AlterPartitionAssignmentsReq
	for _, p := range plan {
		if cancelIt {
			req.CancelAssign(p.Topic, p.Partition)
		} else {
			req.Assign(p.Topic, p.Partition, p.Replicas)
		}
	}
	rs, err := e.adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return nil, fail("alter partition reassignments", err, "")
	}
	var out []reassignResult
	for _, r := range rs.Sorted() {
		res := reassignResult{Topic: r.Topic, Partition: r.Partition}
		if r.Err != nil {
			res.Error = describeErr(r.Err, r.ErrMessage)
			fmt.Fprintf(e.stderr, "strata: reassign %s-%d: %s\n", r.Topic, r.Partition, res.Error)
		}
		out = append(out, res)
	}
	return out, nil
}

func (e *env) reassignStatuses(plan []plannedPartition) ([]reassignStatus, error) {
	ctx, cancel, err := e.admin()
	if err != nil {
		return nil, err
	}
	defer cancel()
	set := kadm.TopicsSet{}
	for _, p := range plan {
		set.Add(p.Topic, p.Partition)
	}
	running, err := e.adm.ListPartitionReassignments(ctx, set)
	if err != nil {
		return nil, fail("list partition reassignments", err, "")
	}
	// Metadata uncached (kadm's is up to metadata.min.age old): a drain
	// polls it to see partitions complete.
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range set.Topics() {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, e.cl)
	if err != nil {
		return nil, fail("describe topics", err, "")
	}
	current := map[string]map[int32][]int32{}
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		ps := map[int32][]int32{}
		for _, p := range t.Partitions {
			ps[p.Partition] = p.Replicas
		}
		current[*t.Topic] = ps
	}
	var out []reassignStatus
	for _, p := range plan {
		st := reassignStatus{Topic: p.Topic, Partition: p.Partition, Target: p.Replicas, Replicas: nonNil(current[p.Topic][p.Partition]), Adding: []int32{}, Removing: []int32{}}
		if r, ok := running[p.Topic][p.Partition]; ok {
			st.Replicas, st.Adding, st.Removing = nonNil(r.Replicas), nonNil(r.AddingReplicas), nonNil(r.RemovingReplicas)
			st.State = "in-progress"
		} else if slices.Equal(st.Replicas, p.Replicas) {
			st.State = "complete"
		} else {
			st.State = "not-running"
		}
		out = append(out, st)
	}
	return out, nil
}

func emitStatuses(e *env, sts []reassignStatus) error {
	return e.emit(sts, func(w io.Writer) {
		row(w, "TOPIC", "PARTITION", "TARGET", "REPLICAS", "ADDING", "REMOVING", "STATE")
		for _, s := range sts {
			row(w, s.Topic, s.Partition, ids(s.Target), ids(s.Replicas), ids(s.Adding), ids(s.Removing), s.State)
		}
	})
}

func emitResults(e *env, rs []reassignResult) error {
	failed := false
	if err := e.emit(rs, func(w io.Writer) {
		row(w, "TOPIC", "PARTITION", "RESULT")
		for _, r := range rs {
			s := "accepted"
			if r.Error != "" {
				s = "FAILED: " + r.Error
			}
			row(w, r.Topic, r.Partition, s)
		}
	}); err != nil {
		return err
	}
	for _, r := range rs {
		failed = failed || r.Error != ""
	}
	if failed {
		return reported{}
	}
	return nil
}

func parseIDs(s string) ([]int32, error) {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.ParseInt(f, 10, 32)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a broker id", f)
		}
		out = append(out, int32(n))
	}
	return out, nil
}

func defineClusterReassign(fs *flag.FlagSet) runFunc {
	generate := fs.Bool("generate", false, "print a balanced plan for --topics over --brokers (and the current assignment, to roll back)")
	topics := fs.String("topics", "", "with --generate: comma-separated topics")
	brokersFlag := fs.String("brokers-list", "", "with --generate: comma-separated broker ids to place on (default: every broker)")
	rf := fs.Int("replication-factor", 0, "with --generate: replicas per partition (default: each topic's current)")
	execute := fs.String("execute", "", "start the reassignment of a plan file (- for stdin)")
	status := fs.String("status", "", "show the progress of a plan file's reassignment (- for stdin)")
	cancelPlan := fs.String("cancel", "", "cancel the reassignment of a plan file's partitions (- for stdin)")
	return func(e *env, pos []string) error {
		if len(pos) != 0 {
			return usagef("cluster reassign takes no arguments, got %q", pos)
		}
		modes := 0
		for _, on := range []bool{*generate, *execute != "", *status != "", *cancelPlan != ""} {
			if on {
				modes++
			}
		}
		if modes != 1 {
			return usagef("give exactly one of --generate, --execute, --status and --cancel")
		}
		switch {
		case *generate:
			if *topics == "" {
				return usagef("--generate needs --topics")
			}
			names := strings.Split(*topics, ",")
			brokers, parts, err := e.clusterLayout(names)
			if err != nil {
				return err
			}
			if *brokersFlag != "" {
				want, err := parseIDs(*brokersFlag)
				if err != nil {
					return usagef("--brokers-list: %v", err)
				}
				var kept []brokerRack
				for _, b := range brokers {
					if slices.Contains(want, b.id) {
						kept = append(kept, b)
					}
				}
				if len(kept) != len(want) {
					return usagef("--brokers-list %s names brokers the cluster does not have", *brokersFlag)
				}
				brokers = kept
			}
			var plan []plannedPartition
			for _, name := range names {
				var tp []plannedPartition
				for _, p := range parts {
					if p.Topic == name {
						tp = append(tp, p)
					}
				}
				if len(tp) == 0 {
					return usagef("topic %q not found", name)
				}
				factor := *rf
				if factor == 0 {
					factor = len(tp[0].Replicas)
				}
				got, err := generatePlan(brokers, tp, factor)
				if err != nil {
					return usagef("%s: %v", name, err)
				}
				plan = append(plan, got...)
			}
			return e.emit(struct {
				Current  reassignPlan `json:"current"`
				Proposed reassignPlan `json:"proposed"`
			}{reassignPlan{1, parts}, reassignPlan{1, plan}}, func(w io.Writer) {
				cur, _ := json.Marshal(reassignPlan{1, parts})
				prop, _ := json.Marshal(reassignPlan{1, plan})
				fmt.Fprintf(w, "Current partition replica assignment (save it to roll back):\n%s\n\nProposed partition reassignment:\n%s\n", cur, prop)
			})
		case *execute != "":
			p, err := readPlan(*execute, e.stdin)
			if err != nil {
				return err
			}
			rs, err := e.alterAssignments(p.Partitions, false)
			if err != nil {
				return err
			}
			return emitResults(e, rs)
		case *cancelPlan != "":
			p, err := readPlan(*cancelPlan, e.stdin)
			if err != nil {
				return err
			}
			rs, err := e.alterAssignments(p.Partitions, true)
			if err != nil {
				return err
			}
			return emitResults(e, rs)
		default:
			p, err := readPlan(*status, e.stdin)
			if err != nil {
				return err
			}
			sts, err := e.reassignStatuses(p.Partitions)
			if err != nil {
				return err
			}
			return emitStatuses(e, sts)
		}
	}
}

func defineClusterDrain(fs *flag.FlagSet) runFunc {
	wait := fs.Duration("wait", 0, "wait up to this long for the moves to complete, reporting progress (0: start them and return)")
	dryRun := fs.Bool("dry-run", false, "print the plan, move nothing")
	return func(e *env, pos []string) error {
		if len(pos) != 1 {
			return usagef("cluster drain takes one broker id, got %q", pos)
		}
		ids, err := parseIDs(pos[0])
		if err != nil || len(ids) != 1 {
			return usagef("cluster drain: %q is not a broker id", pos[0])
		}
		node := ids[0]
		brokers, parts, err := e.clusterLayout(nil)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(brokers, func(b brokerRack) bool { return b.id == node }) {
			return usagef("cluster drain: broker %d is not registered", node)
		}
		plan, err := drainPlan(node, brokers, parts)
		if err != nil {
			return fail("plan the drain", err, "")
		}
		if len(plan) == 0 || *dryRun {
			return e.emit(reassignPlan{1, nonNilPlan(plan)}, func(w io.Writer) {
				if len(plan) == 0 {
					fmt.Fprintf(w, "broker %d holds no replicas\n", node)
					return
				}
				b, _ := json.Marshal(reassignPlan{1, plan})
				fmt.Fprintf(w, "%s\n", b)
			})
		}
		rs, err := e.alterAssignments(plan, false)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.Error != "" {
				return emitResults(e, rs)
			}
		}
		deadline := time.Now().Add(*wait)
		for {
			sts, err := e.reassignStatuses(plan)
			if err != nil {
				return err
			}
			done := 0
			for _, s := range sts {
				if s.State == "complete" {
					done++
				}
			}
			if *wait == 0 || done == len(sts) || time.Now().After(deadline) {
				if *wait > 0 && done < len(sts) {
					fmt.Fprintf(e.stderr, "strata: drain of broker %d: %d of %d partitions moved when --wait ran out\n", node, done, len(sts))
					if err := emitStatuses(e, sts); err != nil {
						return err
					}
					return reported{}
				}
				return emitStatuses(e, sts)
			}
			fmt.Fprintf(e.stderr, "strata: drain of broker %d: %d of %d partitions moved\n", node, done, len(sts))
			time.Sleep(min(500*time.Millisecond, time.Until(deadline)))
		}
	}
}

func nonNilPlan(p []plannedPartition) []plannedPartition {
	if p == nil {
		return []plannedPartition{}
	}
	return p
}

// unregistered is the JSON of cluster unregister.
type unregistered struct {
	Broker       int32 `json:"broker"`
	Unregistered bool  `json:"unregistered"`
}

func defineClusterUnregister(fs *flag.FlagSet) runFunc {
	force := fs.Bool("force", false, "unregister even a broker that still holds replicas or is running")
	return func(e *env, pos []string) error {
		if len(pos) != 1 {
			return usagef("cluster unregister takes one broker id, got %q", pos)
		}
		ids, err := parseIDs(pos[0])
		if err != nil || len(ids) != 1 {
			return usagef("cluster unregister: %q is not a broker id", pos[0])
		}
		node := ids[0]
		brokers, parts, err := e.clusterLayout(nil)
		if err != nil {
			return err
		}
		if !*force {
			// Decommissioning is drain, stop, unregister: a replica left
			// on it stays an offline replica, a running broker registers
			// again at its next heartbeat.
			var held []string
			for _, p := range parts {
				if slices.Contains(p.Replicas, node) {
					held = append(held, fmt.Sprintf("%s-%d", p.Topic, p.Partition))
				}
			}
			if len(held) > 0 {
				return fail("unregister broker "+strconv.Itoa(int(node)), fmt.Errorf("it still holds replicas of %d partitions (%s)", len(held), strings.Join(held[:min(3, len(held))], ", ")),
					fmt.Sprintf("drain it first (strata cluster drain %d --wait 10m), or --force", node))
			}
			if slices.ContainsFunc(brokers, func(b brokerRack) bool { return b.id == node }) {
				return fail("unregister broker "+strconv.Itoa(int(node)), errors.New("it is running (listed in the cluster's metadata)"),
					"stop it first: a running broker registers again at its next heartbeat (or --force)")
			}
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		req := kmsg.NewPtrUnregisterBrokerRequest()
		req.BrokerID = node
		resp, err := req.RequestWith(ctx, e.cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			msg := ""
			if resp != nil && resp.ErrorMessage != nil {
				msg = *resp.ErrorMessage
			}
			return fail("unregister broker "+strconv.Itoa(int(node)), err, msg)
		}
		return e.emit(unregistered{node, true}, func(w io.Writer) { fmt.Fprintf(w, "broker %d unregistered\n", node) })
	}
}
