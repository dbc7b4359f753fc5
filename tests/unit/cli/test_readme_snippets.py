"""The snippets of the README and of docs/servicebus.md run as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[3] / "README.md"
SERVICEBUS_DOC = README.parent / "docs" / "servicebus.md"


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _python_blocks(section: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


def test_rule_language_snippet_runs() -> None:
    blocks = _python_blocks(
        _section(SERVICEBUS_DOC.read_text(), "## The Service Bus rule language")
    )
    assert len(blocks) == 1
    exec(compile(blocks[0], "docs/servicebus.md:rule-language", "exec"), {"__name__": "readme"})


def test_sdk_snippet_uses_the_address_of_the_node_it_shows() -> None:
    section = _section(README.read_text(), "## What works today")
    started = re.search(r"^# qmgr start --name \w+ --listen (\S+)", section, flags=re.M)
    assert started is not None
    (block,) = [b for b in _python_blocks(section) if "QueueManagerClient(" in b]
    assert f'QueueManagerClient("{started.group(1)}")' in block
