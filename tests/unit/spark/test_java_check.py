"""The Java runtime check of the load job: the java Spark's launcher would run, its version."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from qmgr.spark.java import JavaError, check_java, find_java, major_version


def fake_java(home: Path, script: str) -> Path:
    """A JAVA_HOME whose bin/java is the shell ``script``."""
    java = home / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\n{script}\n")
    java.chmod(0o755)
    return home


def test_major_versions() -> None:
    assert major_version('openjdk version "17.0.15" 2025-04-15') == 17
    assert major_version('openjdk version "21" 2023-09-19') == 21
    assert major_version('java version "1.8.0_292"') == 8
    assert major_version("no version here") is None


def test_java_home_wins_over_path(tmp_path: Path) -> None:
    home = fake_java(tmp_path / "jdk", "echo 'openjdk version \"17.0.2\"' >&2")
    other = fake_java(tmp_path / "other", "exit 1")
    env = {"JAVA_HOME": str(home), "PATH": str(other / "bin")}
    assert find_java(env) == home / "bin" / "java"
    assert check_java(env) == home / "bin" / "java"


def test_java_on_path(tmp_path: Path) -> None:
    home = fake_java(tmp_path / "jdk", "echo 'openjdk version \"21.0.1\"' >&2")
    env = {"PATH": os.pathsep.join([str(tmp_path / "empty"), str(home / "bin")])}
    assert check_java(env) == home / "bin" / "java"


def test_no_java_says_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(JavaError) as caught:
        check_java({"PATH": str(tmp_path)})
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("qmgr load needs a Java runtime 17 or newer for Spark")
    assert "no java on PATH" in message
    assert "apt-get install openjdk-17-jre-headless" in message and "JAVA_HOME" in message


def test_java_home_without_java(tmp_path: Path) -> None:
    with pytest.raises(JavaError, match=r"JAVA_HOME=\S+ has no bin/java"):
        check_java({"JAVA_HOME": str(tmp_path), "PATH": os.environ.get("PATH", "")})


def test_a_java_that_does_not_run(tmp_path: Path) -> None:
    home = fake_java(tmp_path / "jdk", "echo 'Error: broken install' >&2; exit 3")
    with pytest.raises(JavaError, match=r"-version failed \(exit code 3\): Error: broken install"):
        check_java({"JAVA_HOME": str(home)})


def test_an_old_java(tmp_path: Path) -> None:
    home = fake_java(tmp_path / "jdk", "echo 'openjdk version \"11.0.20\"' >&2")
    with pytest.raises(JavaError, match="is Java 11; install one"):
        check_java({"JAVA_HOME": str(home)})
