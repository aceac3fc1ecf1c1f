"""README.md is the front door to docs/: it links every page there, every page opens with a title and a line
that says what it is for, and every relative link of README.md and docs/*.md leads to a file (and a heading,
where it names one) that exists."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
PAGES = [README, *DOCS]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"^```.*?^```", re.M | re.S)


def _prose(text: str) -> str:
    """The page without its code blocks and HTML comments (where a link or a heading is not one)."""
    return re.sub(r"<!--.*?-->", "", CODE.sub("", text), flags=re.S)


def _anchors(text: str) -> set[str]:
    """The heading anchors GitHub makes: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*$", _prose(text), re.M)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_there_are_pages() -> None:
    names = {page.name for page in DOCS}
    assert {"profiling.md", "predictions.md", "validation.md", "development.md", "api.md"} <= names


@pytest.mark.parametrize("page", DOCS, ids=[page.name for page in DOCS])
def test_the_readme_links_every_page_in_docs(page: Path) -> None:
    targets = {unquote(target.split("#")[0]) for target in LINK.findall(_prose(README.read_text()))}
    assert f"docs/{page.name}" in targets, f"README.md has no link to docs/{page.name}"


@pytest.mark.parametrize("page", DOCS, ids=[page.name for page in DOCS])
def test_a_page_opens_with_a_title_and_what_it_is_for(page: Path) -> None:
    lines = [line for line in _prose(page.read_text()).splitlines() if line.strip()]
    assert lines[0].startswith("# "), f"{page.name}: the first line is its title, '# ...'"
    purpose = lines[1]
    assert not purpose.startswith(("#", "|", "-", "*", ">")), f"{page.name}: a line of what it is for, first"


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_every_relative_link_leads_somewhere(page: Path) -> None:
    broken = []
    for target in LINK.findall(_prose(page.read_text())):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path_part, _, anchor = unquote(target).partition("#")
        linked = (page.parent / path_part).resolve() if path_part else page
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked.read_text()):
            broken.append(target)
    assert not broken, f"{page.relative_to(REPO)}: {broken}"
