"""The data source's writer reads Arrow record batches into (topic, body, properties,
persistent) rows; the properties map column is read from its flat keys and values, which must
give what Arrow's own ``to_pylist`` gives, for any maps, null rows and slices."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from qmgr.spark.sink import Columns

_value = st.one_of(st.none(), st.text(max_size=5), st.integers(-5, 5))
_map = st.dictionaries(st.text(min_size=1, max_size=6), st.text(max_size=6), max_size=4)


def _expected(column: Any) -> list[dict[Any, Any] | None]:
    return [None if row is None else dict(row) for row in column.to_pylist()]


@given(
    rows=st.lists(st.one_of(st.none(), _map), max_size=30),
    cut=st.tuples(st.integers(0, 30), st.integers(0, 30)),
)
def test_properties_match_arrow_for_any_maps_nulls_and_slices(
    rows: list[dict[str, str] | None], cut: tuple[int, int]
) -> None:
    maps = pa.array(
        [None if r is None else list(r.items()) for r in rows], pa.map_(pa.string(), pa.string())
    )
    start = min(cut[0], len(rows))
    maps = maps.slice(start, cut[1])
    n = len(maps)
    batch = pa.record_batch(
        {"body": pa.array([b"x"] * n, pa.binary()), "properties": maps}, schema=None
    )
    got = [props for _, _, props, _ in Columns.of(["body", "properties"]).messages([batch])]
    assert got == _expected(maps)


@given(values=st.lists(_value, max_size=10))
def test_every_column_is_read_as_arrow_gives_it(values: list[Any]) -> None:
    n = len(values)
    ints = pa.array([v if isinstance(v, int) else None for v in values], pa.int64())
    batch = pa.record_batch(
        {
            "Topic": pa.array([f"T/{i}" for i in range(n)]),
            "BODY": pa.array([str(v) for v in values]),
            "properties": pa.array(
                [[("k", str(v))] for v in values], pa.map_(pa.string(), pa.string())
            ),
            "persistent": pa.array([v is None for v in values]),
            "ignored": ints,
        }
    )
    rows = list(Columns.of(batch.schema.names).messages([batch, batch]))
    one = [(f"T/{i}", str(v), {"k": str(v)}, v is None) for i, v in enumerate(values)]
    assert rows == one + one


def test_a_row_has_a_dict_of_its_own() -> None:
    """The writer adds its send-time property to a row's dict: rows never share one."""
    maps = pa.array([[("a", "1")], [("a", "1")]], pa.map_(pa.string(), pa.string()))
    batch = pa.record_batch({"body": pa.array([b"1", b"2"]), "properties": maps})
    first, second = (p for _, _, p, _ in Columns.of(["body", "properties"]).messages([batch]))
    assert first == second and first is not second


def test_a_properties_column_that_is_not_a_map_is_read_as_pairs() -> None:
    pairs = pa.array([[["k", "1"], ["j", "2"]], None], pa.list_(pa.list_(pa.string())))
    batch = pa.record_batch({"body": pa.array([b"1", b"2"]), "properties": pairs})
    got = [p for _, _, p, _ in Columns.of(["body", "properties"]).messages([batch])]
    assert got == [{"k": "1", "j": "2"}, None]
