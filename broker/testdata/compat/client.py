#!/usr/bin/python3
"""A second Kafka client for broker/compat_python_test.go: librdkafka
through python3-confluent-kafka, with its own protocol code (franz-go's kmsg
is shared by the broker and kgo, so a codec bug could hide on both sides).

Usage: client.py <command> <bootstrap> [args...]; every command prints JSON
on stdout and exits non-zero on any client error. Keys, values and header
values travel base64-encoded so arbitrary bytes compare byte-exact; None
(a null key or header value) stays null.

  metadata  <bootstrap>
      {"brokers": {id: "host:port"}, "topics": {name: {partition: leader}}}
  produce   <bootstrap> <topic> <codec> <idempotent 0|1>
      stdin: one JSON record per line {"partition", "key", "value",
      "headers": [[name, value]], "timestamp"}; stdout: one JSON delivery
      report per record in send order {"partition", "offset", "error"}.
  consume   <bootstrap> <topic> <partition> <offset> <count>
      assign (no group), read until count records or the partition end;
      stdout: one JSON record per line, with "offset" and "timestamp".
  offsets_for_times <bootstrap> <topic> <partition> <ts>...
      stdout: [offset per ts] (-1: no record at or after ts)
  subscribe <bootstrap> <group> <count> <topic>...
      a group member subscribed to the topics (earliest), reading count
      records; stdout: {"records": n, "errors": [every error_cb error,
      transient ones included]}.
  transact <bootstrap> <topic> <transactional.id> <plan>
      a transactional producer (partition 0): plan is a comma-separated
      list of <count>:<commit|abort>, one transaction each, in order, of
      count records valued "<txn index>-<record index>-<commit|abort>";
      stdout: {"committed": [values], "aborted": [values]} (plain text).
  produce_may_fail <bootstrap> <topic> <batch.size>
      as produce (uncompressed, not idempotent, partition 0), but delivery
      errors are reported, not fatal; stdout: {"librdkafka": version
      int, "reports": [{"offset", "error": error name or null}]}.
  etl       <bootstrap> <group> <transactional.id> <in> <out> <count>
      consume-transform-produce (KIP-447): a read_committed member of group
      copies the values of topic in to topic out, each poll's records in one
      transaction whose offsets go with it (send_offsets_to_transaction).
      The first transaction is aborted, and the member then starts over
      with a new consumer, from the group's committed offsets (none: the
      earliest). Stops once count records were committed; stdout:
      {"committed": n, "aborted": n}.
  member    <bootstrap> <group> <topic>
      a classic group member (range, eager) that commits synchronously
      after each record and, once a commit succeeded, prints one line
      "<partition> <offset>" per record that commit covers (records whose
      commit failed wait for the next one); "joined" once it has an
      assignment. It reads stdin and leaves the group (commit, close) when
      stdin closes; stdout ends with "closed".
"""

import base64
import json
import os
import sys

import confluent_kafka as ck

TIMEOUT = 20.0  # seconds; the Go test bounds the whole process too


def b64(b):
    return None if b is None else base64.b64encode(b).decode("ascii")


def unb64(s):
    return None if s is None else base64.b64decode(s)


def common(bootstrap):
    return {
        "bootstrap.servers": bootstrap,
        "broker.address.family": "v4",
        "socket.timeout.ms": 10000,
        "error_cb": fail,
    }


def fail(err):
    # Transient connection notices are not failures; everything else is.
    if err.code() in (ck.KafkaError._TRANSPORT, ck.KafkaError._ALL_BROKERS_DOWN):
        print("client.py: transient: %s" % err, file=sys.stderr)
        return
    print("client.py: error: %s" % err, file=sys.stderr)
    sys.exit(3)


def metadata(bootstrap):
    a = ck.Consumer(dict(common(bootstrap), **{"group.id": "unused"}))
    md = a.list_topics(timeout=TIMEOUT)
    out = {
        "brokers": {str(b.id): "%s:%d" % (b.host, b.port) for b in md.brokers.values()},
        "topics": {
            t.topic: {str(p.id): p.leader for p in t.partitions.values()}
            for t in md.topics.values()
            if t.error is None
        },
    }
    a.close()
    print(json.dumps(out))


def produce(bootstrap, topic, codec, idempotent):
    conf = dict(common(bootstrap), **{
        "compression.codec": codec,
        "enable.idempotence": idempotent == "1",
        "linger.ms": 20,  # several records per batch
        "acks": "all",
        "message.timeout.ms": int(TIMEOUT * 1000),
    })
    p = ck.Producer(conf)
    reports = []

    def done(i):
        def cb(err, msg):
            reports[i] = {
                "partition": msg.partition(),
                "offset": msg.offset(),
                "error": None if err is None else str(err),
            }
        return cb

    for line in sys.stdin:
        if not line.strip():
            continue
        r = json.loads(line)
        reports.append(None)
        kw = {"partition": r.get("partition", 0), "on_delivery": done(len(reports) - 1)}
        if r.get("key") is not None:
            kw["key"] = unb64(r["key"])
        if r.get("headers"):
            kw["headers"] = [(h[0], unb64(h[1])) for h in r["headers"]]
        if r.get("timestamp"):
            kw["timestamp"] = r["timestamp"]
        p.produce(topic, unb64(r["value"]) if r.get("value") is not None else None, **kw)
        p.poll(0)
    left = p.flush(TIMEOUT)
    if left:
        print("client.py: %d records undelivered" % left, file=sys.stderr)
        sys.exit(2)
    for rep in reports:
        print(json.dumps(rep))
    if any(rep is None or rep["error"] for rep in reports):
        sys.exit(2)


def consume(bootstrap, topic, partition, offset, count):
    c = ck.Consumer(dict(common(bootstrap), **{
        "group.id": "unused",  # required by the client, never joined: assign only
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "fetch.wait.max.ms": 100,
        "check.crcs": True,
    }))
    c.assign([ck.TopicPartition(topic, int(partition), int(offset))])
    got = 0
    while got < int(count):
        m = c.poll(TIMEOUT)
        if m is None:
            print("client.py: no record within %ss" % TIMEOUT, file=sys.stderr)
            sys.exit(2)
        if m.error():
            if m.error().code() == ck.KafkaError._PARTITION_EOF:
                break
            print("client.py: consume: %s" % m.error(), file=sys.stderr)
            sys.exit(2)
        hs = m.headers() or []
        print(json.dumps({
            "partition": m.partition(),
            "offset": m.offset(),
            "timestamp": m.timestamp()[1],
            "key": b64(m.key()),
            "value": b64(m.value()),
            "headers": [[h[0], b64(h[1])] for h in hs],
        }))
        got += 1
    c.close()
    # confluent-kafka-python 1.7 (Debian bookworm) drops a reference to
    # None for each null header value it returns, and the interpreter then
    # aborts at exit ("none_dealloc"): skip finalization once the output
    # is out.
    sys.stdout.flush()
    os._exit(0)


def offsets_for_times(bootstrap, topic, partition, *tss):
    c = ck.Consumer(dict(common(bootstrap), **{"group.id": "unused"}))
    tps = [ck.TopicPartition(topic, int(partition), int(ts)) for ts in tss]
    out = []
    # One lookup per timestamp: the API takes one per partition.
    for tp in tps:
        res = c.offsets_for_times([tp], timeout=TIMEOUT)
        if res[0].error:
            print("client.py: offsets_for_times: %s" % res[0].error, file=sys.stderr)
            sys.exit(2)
        out.append(res[0].offset)
    c.close()
    print(json.dumps(out))


def subscribe(bootstrap, group, count, *topics):
    errors = []
    c = ck.Consumer(dict(common(bootstrap), **{
        "group.id": group,
        "auto.offset.reset": "earliest",
        "error_cb": lambda err: errors.append(str(err)),
    }))
    c.subscribe(list(topics))
    got = 0
    while got < int(count):
        m = c.poll(TIMEOUT)
        if m is None:
            break
        if m.error():
            errors.append(str(m.error()))
            continue
        got += 1
    c.close()
    print(json.dumps({"records": got, "errors": errors}))


def produce_may_fail(bootstrap, topic, batch_size):
    p = ck.Producer(dict(common(bootstrap), **{
        "linger.ms": 1000,  # every record in one batch, unless batch.size
        "batch.size": int(batch_size),
        "enable.idempotence": False,
        "acks": "all",
        "message.timeout.ms": int(TIMEOUT * 1000),
    }))
    # Metadata and the connection first, so the first record does not go
    # out on its own as soon as the partition's leader becomes known.
    p.list_topics(topic, timeout=TIMEOUT)
    reports = []

    def done(i):
        def cb(err, msg):
            reports[i] = {"offset": msg.offset(), "error": None if err is None else err.name()}
        return cb

    for line in sys.stdin:
        if not line.strip():
            continue
        r = json.loads(line)
        reports.append(None)
        kw = {"partition": 0, "on_delivery": done(len(reports) - 1)}
        if r.get("key") is not None:
            kw["key"] = unb64(r["key"])
        p.produce(topic, unb64(r["value"]), **kw)
    left = p.flush(TIMEOUT)
    if left:
        print("client.py: %d records without a delivery report" % left, file=sys.stderr)
        sys.exit(2)
    print(json.dumps({"librdkafka": ck.libversion()[1], "reports": reports}))


def transact(bootstrap, topic, txn_id, plan):
    p = ck.Producer(dict(common(bootstrap), **{
        "transactional.id": txn_id,
        "linger.ms": 5,
        "message.timeout.ms": int(TIMEOUT * 1000),
    }))
    p.init_transactions(TIMEOUT)
    out = {"committed": [], "aborted": []}
    for i, step in enumerate(plan.split(",")):
        count, how = step.split(":")
        p.begin_transaction()
        vals = ["%d-%d-%s" % (i, j, how) for j in range(int(count))]
        for v in vals:
            p.produce(topic, v.encode(), partition=0)
        # Flushed before the end, so an abort really aborts written data.
        if p.flush(TIMEOUT):
            print("client.py: records undelivered", file=sys.stderr)
            sys.exit(2)
        if how == "commit":
            p.commit_transaction(TIMEOUT)
            out["committed"].extend(vals)
        else:
            p.abort_transaction(TIMEOUT)
            out["aborted"].extend(vals)
    print(json.dumps(out))


def etl(bootstrap, group, txn_id, src, dst, count):
    count = int(count)

    def consumer():
        c = ck.Consumer(dict(common(bootstrap), **{
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 100,
        }))
        c.subscribe([src])
        return c

    p = ck.Producer(dict(common(bootstrap), **{
        "transactional.id": txn_id,
        "linger.ms": 5,
        "message.timeout.ms": int(TIMEOUT * 1000),
        "transaction.timeout.ms": 30000,
    }))
    p.init_transactions(TIMEOUT)
    c = consumer()
    committed = aborted = 0
    while committed < count:
        msgs = c.consume(num_messages=100, timeout=TIMEOUT)
        if not msgs:
            print("client.py: etl: no record within %ss (%d committed)" % (TIMEOUT, committed), file=sys.stderr)
            sys.exit(2)
        for m in msgs:
            if m.error():
                print("client.py: etl consume: %s" % m.error(), file=sys.stderr)
                sys.exit(2)
        p.begin_transaction()
        for m in msgs:
            p.produce(dst, m.value(), key=m.key())
        p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), TIMEOUT)
        if aborted == 0:
            p.abort_transaction(TIMEOUT)
            aborted += 1
            # The positions moved past the aborted records: a new member
            # starts from the group's committed offsets instead.
            c.close()
            c = consumer()
            continue
        p.commit_transaction(TIMEOUT)
        committed += len(msgs)
    c.close()
    print(json.dumps({"committed": committed, "aborted": aborted}))


def member(bootstrap, group, topic):
    import threading

    stop = threading.Event()

    def watch():
        sys.stdin.read()
        stop.set()

    threading.Thread(target=watch, daemon=True).start()
    pending = {}  # partition -> offsets read, not yet committed

    def say(line):
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def commit(c, partition):
        offs = pending.get(partition)
        if not offs:
            return
        try:
            c.commit(offsets=[ck.TopicPartition(topic, partition, offs[-1] + 1)], asynchronous=False)
        except ck.KafkaException as e:
            print("client.py: commit failed: %s" % e, file=sys.stderr)
            return
        for o in offs:
            say("%d %d" % (partition, o))
        pending[partition] = []

    def on_assign(c, parts):
        say("joined %s" % ",".join(str(p.partition) for p in parts))

    def on_revoke(c, parts):
        for p in parts:
            commit(c, p.partition)
            pending.pop(p.partition, None)

    conf = dict(common(bootstrap), **{
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "partition.assignment.strategy": "range",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 300,
        "error_cb": lambda err: print("client.py: %s" % err, file=sys.stderr),
    })
    c = ck.Consumer(conf)
    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    while not stop.is_set():
        m = c.poll(0.2)
        if m is None:
            for p in list(pending):
                commit(c, p)
            continue
        if m.error():
            print("client.py: %s" % m.error(), file=sys.stderr)
            continue
        pending.setdefault(m.partition(), []).append(m.offset())
        commit(c, m.partition())
    for p in list(pending):
        commit(c, p)
    c.close()
    say("closed")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {
        "metadata": metadata,
        "produce": produce,
        "consume": consume,
        "offsets_for_times": offsets_for_times,
        "produce_may_fail": produce_may_fail,
        "transact": transact,
        "subscribe": subscribe,
        "etl": etl,
        "member": member,
    }[cmd](*args)


if __name__ == "__main__":
    main()
