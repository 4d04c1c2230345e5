"""The documentation site runs as written: every python block of the tutorials, the how-to pages, the
guide (docs/guide/: reference pages, whose python blocks are optional) and the front page is executed, in order, one fresh namespace per page, in a temporary working folder;
an output block right after a python block (a ``text`` fence titled "Output") must be what that
block prints; and ``mkdocs build --strict`` passes (no broken link, no docstring griffe cannot read).

A block that needs what a machine may lack says so on the line above its fence,
``<!-- requires: torch -->`` (module names, ``java``, or ``spark``: pyspark and Java, through the
session of tests/conftest.py); it is skipped without it, the page's other blocks still run, and the
test then skips with the reason. Such a block must be a leaf: no later block may need its names.

The command lines the pages and the README show (``topkeval ...`` in a ``bash`` block) are read by the
command line's own parser, so a flag that does not exist fails; those of the command line's page and
of the README's tour also run, on files made here (a slow test).

    python tests/test_docs.py --update [page.md ...]   # rewrite the output blocks from a run (README.md too)
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import shlex
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
PAGES = [DOCS / "index.md", *sorted((DOCS / "tutorials").glob("*.md")), *sorted((DOCS / "how-to").glob("*.md")),
         *sorted((DOCS / "guide").glob("*.md"))]

FENCE = re.compile(r"^```(?P<lang>[\w-]*)(?P<attrs>[^\n]*)\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
REQUIRES = re.compile(r"<!--\s*requires:\s*(?P<names>[^>]*?)\s*-->\s*\n$")
#: a block shown, not run (the README's calls on a reader's own files): ``<!-- not run: why -->`` above its fence;
#: the docs' pages have none, their blocks all run
NOT_RUN = re.compile(r"<!--\s*not run:[^>]*-->\s*\n$")
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
    shown_only: bool = False  # marked <!-- not run: ... -->


def blocks(text: str) -> list[Block]:
    """The python blocks of a page, each with its requirements and the output block after it."""
    fences = list(FENCE.finditer(text))
    found = []
    for i, fence in enumerate(fences):
        if fence["lang"] != "python":
            continue
        marker = REQUIRES.search(text, 0, fence.start())
        requires = tuple(marker["names"].split()) if marker and marker.end() == fence.start() else ()
        shown = NOT_RUN.search(text, 0, fence.start())
        output = span = None
        after = fences[i + 1] if i + 1 < len(fences) else None
        if (after is not None and after["lang"] == "text" and OUTPUT_TITLE in after["attrs"]
                and not text[fence.end():after.start()].strip()):
            output, span = after["body"], after.span("body")
        found.append(Block(fence["body"], text.count("\n", 0, fence.start()) + 1, requires, output, span,
                           shown_only=bool(shown and shown.end() == fence.start())))
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
    return str(page.relative_to(DOCS if page.is_relative_to(DOCS) else ROOT))


def test_the_pages_are_found():
    """The glob above finds the pages the site lists, and each tutorial and how-to page has python blocks
    to run (a guide page may have none)."""
    names = {_page_id(p) for p in PAGES}
    assert {"index.md", "tutorials/image-search.md", "tutorials/recommender.md", "tutorials/trec.md",
            "how-to/compare.md", "how-to/presets.md", "guide/errors.md"} <= names
    for page in PAGES:
        found = blocks(page.read_text(encoding="utf-8"))
        if not _page_id(page).startswith("guide/"):
            assert found, f"{_page_id(page)} has no python block"
        assert not [b.line for b in found if b.shown_only], f"{_page_id(page)}: every python block of the docs runs"


def test_the_block_reader():
    text = ("# t\n```python\nprint(1)\n```\n\n```text title=\"Output\"\n1\n```\n"
            "<!-- requires: torch java -->\n```python\nimport torch\n```\n```bash\nls\n```\n"
            "```python\nx = 2\n```\n\nprose\n\n```text title=\"Output\"\nnot this block's\n```\n"
            "<!-- not run: your files -->\n```python\ntk.evaluate(\"run.txt\")\n```\n")
    found = blocks(text)
    assert [b.code for b in found] == ["print(1)\n", "import torch\n", "x = 2\n", "tk.evaluate(\"run.txt\")\n"]
    assert [b.requires for b in found] == [(), ("torch", "java"), (), ()]
    assert [b.output for b in found] == ["1\n", None, None, None]  # prose between: not an output block
    assert [b.line for b in found] == [2, 10, 16, 26]
    assert [b.shown_only for b in found] == [False, False, False, True]


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


@dataclass
class Command:
    page: str
    line: int  # the line of the command (its first, when continued), 1-based
    argv: list[str]  # the arguments after ``topkeval``
    output: str | None  # the file its standard output is redirected to (``> file``), if any


def command_lines(text: str, page: str) -> list[Command]:
    """The topkeval commands of a page's ``bash`` blocks: continued lines (``\\``) joined, comments
    dropped, and the commands of ``a && b``, ``a; b`` and ``a | b`` taken apart."""
    found = []
    for fence in FENCE.finditer(text):
        if fence["lang"] != "bash":
            continue
        first = text.count("\n", 0, fence.start()) + 2  # the block's first line
        pending, start = "", None
        for offset, line in enumerate(fence["body"].splitlines()):
            start = first + offset if start is None else start
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            lexer = shlex.shlex(pending + line, posix=True, punctuation_chars=True)
            lexer.whitespace_split, lexer.commenters = True, "#"
            command: list[str] = []
            for token in [*lexer, ";"]:
                if token not in (";", "&&", "||", "|"):
                    command.append(token)
                    continue
                if command[:1] == ["topkeval"]:
                    argv, output = command[1:], None
                    if ">" in argv:
                        at = argv.index(">")
                        argv, output = argv[:at] + argv[at + 2:], argv[at + 1]
                    found.append(Command(page, start, argv, output))
                command = []
            pending, start = "", None
    return found


#: every page of the site, and the README
SHOWN = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def _shown_commands() -> list[Command]:
    return [c for path in SHOWN for c in command_lines(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))]


def test_the_command_line_reader():
    text = ("```bash\npip install . && topkeval demo --save log.parquet   # a comment\n"
            "topkeval evaluate log.parquet --score a \\\n    -m recall@20   # the flags\n"
            "topkeval metrics; topkeval bias arms.csv --format csv > curve.csv\n```\n"
            "```python\ntopkeval = 1\n```\n")
    found = command_lines(text, "page.md")
    assert [(c.line, c.argv, c.output) for c in found] == [
        (2, ["demo", "--save", "log.parquet"], None),
        (3, ["evaluate", "log.parquet", "--score", "a", "-m", "recall@20"], None),
        (5, ["metrics"], None), (5, ["bias", "arms.csv", "--format", "csv"], "curve.csv")]


def test_every_command_line_shown_parses():
    """Each ``topkeval ...`` of the README and the docs, through the command line's parser and its
    checks of values: a flag that does not exist, or a value it refuses, fails here."""
    from topkeval import cli

    commands = _shown_commands()
    pages = {c.page for c in commands}
    assert {"README.md", "docs/guide/command-line.md"} <= pages, pages
    for command in commands:
        try:
            cli._check_values(cli.build_parser().parse_args(command.argv))
        except Exception as exc:  # the parser's one-line usage error
            raise AssertionError(f"{command.page}:{command.line}: topkeval {shlex.join(command.argv)}: {exc}") from exc


def _command_line_files(folder: Path) -> None:
    """The files the command line's page and the README's tour run on, besides the demo's log (which
    they write themselves, with ``topkeval demo --save``): TREC runs and their qrels, a table of top-N
    recommendations beside its truth, click logs and a randomised logger's log."""
    import numpy as np

    import topkeval as tk
    from topkeval.demo import click_log

    rng = np.random.default_rng(0)
    topics, docs = np.repeat(np.arange(1, 21), 50), np.tile(np.arange(50), 20)
    grade = rng.choice([0, 1, 2], size=len(topics), p=[0.8, 0.15, 0.05])
    run = pd.DataFrame({"query": topics.astype(str), "item": [f"D{t}-{d}" for t, d in zip(topics, docs)]})
    for name, noise in (("bm25", 1.5), ("rerank", 0.7)):
        tk.write_run(run.assign(score=grade + rng.normal(scale=noise, size=len(grade))), folder / f"{name}.run",
                     run_name=name)
    run.assign(iteration=0, grade=grade)[["query", "iteration", "item", "grade"]].to_csv(
        folder / "qrels.txt", sep=" ", header=False, index=False)
    users, items = np.repeat(np.arange(40), 10), rng.integers(0, 60, 400)
    truth = pd.DataFrame({"user": users, "item": items, "grade": rng.integers(1, 3, 400)}).drop_duplicates(
        ["user", "item"])
    truth.to_csv(folder / "truth.csv", index=False)
    truth[["user", "item"]].to_csv(folder / "bought.csv", index=False)
    recs = [(model, u, i, float(s)) for model in ("popular", "mf") for u in range(40)
            for s, i in enumerate(rng.permutation(60)[:10][::-1])]
    pd.DataFrame(recs, columns=["model", "user", "item", "score"]).to_csv(folder / "recs.csv", index=False)
    click_log(1500, arms=2).to_csv(folder / "arms.csv", index=False)
    click_log(1500).to_parquet(folder / "clicks.parquet")
    from topkeval.demo import randomized_log

    randomized_log(2000, seed=0).to_parquet(folder / "random.parquet")


@pytest.mark.slow
@pytest.mark.parametrize("page", ["README.md", "docs/guide/command-line.md"])
def test_the_command_lines_of_the_command_line_page_and_the_readme_run(page, tmp_path, monkeypatch):
    """Every command of docs/guide/command-line.md and of the README runs, in order, to exit code 0, and a
    redirected output is written to its file for the next commands. The demo runs on 300 queries
    (``--queries 300`` added where none is given), so that its report is quick; Spark's commands are
    parsed only (above). Without matplotlib a report is written without its plots, and warns."""
    from topkeval import cli

    monkeypatch.chdir(tmp_path)
    _command_line_files(tmp_path)
    commands = [c for c in _shown_commands() if c.page == page]
    assert len(commands) >= (20 if page.startswith("docs") else 4)
    for command in commands:
        if "--spark" in command.argv:  # tests/test_spark.py runs the CLI on Spark
            continue
        argv = command.argv + (["--queries", "300"] if command.argv[0] == "demo" and "--queries" not in command.argv
                               else [])
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(argv)
        assert code == 0, f"{command.page}:{command.line}: topkeval {shlex.join(argv)}: {err.getvalue()}"
        if command.output is not None:
            Path(command.output).write_text(out.getvalue(), encoding="utf-8")


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
                    if block.shown_only:
                        continue
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
