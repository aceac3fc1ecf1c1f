"""views.common.plain: text from a file shown inside a page's Markdown reads as itself; no emphasis, link,
heading, HTML, colour directive or LaTeX made of it, and no terminal escape."""

from __future__ import annotations

import html
import re

import pytest

from stash_core.terminal import printable
from stash_core.views.common import plain

HOSTILE = [
    "<script>alert(1)</script>**bold** [click](javascript:alert(1))",
    '=HYPERLINK("http://x","y") :red[x] $x^2$ `code` ~~gone~~',
    "# heading\n- item\n> quote | a | b |\n1. first\n  2) second\n+ plus\n===",
    "\x1b[2J\x1b]0;title\x07 boom \u202e",
    "resnet50 · batch 32 · 1.5 ms (x_1 * y_2) \\ back",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_plain_text_renders_as_itself(text: str) -> None:
    markdown_it = pytest.importorskip("markdown_it")
    rendered = markdown_it.MarkdownIt("commonmark").render(plain(text))
    tags = set(re.findall(r"<(\w+)", rendered)) - {"p"}
    assert not tags, rendered  # no a, em, strong, code, h1, ul, blockquote, script
    shown = html.unescape(re.sub(r"<[^>]+>", "", rendered)).strip()
    # the same words (a newline may be a space), less the word joiners that keep addresses from links
    assert shown.replace("\u2060", "").split() == printable(text).split()
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", plain(text))


def test_plain_keeps_ordinary_text_readable() -> None:
    assert plain("p3.2xlarge") == "p3.2xlarge" and plain("a_b: c") == "a\\_b\\: c"
    assert plain(None) == "None" and plain(42) == "42"


@pytest.mark.parametrize("text", ["[l](http://e.com)", "see HTTPS://e.com/x", "www.e.com", "mail a@b.com"])
def test_no_address_is_left_for_the_pages_markdown_to_link(text: str) -> None:
    """The pages' Markdown (GitHub's, with its autolinks) linked http(s)://, www. and e-mail addresses in the
    rendered text, past every escape (tests/e2e shows it in a browser): a word joiner inside each breaks
    them, and the text reads the same."""
    markdown_it = pytest.importorskip("markdown_it")
    shown = plain(text)
    assert not re.search(r"(?i)https?\\?:|www\.|@\w", shown), shown
    rendered = markdown_it.MarkdownIt("commonmark").render(shown)
    assert html.unescape(re.sub(r"<[^>]+>", "", rendered)).strip().replace("\u2060", "") == text


def test_a_running_measurements_command_is_cut_at_a_whole_argument() -> None:
    """The Overview cut a command at 80 characters, inside an option ("--workers )"): it read as another
    option with no value."""
    from stash_core.views.common import processes_text

    command = "/work/main/.venv/bin/python /work/main/.venv/bin/stash profile --model resnet10 --workers 2"
    shown = processes_text([{"pid": 7, "command": command}], limit=80)
    assert shown == f"pid 7: {command.removesuffix(' --workers 2')} ..."
    assert processes_text([{"pid": 7, "command": "stash profile"}]) == "pid 7: stash profile"
    assert processes_text([{"pid": 7, "command": "x" * 200}], limit=80).endswith("x ...")
