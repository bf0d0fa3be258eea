package sharegroup

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroupScripts runs testdata/group: heartbeats, expiries and metadata
// changes against one group. After every step the records written so far
// are encoded, decoded and replayed, and the replayed group must equal
// the live one (so no change is made without its record).
func TestGroupScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/group", func(t *testing.T, path string) {
		var (
			cfg  = DefaultConfig()
			g    = NewGroup("g", cfg)
			img  = TopicImage{}
			nm   = names{}
			hist []Record
			now  int64
		)
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			if at := argStr(td, "at", ""); at != "" {
				now = int64(atoi(t, at))
			}
			var out strings.Builder
			var recs []Record
			switch td.Cmd {
			case "topics":
				img, nm = parseTopics(t, td.Input)
				return ""
			case "config":
				if v := argStr(td, "max-size", ""); v != "" {
					cfg.MaxSize = atoi(t, v)
				}
				if v := argStr(td, "session", ""); v != "" {
					cfg.SessionTimeoutMs = int32(atoi(t, v))
				}
				if v := argStr(td, "hb", ""); v != "" {
					cfg.HeartbeatIntervalMs = int32(atoi(t, v))
				}
				g.cfg = cfg
				g.SetTimeouts(0, 0)
				return ""
			case "heartbeat":
				req := kmsg.NewPtrShareGroupHeartbeatRequest()
				req.Version = 1
				req.GroupID = argStr(td, "group", "g")
				req.MemberID = argStr(td, "member", "")
				req.MemberEpoch = int32(atoi(t, argStr(td, "epoch", "0")))
				if hasArg(td, "rack") {
					r := argStr(td, "rack", "")
					req.RackID = &r
				}
				if hasArg(td, "names") {
					req.SubscribedTopicNames = []string{}
					if v := argStr(td, "names", ""); v != "-" && v != "" {
						req.SubscribedTopicNames = strings.Split(v, ",")
					}
				}
				res := g.Heartbeat(now, req, Client{ID: argStr(td, "client", "client"), Host: "127.0.0.1"}, img)
				resp := res.Response
				if resp.ErrorCode != 0 {
					fmt.Fprintf(&out, "error %s: %s\n", kerr.ErrorForCode(resp.ErrorCode).(*kerr.Error).Message, *resp.ErrorMessage)
					if len(res.Records) > 0 {
						t.Fatalf("error answer with records")
					}
				} else {
					a := "unchanged"
					if resp.Assignment != nil {
						as := Assignment{}
						for _, tp := range resp.Assignment.TopicPartitions {
							for _, p := range tp.Partitions {
								as.Add(tp.TopicID, p)
							}
						}
						a = nm.format(as)
					}
					fmt.Fprintf(&out, "ok member=%s epoch=%d hb=%d assignment=%s\n", *resp.MemberID, resp.MemberEpoch, resp.HeartbeatIntervalMillis, a)
				}
				recs = res.Records
			case "expire":
				recs = g.Expire(now, img)
				fmt.Fprintf(&out, "members=%d\n", len(g.Members))
			case "metadata-changed":
				recs = g.MetadataChanged(img)
				fmt.Fprintf(&out, "epoch=%d\n", g.Epoch)
			case "deadline":
				at, ok := g.NextDeadline()
				return fmt.Sprintf("deadline=%d ok=%v\n", at, ok)
			case "describe":
				d := g.Describe(img)
				fmt.Fprintf(&out, "group=%s state=%s epoch=%d assignment-epoch=%d assignor=%s\n", d.GroupID, d.GroupState, d.GroupEpoch, d.AssignmentEpoch, d.Assignor)
				for _, m := range d.Members {
					as := Assignment{}
					for _, tp := range m.Assignment.TopicPartitions {
						for _, p := range tp.Partitions {
							as.Add(tp.TopicID, p)
						}
					}
					fmt.Fprintf(&out, "  %s epoch=%d client=%s/%s topics=%v assignment=%s\n", m.MemberID, m.MemberEpoch, m.ClientID, m.ClientHost, m.SubscribedTopicNames, nm.format(as))
				}
				return out.String()
			case "delete":
				recs = g.DeleteRecords()
				if recs == nil {
					return "not empty\n"
				}
				fmt.Fprintf(&out, "partitions=%s\n", nm.formatState(g.Partitions()))
			default:
				t.Fatalf("unknown command %q", td.Cmd)
			}
			for _, r := range recs {
				fmt.Fprintf(&out, "  %s\n", nm.formatRecord(r))
			}
			hist = append(hist, recs...)
			checkReplay(t, cfg, g, hist, nm, td.Cmd == "delete")
			return out.String()
		})
	})
}

// checkReplay replays hist through the record bytes and compares it with
// the live group.
func checkReplay(t *testing.T, cfg Config, g *Group, hist []Record, nm names, deleted bool) {
	t.Helper()
	var decoded []Record
	for _, r := range hist {
		k, v := EncodeRecord(r)
		d, ok, err := DecodeRecord(k, v)
		if err != nil || !ok {
			t.Fatalf("decode %s: ok=%v err=%v", nm.formatRecord(r), ok, err)
		}
		decoded = append(decoded, d)
	}
	rg := Replay(cfg, decoded)[g.ID]
	if deleted {
		if rg != nil {
			t.Fatalf("deleted group replays as\n%s", nm.snapshot(rg))
		}
		return
	}
	if rg == nil {
		if len(hist) == 0 {
			return
		}
		rg = NewGroup(g.ID, cfg)
	}
	if got, want := nm.snapshot(rg), nm.snapshot(g); got != want {
		t.Fatalf("replay differs:\n%s\nlive:\n%s", got, want)
	}
}
