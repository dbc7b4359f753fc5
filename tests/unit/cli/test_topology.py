"""The cluster topology file: the default topology, addresses, and every validation error."""

from __future__ import annotations

from pathlib import Path

import pytest

from qmgr.launcher.topology import (
    DEFAULT_DIRECTORY,
    DEFAULT_TOPOLOGY_TOML,
    NodeAddresses,
    Topology,
    TopologyError,
    load_topology,
    mqsc_commands,
    parse_topology,
    plan_addresses,
)

REPO = Path(__file__).resolve().parents[3]

MINIMAL = """
cluster = "C1"
[[node]]
name = "FR1"
role = "full"
"""


def with_setting(line: str) -> str:
    """MINIMAL with one more top-level setting."""
    return MINIMAL.replace('cluster = "C1"', 'cluster = "C1"\n' + line)


def with_mqsc(script: str) -> str:
    """MINIMAL whose node FR1 runs ``script`` at start."""
    return MINIMAL + "mqsc = '''\n" + script + "'''\n"


def problems(text: str) -> list[str]:
    with pytest.raises(TopologyError) as info:
        parse_topology(text, "t.toml")
    assert str(info.value).startswith("invalid topology t.toml:")
    return list(info.value.problems)


def one_problem(text: str) -> str:
    found = problems(text)
    assert len(found) == 1, found
    return found[0]


# -- the default topology ------------------------------------------------------------------------


def test_compose_cluster_toml_is_the_built_in_default() -> None:
    assert (REPO / "compose" / "cluster.toml").read_text() == DEFAULT_TOPOLOGY_TOML
    shipped = DEFAULT_DIRECTORY / "servicebus" / "SB1.json"
    assert (REPO / "compose" / "servicebus" / "SB1.json").read_bytes() == shipped.read_bytes()
    assert load_topology(None).node("SB1").servicebus_config == shipped.resolve()


def test_default_topology_is_the_demo_cluster() -> None:
    topology = load_topology(None)
    assert topology.cluster == "DEMO"
    assert topology.base_port is None and topology.secret_file is None
    assert [n.name for n in topology.full_repositories] == ["FR1", "FR2", "FR3"]
    assert [n.name for n in topology.partial_repositories] == [
        "HOSTA1",
        "HOSTA2",
        "HOSTB1",
        "PUB1",
        "SUB1",
        "SUB2",
        "SB1",
    ]
    assert [n.name for n in topology.nodes if n.hosts_servicebus] == ["SB1"]
    prices = "DEFINE TOPIC(PRICES) TOPICSTR('Prices') CLUSTER(DEMO) CLROUTE(TOPICHOST)"
    orders = "DEFINE TOPIC(ORDERS) TOPICSTR('Orders') CLUSTER(DEMO) CLROUTE(TOPICHOST)"
    assert mqsc_commands(topology.node("HOSTA1")) == [prices]
    assert mqsc_commands(topology.node("HOSTA2")) == [prices]
    assert mqsc_commands(topology.node("HOSTB1")) == [orders]
    for name in ("FR1", "FR2", "FR3", "PUB1", "SUB1", "SUB2"):
        assert mqsc_commands(topology.node(name)) == []


def test_load_topology_reads_a_file(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(MINIMAL)
    assert load_topology(path) == Topology(cluster="C1", nodes=load_topology(path).nodes)
    assert load_topology(path).nodes[0].full_repository


def test_load_topology_names_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TopologyError, match="cannot be read"):
        load_topology(tmp_path / "missing.toml")


# -- parsing ---------------------------------------------------------------------------------------


def test_full_example_parses() -> None:
    topology = parse_topology(
        """
cluster = "C1"
base_port = 20000
secret_file = "/etc/qmgr/c1.secret"

[[node]]
name = "FR1"
role = "full"
description = "first"

[[node]]
name = "APP.QM/1"
mqsc = '''
* a comment
DEFINE TOPIC(T) +
  TOPICSTR('A/B') CLUSTER(C1)
DEFINE QLOCAL(Q)
END
DEFINE QLOCAL(NOT.RUN)
'''
"""
    )
    assert topology.base_port == 20000 and topology.secret_file == Path("/etc/qmgr/c1.secret")
    fr, app = topology.nodes
    assert (fr.role, fr.description, fr.mqsc) == ("full", "first", "")
    assert app.role == "partial" and not app.full_repository
    assert mqsc_commands(app) == ["DEFINE TOPIC(T) TOPICSTR('A/B') CLUSTER(C1)", "DEFINE QLOCAL(Q)"]


def test_topology_is_frozen() -> None:
    topology = parse_topology(MINIMAL)
    with pytest.raises(AttributeError):
        topology.cluster = "X"  # type: ignore[misc]
    with pytest.raises(KeyError):
        topology.node("NOPE")


# -- addresses ---------------------------------------------------------------------------------------

THREE = MINIMAL + '[[node]]\nname = "P1"\n[[node]]\nname = "FR2"\nrole = "full"\n'


def test_base_port_numbers_nodes_in_file_order() -> None:
    topology = parse_topology(THREE.replace('cluster = "C1"', 'cluster = "C1"\nbase_port = 17000'))
    plan = plan_addresses(topology, "127.0.0.1", lambda n: pytest.fail("no free ports needed"))
    assert plan == {
        "FR1": NodeAddresses("127.0.0.1:17000", "127.0.0.1:17100"),
        "P1": NodeAddresses("127.0.0.1:17001", None),
        "FR2": NodeAddresses("127.0.0.1:17002", "127.0.0.1:17102"),
    }


def test_without_base_port_free_ports_are_used_once_each() -> None:
    asked: list[int] = []

    def free(count: int) -> list[int]:
        asked.append(count)
        return list(range(30000, 30000 + count))

    plan = plan_addresses(parse_topology(THREE), "127.0.0.1", free)
    assert asked == [5]  # 3 listen ports + 2 Raft ports
    used = [plan[n].listen for n in plan] + [plan[n].raft for n in plan if plan[n].raft]
    assert len(set(used)) == 5
    assert plan["P1"].raft is None


# -- validation errors -------------------------------------------------------------------------------


def test_not_toml() -> None:
    assert one_problem("cluster = ").startswith("not valid TOML:")


def test_empty_file_reports_missing_cluster_and_no_nodes() -> None:
    assert problems("") == [
        "'cluster' (the cluster name) is missing",
        "no nodes: add at least one [[node]] table",
    ]


@pytest.mark.parametrize(
    "text, expected",
    [
        ('cluster = "C1"\n', "no nodes: add at least one [[node]] table"),
        ('cluster = "C1"\nnode = []\n', "no nodes"),
        ('cluster = "C1"\nnode = "FR1"\n', "'node' must be an array of tables ([[node]])"),
        ('cluster = "C1"\nnode = ["FR1"]\n', "node 1: must be a table ([[node]]), got a string"),
        (MINIMAL.replace('cluster = "C1"', "cluster = 7"), "'cluster' must be a string"),
        (
            MINIMAL.replace('cluster = "C1"', 'cluster = "MY-CLUSTER"'),
            "cluster name 'MY-CLUSTER' must be 1-48 characters of A-Z a-z 0-9 . _ % /",
        ),
        (MINIMAL.replace('cluster = "C1"', 'cluster = ""'), "cluster name '' must be 1-48"),
        (MINIMAL + "colour = 1\n", "node 1 (FR1): unknown key 'colour' (allowed: name, role"),
        (
            "flavour = 1\n" + MINIMAL,
            "top level: unknown key 'flavour' (allowed: cluster, base_port, secret_file, tls, node)",
        ),
        (MINIMAL.replace('name = "FR1"\n', ""), "node 1: 'name' is missing"),
        (MINIMAL.replace('"FR1"', "1"), "node 1: 'name' must be a string, got an integer"),
        (
            MINIMAL.replace('"FR1"', '"FR-1"'),
            "node 1 (FR-1): queue manager name 'FR-1' must be 1-48 characters",
        ),
        (MINIMAL.replace('"FR1"', '"' + "Q" * 49 + '"'), "must be 1-48 characters"),
        (
            MINIMAL.replace('role = "full"', 'role = "FULL"'),
            'node 1 (FR1): role must be "full" or "partial", got \'FULL\'',
        ),
        (MINIMAL.replace('role = "full"', "role = true"), 'role must be "full" or "partial"'),
        (MINIMAL + "mqsc = 5\n", "node 1 (FR1): 'mqsc' must be a string, got an integer"),
        (MINIMAL + "description = []\n", "'description' must be a string, got an array"),
        (with_setting('secret_file = ""'), "'secret_file' must not"),
        (with_setting("secret_file = 1"), "'secret_file' must be"),
        (with_setting('base_port = "7000"'), "'base_port' must be an integer, got a string"),
        (with_setting("base_port = true"), "'base_port' must be an integer, got a boolean"),
        (with_setting("base_port = 0"), "'base_port' 0 is out of range"),
        (with_setting("base_port = 65436"), "'base_port' 65436 is out of range"),
    ],
)
def test_each_problem_is_named(text: str, expected: str) -> None:
    assert expected in one_problem(text)


def test_highest_usable_base_port() -> None:
    text = with_setting("base_port = 65435")
    assert parse_topology(text).base_port == 65435


def test_base_port_cannot_number_more_than_100_nodes() -> None:
    nodes = "".join(f'[[node]]\nname = "N{i}"\n' for i in range(100))
    text = with_setting("base_port = 1000") + nodes
    assert "cannot number 101 nodes" in one_problem(text)


def test_a_misspelt_key_gets_a_suggestion() -> None:
    found = problems('cluster = "C1"\n[[nodes]]\nname = "FR1"\nrole = "full"\n')
    assert found == [
        "top level: unknown key 'nodes' (allowed: cluster, base_port, secret_file, tls, node); "
        "did you mean 'node'?",
        "no nodes: add at least one [[node]] table",
    ]


def test_a_password_in_the_topology_is_refused_naming_the_new_key() -> None:
    text = with_setting('password = "s3cret"')
    problem = one_problem(text)
    assert "'password' is no longer read" in problem and "secret_file" in problem
    assert "s3cret" not in problem


def test_a_relative_secret_file_is_relative_to_the_topology_file(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text(with_setting('secret_file = "c.secret"'))
    assert load_topology(path).secret_file == tmp_path / "c.secret"


def test_duplicate_names() -> None:
    assert one_problem(MINIMAL + '[[node]]\nname = "FR1"\n') == "node 2: duplicate name 'FR1'"


def test_names_differing_only_in_case_are_rejected() -> None:
    found = one_problem(MINIMAL + '[[node]]\nname = "fr1"\n')
    assert found.startswith("node 2: name 'fr1' differs from 'FR1' only in case")


def test_no_full_repository() -> None:
    found = one_problem('cluster = "C1"\n[[node]]\nname = "P1"\n[[node]]\nname = "P2"\n')
    assert found.startswith('no full repository: give at least one node role = "full"')


def test_mqsc_that_does_not_parse_names_node_line_position_and_command() -> None:
    text = with_mqsc("* define it\nDEFINE QLOCAL(A)\nDEFINE TOPIC(X) TOPICSTR('a') BOGUS(1)\n")
    found = one_problem(text)
    head, command, caret, message = found.split("\n")
    assert head.startswith("node 1 (FR1): mqsc line 3, position 31: AMQ8405E:")
    assert "BOGUS" in head
    assert command == "      DEFINE TOPIC(X) TOPICSTR('a') BOGUS(1)"
    assert caret.index("^") == command.index("BOGUS")
    assert message.startswith("AMQ8405E")


def test_mqsc_unknown_verb_and_bad_value_are_both_reported() -> None:
    text = with_mqsc("DEFIN QLOCAL(A)\nDEFINE TOPIC(X) TOPICSTR('a') CLROUTE(SIDEWAYS)\n")
    found = problems(text)
    assert len(found) == 2
    assert found[0].startswith("node 1 (FR1): mqsc line 1, position 1: AMQ8426E")
    assert found[1].startswith("node 1 (FR1): mqsc line 2, position")
    assert "AMQ8425E" in found[1]


def test_mqsc_clustering_a_topic_in_another_cluster() -> None:
    text = MINIMAL + "mqsc = \"DEFINE TOPIC(X) TOPICSTR('a') CLUSTER(OTHER)\"\n"
    assert one_problem(text) == (
        "node 1 (FR1): mqsc line 1: DEFINE TOPIC(X) names CLUSTER(OTHER) but the nodes of "
        "this topology belong to cluster C1"
    )


def test_every_problem_is_reported_at_once() -> None:
    text = """
cluster = "bad cluster"
extra = 1
[[node]]
name = "A"
role = "primary"
[[node]]
name = "A"
"""
    found = problems(text)
    assert len(found) == 4
    assert found[0].startswith("top level: unknown key 'extra'")
    assert found[1].startswith("cluster name 'bad cluster'")
    assert found[2].startswith("node 1 (A): role must be")
    assert found[3].startswith("no full repository")


def test_tls_must_be_a_boolean() -> None:
    text = with_setting('tls = "yes"')
    assert "'tls' must be true or false, got a string" in one_problem(text)
