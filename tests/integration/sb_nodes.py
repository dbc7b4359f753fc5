"""One Service Bus node shared by the tests of a module, and entity names no other test of
that module uses.

Starting a node costs a second or more on a loaded machine; tests that each make entities of
their own (named by :func:`unique_name`) lose nothing by sharing one. A module takes the node as
``shared_sb_node = sb_nodes.shared_sb_node``. Its clock can be moved
(:func:`tests.integration.clock.advance_clock`) without the ``movable_clock`` fixture; the
offset only grows, so a test that needs the SDK's lock renewal (which compares the lock's end,
read from the node, with the client's own clock) keeps a node of its own whose clock never
moved."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from qmgr.node.server import CLOCK_FILE_ENV
from tests.integration.conftest import NodeProcess

_numbers = itertools.count(1)


def unique_name(prefix: str) -> str:
    """``prefix`` and a number no earlier call in this process gave (a Service Bus entity
    name: letters, digits and dashes)."""
    return f"{prefix}-{next(_numbers)}"


@pytest.fixture(scope="module")
def shared_sb_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    """A node with a Service Bus namespace for the whole module, its clock movable."""
    base = tmp_path_factory.mktemp("sb")
    node = NodeProcess("QM1", base)
    node.env[CLOCK_FILE_ENV] = str(base / "clock")
    node.extra_args = ["--servicebus"]
    node.start()
    try:
        yield node
    finally:
        node.kill()
