"""The unit tests of the Spark code run on the test process's shared local session
(``spark_session`` in tests/conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest

pyspark = pytest.importorskip("pyspark")


@pytest.fixture(scope="session")
def spark(spark_session: Any) -> Any:
    return spark_session
