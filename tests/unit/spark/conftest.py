"""One local Spark session for the unit tests of the Spark code."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from qmgr.spark.session import local_session

    session = local_session("qmgr-unit-tests", cores=2)
    yield session
    session.stop()
