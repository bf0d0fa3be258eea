package admincli

import (
	"flag"
	"io"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// The client quota tools of Kafka's kafka-configs.sh (--entity-type users,
// clients, ips): set and remove quotas through AlterClientQuotas, describe
// them through DescribeClientQuotas.
func quotaActions() []*action {
	return []*action{
		{name: "set", summary: "set (--add key=value) and remove (--delete key) quotas of one entity: --user/--user-default, --client-id/--client-default, or --ip/--ip-default", define: defineQuotaSet},
		{name: "describe", summary: "describe quotas: every entity, or those of --user/--user-default/--any-user, --client-id/--client-default/--any-client, --ip/--ip-default/--any-ip (--strict: only those components)", define: defineQuotaDescribe},
	}
}

// quotaEntityFlags name one component per entity type: a name, the
// type's default, or (describe) any.
type quotaEntityFlags struct {
	name           [3]*string
	def, anyOfType [3]*bool
}

var quotaTypes = [3]string{"user", "client-id", "ip"}

func defineQuotaEntityFlags(fs *flag.FlagSet, describe bool) *quotaEntityFlags {
	f := &quotaEntityFlags{}
	for i, flagName := range []string{"user", "client-id", "ip"} {
		short := map[string]string{"user": "user", "client-id": "client", "ip": "ip"}[flagName]
		f.name[i] = fs.String(flagName, "", "the "+quotaTypes[i]+" entity of this name")
		f.def[i] = fs.Bool(short+"-default", false, "the default "+quotaTypes[i]+" entity")
		if describe {
			f.anyOfType[i] = fs.Bool("any-"+short, false, "any "+quotaTypes[i]+" entity, the default included")
		}
	}
	return f
}

// entity returns the set's entity.
func (f *quotaEntityFlags) entity() (kadm.ClientQuotaEntity, error) {
	var e kadm.ClientQuotaEntity
	for i, typ := range quotaTypes {
		switch {
		case *f.name[i] != "" && *f.def[i]:
			return nil, usagef("give the %s entity's name or its default, not both", typ)
		case *f.name[i] != "":
			name := *f.name[i]
			e = append(e, kadm.ClientQuotaEntityComponent{Type: typ, Name: &name})
		case *f.def[i]:
			e = append(e, kadm.ClientQuotaEntityComponent{Type: typ})
		}
	}
	if len(e) == 0 {
		return nil, usagef("give an entity: --user, --client-id or --ip (or their -default forms)")
	}
	return e, nil
}

// components returns describe's filter.
func (f *quotaEntityFlags) components() ([]kadm.DescribeClientQuotaComponent, error) {
	var cs []kadm.DescribeClientQuotaComponent
	for i, typ := range quotaTypes {
		n := 0
		for _, b := range []bool{*f.name[i] != "", *f.def[i], *f.anyOfType[i]} {
			if b {
				n++
			}
		}
		if n > 1 {
			return nil, usagef("give one of the %s entity's name, default or any", typ)
		}
		switch {
		case *f.name[i] != "":
			name := *f.name[i]
			cs = append(cs, kadm.DescribeClientQuotaComponent{Type: typ, MatchName: &name, MatchType: 0})
		case *f.def[i]:
			cs = append(cs, kadm.DescribeClientQuotaComponent{Type: typ, MatchType: 1})
		case *f.anyOfType[i]:
			cs = append(cs, kadm.DescribeClientQuotaComponent{Type: typ, MatchType: 2})
		}
	}
	return cs, nil
}

// quotaRow is one quota value of one entity.
type quotaRow struct {
	Entity string  `json:"entity"`
	Key    string  `json:"key"`
	Value  float64 `json:"value"`
}

func (e *env) emitQuotas(rows []quotaRow) error {
	return e.emit(rows, func(w io.Writer) {
		row(w, "ENTITY", "KEY", "VALUE")
		for _, r := range rows {
			row(w, r.Entity, r.Key, strconv.FormatFloat(r.Value, 'f', -1, 64))
		}
	})
}

// entityString is kafka-configs' form of an entity: user=alice,
// client-id=<default>.
func entityString(e kadm.ClientQuotaEntity) string {
	parts := make([]string, len(e))
	for i, c := range e {
		parts[i] = c.String()
	}
	return strings.Join(parts, ",")
}

func defineQuotaSet(fs *flag.FlagSet) runFunc {
	f := defineQuotaEntityFlags(fs, false)
	var add kvFlags
	var del listFlag
	fs.Var(&add, "add", "a quota to set, key=value (repeatable; keys producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation_rate; connection_creation_rate for --ip)")
	fs.Var(&del, "delete", "a quota key to remove (repeatable)")
	validate := fs.Bool("validate-only", false, "check the change without making it")
	return func(e *env, pos []string) error {
		if len(pos) != 0 {
			return usagef("quota set takes no arguments, got %q", pos)
		}
		ent, err := f.entity()
		if err != nil {
			return err
		}
		var ops []kadm.AlterClientQuotaOp
		for _, k := range add.keys {
			v, err := strconv.ParseFloat(strings.TrimSpace(add.vals[k]), 64)
			if err != nil {
				return usagef("--add %s=%q: not a number", k, add.vals[k])
			}
			ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: v})
		}
		for _, k := range del {
			ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Remove: true})
		}
		if len(ops) == 0 {
			return usagef("give --add key=value or --delete key")
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		alter := e.adm.AlterClientQuotas
		if *validate {
			alter = e.adm.ValidateAlterClientQuotas
		}
		res, err := alter(ctx, []kadm.AlterClientQuotaEntry{{Entity: ent, Ops: ops}})
		if err != nil {
			return fail("set quotas", err, "")
		}
		for _, r := range res {
			if r.Err != nil {
				return fail("set quotas of "+entityString(ent), r.Err, r.ErrMessage)
			}
		}
		return nil
	}
}

func defineQuotaDescribe(fs *flag.FlagSet) runFunc {
	f := defineQuotaEntityFlags(fs, true)
	strict := fs.Bool("strict", false, "only entities with exactly the components given")
	return func(e *env, pos []string) error {
		if len(pos) != 0 {
			return usagef("quota describe takes no arguments, got %q", pos)
		}
		cs, err := f.components()
		if err != nil {
			return err
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		res, err := e.adm.DescribeClientQuotas(ctx, *strict, cs)
		if err != nil {
			return fail("describe quotas", err, "")
		}
		rows := []quotaRow{}
		for _, q := range res {
			for _, v := range q.Values {
				rows = append(rows, quotaRow{entityString(q.Entity), v.Key, v.Value})
			}
		}
		return e.emitQuotas(rows)
	}
}
