"""The documentation site runs as written: every python block of the tutorials, the how-to pages and
the front page is executed, in order, one fresh namespace per page, in a temporary working folder;
an output block right after a python block (a ``text`` fence titled "Output") must be what that
block prints; and ``mkdocs build --strict`` passes (no broken link, no docstring griffe cannot read).

A block that needs what a machine may lack says so on the line above its fence,
``<!-- requires: torch -->`` (module names, ``java``, or ``spark``: pyspark and Java, through the
session of tests/conftest.py); it is skipped without it, the page's other blocks still run, and the
test then skips with the reason. Such a block must be a leaf: no later block may need its names.

    python tests/test_docs.py --update [page.md ...]   # rewrite the output blocks from a run
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = [DOCS / "index.md", *sorted((DOCS / "tutorials").glob("*.md")), *sorted((DOCS / "how-to").glob("*.md"))]

FENCE = re.compile(r"^```(?P<lang>[\w-]*)(?P<attrs>[^\n]*)\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
REQUIRES = re.compile(r"<!--\s*requires:\s*(?P<names>[^>]*?)\s*-->\s*\n$")
OUTPUT_TITLE = 'title="Output"'
# the width pandas prints at is the terminal's; the pages' outputs are made at this one, from pandas'
# default precision (a page that sets its own is undone after it: the doctests print at the default)
DISPLAY = ("display.width", 100, "display.max_columns", 20, "display.precision", 6)


@dataclass
class Block:
    code: str
    line: int  # the line of the opening fence, 1-based
    requires: tuple[str, ...]
    output: str | None  # the output block that follows it, if any
    output_span: tuple[int, int] | None  # where that block's body lies in the page's text


def blocks(text: str) -> list[Block]:
    """The python blocks of a page, each with its requirements and the output block after it."""
    fences = list(FENCE.finditer(text))
    found = []
    for i, fence in enumerate(fences):
        if fence["lang"] != "python":
            continue
        marker = REQUIRES.search(text, 0, fence.start())
        requires = tuple(marker["names"].split()) if marker and marker.end() == fence.start() else ()
        output = span = None
        after = fences[i + 1] if i + 1 < len(fences) else None
        if (after is not None and after["lang"] == "text" and OUTPUT_TITLE in after["attrs"]
                and not text[fence.end():after.start()].strip()):
            output, span = after["body"], after.span("body")
        found.append(Block(fence["body"], text.count("\n", 0, fence.start()) + 1, requires, output, span))
    return found


def missing(requires: tuple[str, ...]) -> list[str]:
    """What this machine lacks of a block's requirements, as reasons."""
    reasons = []
    for name in requires:
        if name == "spark":
            reasons += missing(("pyspark", "java"))
        elif name == "java":
            if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
                reasons.append("Java (Spark needs Java 17)")
        elif importlib.util.find_spec(name) is None:
            reasons.append(f"{name} (pip install it, or the extra that brings it)")
    return reasons


def run(block: Block, namespace: dict, page: Path) -> str:
    """Execute one block in the page's namespace; what it prints."""
    out = io.StringIO()
    code = compile(block.code, f"{page.relative_to(ROOT)}:{block.line}", "exec")
    with contextlib.redirect_stdout(out):
        exec(code, namespace)
    return out.getvalue()


def normalised(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def _page_id(page: Path) -> str:
    return str(page.relative_to(DOCS))


def test_the_pages_are_found():
    """The glob above finds the pages the site lists, and each has python blocks to run."""
    names = {_page_id(p) for p in PAGES}
    assert {"index.md", "tutorials/image-search.md", "tutorials/recommender.md", "tutorials/trec.md",
            "how-to/compare.md", "how-to/presets.md"} <= names
    for page in PAGES:
        assert blocks(page.read_text(encoding="utf-8")), f"{_page_id(page)} has no python block"


def test_the_block_reader():
    text = ("# t\n```python\nprint(1)\n```\n\n```text title=\"Output\"\n1\n```\n"
            "<!-- requires: torch java -->\n```python\nimport torch\n```\n```bash\nls\n```\n"
            "```python\nx = 2\n```\n\nprose\n\n```text title=\"Output\"\nnot this block's\n```\n")
    found = blocks(text)
    assert [b.code for b in found] == ["print(1)\n", "import torch\n", "x = 2\n"]
    assert [b.requires for b in found] == [(), ("torch", "java"), ()]
    assert [b.output for b in found] == ["1\n", None, None]  # prose between: not an output block
    assert [b.line for b in found] == [2, 10, 16]


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_the_page_runs_as_written(page, tmp_path, monkeypatch, request):
    text = page.read_text(encoding="utf-8")
    page_blocks = blocks(text)
    if any("spark" in b.requires for b in page_blocks) and not missing(("spark",)):
        request.getfixturevalue("spark")  # one local session for the test run; the page's getOrCreate finds it
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    namespace: dict = {"__name__": "__main__"}
    skipped = []
    with pd.option_context(*DISPLAY):  # the options the page sets are undone on the way out
        for block in page_blocks:
            lacking = missing(block.requires)
            if lacking:
                skipped.append(f"line {block.line} needs {', '.join(lacking)}")
                continue
            printed = run(block, namespace, page)
            if block.output is not None:
                assert normalised(printed) == normalised(block.output), (
                    f"{_page_id(page)}:{block.line} printed something else than its output block "
                    "(python tests/test_docs.py --update rewrites them)")
    if skipped:
        pytest.skip(f"{_page_id(page)}: the other blocks ran; " + "; ".join(skipped))


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path):
    """``mkdocs build --strict``: every page, link and anchor resolves, every docstring of the API
    reference is read without a warning."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings_handlers") is None:
        pytest.skip('mkdocs and mkdocstrings are the docs extra (pip install -e ".[docs]", in the test extra too)')
    site = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    front = (site / "index.html").read_text(encoding="utf-8")
    assert "topkeval" in front
    reference = (site / "reference" / "results" / "index.html").read_text(encoding="utf-8")
    assert 'id="topkeval.Results.compare"' in reference  # the API reference is generated from the docstrings
    assert ":meth:" not in reference  # Sphinx roles became links (docs/sphinx_roles.py)
    assert not list(site.rglob("*.py"))  # the scripts of docs/ are no pages


def _update(pages: list[Path]) -> None:
    """Run each page and write what each python block prints into the output block after it."""
    os.environ.setdefault("TOPKEVAL_JIT", "1")
    warnings.simplefilter("error")  # as in the tests (pyproject.toml): a page's code warns on no input
    for page in pages:
        text = page.read_text(encoding="utf-8")
        namespace: dict = {"__name__": "__main__"}
        edits = []
        start = time.perf_counter()
        here = os.getcwd()
        with tempfile.TemporaryDirectory() as tmp, pd.option_context(*DISPLAY):
            os.chdir(tmp)  # contextlib.chdir is Python 3.11
            try:
                for block in blocks(text):
                    if missing(block.requires):
                        print(f"  {_page_id(page)}:{block.line}: skipped ({', '.join(missing(block.requires))})")
                        continue
                    printed = run(block, namespace, page)
                    if block.output_span is not None:
                        edits.append((block.output_span, normalised(printed) + "\n"))
            finally:
                os.chdir(here)
        for (begin, end), new in sorted(edits, reverse=True):
            text = text[:begin] + new + text[end:]
        page.write_text(text, encoding="utf-8")
        print(f"{_page_id(page)}: {len(edits)} output blocks, {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    if sys.argv[1:2] != ["--update"]:
        sys.exit(__doc__)
    _update([Path(p).resolve() for p in sys.argv[2:]] or PAGES)
