package admincli

import (
	"bufio"
	"flag"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// The SCRAM users of Kafka's kafka-configs.sh --entity-type users
// --add-config 'SCRAM-SHA-256=[...]': create, list and delete credentials
// through AlterUserScramCredentials and DescribeUserScramCredentials
// (KIP-554). The password never comes from the command line alone: it is
// read from --password-file (- for stdin) or $STRATA_PASSWORD; kadm salts
// it on the client, so only the salted password leaves this process.
func userActions() []*action {
	return []*action{
		{name: "create", args: "NAME", summary: "create or replace NAME's SCRAM credentials (password from --password-file, - for stdin, or $STRATA_PASSWORD)", define: defineUserCreate},
		{name: "list", args: "[NAME...]", summary: "list users with SCRAM credentials: mechanism and iterations (never a password)", define: defineUserList},
		{name: "delete", args: "NAME", summary: "delete NAME's SCRAM credentials (--mechanism, default every one NAME has)", define: defineUserDelete},
	}
}

// PasswordEnv is the environment variable `strata user create` reads the
// password from when no --password-file is given.
const PasswordEnv = "STRATA_PASSWORD"

// userRow is one credential as the user actions print it.
type userRow struct {
	User       string `json:"user"`
	Mechanism  string `json:"mechanism,omitempty"`
	Iterations int32  `json:"iterations,omitempty"`
	Error      string `json:"error,omitempty"`
}

func (e *env) emitUsers(rows []userRow) error {
	return e.emit(rows, func(w io.Writer) {
		row(w, "USER", "MECHANISM", "ITERATIONS", "STATUS")
		for _, r := range rows {
			status, it := "ok", ""
			if r.Error != "" {
				status = "error: " + r.Error
			}
			if r.Iterations > 0 {
				it = strconv.Itoa(int(r.Iterations))
			}
			row(w, r.User, r.Mechanism, it, status)
		}
	})
}

// parseMechanisms reads --mechanism: SCRAM-SHA-256, SCRAM-SHA-512 or both,
// comma-separated, any case.
func parseMechanisms(s string) ([]kadm.ScramMechanism, error) {
	var out []kadm.ScramMechanism
	for _, m := range splitList(s) {
		switch strings.ToUpper(m) {
		case "SCRAM-SHA-256":
			out = append(out, kadm.ScramSha256)
		case "SCRAM-SHA-512":
			out = append(out, kadm.ScramSha512)
		default:
			return nil, usagef("--mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", m)
		}
	}
	return out, nil
}

// readPassword returns the password of --password-file (the first line;
// "-" reads stdin) or else $STRATA_PASSWORD.
func (e *env) readPassword(file string) (string, error) {
	var r io.Reader
	switch file {
	case "":
		if p := os.Getenv(PasswordEnv); p != "" {
			return p, nil
		}
		return "", usagef("give the password in $%s or --password-file FILE (- for stdin)", PasswordEnv)
	case "-":
		r = e.stdin
	default:
		f, err := os.Open(file)
		if err != nil {
			return "", fail("read the password", err, "")
		}
		defer f.Close()
		r = f
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", fail("read the password", err, "")
	}
	p := strings.TrimRight(line, "\r\n")
	if p == "" {
		return "", usagef("the password is empty")
	}
	return p, nil
}

func defineUserCreate(fs *flag.FlagSet) runFunc {
	mech := fs.String("mechanism", "SCRAM-SHA-256", "SCRAM-SHA-256, SCRAM-SHA-512, or both comma-separated")
	iters := fs.Int("iterations", 4096, "SCRAM iterations, 4096 to 16384")
	pwFile := fs.String("password-file", "", "file whose first line is the password; - for stdin (default: $"+PasswordEnv+")")
	return func(e *env, pos []string) error {
		if len(pos) != 1 || pos[0] == "" {
			return usagef("user create takes one user NAME, got %q", pos)
		}
		mechs, err := parseMechanisms(*mech)
		if err != nil {
			return err
		}
		if len(mechs) == 0 {
			return usagef("--mechanism is required")
		}
		if *iters < 4096 || *iters > 16384 {
			return usagef("--iterations %d: want 4096 to 16384", *iters)
		}
		pass, err := e.readPassword(*pwFile)
		if err != nil {
			return err
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		var rows []userRow
		failed := false
		// One request per mechanism: Kafka refuses a user named twice
		// in one AlterUserScramCredentials (DUPLICATE_RESOURCE).
		for _, m := range mechs {
			res, err := e.adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: pos[0], Mechanism: m, Iterations: int32(*iters), Password: pass}})
			if err != nil {
				return fail("create user", err, "")
			}
			r := userRow{User: pos[0], Mechanism: m.String(), Iterations: int32(*iters)}
			if a, ok := res[pos[0]]; !ok {
				r.Error, failed = "no result for the user", true
			} else if a.Err != nil {
				r.Error, failed = describeErr(a.Err, a.ErrMessage), true
			}
			rows = append(rows, r)
		}
		if err := e.emitUsers(rows); err != nil {
			return err
		}
		if failed {
			return reported{}
		}
		return nil
	}
}

func defineUserList(fs *flag.FlagSet) runFunc {
	return func(e *env, pos []string) error {
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		res, err := e.adm.DescribeUserSCRAMs(ctx, pos...)
		if err != nil {
			return fail("list users", err, "")
		}
		names := make([]string, 0, len(res))
		for u := range res {
			names = append(names, u)
		}
		sort.Strings(names)
		rows := []userRow{}
		failed := false
		for _, u := range names {
			d := res[u]
			if d.Err != nil {
				rows, failed = append(rows, userRow{User: u, Error: describeErr(d.Err, d.ErrMessage)}), true
				continue
			}
			for _, c := range d.CredInfos {
				rows = append(rows, userRow{User: u, Mechanism: c.Mechanism.String(), Iterations: c.Iterations})
			}
		}
		if err := e.emitUsers(rows); err != nil {
			return err
		}
		if failed {
			return reported{}
		}
		return nil
	}
}

func defineUserDelete(fs *flag.FlagSet) runFunc {
	mech := fs.String("mechanism", "", "SCRAM-SHA-256, SCRAM-SHA-512 or both (default: every mechanism the user has)")
	return func(e *env, pos []string) error {
		if len(pos) != 1 || pos[0] == "" {
			return usagef("user delete takes one user NAME, got %q", pos)
		}
		mechs, err := parseMechanisms(*mech)
		if err != nil {
			return err
		}
		ctx, cancel, err := e.admin()
		if err != nil {
			return err
		}
		defer cancel()
		if len(mechs) == 0 {
			res, err := e.adm.DescribeUserSCRAMs(ctx, pos[0])
			if err != nil {
				return fail("delete user", err, "")
			}
			d := res[pos[0]]
			if d.Err != nil {
				return fail("delete user "+pos[0], d.Err, d.ErrMessage)
			}
			for _, c := range d.CredInfos {
				mechs = append(mechs, c.Mechanism)
			}
		}
		var rows []userRow
		failed := false
		for _, m := range mechs {
			res, err := e.adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: pos[0], Mechanism: m}}, nil)
			if err != nil {
				return fail("delete user", err, "")
			}
			r := userRow{User: pos[0], Mechanism: m.String()}
			if a, ok := res[pos[0]]; !ok {
				r.Error, failed = "no result for the user", true
			} else if a.Err != nil {
				r.Error, failed = describeErr(a.Err, a.ErrMessage), true
			}
			rows = append(rows, r)
		}
		if err := e.emitUsers(rows); err != nil {
			return err
		}
		if failed {
			return reported{}
		}
		return nil
	}
}
