"""Cluster channel definitions (cluster.chldefs): CONNAME forms, the MQRCCF reasons of a
definition that cannot be accepted, when a queue manager can join, persistence."""

from __future__ import annotations

import pytest

from cluster.chldefs import (
    ChannelDef,
    ChannelDefError,
    ChannelDefs,
    parse_conname,
    parse_connames,
)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("fr1.example.com(1414)", "fr1.example.com:1414"),
        ("127.0.0.1(50001)", "127.0.0.1:50001"),
        ("127.0.0.1:50001", "127.0.0.1:50001"),
        (" host( 1415 ) ", "host:1415"),
        ("host", "host:1414"),  # MQ's default port
        ("[::1]:1414", "[::1]:1414"),
    ],
)
def test_conname_forms(text: str, want: str) -> None:
    assert parse_conname(text) == want


@pytest.mark.parametrize(
    "text", ["", "host(port)", "host(0)", "host(65536)", "a:b:c", "host((1))", "bad host(1)"]
)
def test_bad_conname(text: str) -> None:
    with pytest.raises(ChannelDefError) as err:
        parse_conname(text)
    assert err.value.reason == "MQRCCF_CONN_NAME_ERROR"


def _rcvr(defs: ChannelDefs, cluster: str = "DEMO") -> ChannelDef:
    params = {"CHLTYPE": "CLUSRCVR", "CONNAME": "qm1(1414)", "CLUSTER": cluster, "CLWLWGHT": "7"}
    return defs.check("DEFINE", f"{cluster}.QM1", params)


def _sdr(defs: ChannelDefs, name: str = "DEMO.FR1", conname: str = "fr1(1414)") -> ChannelDef:
    params = {"CHLTYPE": "CLUSSDR", "CONNAME": conname, "CLUSTER": "DEMO"}
    return defs.check("DEFINE", name, params)


def test_receiver_and_sender_make_a_joinable_queue_manager() -> None:
    defs = ChannelDefs()
    assert not defs.ready() and defs.cluster == ""
    defs.put(_rcvr(defs))
    assert not defs.ready() and defs.cluster == "DEMO"
    defs.put(_sdr(defs))
    defs.put(_sdr(defs, "DEMO.FR2", "fr2:1414"))
    assert defs.ready()
    assert defs.join_addresses() == ("fr1:1414", "fr2:1414")
    receiver = defs.receiver()
    assert receiver is not None and receiver.workload == {"CLWLWGHT": 7}
    defs.remove("DEMO.FR1")
    assert defs.join_addresses() == ("fr2:1414",)


def test_alter_keeps_what_it_does_not_name() -> None:
    defs = ChannelDefs()
    defs.put(_rcvr(defs))
    altered = defs.check("ALTER", "DEMO.QM1", {"CHLTYPE": "CLUSRCVR", "CLWLRANK": "2"})
    assert altered.conname == "qm1:1414" and altered.cluster == "DEMO"
    assert altered.workload == {"CLWLWGHT": 7, "CLWLRANK": 2}


@pytest.mark.parametrize(
    ("verb", "name", "params", "reason"),
    [
        ("DEFINE", "DEMO.FR9", {"CHLTYPE": "CLUSSDR", "CONNAME": "h(1)"}, "CLUSTER_NAME_ERROR"),
        (
            "DEFINE",
            "X.FR1",
            {"CHLTYPE": "CLUSSDR", "CONNAME": "h(1)", "CLUSTER": "X"},
            "CLUSTER_NAME_ERROR",
        ),
        ("DEFINE", "DEMO.FR9", {"CHLTYPE": "CLUSSDR", "CLUSTER": "DEMO"}, "CONN_NAME_ERROR"),
        (
            "DEFINE",
            "DEMO.FR1",
            {"CHLTYPE": "CLUSSDR", "CONNAME": "h(1)", "CLUSTER": "DEMO"},
            "OBJECT_ALREADY_EXISTS",
        ),
        (
            "DEFINE",
            "DEMO.FR1",
            {"CHLTYPE": "CLUSRCVR", "CLUSTER": "DEMO", "REPLACE": None},
            "CHANNEL_TYPE_ERROR",
        ),
        ("DEFINE", "DEMO.QM2", {"CHLTYPE": "CLUSRCVR", "CLUSTER": "DEMO"}, "CHANNEL_TYPE_ERROR"),
        ("ALTER", "DEMO.NONE", {"CHLTYPE": "CLUSSDR"}, "CHANNEL_NOT_FOUND"),
    ],
)
def test_refusals(verb: str, name: str, params: dict[str, str | None], reason: str) -> None:
    defs = ChannelDefs()
    defs.put(_rcvr(defs))
    defs.put(_sdr(defs))
    with pytest.raises(ChannelDefError) as err:
        defs.check(verb, name, params)
    assert err.value.reason == f"MQRCCF_{reason}"


def test_replace_and_the_cluster_of_a_started_member() -> None:
    defs = ChannelDefs(fixed_cluster="DEMO")
    with pytest.raises(ChannelDefError, match="cluster DEMO"):
        _rcvr(defs, "OTHER")
    defs.put(_sdr(defs))
    again = defs.check(
        "DEFINE",
        "DEMO.FR1",
        {"CHLTYPE": "CLUSSDR", "CONNAME": "fr1b(1414)", "CLUSTER": "DEMO", "REPLACE": None},
    )
    assert again.conname == "fr1b:1414"


def test_definitions_survive_a_round_trip() -> None:
    defs = ChannelDefs()
    defs.put(_rcvr(defs))
    defs.put(_sdr(defs))
    loaded = ChannelDefs.load([d.to_dict() for d in defs.defs.values()])
    assert loaded.defs == defs.defs and loaded.ready()


def test_a_clussdr_conname_list_gives_each_address() -> None:
    assert parse_connames("fr1(1414), fr1b(1415)") == ("fr1:1414", "fr1b:1415")
    with pytest.raises(ChannelDefError, match="empty connection name"):
        parse_connames("fr1(1414),")
    defs = ChannelDefs()
    defs.put(_sdr(defs, conname="fr1(1414),fr1b(1415)"))
    defs.put(_sdr(defs, "DEMO.FR2", "fr2(1414),fr1(1414)"))
    assert defs.join_addresses() == ("fr1:1414", "fr1b:1415", "fr2:1414")
    with pytest.raises(ChannelDefError):  # a cluster-receiver advertises one address
        defs.check(
            "DEFINE", "DEMO.QM1", {"CHLTYPE": "CLUSRCVR", "CONNAME": "a(1),b(2)", "CLUSTER": "DEMO"}
        )
