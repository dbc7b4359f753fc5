"""The Java runtime Spark needs, looked for before the load job starts anything: the one
Spark's launcher would run (``$JAVA_HOME/bin/java`` when JAVA_HOME is set, else ``java`` on
PATH), which must answer ``java -version`` with version 17 or newer."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

MIN_VERSION = 17
NEEDS = f"qmgr load needs a Java runtime {MIN_VERSION} or newer for Spark"
INSTALL = (
    f"install one (Debian: apt-get install openjdk-{MIN_VERSION}-jre-headless) or set JAVA_HOME"
)
VERSION_TIMEOUT = 30.0


class JavaError(RuntimeError):
    """No usable Java runtime: the message is one line that says what to install."""


def find_java(env: Mapping[str, str] | None = None) -> Path | None:
    """The ``java`` Spark's launcher would run: under JAVA_HOME when it is set, else the first
    on PATH; None when there is none."""
    env = os.environ if env is None else env
    home = env.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None
    found = shutil.which("java", path=env.get("PATH", os.defpath))
    return Path(found) if found else None


def major_version(text: str) -> int | None:
    """The major version in ``java -version`` output: ``"17.0.2"`` is 17, ``"1.8.0_292"`` 8."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if match is None:
        return None
    major = int(match.group(1))
    if major == 1 and match.group(2) is not None:
        return int(match.group(2))
    return major


def check_java(env: Mapping[str, str] | None = None) -> Path:
    """The Java runtime Spark will run; :class:`JavaError` when there is none, it does not run
    or it is older than :data:`MIN_VERSION`."""
    env = os.environ if env is None else env
    java = find_java(env)
    if java is None:
        home = env.get("JAVA_HOME")
        where = f"JAVA_HOME={home} has no bin/java" if home else "no java on PATH, no JAVA_HOME"
        raise JavaError(f"{NEEDS}: {where}; {INSTALL}")
    try:
        done = subprocess.run(
            [str(java), "-version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=VERSION_TIMEOUT,
            env=dict(env),
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JavaError(f"{NEEDS}: {java} -version did not run ({exc}); {INSTALL}") from None
    output = done.stderr + done.stdout
    if done.returncode != 0:
        last = next((x.strip() for x in reversed(output.splitlines()) if x.strip()), "")
        detail = f": {last}" if last else ""
        raise JavaError(
            f"{NEEDS}: {java} -version failed (exit code {done.returncode}){detail}; {INSTALL}"
        )
    version = major_version(output)
    if version is not None and version < MIN_VERSION:
        raise JavaError(f"{NEEDS}: {java} is Java {version}; {INSTALL}")
    return java
