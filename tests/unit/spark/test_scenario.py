"""Scenario files: the shipped ones parse; a bad one lists every problem at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from qmgr.launcher.topology import NODE_KEYS
from qmgr.spark.scenario import Kill, ScenarioError, load_scenario, parse_scenario

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"
TOPOLOGY = """
cluster = "T"

[[node]]
name = "FR1"
role = "full"

[[node]]
name = "PUB1"
"""


def _shipped() -> list[Path]:
    files = sorted(p for p in SCENARIOS.glob("*.toml") if not p.name.startswith("topology-"))
    if "servicebus" not in NODE_KEYS:  # topologies with a Service Bus node need the bridge
        files = [p for p in files if "servicebus" not in p.read_text()]
    return files


@pytest.mark.parametrize("path", _shipped(), ids=lambda p: p.stem)
def test_the_shipped_scenarios_parse(path: Path) -> None:
    scenario = load_scenario(path)
    assert scenario.name == path.stem
    assert scenario.topology.is_file()
    assert scenario.load.total > 0 and scenario.subscriptions


def test_a_full_scenario(tmp_path: Path) -> None:
    (tmp_path / "t.toml").write_text(TOPOLOGY)
    scenario = parse_scenario(
        """
        topology = "t.toml"
        [load]
        nodes = "PUB1"
        topics = ["A/b", "A/c"]
        publishers = 3
        messages = 10
        rate = 50
        properties = { Kind = ["x", "y"], Fixed = "z" }
        [[subscription]]
        name = "S"
        node = "PUB1"
        topic = "A/#"
        servicebus = "t/subscriptions/s"
        sessions = "sequenced"
        [fault]
        kill = { node = "FR1", after = 0.5 }
        """,
        directory=tmp_path,
        default_name="x",
    )
    assert scenario.name == "x"
    load = scenario.load
    assert (load.total, load.rate, load.persistent) == (30, 50.0, True)
    assert [load.topic_of(p) for p in range(3)] == ["A/b", "A/c", "A/b"]
    assert load.properties == (("Kind", ("x", "y")), ("Fixed", ("z",)))
    (sub,) = scenario.subscriptions
    assert (sub.kind, sub.sessions, sub.mq_name) == ("servicebus", "sequenced", "LOAD.S")
    assert scenario.kill == Kill("FR1", 0.5, None)


def test_every_problem_is_reported_together(tmp_path: Path) -> None:
    (tmp_path / "t.toml").write_text(TOPOLOGY)
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(
            """
            topology = "t.toml"
            colour = "blue"
            [load]
            nodes = ["NOPE"]
            topics = ["A/#"]
            publishers = 0
            rate = -1
            properties = { LoadSeq = "1" }
            [[subscription]]
            name = "S"
            node = "PUB1"
            topic = "A/#"
            sessions = "all"
            [fault]
            kill = { node = "FR1", after = 1.5 }
            """,
            "bad.toml",
            tmp_path,
        )
    problems = "\n".join(caught.value.problems)
    for expected in (
        "unknown key 'colour'",
        "node 'NOPE' is not in the topology",
        "'A/#' has a wildcard",
        "load.publishers must be between 1",
        "load.rate must be a number of at least 0",
        "LoadSeq is set by the job",
        "sessions apply to a Service Bus subscription",
        "fault.kill.after must be a fraction",
    ):
        assert expected in problems
    assert str(caught.value).startswith("invalid scenario bad.toml:")


def test_missing_parts_and_files(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario('topology = "nowhere.toml"', directory=tmp_path)
    problems = "\n".join(caught.value.problems)
    assert "does not exist" in problems
    assert "[load] is missing" in problems
    assert "no measured subscription" in problems
    with pytest.raises(ScenarioError, match="not valid TOML"):
        parse_scenario("load = [")
    with pytest.raises(ScenarioError, match="cannot be read"):
        load_scenario(tmp_path / "absent.toml")


def test_qmgr_load_refuses_a_bad_scenario_before_spark_starts(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from qmgr.cli.load import load

    bad = tmp_path / "bad.toml"
    bad.write_text('topology = "nowhere.toml"\n[load]\nnodes = ["X"]\ntopics = ["T"]\n')
    result = CliRunner().invoke(load, [str(bad), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2  # 1 means something acknowledged was lost or duplicated
    assert f"invalid scenario {bad}" in result.output
    assert "does not exist" in result.output and "no measured subscription" in result.output
    assert not (tmp_path / "out").exists()
