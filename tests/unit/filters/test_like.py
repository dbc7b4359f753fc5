"""LIKE matching without backtracking, checked against a plain dynamic-programming matcher."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qmgr.filters import FilterEvaluationError, compile_filter
from qmgr.filters.interpreter import Interpreter
from qmgr.filters.like import REGEX, compile_like

# --- reference: the textbook DP over (pattern item, text position) ----------------------------


def ref_items(pattern: str, escape: str | None) -> list[tuple[str, str]]:
    """('lit', ch) | ('one', '') | ('any', '') items; the escape is read before % and _."""
    items: list[tuple[str, str]] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == escape:
            items.append(("lit", pattern[i + 1]))
            i += 2
        elif ch == "%":
            items.append(("any", ""))
            i += 1
        elif ch == "_":
            items.append(("one", ""))
            i += 1
        else:
            items.append(("lit", ch))
            i += 1
    return items


def ref_like(text: str, pattern: str, escape: str | None = None) -> bool:
    items = ref_items(pattern, escape)
    # can[j]: the items read so far match text[:j]
    can = [True] + [False] * len(text)
    for kind, ch in items:
        nxt = [False] * (len(text) + 1)
        if kind == "any":
            seen = False
            for j in range(len(text) + 1):
                seen = seen or can[j]
                nxt[j] = seen
        else:
            for j in range(1, len(text) + 1):
                nxt[j] = can[j - 1] and (kind == "one" or text[j - 1] == ch)
        can = nxt
    return can[len(text)]


ALPHABET = "ab%_!\n"
texts = st.text(alphabet="ab!%_\n", max_size=14)
patterns = st.text(alphabet=ALPHABET, max_size=10)


@settings(max_examples=600, deadline=None)
@given(texts, patterns)
def test_like_without_escape_agrees_with_the_dp_reference(text: str, pattern: str) -> None:
    assert compile_like(pattern, None).match(text) is ref_like(text, pattern)


@settings(max_examples=600, deadline=None)
@given(texts, patterns)
def test_like_with_escape_agrees_with_the_dp_reference(text: str, pattern: str) -> None:
    if pattern.replace("!!", "").endswith("!") and _ends_in_escape(pattern):
        with pytest.raises(FilterEvaluationError):
            compile_like(pattern, "!")
        return
    assert compile_like(pattern, "!").match(text) is ref_like(text, pattern, "!")


def _ends_in_escape(pattern: str) -> bool:
    i = 0
    while i < len(pattern):
        if pattern[i] == "!":
            if i + 1 == len(pattern):
                return True
            i += 2
        else:
            i += 1
    return False


@settings(max_examples=300, deadline=None)
@given(texts, patterns)
def test_compiled_and_interpreted_filters_agree_with_the_reference(text: str, pattern: str) -> None:
    quoted = pattern.replace("'", "''")
    sql = compile_filter(f"x LIKE '{quoted}'")
    expected = ref_like(text, pattern)
    assert sql.evaluate({}, {"x": text}) is expected
    assert Interpreter({}).condition(sql.tree, {}, {"x": text}) is expected
    # The same pattern computed at run time goes through the dynamic path.
    dynamic = compile_filter("x LIKE p")
    assert dynamic.evaluate({}, {"x": text, "p": pattern}) is expected


PATHOLOGICAL = "%a%a%a%a%a%a_b"


def test_pathological_pattern_gives_the_right_answer() -> None:
    # A backtracking regex took seconds here; the answer is all that is asserted (timing: bench).
    plan = compile_like(PATHOLOGICAL, None)
    assert plan.shape == REGEX
    assert plan.match("a" * 100) is False
    assert plan.match("a" * 100 + "xb") is True
    assert plan.match("a" * 5 + "xb") is False
    assert plan.match("a" * 6 + "xb") is True
    many = "%a" * 200 + "_b"
    assert compile_like(many, None).match("a" * 1000) is False


def test_pathological_constant_like_is_folded_or_left_to_run_time_correctly() -> None:
    text = "a" * 100
    assert compile_filter(f"'{text}' LIKE '{PATHOLOGICAL}'").evaluate({}, {}) is False
    assert compile_filter(f"'{text}' NOT LIKE '{PATHOLOGICAL}'").evaluate({}, {}) is True
    huge = "a" * 30_000
    sql = compile_filter("@v LIKE @p", {"v": huge, "p": "%a" * 500 + "_b"})
    assert sql.evaluate({}, {}) is False
    sql = compile_filter("@v LIKE @p", {"v": huge + "cb", "p": "%a" * 500 + "_b"})
    assert sql.evaluate({}, {}) is True


@pytest.mark.parametrize(
    ("pattern", "escape", "text", "expected"),
    [
        ("a!%b%", "!", "a%bxyz", True),
        ("a!%b%", "!", "axbxyz", False),
        ("%!_x_", "!", "zz_xy", True),
        ("%!_x_", "!", "zzaxy", False),
        ("_%_", None, "ab", True),
        ("_%_", None, "a", False),
        ("a_%_a", None, "a\n\na", True),
        ("%ab_ab%", None, "abaab", True),
        ("%ab_ab%", None, "ababb", False),
        ("%ab_ab%", None, "xxabzabyy", True),
    ],
)
def test_like_examples(pattern: str, escape: str | None, text: str, expected: bool) -> None:
    assert compile_like(pattern, escape).match(text) is expected
    assert ref_like(text, pattern, escape) is expected
