#!/usr/bin/python3
"""Admin calls through librdkafka (python3-confluent-kafka) for
config_compat_test.go: DescribeConfigs, AlterConfigs, CreatePartitions with
librdkafka's own protocol code. Usage: admin.py <bootstrap> <topic>.
Prints one JSON object per step on stdout."""
import json
import sys

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions

bootstrap, topic = sys.argv[1], sys.argv[2]
adm = AdminClient({"bootstrap.servers": bootstrap})
TIMEOUT = 30


def emit(step, **kw):
    kw["step"] = step
    print(json.dumps(kw), flush=True)


def describe(restype, name, keys):
    res = ConfigResource(restype, name)
    configs = adm.describe_configs([res], request_timeout=TIMEOUT)[res].result(timeout=TIMEOUT)
    out = {}
    for k in keys:
        e = configs.get(k)
        if e is not None:
            out[k] = {"value": e.value, "source": int(e.source), "read_only": bool(e.is_read_only)}
    return len(configs), out


def error_name(fut):
    try:
        fut.result(timeout=TIMEOUT)
        return "NONE"
    except KafkaException as e:
        return e.args[0].name()


count, cfgs = describe(ConfigResource.Type.TOPIC, topic, ["segment.bytes", "retention.ms", "cleanup.policy"])
emit("describe_topic", count=count, configs=cfgs)

res = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"retention.ms": "12345"})
emit("alter_topic", error=error_name(adm.alter_configs([res], request_timeout=TIMEOUT)[res]))

count, cfgs = describe(ConfigResource.Type.TOPIC, topic, ["segment.bytes", "retention.ms"])
emit("describe_after_alter", count=count, configs=cfgs)

res = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config={"retention.ms": "-7"})
emit("alter_bad", error=error_name(adm.alter_configs([res], request_timeout=TIMEOUT)[res]))

count, cfgs = describe(ConfigResource.Type.BROKER, "1", ["num.partitions", "log.retention.ms"])
emit("describe_broker", count=count, configs=cfgs)

fs = adm.create_partitions([NewPartitions(topic, 3)], request_timeout=TIMEOUT)
emit("create_partitions", error=error_name(fs[topic]))
fs = adm.create_partitions([NewPartitions(topic, 2)], request_timeout=TIMEOUT)
emit("shrink_partitions", error=error_name(fs[topic]))

md = adm.list_topics(topic=topic, timeout=TIMEOUT)
emit("metadata", partitions=len(md.topics[topic].partitions))
