package controller

import (
	"errors"
	"testing"
	"time"
)

func TestConfigParsesKafkaNames(t *testing.T) {
	cfg, err := ParseConfig(map[string]string{
		"node.id":                               "2",
		"process.roles":                         "broker,controller",
		"controller.quorum.voters":              "1@127.0.0.1:9093,2@127.0.0.1:9094,3@localhost:9095",
		"controller.listener.names":             "CONTROLLER",
		"listeners":                             "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:19094",
		"metadata.log.dir":                      "/data/meta",
		"broker.session.timeout.ms":             "6000",
		"broker.heartbeat.interval.ms":          "1500",
		"controller.quorum.election.timeout.ms": "1000",
		"strata.controller.snapshot.entries":    "500",
		"log.dirs":                              "/data/logs", // a broker key: ignored
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NodeID != 2 || len(cfg.Voters) != 3 || cfg.Voters[2] != (Voter{3, "localhost:9095"}) {
		t.Fatalf("ids/voters: %+v", cfg)
	}
	if cfg.ListenAddr != "127.0.0.1:19094" || cfg.WALDir() != "/data/meta/__cluster_metadata-0" {
		t.Fatalf("listener %q, wal dir %q", cfg.ListenAddr, cfg.WALDir())
	}
	if cfg.BrokerSessionTimeout != 6*time.Second || cfg.BrokerHeartbeatInterval != 1500*time.Millisecond {
		t.Fatalf("timeouts %v %v", cfg.BrokerSessionTimeout, cfg.BrokerHeartbeatInterval)
	}
	if cfg.ElectionTicks != 10 || cfg.SnapshotEntries != 500 || cfg.SnapshotCatchUpEntries != 500 {
		t.Fatalf("raft tuning: election %d snapshot %d/%d", cfg.ElectionTicks, cfg.SnapshotEntries, cfg.SnapshotCatchUpEntries)
	}
	if got := FormatVoters(cfg.Voters); got != "1@127.0.0.1:9093,2@127.0.0.1:9094,3@localhost:9095" {
		t.Fatalf("FormatVoters %q", got)
	}
	if got := VoterAddrs(cfg.Voters); len(got) != 3 || got[2] != "localhost:9095" {
		t.Fatalf("VoterAddrs %v", got)
	}
	// Defaults: the listener address comes from our voter entry.
	cfg, err = ParseConfig(map[string]string{"node.id": "1", "controller.quorum.voters": "1@127.0.0.1:9093"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ListenAddr != "127.0.0.1:9093" || cfg.BrokerSessionTimeout != DefaultBrokerSessionTimeout || len(cfg.Roles) != 2 {
		t.Fatalf("defaults: %+v", cfg)
	}
}

func TestConfigRejectsBadSettings(t *testing.T) {
	base := func() map[string]string {
		return map[string]string{"node.id": "1", "controller.quorum.voters": "1@127.0.0.1:9093"}
	}
	for name, mod := range map[string]func(map[string]string){
		"two voters":        func(m map[string]string) { m["controller.quorum.voters"] = "1@h:1,2@h:2" },
		"four voters":       func(m map[string]string) { m["controller.quorum.voters"] = "1@h:1,2@h:2,3@h:3,4@h:4" },
		"repeated voter":    func(m map[string]string) { m["controller.quorum.voters"] = "1@h:1,1@h:2,3@h:3" },
		"node not a voter":  func(m map[string]string) { m["node.id"] = "7" },
		"zero node id":      func(m map[string]string) { m["node.id"] = "0" },
		"bad node id":       func(m map[string]string) { m["node.id"] = "one" },
		"no at":             func(m map[string]string) { m["controller.quorum.voters"] = "127.0.0.1:9093" },
		"no port":           func(m map[string]string) { m["controller.quorum.voters"] = "1@127.0.0.1" },
		"bad port":          func(m map[string]string) { m["controller.quorum.voters"] = "1@127.0.0.1:99999" },
		"negative id":       func(m map[string]string) { m["controller.quorum.voters"] = "-1@127.0.0.1:9093" },
		"empty voters":      func(m map[string]string) { m["controller.quorum.voters"] = " " },
		"broker only":       func(m map[string]string) { m["process.roles"] = "broker" },
		"unknown role":      func(m map[string]string) { m["process.roles"] = "controller,witness" },
		"bad session":       func(m map[string]string) { m["broker.session.timeout.ms"] = "-5" },
		"heartbeat≥session": func(m map[string]string) { m["broker.heartbeat.interval.ms"] = "9000" },
		"zero snapshots":    func(m map[string]string) { m["strata.controller.snapshot.entries"] = "0" },
	} {
		t.Run(name, func(t *testing.T) {
			m := base()
			mod(m)
			if _, err := ParseConfig(m); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err %v, want ErrInvalidConfig", err)
			}
		})
	}
}
