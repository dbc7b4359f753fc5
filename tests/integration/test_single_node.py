"""One real node over gRPC: the SDK and the CLI against a `qmgr start` process."""

from __future__ import annotations

import json

import pytest

from qmgr.client import MQClientError, MqscCommandError
from tests.integration.conftest import NodeFactory, NodeProcess


@pytest.fixture
def node(shared_node: NodeProcess) -> NodeProcess:
    """The module's one node (see ``shared_node``); tests that kill or restart it use their own."""
    return shared_node


def test_ready_line_health_and_define_sub_pub_receive(node: NodeProcess) -> None:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(node.address) as ch:
        status = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=""))
        assert status.status == health_pb2.HealthCheckResponse.SERVING
    with node.client() as qm:
        qm.mqsc("DEFINE TOPIC(SPORTS) TOPICSTR('Sport')")
        with qm.subscribe("Sport/Football") as sub:
            deliveries = qm.publish("Sport/Football", b"goal", properties={"minute": 42})
            assert deliveries == 1
            msg = sub.receive(timeout=5)
            assert msg is not None and msg.body == b"goal"
            assert msg.properties["MQTopicString"] == "Sport/Football"
            assert msg.properties["minute"] == 42
            assert msg.topic == "Sport/Football"


def test_wildcard_subscriptions(node: NodeProcess) -> None:
    with node.client() as qm:
        hash_sub = qm.subscribe("USA/#")
        plus_sub = qm.subscribe("IBM/+/Results")
        for topic in (
            "USA",
            "USA/Alaska",
            "USA/Alaska/Juneau",
            "IBM/Software/Results",
            "IBM/a/b/Results",
            "IBM/Results",
        ):
            qm.publish(topic, topic)
        got_hash = [hash_sub.receive(timeout=5) for _ in range(3)]
        assert [m.text for m in got_hash if m] == ["USA", "USA/Alaska", "USA/Alaska/Juneau"]
        got_plus = plus_sub.receive(timeout=5)
        assert got_plus is not None and got_plus.text == "IBM/Software/Results"
        assert plus_sub.receive(timeout=0.5) is None
        hash_sub.close()
        plus_sub.close()


def test_retained_publication(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.publish("price/IBM", "100", retain=True)
        qm.publish("price/IBM", "101", retain=True)
        with qm.subscribe("price/+") as sub:
            m = sub.receive(timeout=5)
            assert m is not None and m.text == "101" and m.properties["MQIsRetained"] is True
        recs = qm.mqsc("DISPLAY TPSTATUS('price/IBM') TYPE(TOPIC)")
        assert recs[0]["RETAINED"] == "YES"
        qm.mqsc("CLEAR TOPICSTR('price/IBM') CLRTYPE(RETAINED)")
        with qm.subscribe("price/+") as sub:
            assert sub.receive(timeout=0.5) is None


def test_durable_state_survives_kill_9(node_factory: NodeFactory) -> None:
    node = node_factory()
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(APP.Q) MAXDEPTH(100) DESCR('kept')")
        qm.mqsc("DEFINE TOPIC(ORDERS) TOPICSTR('orders') DEFPSIST(YES)")
        qm.create_subscription("orders/#", name="DURABLE.SUB", durable=True)
        qm.create_subscription("orders/#", name="", durable=False)
        qm.put("APP.Q", "p1", persistent=True)
        qm.put("APP.Q", "np1", persistent=False)
        for i in range(50):
            qm.publish("orders/new", f"order {i}")  # DEFPSIST(YES) resolves persistent
        qm.publish("orders/new", "np", persistent=False)
        qm.publish("orders/last", "retained", persistent=True, retain=True)
    node.restart()
    with node.client() as qm:
        assert qm.mqsc("DISPLAY QLOCAL(APP.Q) DESCR")[0]["DESCR"] == "kept"
        assert [m.text for m in qm.get_many("APP.Q", 10)] == ["p1"]
        assert qm.mqsc("DISPLAY TOPIC(ORDERS)")[0]["DEFPSIST"] == "YES"
        subs = qm.mqsc("DISPLAY SUB(*)")
        assert [r["SUB"] for r in subs] == ["DURABLE.SUB"]  # the non-durable one is gone
        queue = subs[0]["DEST"]
        texts = [m.text for m in qm.get_many(queue, 100)]
        assert texts == [f"order {i}" for i in range(50)] + ["retained"]
        with qm.subscribe("orders/last") as sub:
            m = sub.receive(timeout=5)
            assert m is not None and m.text == "retained"


def test_acknowledged_persistent_stream_survives_kill(node_factory: NodeFactory) -> None:
    node = node_factory()
    with node.client() as qm:
        qm.create_subscription("load/#", name="LOAD", durable=True)
        pub = qm.stream_publisher(batch_size=50, window=4)
        for i in range(1000):
            pub.publish("load/x", f"{i}", persistent=True)
        result = pub.close()
        assert result.accepted == 1000
    node.kill()
    node.start()
    with node.client() as qm:
        queue = qm.mqsc("DISPLAY SUB(LOAD)")[0]["DEST"]
        texts = [m.text for m in qm.get_many(queue, 2000)]
        assert texts == [str(i) for i in range(1000)]


def test_syncpoint_backout_and_threshold(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(APP.BOQ)")
        qm.mqsc("DEFINE QLOCAL(APP.IN) BOTHRESH(2) BOQNAME(APP.BOQ)")
        qm.put("APP.IN", "poison", persistent=True)
        with pytest.raises(RuntimeError), qm.unit_of_work() as uow:
            m = qm.get("APP.IN", unit_of_work=uow)
            assert m is not None and m.backout_count == 0
            raise RuntimeError("processing failed")
        m = qm.get("APP.IN", unit_of_work="u2")
        assert m is not None and m.text == "poison" and m.backout_count == 1
        qm.backout("u2")
        assert qm.get("APP.IN") is None
        moved = qm.get("APP.BOQ")
        assert moved is not None and moved.text == "poison" and moved.backout_count == 2


def test_bad_mqsc_is_rejected_and_changes_nothing(node: NodeProcess) -> None:
    with node.client() as qm:
        qm.mqsc("DEFINE QLOCAL(Q1) MAXDEPTH(10)")
        for bad in (
            "DEFINE QLOCAL(Q1) MAXDEPTH(99999999999)",
            "ALTER QLOCAL(Q1) MAXDPTH(5)",
            "ALTER QLOCAL(Q1) MAXDEPTH(5) DEFPSIST(MAYBE)",
            "DEFINE TOPIC(T1)",
            "FROB QLOCAL(Q1)",
            "DEFINE QLOCAL(Q1) DESCR('unbalanced)",
        ):
            ok, records = qm.mqsc_ok(bad)
            assert not ok, bad
            assert records and records[0].code.endswith("E"), bad
        assert qm.mqsc("DISPLAY QLOCAL(Q1) MAXDEPTH")[0]["MAXDEPTH"] == "10"
        assert qm.mqsc("DISPLAY TOPIC(T*)") == []
        with pytest.raises(MqscCommandError) as err:
            qm.mqsc("DISPLAY QLOCAL(NOPE)")
        assert err.value.records[0].code == "AMQ8147E"


def test_bad_topic_strings_rejected(node: NodeProcess) -> None:
    with node.client() as qm:
        # the shared node may hold other tests' subscriptions: none is added by what follows
        before = {r["SUBID"] for r in qm.mqsc("DISPLAY SUB(*) SUBID")}
        for topic in ("", "a/#", "a/+/b", "x\x00y"):
            with pytest.raises(MQClientError) as err:
                qm.publish(topic, "x")
            assert err.value.reason == 2425, topic
        with pytest.raises(MQClientError) as err:
            qm.subscribe("")
        assert err.value.reason == 2425
        assert {r["SUBID"] for r in qm.mqsc("DISPLAY SUB(*) SUBID")} <= before


def test_runmqsc_cli_text_and_json(node: NodeProcess, tmp_path: object) -> None:
    script = """
* a comment
DEFINE QLOCAL(CLI.Q) +
       MAXDEPTH(42)
DEFINE TOPIC(CLI.T) TOPICSTR('cli/topic')
DISPLAY QLOCAL(CLI.Q) MAXDEPTH
"""
    res = node.cli("runmqsc", "QM1", input=script)  # found by name through the registry
    assert res.returncode == 0, res.stdout + res.stderr
    assert "AMQ8006I" in res.stdout and "MAXDEPTH(42)" in res.stdout
    res = node.cli(
        "runmqsc",
        node.address,
        "--output",
        "json",
        input="DISPLAY TOPIC(CLI.T)\nDISPLAY QLOCAL(NONE)\n",
    )
    assert res.returncode == 10
    out = json.loads(res.stdout)
    assert out[0]["ok"] and out[0]["records"][0]["attrs"]["TOPICSTR"] == "cli/topic"
    assert not out[1]["ok"] and out[1]["records"][0]["code"] == "AMQ8147E"


def test_pub_sub_put_get_cli(node: NodeProcess) -> None:
    assert node.cli("runmqsc", "QM1", input="DEFINE QLOCAL(CQ)\n").returncode == 0
    assert node.cli("put", "QM1", "CQ", "hello").returncode == 0
    res = node.cli("get", "QM1", "CQ")
    assert res.returncode == 0 and res.stdout.strip() == "hello"
    assert node.cli("get", "QM1", "CQ").returncode == 2
    res = node.cli("pub", "QM1", "a/b", "hi")
    assert res.returncode == 0 and "0 local deliveries" in res.stdout
    res = node.cli("pub", "QM1", "a/#", "hi")
    assert res.returncode != 0 and "2425" in res.stderr


def test_async_client(node: NodeProcess) -> None:
    import asyncio

    from qmgr.client import AsyncQueueManagerClient, Int32

    async def scenario() -> None:
        async with AsyncQueueManagerClient(node.address) as qm:
            await qm.mqsc("DEFINE QLOCAL(ASYNC.Q)")
            await qm.put(
                "ASYNC.Q",
                "one",
                properties={
                    "n": Int32(7),
                    "big": 2**40,
                    "f": 1.5,
                    "b": True,
                    "raw": b"\x00",
                    "none": None,
                },
            )
            got = await qm.get("ASYNC.Q", wait_ms=1000)
            assert got is not None and got.text == "one"
            assert got.properties == {
                "n": 7,
                "big": 2**40,
                "f": 1.5,
                "b": True,
                "raw": b"\x00",
                "none": None,
            }
            assert isinstance(got.properties["n"], Int32) and not isinstance(
                got.properties["big"], Int32
            )
            sub = await qm.subscribe("async/#")
            await qm.publish("async/x", "pub")
            async for msg in sub:
                assert msg.text == "pub" and msg.topic == "async/x"
                break
            sub.close()
            waiter = asyncio.create_task(qm.get("ASYNC.Q", wait_ms=5000))
            await asyncio.sleep(0.2)
            await qm.put("ASYNC.Q", "late")
            late = await waiter
            assert late is not None and late.text == "late"  # a waiting get is woken by a put
            with pytest.raises(MQClientError) as err:
                await qm.get("NO.SUCH.Q")
            assert err.value.reason_name == "MQRC_UNKNOWN_OBJECT_NAME"

    asyncio.run(scenario())
