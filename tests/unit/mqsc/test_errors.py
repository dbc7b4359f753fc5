"""Bad commands raise MqscError with the message id, the problem and where it is."""

import pytest

from qmgr.mqsc import MESSAGE_IDS, MqscError, parse_command


def fail(text: str) -> MqscError:
    with pytest.raises(MqscError) as info:
        parse_command(text)
    assert info.value.text == text
    return info.value


def at(text: str, fragment: str, nth: int = 0) -> int:
    """Offset of the nth occurrence of fragment in text."""
    pos = -1
    for _ in range(nth + 1):
        pos = text.index(fragment, pos + 1)
    return pos


CASES = [
    # (text, code, message, fragment the caret must point at; "" = end of command)
    ("", "AMQ8405E", "Empty command", None),
    (
        "FOO QLOCAL(Q1)",
        "AMQ8426E",
        "Unknown command verb FOO"
        "; valid verbs are ALTER, CLEAR, DEFINE, DELETE, DISPLAY, END, REFRESH, RESET, RESUME, START, STOP, SUSPEND",
        "FOO",
    ),
    (
        "PING CHANNEL(C)",
        "AMQ8426E",
        "Unknown command verb PING"
        "; valid verbs are ALTER, CLEAR, DEFINE, DELETE, DISPLAY, END, REFRESH, RESET, RESUME, START, STOP, SUSPEND",
        "PING",
    ),
    (
        "DEFI QLOCAL(Q1)",
        "AMQ8426E",
        "Unknown command verb DEFI"
        "; valid verbs are ALTER, CLEAR, DEFINE, DELETE, DISPLAY, END, REFRESH, RESET, RESUME, START, STOP, SUSPEND",
        "DEFI",
    ),
    (
        "DEFINE QREMOTE(Q1)",
        "AMQ8427E",
        "Object type QREMOTE not valid for DEFINE; valid types are BRIDGE, CHANNEL, QLOCAL, QMODEL, "
        "SUB, TOPIC",
        "QREMOTE",
    ),
    (
        "DEFINE QUEUE(Q1)",
        "AMQ8427E",
        "Object type QUEUE not valid for DEFINE; valid types are BRIDGE, CHANNEL, QLOCAL, QMODEL, "
        "SUB, TOPIC",
        "QUEUE",
    ),
    (
        "CLEAR TOPIC(T)",
        "AMQ8427E",
        "Object type TOPIC not valid for CLEAR; valid types are QLOCAL, TOPICSTR",
        "TOPIC",
    ),
    (
        "DEFINE",
        "AMQ8427E",
        "Missing object type after DEFINE; valid types are BRIDGE, CHANNEL, QLOCAL, QMODEL, SUB, "
        "TOPIC",
        "",
    ),
    ("DEFINE QLOCAL", "AMQ8427E", "Missing name in parentheses after QLOCAL", ""),
    (
        "DEFINE QLOCAL(Q1) MAXDPTH(5)",
        "AMQ8405E",
        "Unknown keyword MAXDPTH for DEFINE QLOCAL",
        "MAXDPTH",
    ),
    (
        "DEFINE QLOCAL(Q1) TOPICSTR('x')",
        "AMQ8405E",
        "Keyword TOPICSTR not valid for DEFINE QLOCAL",
        "TOPICSTR",
    ),
    ("ALTER QLOCAL(Q1) LIKE(Q2)", "AMQ8405E", "Keyword LIKE not valid for ALTER QLOCAL", "LIKE"),
    ("DEFINE QLOCAL(Q1) DEFPRTY(12)", "AMQ8425E", "Value 12 out of range 0-9 for DEFPRTY", "12"),
    (
        "DEFINE QLOCAL(Q1) MAXDEPTH(1000000000)",
        "AMQ8425E",
        "Value 1000000000 out of range 0-999999999 for MAXDEPTH",
        "1000000000",
    ),
    (
        "DEFINE QLOCAL(Q1) MAXMSGL(62914561)",
        "AMQ8425E",
        "Value 62914561 out of range 0-62914560 for MAXMSGL",
        "62914561",
    ),
    (
        "DEFINE QLOCAL(Q1) MAXDEPTH(-1)",
        "AMQ8425E",
        "Value -1 not valid for MAXDEPTH; expected 0-999999999",
        "-1",
    ),
    (
        "DEFINE QLOCAL(Q1) MAXDEPTH(ten)",
        "AMQ8425E",
        "Value TEN not valid for MAXDEPTH; expected 0-999999999",
        "ten",
    ),
    (
        "DEFINE QLOCAL(Q1) DEFPSIST(ASPARENT)",
        "AMQ8425E",
        "Value ASPARENT not valid for DEFPSIST; valid values are NO|YES",
        "ASPARENT",
    ),
    (
        "DEFINE TOPIC(T) TOPICSTR('a') PUB(ON)",
        "AMQ8425E",
        "Value ON not valid for PUB; valid values are ASPARENT|ENABLED|DISABLED",
        "ON",
    ),
    (
        "DEFINE TOPIC(T) TOPICSTR('a') CLROUTE(ROUTED)",
        "AMQ8425E",
        "Value ROUTED not valid for CLROUTE; valid values are DIRECT|TOPICHOST",
        "ROUTED",
    ),
    (
        "DEFINE TOPIC(T) TOPICSTR('a') DEFPRTY(10)",
        "AMQ8425E",
        "Value 10 out of range 0-9 for DEFPRTY",
        "10",
    ),
    (
        "DEFINE TOPIC(T) TOPICSTR('a') DEFPRTY(HIGH)",
        "AMQ8425E",
        "Value HIGH not valid for DEFPRTY; expected ASPARENT|0-9",
        "HIGH",
    ),
    (
        "DEFINE SUB(S) TOPICSTR('a') DEST(Q) SUBSCOPE(ASPARENT)",
        "AMQ8425E",
        "Value ASPARENT not valid for SUBSCOPE; valid values are ALL|QMGR",
        "ASPARENT",
    ),
    (
        "DEFINE SUB(S) TOPICSTR('a') DEST(Q) PUBPRTY(10)",
        "AMQ8425E",
        "Value 10 out of range 0-9 for PUBPRTY",
        "10",
    ),
    (
        "DEFINE SUB(S) TOPICSTR('a') DEST(Q) DESTCORL(XYZ)",
        "AMQ8425E",
        "Value for DESTCORL must be hexadecimal",
        "XYZ",
    ),
    (
        "DEFINE CHANNEL(C) CHLTYPE(CLUSRCVR) CLWLWGHT(0)",
        "AMQ8425E",
        "Value 0 out of range 1-99 for CLWLWGHT",
        "0",
    ),
    (
        "DEFINE CHANNEL(C) CHLTYPE(CLUSRCVR) CLWLWGHT(100)",
        "AMQ8425E",
        "Value 100 out of range 1-99 for CLWLWGHT",
        "100",
    ),
    (
        "DEFINE CHANNEL(C) CHLTYPE(SDR)",
        "AMQ8425E",
        "Value SDR not valid for CHLTYPE; valid values are CLUSRCVR|CLUSSDR",
        "SDR",
    ),
    (
        "ALTER QMGR TREELIFE(59)",
        "AMQ8425E",
        "Value 59 out of range 60-604000 or 0 for TREELIFE",
        "59",
    ),
    (
        "ALTER QMGR MAXMSGL(100)",
        "AMQ8425E",
        "Value 100 out of range 32768-62914560 for MAXMSGL",
        "100",
    ),
    (
        "ALTER QMGR PSMODE(ON)",
        "AMQ8425E",
        "Value ON not valid for PSMODE; valid values are ENABLED|COMPAT|DISABLED",
        "ON",
    ),
    (
        "REFRESH QMGR TYPE(EXPIRY)",
        "AMQ8425E",
        "Value EXPIRY not valid for TYPE; valid values are PROXYSUB",
        "EXPIRY",
    ),
    (
        "DISPLAY SUB(*) SUBTYPE(ANY)",
        "AMQ8425E",
        "Value ANY not valid for SUBTYPE; valid values are USER|PROXY|ADMIN|API|ALL",
        "ANY",
    ),
    (
        "DISPLAY TOPIC(*) TYPE(REMOTE)",
        "AMQ8425E",
        "Value REMOTE not valid for TYPE; valid values are LOCAL|CLUSTER|ALL",
        "REMOTE",
    ),
    (
        "DEFINE QLOCAL(Q1) DESCR('" + "x" * 65 + "')",
        "AMQ8425E",
        "Value too long for DESCR: 65 characters (maximum 64)",
        "'x",
    ),
    (
        "DEFINE QLOCAL(" + "Q" * 49 + ")",
        "AMQ8424E",
        "Name too long for QLOCAL: 49 characters (maximum 48)",
        "QQ",
    ),
    (
        "DEFINE CHANNEL(" + "C" * 21 + ") CHLTYPE(CLUSRCVR)",
        "AMQ8424E",
        "Name too long for CHANNEL: 21 characters (maximum 20)",
        "CC",
    ),
    (
        "DEFINE TOPIC(T) TOPICSTR('a') CLUSTER(" + "C" * 49 + ")",
        "AMQ8425E",
        "Name too long for CLUSTER: 49 characters (maximum 48)",
        "CC",
    ),
    (
        "DEFINE QLOCAL('a b')",
        "AMQ8424E",
        "Character ' ' not allowed in a name for QLOCAL; names use A-Z a-z 0-9 . / _ %",
        " b",
    ),
    (
        "DEFINE QLOCAL(APP-Q)",
        "AMQ8424E",
        "Character '-' not allowed in a name for QLOCAL; names use A-Z a-z 0-9 . / _ %",
        "-",
    ),
    (
        "DEFINE QLOCAL(APP.*)",
        "AMQ8424E",
        "Character '*' not allowed in a name for QLOCAL; names use A-Z a-z 0-9 . / _ %",
        "*",
    ),
    (
        "DISPLAY QLOCAL(A*B*)",
        "AMQ8424E",
        "Character '*' not allowed in a name for QLOCAL; names use A-Z a-z 0-9 . / _ % and a trailing * in DISPLAY",
        "*",
    ),
    ("DEFINE QLOCAL(' ')", "AMQ8424E", "Name for QLOCAL must not be blank", "' '"),
    ("DEFINE TOPIC(T)", "AMQ8427E", "Missing required parameter TOPICSTR for DEFINE TOPIC", ""),
    (
        "DEFINE TOPIC(T) CLUSTER(DEMO)  ",
        "AMQ8427E",
        "Missing required parameter TOPICSTR for DEFINE TOPIC",
        "  ",
    ),
    ("DEFINE TOPIC(T) TOPICSTR('')", "AMQ8425E", "TOPICSTR must not be empty", "''"),
    ("DEFINE TOPIC(T) TOPICSTR('a/')", "AMQ8425E", "TOPICSTR must not end with '/'", "/"),
    (
        "DEFINE SUB(S) DEST(Q)",
        "AMQ8427E",
        "Missing required parameter TOPICSTR or TOPICOBJ for DEFINE SUB",
        "",
    ),
    (
        "DEFINE SUB(S) TOPICSTR('a')",
        "AMQ8427E",
        "Missing required parameter DEST for DEFINE SUB (or DESTCLAS(MANAGED))",
        "",
    ),
    (
        "DEFINE CHANNEL(C) CONNAME('h')",
        "AMQ8427E",
        "Missing required parameter CHLTYPE for DEFINE CHANNEL",
        "",
    ),
    (
        "CLEAR TOPICSTR('a')",
        "AMQ8427E",
        "Missing required parameter CLRTYPE for CLEAR TOPICSTR",
        "",
    ),
    ("SUSPEND QMGR", "AMQ8427E", "Missing required parameter CLUSTER for SUSPEND QMGR", ""),
    ("REFRESH QMGR", "AMQ8427E", "Missing required parameter TYPE for REFRESH QMGR", ""),
    (
        "RESET CLUSTER(D) ACTION(FORCEREMOVE)",
        "AMQ8427E",
        "Missing required parameter QMNAME or QMID for RESET CLUSTER",
        "",
    ),
    (
        "RESET CLUSTER(D) QMNAME(QM1)",
        "AMQ8427E",
        "Missing required parameter ACTION for RESET CLUSTER",
        "",
    ),
    (
        "RESET CLUSTER(D) ACTION(FORCEREMOVE) QMNAME(A) QMID(B)",
        "AMQ8405E",
        "Parameters QMNAME and QMID cannot be used together",
        "QMID",
    ),
    ("DELETE SUB", "AMQ8427E", "DELETE SUB needs a name in parentheses or SUBID", ""),
    (
        "DEFINE QLOCAL(Q1) DESCR('a') DESCR('b')",
        "AMQ8405E",
        "Parameter DESCR specified twice",
        ("DESCR", 1),
    ),
    (
        "DEFINE QLOCAL(Q1) REPLACE replace",
        "AMQ8405E",
        "Parameter REPLACE specified twice",
        "replace",
    ),
    (
        "DISPLAY QLOCAL(Q1) CURDEPTH CURDEPTH",
        "AMQ8405E",
        "Parameter CURDEPTH specified twice",
        ("CURDEPTH", 1),
    ),
    (
        "DEFINE QLOCAL(Q1) REPLACE NOREPLACE",
        "AMQ8405E",
        "Parameters REPLACE and NOREPLACE cannot be used together",
        "NOREPLACE",
    ),
    (
        "DELETE QLOCAL(Q1) NOPURGE PURGE",
        "AMQ8405E",
        "Parameters NOPURGE and PURGE cannot be used together",
        ("PURGE", 1),
    ),
    ("DEFINE QLOCAL(Q1) DESCR('abc", "AMQ8405E", "Unbalanced quotes", "'"),
    ("DEFINE QLOCAL('Q1) DESCR(abc)", "AMQ8405E", "Unbalanced quotes", "'"),
    ("DEFINE QLOCAL(Q1) 'abc'", "AMQ8405E", "Quoted string must be a value in parentheses", "'"),
    (
        "DEFINE QLOCAL(Q1 MAXDEPTH(5)",
        "AMQ8405E",
        "Unbalanced parenthesis: '(' is never closed",
        "(",
    ),
    (
        "DEFINE QLOCAL(Q1) DESCR(abc",
        "AMQ8405E",
        "Unbalanced parenthesis: '(' is never closed",
        ("(", 1),
    ),
    (
        "DEFINE QLOCAL(Q1) MAXDEPTH(5))",
        "AMQ8405E",
        "Unbalanced parenthesis: ')' without '('",
        (")", 2),
    ),
    ("DEFINE QLOCAL(Q1) (5)", "AMQ8405E", "Value in parentheses without a keyword", "(5"),
    (
        "DEFINE TOPIC(T) TOPICSTR CLUSTER(X)",
        "AMQ8405E",
        "Missing parenthesised value for TOPICSTR",
        "TOPICSTR",
    ),
    (
        "DEFINE TOPIC(T) TOPICSTR() CLUSTER(X)",
        "AMQ8405E",
        "Missing parenthesised value for TOPICSTR",
        "()",
    ),
    ("DEFINE QLOCAL() MAXDEPTH(5)", "AMQ8405E", "Missing parenthesised value for QLOCAL", "("),
    (
        "DEFINE QLOCAL(Q1) DESCR(my queue)",
        "AMQ8405E",
        "Too many values for DESCR; quote a value that holds blanks or commas",
        "queue",
    ),
    ("DEFINE QLOCAL(Q1) REPLACE(YES)", "AMQ8405E", "REPLACE takes no value", "(YES"),
    ("DEFINE(Q1)", "AMQ8405E", "DEFINE takes no value in parentheses", "("),
    ("DISPLAY QMGR(QM1)", "AMQ8405E", "QMGR takes no name in parentheses", "("),
    ("DISPLAY QLOCAL(Q1) BOGUS", "AMQ8405E", "Unknown keyword BOGUS for DISPLAY QLOCAL", "BOGUS"),
    ("DISPLAY QLOCAL(Q1) CURDEPTH(5)", "AMQ8405E", "CURDEPTH takes no value", "(5"),
    ("DISPLAY QLOCAL(Q1) WHERE", "AMQ8405E", "Missing parenthesised value for WHERE", "WHERE"),
    (
        "DISPLAY QLOCAL(Q1) WHERE(CURDEPTH GT)",
        "AMQ8405E",
        "WHERE needs a filter of the form WHERE(keyword operator value)",
        (")", 1),
    ),
    (
        "DISPLAY QLOCAL(Q1) WHERE(BOGUS GT 5)",
        "AMQ8405E",
        "BOGUS cannot be used in WHERE for DISPLAY QLOCAL",
        "BOGUS",
    ),
    (
        "DISPLAY QLOCAL(Q1) WHERE(CURDEPTH BIGGER 5)",
        "AMQ8405E",
        "Unknown WHERE operator BIGGER; valid operators are LT, GT, EQ, NE, LE, GE, LK, NL, CT, EX, CTG, EXG",
        "BIGGER",
    ),
    (
        "DISPLAY TPSTATUS('a') TYPE(PUB) SUBCOUNT",
        "AMQ8405E",
        "Attribute SUBCOUNT not valid for DISPLAY TPSTATUS TYPE(PUB)",
        "SUBCOUNT",
    ),
    (
        "DISPLAY TPSTATUS('a') NUMPUBS",
        "AMQ8405E",
        "Attribute NUMPUBS not valid for DISPLAY TPSTATUS TYPE(TOPIC)",
        "NUMPUBS",
    ),
    (
        "DISPLAY TCLUSTER(*) TYPE(CLUSTER)",
        "AMQ8427E",
        "TYPE cannot be given with DISPLAY TCLUSTER (it means TYPE(CLUSTER))",
        "TYPE",
    ),
    (
        "DISPLAY SUB(*) ALL SUMMARY",
        "AMQ8405E",
        "Parameters ALL and SUMMARY cannot be used together",
        "SUMMARY",
    ),
    ("ALTER TOPIC(T) TOPICSTR('x')", "AMQ8427E", "TOPICSTR cannot be altered", "TOPICSTR"),
    ("ALTER TOPIC(T) TOPICSTR", "AMQ8427E", "TOPICSTR cannot be altered", "TOPICSTR"),
    ("ALTER SUB(S) SELECTOR('a = 1')", "AMQ8427E", "SELECTOR cannot be altered", "SELECTOR"),
    ("ALTER SUB(S) TOPICSTR('x')", "AMQ8427E", "TOPICSTR cannot be altered", "TOPICSTR"),
    (
        "ALTER CHANNEL(C) CLWLRANK(1)",
        "AMQ8427E",
        "Missing required parameter CHLTYPE for ALTER CHANNEL",
        "",
    ),
    ("END NOW", "AMQ8405E", "END takes no parameters", "NOW"),
    ("DISPLAY QMGR; DISPLAY PUBSUB", "AMQ8405E", "Unexpected ';': only one command per line", ";"),
]


@pytest.mark.parametrize(
    ("text", "code", "message", "where"), CASES, ids=[c[2][:50] for c in CASES]
)
def test_bad_command(text: str, code: str, message: str, where: str | tuple | None) -> None:
    error = fail(text)
    assert error.code == code
    assert error.message == message
    assert code in MESSAGE_IDS
    if where is None:
        assert error.position == 0
    elif where == "":
        assert error.position == len(text.rstrip())
    elif isinstance(where, tuple):
        assert error.position == at(text, *where)
    else:
        assert error.position == at(text, where)


def test_error_is_a_value_error_with_code_in_str() -> None:
    error = fail("DEFINE QLOCAL(Q1) DEFPRTY(12)")
    assert isinstance(error, ValueError)
    assert str(error) == "AMQ8425E: Value 12 out of range 0-9 for DEFPRTY"


def test_render_puts_caret_under_position() -> None:
    error = fail("DEFINE QLOCAL(Q1) MAXDPTH(5)")
    assert error.render() == (
        "DEFINE QLOCAL(Q1) MAXDPTH(5)\n"
        "                  ^\n"
        "AMQ8405E: Unknown keyword MAXDPTH for DEFINE QLOCAL"
    )


def test_render_with_label_shifts_caret() -> None:
    error = fail("DIS QL(Q1) BOGUS")
    lines = error.render("     1 : ").splitlines()
    assert lines[0] == "     1 : DIS QL(Q1) BOGUS"
    assert lines[1].index("^") == len("     1 : ") + len("DIS QL(Q1) ")


def test_render_of_long_command_shows_window_around_caret() -> None:
    text = "DEFINE TOPIC(T) TOPICSTR('" + "d" * 300 + "') BOGUS(1)"
    error = fail(text)
    line, caret, message = error.render().splitlines()
    assert len(line) <= 106
    assert line[caret.index("^") :].startswith("BOGUS")
    assert message == "AMQ8405E: Unknown keyword BOGUS for DEFINE TOPIC"


def test_render_of_control_characters_keeps_alignment() -> None:
    error = fail("DEFINE\tQLOCAL(Q1)\tMAXDPTH(5)")
    line, caret, _ = error.render().splitlines()
    assert line[caret.index("^") :].startswith("MAXDPTH")


def test_huge_integer_is_out_of_range_not_a_crash() -> None:
    error = fail("DEFINE QLOCAL(Q1) MAXDEPTH(" + "9" * 5000 + ")")
    assert error.code == "AMQ8425E"
    assert "out of range 0-999999999 for MAXDEPTH" in error.message
