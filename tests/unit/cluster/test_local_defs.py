"""A member's own clustered definitions against the repository's copies: what is still to send
(CLSTATE(PENDING)) and what the repository refused later (CLSTATE(INVALID))."""

from __future__ import annotations

from cluster.local_defs import changes_to_send, clroute_change, local_clstate
from cluster.records import ClState, Role
from cluster.repository import ClusterRepository, Cmd, ErrorCode
from cluster.topics import TopicObject

C = "DEMO"


def obj(name: str, topic: str, clroute: str = "TOPICHOST", **attrs: str) -> TopicObject:
    return TopicObject(name, topic, {"CLUSTER": C, "CLROUTE": clroute, **attrs})


def repo() -> ClusterRepository:
    r = ClusterRepository(C)
    assert r.apply(Cmd.join_member("FR1", "FR1_1", "h:1", Role.REPOS)).ok
    for name in ("QM1", "QM2"):
        assert r.apply(Cmd.join_member(name, f"{name}_1", f"h:{name}")).ok
    return r


def send_all(r: ClusterRepository, qmgr: str, desired: dict[str, TopicObject]) -> list[str]:
    errors = []
    for change in changes_to_send(qmgr, C, desired, r.topics()):
        result = r.apply(change.command)
        if result.error is not None:
            errors.append(result.error.code.value)
    return errors


def test_nothing_to_send_when_the_repository_holds_the_local_definitions() -> None:
    r = repo()
    desired = {"ORDERS": obj("ORDERS", "Orders", PUB="ENABLED")}
    assert send_all(r, "QM1", desired) == []
    assert changes_to_send("QM1", C, desired, r.topics()) == []


def test_defines_alters_and_deletes_made_while_unavailable_are_sent_in_one_pass() -> None:
    r = repo()
    send_all(r, "QM1", {"OLD": obj("OLD", "Old"), "ORDERS": obj("ORDERS", "Orders")})
    # meanwhile: OLD deleted, ORDERS altered, PRICES defined
    desired = {
        "ORDERS": obj("ORDERS", "Orders", PUB="DISABLED"),
        "PRICES": obj("PRICES", "Prices", "DIRECT"),
    }
    changes = changes_to_send("QM1", C, desired, r.topics())
    assert [(c.name, c.command["op"]) for c in changes] == [
        ("OLD", "delete_topic"),
        ("ORDERS", "alter_topic"),
        ("PRICES", "define_topic"),
    ]
    assert send_all(r, "QM1", desired) == []
    held = {(t.name, t.qmgr): t for t in r.topics()}
    assert set(held) == {("ORDERS", "QM1"), ("PRICES", "QM1")}
    assert held["ORDERS", "QM1"].attrs["PUB"] == "DISABLED"
    # sent again (a retry after an unknown outcome): nothing left, nothing duplicated
    assert changes_to_send("QM1", C, desired, r.topics()) == []


def test_other_hosts_copies_are_left_alone() -> None:
    r = repo()
    send_all(r, "QM2", {"ORDERS": obj("ORDERS", "Orders")})
    assert changes_to_send("QM1", C, {}, r.topics()) == []
    changes = changes_to_send("QM1", C, {"ORDERS": obj("ORDERS", "Orders")}, r.topics())
    assert [(c.name, c.command["qmgr"]) for c in changes] == [("ORDERS", "QM1")]


def test_a_conflict_found_when_sent_later_is_refused() -> None:
    r = repo()
    send_all(r, "QM2", {"SPORTS": obj("SPORTS", "Sports", "DIRECT")})
    errors = send_all(r, "QM1", {"SPORTS": obj("SPORTS", "Sports", "TOPICHOST")})
    assert errors == [ErrorCode.CLUSTER_TOPIC_CONFLICT.value]
    assert {t.qmgr for t in r.topics() if t.name == "SPORTS"} == {"QM2"}


def test_clstate_of_a_local_definition() -> None:
    assert local_clstate("A", unsent=(), invalid={}) is ClState.ACTIVE
    assert local_clstate("A", unsent={"A"}, invalid={}) is ClState.PENDING
    assert local_clstate("A", unsent={"A"}, invalid={"A": "conflict"}) is ClState.INVALID


def test_clroute_cannot_change_while_the_object_stays_in_the_cluster() -> None:
    before = obj("ORDERS", "Orders", "TOPICHOST")
    assert "remove it from the cluster" in clroute_change(
        before, obj("ORDERS", "Orders", "DIRECT"), C
    )
    assert clroute_change(before, obj("ORDERS", "Orders", "TOPICHOST", PUB="DISABLED"), C) == ""
    assert clroute_change(before, None, C) == ""  # deleted
    assert clroute_change(None, before, C) == ""  # defined
    unclustered = TopicObject("ORDERS", "Orders", {"CLROUTE": "DIRECT"})
    assert clroute_change(before, unclustered, C) == ""  # removed from the cluster
    assert clroute_change(unclustered, before, C) == ""  # put in the cluster
