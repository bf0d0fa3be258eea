#!/usr/bin/python3
"""A librdkafka consumer-group member for broker/group_membership_test.go.

Usage: group_member.py <bootstrap> <group> <topic> <assignor>

Joins the group (librdkafka's own JoinGroup/SyncGroup/Heartbeat code and
its own assignor), prints one JSON line {"assigned": [partitions]} each time
its assignment changes, and leaves the group (consumer.close: LeaveGroup)
once stdin closes. Exits non-zero on a client error; bounded to 60 s.
"""

import json
import sys
import threading
import time

import confluent_kafka as ck

stop = threading.Event()


def watch_stdin():
    sys.stdin.read()
    stop.set()


def fail(err):
    if err.code() in (ck.KafkaError._TRANSPORT, ck.KafkaError._ALL_BROKERS_DOWN):
        print("group_member.py: transient: %s" % err, file=sys.stderr)
        return
    print("group_member.py: error: %s" % err, file=sys.stderr)
    sys.exit(3)


def main():
    bootstrap, group, topic, assignor = sys.argv[1:5]
    c = ck.Consumer({
        "bootstrap.servers": bootstrap,
        "broker.address.family": "v4",
        "group.id": group,
        "partition.assignment.strategy": assignor,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 200,
        "enable.auto.commit": False,
        "error_cb": fail,
    })
    owned = set()

    def report():
        print(json.dumps({"assigned": sorted(owned)}), flush=True)

    def on_assign(_c, parts):
        owned.update(p.partition for p in parts)
        report()

    def on_revoke(_c, parts):
        owned.difference_update(p.partition for p in parts)
        report()

    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    threading.Thread(target=watch_stdin, daemon=True).start()
    deadline = time.time() + 60
    while not stop.is_set() and time.time() < deadline:
        msg = c.poll(0.1)
        if msg is not None and msg.error() is not None:
            print("group_member.py: consume error: %s" % msg.error(), file=sys.stderr)
    c.close()


if __name__ == "__main__":
    main()
