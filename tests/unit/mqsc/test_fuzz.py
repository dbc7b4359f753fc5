"""Any input at all either parses or raises MqscError -- never another exception."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qmgr.mqsc import MqscCommand, MqscError, parse_command, parse_script, split_commands

VALID = [
    "DEFINE QLOCAL(Q1) MAXDEPTH(10) DESCR('a b') REPLACE",
    "DEFINE TOPIC(T) TOPICSTR('Sport/#') CLUSTER(DEMO) CLROUTE(TOPICHOST)",
    "DEFINE SUB(S) TOPICSTR('a') DEST(Q) PUBPRTY(ASPUB)",
    "DISPLAY SUB(*) SUBTYPE(ALL) WHERE(TOPICSTR LK 'a*') DEST",
    "DIS TPS('a/+') TYPE(SUB) SUBID",
    "RESET CLUSTER(C) ACTION(FORCEREMOVE) QMID(X) QUEUES(NO)",
    "DEFINE CHANNEL(C.QM1) CHLTYPE(CLUSRCVR) CONNAME(h(1414)) CLWLWGHT(5)",
    "ALTER QMGR TREELIFE(60) REPOS('')",
]
ALPHABET = "DEFINQLOCATPSUBRMYXGHKW*0159 ,()''';+-#/\t\n.%_a"
settings_ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(text: str) -> None:
    try:
        result = parse_command(text)
    except MqscError as error:
        assert 0 <= error.position <= len(text)
        assert error.code.startswith("AMQ")
        assert error.render().count("^") >= 1
    else:
        assert isinstance(result, MqscCommand)
        hash(result)


@settings_
@given(st.binary(max_size=200).map(lambda b: b.decode("utf-8", errors="replace")))
def test_arbitrary_bytes(text: str) -> None:
    outcome(text)
    split_commands(text)


@settings_
@given(st.text(max_size=200))
def test_arbitrary_text(text: str) -> None:
    outcome(text)
    parse_script(text)


@settings_
@given(st.text(alphabet=ALPHABET, max_size=80))
def test_mqsc_like_text(text: str) -> None:
    outcome(text)
    for command in split_commands(text):
        outcome(command.text)


@settings_
@given(
    st.sampled_from(VALID),
    st.lists(
        st.tuples(st.integers(0, 200), st.integers(0, 3), st.text(alphabet=ALPHABET, max_size=3)),
        max_size=4,
    ),
)
def test_mutated_valid_commands(base: str, edits: list[tuple[int, int, str]]) -> None:
    text = base
    for at, cut, insert in edits:
        at %= len(text) + 1
        text = text[:at] + insert + text[at + cut :]
    outcome(text)


@settings_
@given(st.text(alphabet=ALPHABET, max_size=120))
def test_script_commands_never_start_with_comment_or_blank(text: str) -> None:
    for command in split_commands(text):
        assert command.text == command.text.strip()
        assert command.text
        assert command.line >= 1
        assert not command.text.startswith("*")
