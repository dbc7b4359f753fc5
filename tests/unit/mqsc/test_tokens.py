"""Token rules: case folding vs quoting, separators, flags, parameter order."""

import pytest

from qmgr.mqsc import MqscError, parse_command


def test_keywords_are_case_insensitive() -> None:
    a = parse_command("define qlocal(Q1) maxdepth(10) replace")
    b = parse_command("DeFiNe QLocal(Q1) MAXDEPTH(10) Replace")
    assert (a.verb, a.obj, a.name, dict(a.params)) == (b.verb, b.obj, b.name, dict(b.params))
    assert a.params == {"MAXDEPTH": "10", "REPLACE": None}


def test_unquoted_values_are_folded_to_upper_case() -> None:
    cmd = parse_command("DEFINE QLOCAL(app.queue) DESCR(hello) BOQNAME(back.out)")
    assert cmd.name == "APP.QUEUE"
    assert cmd.params["DESCR"] == "HELLO"
    assert cmd.params["BOQNAME"] == "BACK.OUT"


def test_quoted_values_keep_case() -> None:
    cmd = parse_command("DEFINE QLOCAL('app.Queue') DESCR('Hello World')")
    assert cmd.name == "app.Queue"
    assert cmd.params["DESCR"] == "Hello World"


def test_unquoted_topic_string_is_folded_quoted_is_not() -> None:
    assert parse_command("DEFINE TOPIC(T) TOPICSTR(sport/tennis)").params["TOPICSTR"] == (
        "SPORT/TENNIS"
    )
    assert parse_command("DEFINE TOPIC(T) TOPICSTR('sport/tennis')").params["TOPICSTR"] == (
        "sport/tennis"
    )


def test_two_quotes_inside_a_quoted_string_are_one_quote() -> None:
    cmd = parse_command("DEFINE QLOCAL(Q) DESCR('Fred''s queue')")
    assert cmd.params["DESCR"] == "Fred's queue"
    assert parse_command("DEFINE QLOCAL(Q) DESCR('''')").params["DESCR"] == "'"


def test_empty_quoted_string_is_an_empty_value() -> None:
    assert parse_command("ALTER QLOCAL(Q) DESCR('')").params["DESCR"] == ""


def test_quoted_value_keeps_blanks_commas_and_parentheses() -> None:
    cmd = parse_command("ALTER QLOCAL(Q) DESCR(' a, (b) ; c ')")
    assert cmd.params["DESCR"] == " a, (b) ; c "


def test_blanks_and_commas_are_separators_anywhere() -> None:
    # The documented example: ALTER QLOCAL ('Account' ) TRIGDPTH ( 1) -- with our keywords.
    cmd = parse_command("ALTER QLOCAL ('Account' )   MAXDEPTH ( 1)")
    assert cmd.name == "Account"
    assert cmd.params == {"MAXDEPTH": "1"}
    cmd = parse_command("ALTER,QLOCAL(Q1),,MAXDEPTH(2),PUT(DISABLED) ,GET( ENABLED )")
    assert cmd.params == {"MAXDEPTH": "2", "PUT": "DISABLED", "GET": "ENABLED"}


def test_tabs_are_blanks() -> None:
    assert parse_command("DISPLAY\tQLOCAL(Q1)\tCURDEPTH").requested == ("CURDEPTH",)


def test_parameter_order_is_free() -> None:
    a = parse_command("DEFINE QLOCAL(Q) MAXDEPTH(5) PUT(DISABLED) DESCR('x')")
    b = parse_command("DEFINE QLOCAL(Q) DESCR('x') PUT(DISABLED) MAXDEPTH(5)")
    assert a.params == b.params


def test_params_keep_the_order_given() -> None:
    cmd = parse_command("DEFINE QLOCAL(Q) PUT(DISABLED) DESCR('x') MAXDEPTH(5)")
    assert list(cmd.params) == ["PUT", "DESCR", "MAXDEPTH"]


def test_flags_map_to_none() -> None:
    cmd = parse_command("DEFINE QLOCAL(Q) NOREPLACE")
    assert cmd.params == {"NOREPLACE": None}
    assert cmd.has("NOREPLACE") and not cmd.has("REPLACE")
    assert parse_command("DELETE QLOCAL(Q) PURGE").params == {"PURGE": None}


def test_integers_are_canonical_strings() -> None:
    cmd = parse_command("DEFINE QLOCAL(Q) MAXDEPTH(007) DEFPRTY(0)")
    assert cmd.params == {"MAXDEPTH": "7", "DEFPRTY": "0"}


def test_enumerations_in_lower_case_are_folded_when_unquoted() -> None:
    assert (
        parse_command("define topic(t) topicstr('x') clroute(topichost)").params["CLROUTE"]
        == "TOPICHOST"
    )


def test_quoted_enumeration_keeps_case_and_is_rejected() -> None:
    with pytest.raises(MqscError) as info:
        parse_command("DEFINE TOPIC(T) TOPICSTR('x') CLROUTE('topichost')")
    assert info.value.code == "AMQ8425E"


def test_blank_name_for_object_reference_attribute_is_empty() -> None:
    # MQ pads names with blanks: CLUSTER(' ') removes the cluster.
    assert parse_command("ALTER TOPIC(T) CLUSTER(' ')").params["CLUSTER"] == ""
    assert parse_command("ALTER QMGR REPOS('')").params["REPOS"] == ""


def test_trailing_semicolon_is_accepted_by_parse_command() -> None:
    assert parse_command("DISPLAY QMGR ;").obj == "QMGR"


def test_unquoted_value_with_balanced_parentheses() -> None:
    cmd = parse_command("DEFINE CHANNEL(TO.QM1) CHLTYPE(CLUSRCVR) CONNAME(host(1414))")
    assert cmd.params["CONNAME"] == "HOST(1414)"


def test_text_is_kept_verbatim() -> None:
    text = "  dis   qmgr  "
    assert parse_command(text).text == text
