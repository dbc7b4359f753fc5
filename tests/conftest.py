"""Markers by what a test needs, set from where it lives and what it uses, so that a run can
leave out the slow kinds (``scripts/test --quick`` runs neither of the first three):

- ``integration``: starts real node processes (everything under ``tests/integration``);
- ``spark``: starts a JVM (a ``spark`` fixture, a module under a ``spark`` folder, or a module
  that runs the load job or ``spark-submit``);
- ``docker``: needs the Docker engine;
- ``slow``: long even among these (set by the module itself).

The same hook puts the modules in the order the parallel run should start them
(``scripts/test`` hands modules to its workers in collection order): the Docker module first
and the Spark ones next, as they are the longest; then the other integration modules and the
unit modules, many short ones that fill the gaps. The slow modules that run no Spark (the
soaks) go with the Service Bus modules, which mostly wait, and on workers of their own
(``_SoaksApart``, the scheduler ``scripts/test`` runs with). A soak is a chain of 100,000 round
trips, each waiting on two processes, which a loaded machine stretches many times over (the
async soak took 81 s in a quiet moment and 737 s beside the Spark jobs), so none starts
before the Spark modules are under way.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from xdist.scheduler import LoadFileScheduling

# No test asserts a duration, Hypothesis's per-example deadline included: on a machine as
# loaded as a parallel run makes it, a 1 ms example can take 500.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

# modules that run Spark without asking for a ``spark`` fixture (the load job, spark-submit)
SPARK_MODULES = frozenset(
    {"test_main_job", "test_load_report", "test_load_signals", "test_spark_standalone"}
)
DOCKER_MODULES = frozenset({"test_docker_compose"})
# the long single-chain modules (marked ``slow`` and starting no JVM): no worker runs two
SOAK_MODULES = frozenset({"test_sb_soak", "test_sb_soak_async"})
# a module's place in the run, by kind (``_start_rank``)
DOCKER, SPARK, INTEGRATION, UNIT, SOAK = range(5)


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects by the markers set here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = item.path
        if "integration" in path.parts:
            item.add_marker(pytest.mark.integration)
        if (
            "spark" in getattr(item, "fixturenames", ())
            or "spark" in path.parts
            or path.stem in SPARK_MODULES
        ):
            item.add_marker(pytest.mark.spark)
        if path.stem in DOCKER_MODULES:
            item.add_marker(pytest.mark.docker)
    first: dict[Any, int] = {}
    for item in items:
        first[item.path] = min(first.get(item.path, SOAK), _start_rank(item))
    items.sort(key=lambda item: first[item.path])  # stable: a module's own order is kept
    _spread_soaks(items, first)


def _spread_soaks(items: list[pytest.Item], rank: dict[Any, int]) -> None:
    """Put the soak modules before the first Service Bus module (``test_sb_*``), each followed
    by a unit module. The Service Bus modules mostly wait on the SDK's timers (the machine was
    a fifth to a half busy while they ran), which the soaks, a core each, fill. A worker
    handed a soak takes the module after it along (``_SoaksApart``): a short one."""
    modules: dict[Any, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.path, []).append(item)
    soaks = [path for path in modules if rank[path] == SOAK]
    units = [path for path in modules if rank[path] == UNIT]
    if not soaks or not units:
        return
    fillers = units[-len(soaks) :]
    rest = [path for path in modules if path not in soaks and path not in fillers]
    at = next(
        (
            i
            for i, path in enumerate(rest)
            if rank[path] == INTEGRATION and path.stem.startswith("test_sb_")
        ),
        len(rest),
    )
    spread = [path for pair in zip(soaks, fillers, strict=False) for path in pair] + soaks[
        len(fillers) :
    ]
    order = rest[:at] + spread + rest[at:]
    items[:] = [item for path in order for item in modules[path]]


def _start_rank(item: pytest.Item) -> int:
    """Where ``item``'s module goes in the run: Docker, Spark, other integration, unit, soak."""
    marks = {mark.name for mark in item.iter_markers()}
    if "docker" in marks:
        return DOCKER
    if "spark" in marks:
        return SPARK
    if item.path.stem in SOAK_MODULES:
        return SOAK
    return INTEGRATION if "integration" in marks else UNIT


class _SoaksApart(LoadFileScheduling):
    """``--dist loadfile`` that never queues a soak module on a worker already holding one.

    A worker is handed its next module while it still runs the last test of its own, and
    keeps taking modules while it has two tests or fewer waiting; so a worker handed a soak
    (one test) takes whatever is next in the queue as well, which may be the other soak, and
    the two would run one after the other on one worker. Here a worker with a soak not yet
    done is handed the first module in the queue that is not a soak (a soak only when nothing
    else is left)."""

    def _assign_work_unit(self, node: Any) -> None:
        if self._holds_soak(node):
            scope = next((s for s in self.workqueue if not _is_soak(s)), None)
            if scope is not None:
                self.workqueue.move_to_end(scope, last=False)  # the base takes the first
        super()._assign_work_unit(node)

    def _holds_soak(self, node: Any) -> bool:
        return any(
            _is_soak(scope) and not all(tests.values())
            for scope, tests in self.assigned_work.get(node, {}).items()
        )


def _is_soak(scope: str) -> bool:
    return Path(scope.split("::")[0]).stem in SOAK_MODULES


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` (``scripts/test``) with the soaks on workers of their own."""
    if config.getvalue("dist") == "loadfile":
        return _SoaksApart(config, log)
    return None


@pytest.fixture(scope="session")
def spark_session() -> Iterator[Any]:
    """One local Spark session (one JVM, local[2]) per test process, shared by every module
    that asks for it: starting a JVM takes seconds, and with ``--dist loadfile`` a worker runs
    several Spark modules in turn. A module that needs other settings (a shuffle width, the
    QMGR_HOME its nodes register in) sets them on the session in a fixture of its own and puts
    them back afterwards."""
    pytest.importorskip("pyspark")
    from qmgr.spark.session import local_session

    session = local_session("qmgr-tests", cores=2)
    yield session
    session.stop()
