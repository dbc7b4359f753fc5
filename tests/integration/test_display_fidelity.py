"""DISPLAY TPSTATUS ADMIN, DISPLAY PUBSUB TPCOUNT and managed queue names on a real node, as IBM
MQ documents them, through the SDK and `qmgr runmqsc`."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from qmgr.client import MqscCommandError
from tests.integration.cluster_nodes import Cluster
from tests.integration.conftest import NodeProcess


def runmqsc(node: NodeProcess, script: str) -> list[dict[str, object]]:
    res = node.cli("runmqsc", node.address, "--output", "json", input=script)
    out: list[dict[str, object]] = json.loads(res.stdout)
    return out


def first_attrs(result: dict[str, object]) -> dict[str, str]:
    records = result["records"]
    assert isinstance(records, list)
    attrs: dict[str, str] = records[0]["attrs"]
    return attrs


def test_tpstatus_admin_blank_or_named_through_runmqsc(node: NodeProcess) -> None:
    out = runmqsc(
        node,
        "DISPLAY TPSTATUS('Weather/London') TYPE(TOPIC)\n"
        "DEFINE TOPIC(WEATHER) TOPICSTR('Weather') DEFPRTY(6)\n"
        "DISPLAY TPSTATUS('Weather') TYPE(TOPIC)\n"
        "DISPLAY TPSTATUS('Weather/London') TYPE(TOPIC)\n",
    )
    assert all(r["ok"] for r in out)
    unrelated = first_attrs(out[0])
    assert unrelated["ADMIN"] == "" and unrelated["DEFPRTY"] == "0"  # SYSTEM.BASE.TOPIC's values
    assert first_attrs(out[2])["ADMIN"] == "WEATHER"
    below = first_attrs(out[3])
    assert below["ADMIN"] == "" and below["DEFPRTY"] == "6"
    res = node.cli("runmqsc", "QM1", input="DISPLAY TPSTATUS('Weather/London') ADMIN\n")
    assert res.returncode == 0 and "ADMIN()" in res.stdout, res.stdout


def test_pubsub_tpcount_counts_topic_nodes(node: NodeProcess) -> None:
    with node.client() as qm:

        def tpcount() -> int:
            return int(qm.mqsc("DISPLAY PUBSUB")[0]["TPCOUNT"])

        assert tpcount() == 1  # the root node of SYSTEM.BASE.TOPIC
        qm.mqsc("DEFINE TOPIC(SPORT) TOPICSTR('Sport')")
        assert tpcount() == 2
        qm.create_subscription("Sport/Football", name="FOOTBALL.SUB")
        qm.create_subscription("Sport/Football", name="FOOTBALL.SUB2")
        assert tpcount() == 3
        qm.publish("News/Today", "headline", retain=True, persistent=True)
        assert tpcount() == 5  # 'News' and 'News/Today'
        nodes = qm.mqsc("DISPLAY TPSTATUS('#') TYPE(TOPIC)")
        assert len(nodes) == 5
        assert qm.mqsc("DISPLAY PUBSUB")[0]["SUBCOUNT"] == "2"
    node.restart()  # administered objects, durable subscriptions and retained pubs are kept
    with node.client() as qm:
        assert qm.mqsc("DISPLAY PUBSUB")[0]["TPCOUNT"] == "5"


def test_managed_queue_names_are_addressable(node: NodeProcess) -> None:
    with node.client() as qm:
        durable_q = qm.create_subscription("Prices/IBM", name="PRICES.D", durable=True)
        with qm.subscribe("Prices/IBM") as live:
            nondurable_q = qm.mqsc("DISPLAY SUB(*) SUBTYPE(ALL) DEST")
            dests = {r["DEST"] for r in nondurable_q}
            assert durable_q in dests and len(dests) == 2
            for dest in dests:
                assert dest.startswith("SYSTEM.MANAGED.") and len(dest) <= 48
            qm.publish("Prices/IBM", "101")
            assert (m := live.receive(timeout=5)) is not None and m.text == "101"
        queue = qm.mqsc(f"DISPLAY QLOCAL({durable_q})")[0]
        assert queue["QUEUE"] == durable_q and queue["CURDEPTH"] == "1"
        assert qm.mqsc(f"DISPLAY QSTATUS({durable_q})")[0]["CURDEPTH"] == "1"
        got = qm.get(durable_q)
        assert got is not None and got.text == "101"
    res = node.cli("runmqsc", "QM1", input=f"DISPLAY QSTATUS({durable_q}) CURDEPTH\n")
    assert res.returncode == 0 and "CURDEPTH(0)" in res.stdout, res.stdout


def test_stored_long_managed_queue_is_migrated_at_restart(node: NodeProcess) -> None:
    """A durable subscription stored by an earlier version, whose managed queue name is 63
    characters, keeps its messages and works after a restart under a 48-character name."""
    with node.client() as qm:
        short = qm.create_subscription("Legacy/Topic", name="LEGACY", durable=True)
        sub_id = qm.mqsc("DISPLAY SUB(LEGACY) SUBID")[0]["SUBID"]
        qm.publish("Legacy/Topic", "before", persistent=True)
    node.kill()
    long_name = f"SYSTEM.MANAGED.DURABLE.{sub_id[8:]}"  # how earlier versions named it
    assert len(long_name) == 63
    assert node.data_dir is not None
    db = sqlite3.connect(node.data_dir / "qmgr.sqlite")
    with db:
        (data,) = db.execute(
            "SELECT data FROM objects WHERE kind='queue' AND name=?", (short,)
        ).fetchone()
        queue = json.loads(data)
        queue["name"] = long_name
        db.execute("DELETE FROM objects WHERE kind='queue' AND name=?", (short,))
        db.execute(
            "INSERT INTO objects (kind, name, data) VALUES ('queue', ?, ?)",
            (long_name, json.dumps(queue)),
        )
        (data,) = db.execute(
            "SELECT data FROM objects WHERE kind='sub' AND name='LEGACY'"
        ).fetchone()
        sub = json.loads(data)
        sub["dest"] = long_name
        db.execute(
            "UPDATE objects SET data=? WHERE kind='sub' AND name='LEGACY'", (json.dumps(sub),)
        )
        db.execute("UPDATE messages SET queue=? WHERE queue=?", (long_name, short))
    db.close()
    node.start()
    with node.client() as qm:
        assert qm.mqsc("DISPLAY SUB(LEGACY) DEST")[0]["DEST"] == short
        assert qm.mqsc(f"DISPLAY QSTATUS({short})")[0]["CURDEPTH"] == "1"
        with pytest.raises(MqscCommandError):  # beyond MQ's 48 characters: not addressable
            qm.mqsc(f"DISPLAY QLOCAL({long_name})")
        qm.publish("Legacy/Topic", "after", persistent=True)
        assert [m.text for m in qm.get_many(short, 10)] == ["before", "after"]
    node.restart()  # the migration was stored: nothing to do the second time
    with node.client() as qm:
        assert qm.mqsc("DISPLAY SUB(LEGACY) DEST")[0]["DEST"] == short
        assert qm.mqsc(f"DISPLAY QSTATUS({short})")[0]["CURDEPTH"] == "0"


def test_cluster_topic_is_an_admin_node_on_every_member(tmp_path: Path) -> None:
    """A clustered topic object is known in every member's topic tree: DISPLAY TPSTATUS on a
    member that does not host it names it in ADMIN (its node only) and shows its CLUSTER; the
    node counts in TPCOUNT there; an unrelated string stays blank."""
    cluster = Cluster(tmp_path / "cl").start(["FR1"], ["HOST", "MEMBER"])
    try:
        cluster.define_topic("HOST", "PRICES", "Prices")
        cluster.wait_definition("PRICES", ["HOST"])
        member = cluster["MEMBER"]
        assert member.mqsc("DISPLAY PUBSUB")[0]["TPCOUNT"] == "2"  # root and 'Prices'
        node = member.mqsc("DISPLAY TPSTATUS('Prices') TYPE(TOPIC)")[0]
        assert node["ADMIN"] == "PRICES" and node["CLUSTER"] == cluster.name
        below = member.mqsc("DISPLAY TPSTATUS('Prices/IBM') TYPE(TOPIC)")[0]
        assert below["ADMIN"] == "" and below["CLUSTER"] == cluster.name
        other = member.mqsc("DISPLAY TPSTATUS('Weather') TYPE(TOPIC)")[0]
        assert other["ADMIN"] == "" and other["CLUSTER"] == ""
    finally:
        cluster.stop()
