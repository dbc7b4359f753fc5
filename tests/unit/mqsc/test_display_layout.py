"""runmqsc's two-column KEY(value) layout."""

from __future__ import annotations

from qmgr.client.types import MqscRecord
from qmgr.core.admin.records import COLUMN, Record, render_record


def _body(rendered: str) -> list[str]:
    head, *lines = rendered.split("\n")
    assert head == "AMQ8096I: IBM MQ subscription inquired."
    return lines


def _render(attrs: list[tuple[str, str]]) -> list[str]:
    return _body(render_record("AMQ8096I", "IBM MQ subscription inquired.", attrs))


def test_short_pairs_share_a_line_in_columns() -> None:
    assert _render([("SUBTYPE", "PROXY"), ("TOPICSTR", "Prices/#"), ("DESTQMGR", "SB1")]) == [
        "   SUBTYPE(PROXY)                          TOPICSTR(Prices/#)",
        "   DESTQMGR(SB1)",
    ]


def test_a_long_right_pair_stays_on_the_right() -> None:
    subid = "1A159D59A04BB88CB8272619F68F8F5AD11F09051A9F7E51"
    assert _render([("SUB", "SYSTEM.PROXY.SB1 DEMO Prices/#"), ("SUBID", subid)]) == [
        f"   SUB(SYSTEM.PROXY.SB1 DEMO Prices/#)     SUBID({subid})"
    ]


def test_a_left_pair_one_short_of_the_column_keeps_one_space() -> None:
    value = "X" * (COLUMN - 1 - len("SUB()"))
    (line,) = _render([("SUB", value), ("SUBID", "AB")])
    assert line == f"   SUB({value}) SUBID(AB)"


def test_a_left_pair_as_long_as_the_column_goes_on_its_own_line() -> None:
    for extra in (0, 1, 25):
        value = "X" * (COLUMN - len("SUB()") + extra)
        lines = _render(
            [("SUB", value), ("SUBID", "AB"), ("SUBTYPE", "PROXY"), ("DESTQMGR", "SB1")]
        )
        assert lines == [
            f"   SUB({value})",
            "   SUBID(AB)                               SUBTYPE(PROXY)",
            "   DESTQMGR(SB1)",
        ]


def test_every_key_value_pair_is_separated_by_whitespace() -> None:
    attrs = [(f"K{i}", "v" * n) for i, n in enumerate((10, 36, 37, 38, 60, 1, 35, 34, 80, 2))]
    lines = _render(attrs)
    tokens = [token for line in lines for token in line.split()]
    assert tokens == [f"{k}({v})" for k, v in attrs]


def test_core_and_client_records_render_alike() -> None:
    attrs = [("SUB", "S" * 45), ("TOPICSTR", "a/b"), ("DEST", "Q")]
    core = Record("AMQ8096I", "IBM MQ subscription inquired.", attrs).render()
    client = MqscRecord("AMQ8096I", "IBM MQ subscription inquired.", dict(attrs)).render()
    assert core == client
    assert _body(core)[0] == "   SUB(" + "S" * 45 + ")"
