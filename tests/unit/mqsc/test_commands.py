"""Every supported command parses into the expected record; synonyms and generic names."""

import pytest

from qmgr.mqsc import MqscCommand, WhereClause, parse_command

N = None

CASES = [
    # local queues
    (
        "DEFINE QLOCAL(APP.Q) DESCR('App queue') MAXDEPTH(5000) MAXMSGL(4194304) DEFPSIST(YES)"
        " DEFPRTY(4) GET(ENABLED) PUT(DISABLED) BOTHRESH(3) BOQNAME(APP.BACKOUT) USAGE(NORMAL)"
        " REPLACE",
        ("DEFINE", "QLOCAL", "APP.Q"),
        {
            "DESCR": "App queue",
            "MAXDEPTH": "5000",
            "MAXMSGL": "4194304",
            "DEFPSIST": "YES",
            "DEFPRTY": "4",
            "GET": "ENABLED",
            "PUT": "DISABLED",
            "BOTHRESH": "3",
            "BOQNAME": "APP.BACKOUT",
            "USAGE": "NORMAL",
            "REPLACE": N,
        },
        (),
    ),
    (
        "DEFINE QLOCAL(B) LIKE(APP.Q) NOREPLACE",
        ("DEFINE", "QLOCAL", "B"),
        {"LIKE": "APP.Q", "NOREPLACE": N},
        (),
    ),
    ("DEFINE QLOCAL(XQ) USAGE(XMITQ)", ("DEFINE", "QLOCAL", "XQ"), {"USAGE": "XMITQ"}, ()),
    (
        "ALTER QLOCAL(APP.Q) MAXDEPTH(10) FORCE",
        ("ALTER", "QLOCAL", "APP.Q"),
        {"MAXDEPTH": "10", "FORCE": N},
        (),
    ),
    ("DELETE QLOCAL(APP.Q)", ("DELETE", "QLOCAL", "APP.Q"), {}, ()),
    ("DELETE QLOCAL(APP.Q) NOPURGE", ("DELETE", "QLOCAL", "APP.Q"), {"NOPURGE": N}, ()),
    ("CLEAR QLOCAL(APP.Q)", ("CLEAR", "QLOCAL", "APP.Q"), {}, ()),
    ("DISPLAY QLOCAL(APP.Q)", ("DISPLAY", "QLOCAL", "APP.Q"), {}, ()),
    (
        "DISPLAY QLOCAL(APP.*) CURDEPTH MAXDEPTH",
        ("DISPLAY", "QLOCAL", "APP.*"),
        {},
        ("CURDEPTH", "MAXDEPTH"),
    ),
    (
        "DISPLAY QUEUE(*) TYPE(QLOCAL) ALL",
        ("DISPLAY", "QUEUE", "*"),
        {"TYPE": "QLOCAL", "ALL": N},
        (),
    ),
    ("DISPLAY QUEUE(*) TYPE(QL)", ("DISPLAY", "QUEUE", "*"), {"TYPE": "QLOCAL"}, ()),
    (
        "DISPLAY QSTATUS(APP.Q) TYPE(QUEUE) CURDEPTH IPPROCS",
        ("DISPLAY", "QSTATUS", "APP.Q"),
        {"TYPE": "QUEUE"},
        ("CURDEPTH", "IPPROCS"),
    ),
    # topics
    (
        "DEFINE TOPIC(SPORTS) TYPE(LOCAL) TOPICSTR('Sport') CLUSTER(DEMO) CLROUTE(TOPICHOST)"
        " PUB(ENABLED) SUB(ASPARENT) PUBSCOPE(ALL) SUBSCOPE(QMGR) PROXYSUB(FORCE)"
        " WILDCARD(BLOCK) DURSUB(YES) DEFPSIST(ASPARENT) DEFPRTY(ASPARENT) DEFPRESP(SYNC)"
        " NPMSGDLV(ALLAVAIL) PMSGDLV(ALLDUR) USEDLQ(NO) MDURMDL(SYSTEM.DURABLE.MODEL.QUEUE)"
        " MNDURMDL(SYSTEM.NDURABLE.MODEL.QUEUE) DESCR('Sport') CUSTOM('x') CAPEXPRY(NOLIMIT)"
        " REPLACE",
        ("DEFINE", "TOPIC", "SPORTS"),
        {
            "TYPE": "LOCAL",
            "TOPICSTR": "Sport",
            "CLUSTER": "DEMO",
            "CLROUTE": "TOPICHOST",
            "PUB": "ENABLED",
            "SUB": "ASPARENT",
            "PUBSCOPE": "ALL",
            "SUBSCOPE": "QMGR",
            "PROXYSUB": "FORCE",
            "WILDCARD": "BLOCK",
            "DURSUB": "YES",
            "DEFPSIST": "ASPARENT",
            "DEFPRTY": "ASPARENT",
            "DEFPRESP": "SYNC",
            "NPMSGDLV": "ALLAVAIL",
            "PMSGDLV": "ALLDUR",
            "USEDLQ": "NO",
            "MDURMDL": "SYSTEM.DURABLE.MODEL.QUEUE",
            "MNDURMDL": "SYSTEM.NDURABLE.MODEL.QUEUE",
            "DESCR": "Sport",
            "CUSTOM": "x",
            "CAPEXPRY": "NOLIMIT",
            "REPLACE": N,
        },
        (),
    ),
    (
        "DEFINE TOPIC(T2) TOPICSTR('a/b') LIKE(SPORTS)",
        ("DEFINE", "TOPIC", "T2"),
        {"TOPICSTR": "a/b", "LIKE": "SPORTS"},
        (),
    ),
    (
        "ALTER TOPIC(SPORTS) PUB(DISABLED) DEFPRTY(9)",
        ("ALTER", "TOPIC", "SPORTS"),
        {"PUB": "DISABLED", "DEFPRTY": "9"},
        (),
    ),
    ("DELETE TOPIC(SPORTS)", ("DELETE", "TOPIC", "SPORTS"), {}, ()),
    ("DISPLAY TOPIC(*)", ("DISPLAY", "TOPIC", "*"), {}, ()),
    (
        "DISPLAY TOPIC(SP*) TYPE(CLUSTER) CLUSINFO CLUSTER(DEMO) CLROUTE TOPICSTR",
        ("DISPLAY", "TOPIC", "SP*"),
        {"TYPE": "CLUSTER", "CLUSINFO": N, "CLUSTER": "DEMO"},
        ("CLROUTE", "TOPICSTR"),
    ),
    ("DISPLAY TOPIC(*) CLUSTER TYPE", ("DISPLAY", "TOPIC", "*"), {}, ("CLUSTER", "TYPE")),
    (
        "DISPLAY TCLUSTER(*) CLROUTE CLSTATE",
        ("DISPLAY", "TCLUSTER", "*"),
        {},
        ("CLROUTE", "CLSTATE"),
    ),
    ("DISPLAY TPSTATUS('Sport/#')", ("DISPLAY", "TPSTATUS", "Sport/#"), {}, ()),
    (
        "DISPLAY TPSTATUS('Sport/+') TYPE(TOPIC) ADMIN SUBCOUNT",
        ("DISPLAY", "TPSTATUS", "Sport/+"),
        {"TYPE": "TOPIC"},
        ("ADMIN", "SUBCOUNT"),
    ),
    (
        "DISPLAY TPSTATUS('a') TYPE(SUB) SUBID SUBTYPE",
        ("DISPLAY", "TPSTATUS", "a"),
        {"TYPE": "SUB"},
        ("SUBID", "SUBTYPE"),
    ),
    (
        "DISPLAY TPSTATUS('a') TYPE(PUB) NUMPUBS",
        ("DISPLAY", "TPSTATUS", "a"),
        {"TYPE": "PUB"},
        ("NUMPUBS",),
    ),
    (
        "CLEAR TOPICSTR('Sport/Scores') CLRTYPE(RETAINED)",
        ("CLEAR", "TOPICSTR", "Sport/Scores"),
        {"CLRTYPE": "RETAINED"},
        (),
    ),
    # subscriptions
    (
        "DEFINE SUB('My sub') TOPICSTR('Sport/#') DEST(SUBQ) DESTQMGR(QM1) DESTCLAS(PROVIDED)"
        " DESTCORL(414D5120) EXPIRY(UNLIMITED) PSPROP(MSGPROP) PUBPRTY(ASQDEF)"
        " SELECTOR('colour = ''red''') SUBSCOPE(ALL) SUBUSER('app') USERDATA('data')"
        " VARUSER(FIXED) WSCHEMA(TOPIC) SUBLEVEL(1) REQONLY(NO) PUBACCT(00FF) PUBAPPID('id')"
        " REPLACE",
        ("DEFINE", "SUB", "My sub"),
        {
            "TOPICSTR": "Sport/#",
            "DEST": "SUBQ",
            "DESTQMGR": "QM1",
            "DESTCLAS": "PROVIDED",
            "DESTCORL": "414D5120",
            "EXPIRY": "UNLIMITED",
            "PSPROP": "MSGPROP",
            "PUBPRTY": "ASQDEF",
            "SELECTOR": "colour = 'red'",
            "SUBSCOPE": "ALL",
            "SUBUSER": "app",
            "USERDATA": "data",
            "VARUSER": "FIXED",
            "WSCHEMA": "TOPIC",
            "SUBLEVEL": "1",
            "REQONLY": "NO",
            "PUBACCT": "00FF",
            "PUBAPPID": "id",
            "REPLACE": N,
        },
        (),
    ),
    (
        "DEFINE SUB(S1) TOPICOBJ(SPORTS) DESTCLAS(MANAGED)",
        ("DEFINE", "SUB", "S1"),
        {"TOPICOBJ": "SPORTS", "DESTCLAS": "MANAGED"},
        (),
    ),
    (
        "DEFINE SUB(S2) TOPICOBJ(SPORTS) TOPICSTR('Tennis') DEST(Q) PUBPRTY(5) EXPIRY(600)",
        ("DEFINE", "SUB", "S2"),
        {"TOPICOBJ": "SPORTS", "TOPICSTR": "Tennis", "DEST": "Q", "PUBPRTY": "5", "EXPIRY": "600"},
        (),
    ),
    (
        "ALTER SUB(S1) USERDATA('new') PUBPRTY(ASPUB)",
        ("ALTER", "SUB", "S1"),
        {"USERDATA": "new", "PUBPRTY": "ASPUB"},
        (),
    ),
    ("ALTER SUB SUBID(414d5120)", ("ALTER", "SUB", N), {"SUBID": "414D5120"}, ()),
    ("DELETE SUB(S1)", ("DELETE", "SUB", "S1"), {}, ()),
    ("DELETE SUB SUBID(414D5120514D31)", ("DELETE", "SUB", N), {"SUBID": "414D5120514D31"}, ()),
    ("DISPLAY SUB(*) SUBTYPE(PROXY)", ("DISPLAY", "SUB", "*"), {"SUBTYPE": "PROXY"}, ()),
    (
        "DISPLAY SUB(*) SUBTYPE(ALL) DURABLE(YES) TOPICSTR DEST",
        ("DISPLAY", "SUB", "*"),
        {"SUBTYPE": "ALL", "DURABLE": "YES"},
        ("TOPICSTR", "DEST"),
    ),
    ("DISPLAY SUB SUBID(414D5120) ALL", ("DISPLAY", "SUB", N), {"SUBID": "414D5120", "ALL": N}, ()),
    ("DISPLAY SUB(S*) SUMMARY", ("DISPLAY", "SUB", "S*"), {"SUMMARY": N}, ()),
    (
        "DISPLAY SBSTATUS(*) NUMMSGS LMSGDATE",
        ("DISPLAY", "SBSTATUS", "*"),
        {},
        ("NUMMSGS", "LMSGDATE"),
    ),
    (
        "DISPLAY SBSTATUS(*) SUBTYPE(PROXY) DURABLE(NO)",
        ("DISPLAY", "SBSTATUS", "*"),
        {"SUBTYPE": "PROXY", "DURABLE": "NO"},
        (),
    ),
    # queue manager, pub/sub, cluster
    ("DISPLAY QMGR", ("DISPLAY", "QMGR", N), {}, ()),
    ("DISPLAY QMGR PSMODE REPOS QMID", ("DISPLAY", "QMGR", N), {}, ("PSMODE", "REPOS", "QMID")),
    ("DISPLAY QMGR ALL", ("DISPLAY", "QMGR", N), {"ALL": N}, ()),
    ("DISPLAY PUBSUB", ("DISPLAY", "PUBSUB", N), {}, ()),
    (
        "DISPLAY PUBSUB TYPE(LOCAL) STATUS SUBCOUNT",
        ("DISPLAY", "PUBSUB", N),
        {"TYPE": "LOCAL"},
        ("STATUS", "SUBCOUNT"),
    ),
    ("DISPLAY CLUSQMGR(*)", ("DISPLAY", "CLUSQMGR", "*"), {}, ()),
    (
        "DISPLAY CLUSQMGR(QM*) CLUSTER(DEMO) QMTYPE STATUS SUSPEND",
        ("DISPLAY", "CLUSQMGR", "QM*"),
        {"CLUSTER": "DEMO"},
        ("QMTYPE", "STATUS", "SUSPEND"),
    ),
    ("DISPLAY CHSTATUS(*)", ("DISPLAY", "CHSTATUS", "*"), {}, ()),
    (
        "DISPLAY CHSTATUS(DEMO.*) CURRENT STATUS MSGS",
        ("DISPLAY", "CHSTATUS", "DEMO.*"),
        {"CURRENT": N},
        ("STATUS", "MSGS"),
    ),
    ("SUSPEND QMGR CLUSTER(DEMO)", ("SUSPEND", "QMGR", N), {"CLUSTER": "DEMO"}, ()),
    (
        "SUSPEND QMGR CLUSTER(DEMO) MODE(FORCE)",
        ("SUSPEND", "QMGR", N),
        {"CLUSTER": "DEMO", "MODE": "FORCE"},
        (),
    ),
    ("RESUME QMGR CLUSTER(DEMO)", ("RESUME", "QMGR", N), {"CLUSTER": "DEMO"}, ()),
    ("REFRESH QMGR TYPE(PROXYSUB)", ("REFRESH", "QMGR", N), {"TYPE": "PROXYSUB"}, ()),
    ("REFRESH CLUSTER(DEMO) REPOS(YES)", ("REFRESH", "CLUSTER", "DEMO"), {"REPOS": "YES"}, ()),
    (
        "RESET CLUSTER(DEMO) ACTION(FORCEREMOVE) QMNAME(QM3)",
        ("RESET", "CLUSTER", "DEMO"),
        {"ACTION": "FORCEREMOVE", "QMNAME": "QM3"},
        (),
    ),
    (
        "RESET CLUSTER(DEMO) ACTION(FORCEREMOVE) QMID('QM3_2024-01-01_10.00.00') QUEUES(YES)",
        ("RESET", "CLUSTER", "DEMO"),
        {"ACTION": "FORCEREMOVE", "QMID": "QM3_2024-01-01_10.00.00", "QUEUES": "YES"},
        (),
    ),
    (
        "ALTER QMGR DESCR('Node 1') PSMODE(ENABLED) PSCLUS(DISABLED) REPOS(DEMO) TREELIFE(1800)"
        " CLWLUSEQ(ANY) CLWLMRUC(999999999) DEFCLXQ(CHANNEL) MAXMSGL(4194304)"
        " DEADQ(SYSTEM.DEAD.LETTER.QUEUE)",
        ("ALTER", "QMGR", N),
        {
            "DESCR": "Node 1",
            "PSMODE": "ENABLED",
            "PSCLUS": "DISABLED",
            "REPOS": "DEMO",
            "TREELIFE": "1800",
            "CLWLUSEQ": "ANY",
            "CLWLMRUC": "999999999",
            "DEFCLXQ": "CHANNEL",
            "MAXMSGL": "4194304",
            "DEADQ": "SYSTEM.DEAD.LETTER.QUEUE",
        },
        (),
    ),
    ("ALTER QMGR TREELIFE(0)", ("ALTER", "QMGR", N), {"TREELIFE": "0"}, ()),
    # channels
    (
        "DEFINE CHANNEL(DEMO.QM1) CHLTYPE(CLUSRCVR) CONNAME('127.0.0.1(1414)') CLUSTER(DEMO)"
        " CLWLRANK(3) CLWLPRTY(2) CLWLWGHT(99) NETPRTY(1) DESCR('to QM1') REPLACE",
        ("DEFINE", "CHANNEL", "DEMO.QM1"),
        {
            "CHLTYPE": "CLUSRCVR",
            "CONNAME": "127.0.0.1(1414)",
            "CLUSTER": "DEMO",
            "CLWLRANK": "3",
            "CLWLPRTY": "2",
            "CLWLWGHT": "99",
            "NETPRTY": "1",
            "DESCR": "to QM1",
            "REPLACE": N,
        },
        (),
    ),
    (
        "ALTER CHANNEL(DEMO.QM1) CHLTYPE(CLUSRCVR) CLWLWGHT(1)",
        ("ALTER", "CHANNEL", "DEMO.QM1"),
        {"CHLTYPE": "CLUSRCVR", "CLWLWGHT": "1"},
        (),
    ),
    ("DELETE CHANNEL(DEMO.QM1)", ("DELETE", "CHANNEL", "DEMO.QM1"), {}, ()),
    (
        "DISPLAY CHANNEL(DEMO.*) CHLTYPE(CLUSRCVR) CLWLRANK",
        ("DISPLAY", "CHANNEL", "DEMO.*"),
        {"CHLTYPE": "CLUSRCVR"},
        ("CLWLRANK",),
    ),
]


@pytest.mark.parametrize(
    ("text", "head", "params", "requested"), CASES, ids=[c[0][:40] for c in CASES]
)
def test_command_parses_into_record(
    text: str, head: tuple[str, str, str | None], params: dict, requested: tuple
) -> None:
    cmd = parse_command(text)
    assert (cmd.verb, cmd.obj, cmd.name) == head
    assert dict(cmd.params) == params
    assert cmd.requested == requested
    assert cmd.text == text


def test_end() -> None:
    cmd = parse_command("end")
    assert (cmd.verb, cmd.obj, cmd.name, dict(cmd.params), cmd.requested) == ("END", N, N, {}, ())
    assert cmd.label == "END"


@pytest.mark.parametrize(
    ("short", "full"),
    [
        ("DEF QL(Q1)", "DEFINE QLOCAL(Q1)"),
        ("ALT QL(Q1) MAXDEPTH(1)", "ALTER QLOCAL(Q1) MAXDEPTH(1)"),
        ("DIS QL(*)", "DISPLAY QLOCAL(*)"),
        ("DIS Q(*)", "DISPLAY QUEUE(*)"),
        ("DIS QS(Q1)", "DISPLAY QSTATUS(Q1)"),
        ("DIS TPS('a/b')", "DISPLAY TPSTATUS('a/b')"),
        ("DIS CHS(*)", "DISPLAY CHSTATUS(*)"),
        ("DIS CHL(*)", "DISPLAY CHANNEL(*)"),
        ("DEF CHL(C1) CHLTYPE(CLUSRCVR)", "DEFINE CHANNEL(C1) CHLTYPE(CLUSRCVR)"),
        ("DEF SUBSCRIPTION(S) TOPICSTR('a') DEST(Q)", "DEFINE SUB(S) TOPICSTR('a') DEST(Q)"),
        ("DELETE QL(Q1)", "DELETE QLOCAL(Q1)"),
        ("CLEAR QL(Q1)", "CLEAR QLOCAL(Q1)"),
        ("ALT SUB(S) USERDATA('u')", "ALTER SUB(S) USERDATA('u')"),
    ],
)
def test_synonyms_give_the_canonical_record(short: str, full: str) -> None:
    a, b = parse_command(short), parse_command(full)
    assert (a.verb, a.obj, a.name, dict(a.params)) == (b.verb, b.obj, b.name, dict(b.params))


def test_generic_names() -> None:
    assert parse_command("DISPLAY QLOCAL(APP.*)").generic
    assert parse_command("DISPLAY TOPIC(*)").generic
    assert parse_command("DISPLAY SUB('abc*')").generic
    assert not parse_command("DISPLAY QLOCAL(APP.Q)").generic
    assert not parse_command("DISPLAY QMGR").generic
    # TPSTATUS takes a topic string; its wildcards are # and +, never a generic '*'.
    assert not parse_command("DISPLAY TPSTATUS('a/*')").generic


def test_where_filter() -> None:
    cmd = parse_command("DISPLAY QLOCAL(*) WHERE(CURDEPTH GT 100)")
    assert cmd.where == WhereClause("CURDEPTH", "GT", "100")
    assert cmd.params["WHERE"] == "CURDEPTH GT 100"
    cmd = parse_command("dis sub(*) where(topicstr lk 'Sport/*')")
    assert cmd.where == WhereClause("TOPICSTR", "LK", "Sport/*")


def test_record_is_frozen_hashable_and_comparable() -> None:
    a = parse_command("DEFINE QLOCAL(Q) MAXDEPTH(5)")
    b = parse_command("DEFINE QLOCAL(Q) MAXDEPTH(5)")
    assert a == b and hash(a) == hash(b)
    assert isinstance(a, MqscCommand)
    with pytest.raises(AttributeError):
        a.verb = "ALTER"  # type: ignore[misc]
    with pytest.raises(TypeError):
        a.params["X"] = "1"  # type: ignore[index]
    assert a.get("MAXDEPTH") == "5" and a.get("DESCR") is None
    assert a.label == "DEFINE QLOCAL"


def test_longest_valid_names_and_strings() -> None:
    name = "Q." + "A" * 46
    assert parse_command(f"DEFINE QLOCAL({name})").name == name
    assert parse_command(f"DEFINE QLOCAL(Q) DESCR('{'d' * 64}')").params["DESCR"] == "d" * 64
    topic = "t" * 10240
    assert parse_command(f"DEFINE TOPIC(T) TOPICSTR('{topic}')").params["TOPICSTR"] == topic
    assert parse_command("DEFINE CHANNEL(" + "C" * 20 + ") CHLTYPE(CLUSRCVR)").name == "C" * 20


def test_object_name_characters() -> None:
    assert parse_command("DEFINE QLOCAL('a.B/c_d%9')").name == "a.B/c_d%9"
