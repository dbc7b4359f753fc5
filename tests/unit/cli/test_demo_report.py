"""The `qmgr demo` report computed from publications and receipts: loss, duplicates, order,
latency, route split, the ordering note and the JSON shape."""

from __future__ import annotations

import json

import pytest

from qmgr.cli.demo_report import (
    NO_ROUTE,
    Receipt,
    Row,
    SubscriptionResult,
    analyse_topic,
    build_report,
    latencies_by_route,
    percentile,
    report_json,
    route_via,
)

T0 = 1_700_000_000_000  # put time of seq 0, ms


def rcpt(
    seq: int,
    *,
    topic: str = "Orders/Retail",
    publisher: str = "P",
    latency_ms: float = 1.0,
    route: str = "PUB1,HOSTB1,SUB1",
) -> Receipt:
    put = T0 + seq
    return Receipt(topic, publisher, seq, put, (put + latency_ms) / 1000.0, route)


def row_for(receipts: list[Receipt], sent: dict[str, int] | None = None) -> Row:
    return analyse_topic("SUB1", "Orders/#", "Orders/Retail", sent or {"P": 5}, receipts)


# -- loss, duplicates, order ---------------------------------------------------------------------


def test_everything_in_order_once_is_clean() -> None:
    row = row_for([rcpt(i) for i in range(5)])
    assert (row.expected, row.received, row.lost, row.duplicates, row.out_of_order) == (
        5,
        5,
        0,
        0,
        0,
    )


def test_missing_publications_are_lost() -> None:
    row = row_for([rcpt(0), rcpt(2), rcpt(4)])
    assert row.lost == 2
    assert row.received == 3
    assert row.out_of_order == 0  # gaps are loss, not disorder


def test_a_second_copy_is_a_duplicate_and_not_also_out_of_order() -> None:
    row = row_for([rcpt(0), rcpt(1), rcpt(2), rcpt(1), rcpt(3), rcpt(4), rcpt(4)])
    assert row.duplicates == 2
    assert row.received == 7
    assert row.lost == 0
    assert row.out_of_order == 0


def test_out_of_order_counts_each_copy_lower_than_one_already_received() -> None:
    # 0 3 1 2 4: 1 and 2 both arrive after 3
    row = row_for([rcpt(0), rcpt(3), rcpt(1), rcpt(2), rcpt(4)])
    assert row.out_of_order == 2
    assert row.lost == 0


def test_order_is_per_publisher() -> None:
    # two publishers interleaved, each in its own order: nothing out of order
    receipts = [rcpt(0, publisher="A"), rcpt(5, publisher="B"), rcpt(1, publisher="A")]
    receipts.append(rcpt(6, publisher="B"))
    row = row_for(receipts, {"A": 2, "B": 7})
    assert row.out_of_order == 0
    assert row.expected == 9
    assert row.lost == 5  # B's 0..4 never came


def test_copies_never_published_do_not_hide_loss() -> None:
    # seq 7 was never sent (only 0..4): it is received but delivers nothing expected
    row = row_for([rcpt(0), rcpt(7)])
    assert row.received == 2
    assert row.lost == 4


# -- latency and route split ---------------------------------------------------------------------


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([], 50) == 0.0


def test_latency_is_receipt_minus_put_time_over_first_copies() -> None:
    receipts = [rcpt(i, latency_ms=float(i + 1)) for i in range(5)]
    receipts.append(rcpt(0, latency_ms=1000.0))  # a late duplicate does not count
    row = row_for(receipts)
    assert row.latency.p50 == pytest.approx(3.0)
    assert row.latency.p99 == pytest.approx(5.0)
    assert row.latency.max == pytest.approx(5.0)


def test_route_via_is_the_nodes_between_origin_and_receiver() -> None:
    assert route_via("PUB1,HOSTA2,SUB1") == "HOSTA2"
    assert route_via("PUB1,HOSTA1,FWD,SUB1") == "HOSTA1,FWD"
    assert route_via("PUB1,SUB1") == NO_ROUTE
    assert route_via("") == NO_ROUTE


def test_route_split_counts_first_copies_per_host() -> None:
    receipts = [rcpt(i, route=f"PUB1,HOSTA{1 + i % 2},SUB1") for i in range(5)]
    receipts.append(rcpt(0, route="PUB1,HOSTA2,SUB1"))  # duplicate: not counted again
    row = row_for(receipts)
    assert row.routes == {"HOSTA1": 3, "HOSTA2": 2}


def test_latencies_by_route_groups_first_copies() -> None:
    result = SubscriptionResult(
        "SUB1",
        "Prices/#",
        [
            rcpt(0, topic="Prices/A", route="PUB1,HOSTA1,SUB1", latency_ms=2.0),
            rcpt(1, topic="Prices/A", route="PUB1,HOSTA2,SUB1", latency_ms=4.0),
            rcpt(1, topic="Prices/A", route="PUB1,HOSTA1,SUB1", latency_ms=9.0),  # duplicate
        ],
    )
    got = latencies_by_route([result])
    assert got == {"HOSTA1": [pytest.approx(2.0)], "HOSTA2": [pytest.approx(4.0)]}


# -- the whole report ----------------------------------------------------------------------------

SENT = {
    "Prices/Fruit/Apples": {"P": 4},
    "Prices/Veg/Carrots": {"P": 2},
    "Orders/Retail": {"P": 3},
}


def prices(seq: int, host: str, topic: str = "Prices/Fruit/Apples") -> Receipt:
    return rcpt(seq, topic=topic, route=f"PUB1,{host},SUB1")


def demo_results() -> list[SubscriptionResult]:
    sub1_prices = [
        prices(0, "HOSTA1"),
        prices(2, "HOSTA1"),
        prices(1, "HOSTA2"),  # overtaken through the other host
        prices(3, "HOSTA2"),
        prices(0, "HOSTA1", "Prices/Veg/Carrots"),
        prices(1, "HOSTA2", "Prices/Veg/Carrots"),
    ]
    sub1_orders = [rcpt(i, topic="Orders/Retail") for i in range(3)]
    sub2 = [prices(i, "HOSTA1" if i % 2 else "HOSTA2") for i in range(4)]
    return [
        SubscriptionResult("SUB1", "Prices/#", sub1_prices),
        SubscriptionResult("SUB1", "Orders/#", sub1_orders),
        SubscriptionResult("SUB2", "Prices/Fruit/+", sub2, foreign=1),
    ]


def test_report_has_a_row_per_subscription_and_matching_topic_string() -> None:
    report = build_report(demo_results(), SENT)
    keys = [(r.node, r.pattern, r.topic) for r in report.rows]
    assert keys == [
        ("SUB1", "Prices/#", "Prices/Fruit/Apples"),
        ("SUB1", "Prices/#", "Prices/Veg/Carrots"),
        ("SUB1", "Orders/#", "Orders/Retail"),
        ("SUB2", "Prices/Fruit/+", "Prices/Fruit/Apples"),
    ]
    assert [r.expected for r in report.rows] == [4, 2, 3, 4]
    assert report.totals == {
        "expected": 13,
        "received": 13,
        "lost": 0,
        "duplicates": 0,
        "out_of_order": 1,
    }
    assert report.ok
    assert report.foreign == 1


def test_a_subscription_that_received_nothing_shows_everything_lost() -> None:
    results = [SubscriptionResult("SUB2", "Orders/#", [])]
    report = build_report(results, SENT)
    assert [(r.topic, r.lost) for r in report.rows] == [("Orders/Retail", 3)]
    assert not report.ok


def test_duplicates_make_the_report_fail() -> None:
    results = [SubscriptionResult("SUB1", "Orders/#", [rcpt(0), rcpt(1), rcpt(2), rcpt(2)])]
    report = build_report(results, SENT)
    assert report.totals["duplicates"] == 1
    assert not report.ok


def test_branches_sum_routes_and_disorder_per_first_level() -> None:
    report = build_report(demo_results(), SENT)
    branches = {b.name: b for b in report.branches}
    assert branches["Prices"].routes == {"HOSTA1": 5, "HOSTA2": 5}
    assert branches["Prices"].out_of_order == 1
    assert branches["Orders"].routes == {"HOSTB1": 3}
    assert branches["Orders"].out_of_order == 0


def test_note_says_several_hosts_reorder_and_one_host_keeps_order() -> None:
    note = build_report(demo_results(), SENT).note
    prices_part, orders_part = note.split("; ")
    assert prices_part.startswith("Prices via 2 hosts (HOSTA1, HOSTA2): 1 out of order")
    assert orders_part == "Orders via one route (HOSTB1): in order (one host keeps order)"


def test_note_flags_disorder_through_one_host() -> None:
    results = [SubscriptionResult("SUB1", "Orders/#", [rcpt(1), rcpt(0), rcpt(2)])]
    note = build_report(results, SENT).note
    assert note == "Orders via one route (HOSTB1): 1 out of order"


def test_json_carries_rows_totals_branches_and_extra_keys() -> None:
    report = build_report(demo_results(), SENT)
    data = json.loads(json.dumps(report_json(report, messages=9)))
    assert data["messages"] == 9
    assert data["ok"] is True
    assert data["totals"]["lost"] == 0
    first = data["rows"][0]
    assert first["subscriber"] == "SUB1"
    assert first["subscription"] == "Prices/#"
    assert first["topic"] == "Prices/Fruit/Apples"
    assert first["out_of_order"] == 1
    assert first["routes"] == {"HOSTA1": 2, "HOSTA2": 2}
    assert set(first["latency_ms"]) == {"p50", "p99", "max"}
    assert {b["branch"]: b["routes"] for b in data["branches"]}["Orders"] == {"HOSTB1": 3}
