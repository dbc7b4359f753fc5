"""The settings a new Spark session gets: the JVMs' options among them."""

from __future__ import annotations

import pytest

from qmgr.spark.session import JAVA_OPTIONS, JAVA_OPTIONS_ENV, session_config

JVM_KEYS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")


def test_driver_and_executors_compile_with_the_client_compiler_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(JAVA_OPTIONS_ENV, raising=False)
    config = session_config("local[2]", 2)
    assert JAVA_OPTIONS == "-XX:TieredStopAtLevel=1"
    assert [config[key] for key in JVM_KEYS] == [JAVA_OPTIONS, JAVA_OPTIONS]


def test_the_environment_replaces_the_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(JAVA_OPTIONS_ENV, " -Xss4m -XX:+UseSerialGC ")
    config = session_config("spark://127.0.0.1:7077", 2)
    assert [config[key] for key in JVM_KEYS] == ["-Xss4m -XX:+UseSerialGC"] * 2


@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_setting_leaves_the_jvm_defaults(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(JAVA_OPTIONS_ENV, value)
    config = session_config("local[*]")
    assert not any(key in config for key in JVM_KEYS)
    assert config["spark.master"] == "local[*]"
