"""The documentation holds together: every relative link in README.md, docs/*.md and the
package READMEs points to a file that exists (and, with a ``#fragment``, to a heading of it),
and every page a module in qmgr/, cluster/, tests/ or bench/ cites exists, with the sections it
names.

Headings become fragments as GitHub makes them: lower case, punctuation dropped, spaces turned
into hyphens, a repeated heading numbered ``-1``, ``-2``... Fenced code blocks are skipped, so a
``# comment`` in a shell example is not a heading."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    {
        ROOT / "README.md",
        *ROOT.glob("docs/*.md"),
        *ROOT.glob("cluster/**/README.md"),
        *ROOT.glob("qmgr/**/README.md"),
    }
)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
CITED = re.compile(r"(?<![\w./*-])\w[\w./-]*\.md\b")
SECTIONS = re.compile(r"§([A-Z](?:[–-][A-Z])?|\d+(?:\.\d+)?)")


def prose(text: str) -> list[str]:
    """The lines of a Markdown text outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in prose(page.read_text()):
        m = re.match(r"#{1,6} (.*)", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def section_numbers(page: Path) -> set[str]:
    """The ``§`` labels of a page's headings (``1.4``, ``B``)."""
    return {
        m.group(1)
        for line in prose(page.read_text())
        if (m := re.match(r"#{1,6} §([A-Z]|\d+(?:\.\d+)?)\b", line))
    }


def expand(label: str) -> list[str]:
    """``B–G`` -> B, C, ..., G; anything else as it is."""
    m = re.fullmatch(r"([A-Z])[–-]([A-Z])", label)
    if m is None:
        return [label]
    return [chr(c) for c in range(ord(m.group(1)), ord(m.group(2)) + 1)]


def test_the_pages_exist() -> None:
    assert ROOT / "README.md" in PAGES and len(PAGES) > 5


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_to_what_exists(page: Path) -> None:
    broken = []
    for line in prose(page.read_text()):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            path, _, fragment = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{target}: no such file")
            elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                broken.append(f"{target}: no heading #{fragment} in {dest.name}")
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


def cited_pages() -> list[tuple[Path, int, str, Path]]:
    """(module, line number, line, page) for each .md file a module names: a path with a
    folder from the repository root, a bare name beside the module, at the root or in docs/."""
    out = []
    modules = [p for d in ("qmgr", "cluster", "tests", "bench") for p in ROOT.glob(f"{d}/**/*.py")]
    for module in sorted(modules):
        for number, line in enumerate(module.read_text().splitlines(), 1):
            for name in CITED.findall(line):
                if "/" in name:
                    page = ROOT / name
                elif (module.parent / name).exists():
                    page = module.parent / name
                elif (ROOT / name).exists():
                    page = ROOT / name
                else:
                    page = ROOT / "docs" / name
                out.append((module, number, line, page))
    return out


def test_every_page_a_docstring_cites_exists_with_its_sections() -> None:
    problems = []
    for module, number, line, page in cited_pages():
        where = f"{module.relative_to(ROOT)}:{number}"
        if not page.exists():
            problems.append(f"{where}: {page.relative_to(ROOT)} does not exist")
            continue
        known = section_numbers(page)
        after = line[line.index(page.name) :]
        for label in SECTIONS.findall(after):
            for one in expand(label):
                if one not in known:
                    problems.append(f"{where}: {page.name} has no §{one}")
    assert not problems, problems
