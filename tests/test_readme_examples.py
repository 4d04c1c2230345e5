"""The README's tour and the docs' reference examples run as written and give what they say: the
README's python block with an output block prints it (as tests/test_docs.py holds the docs' pages to
theirs), its other python block calls the API by names and keywords that exist, every file and
anchor it links to exists, and the examples of docs/contributing/extending.md (a metric of your
own, an output format), which tests/test_docs.py does not run, give what their comments say."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from pathlib import Path

import pandas as pd
import pytest

import topkeval as tk
from test_docs import DISPLAY, blocks, normalised, run
from topkeval.metrics.define import forget_metric
from topkeval.outputs import formats

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
EXTENDING = ROOT / "docs" / "contributing" / "extending.md"


def _block(page: Path, marker: str) -> tuple[str, str]:
    """The one python block of ``page`` that contains ``marker``: its statements, and its last line
    as an expression (without its comment)."""
    found = [b for b in re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S) if marker in b]
    assert len(found) == 1, f"{page.name} has {len(found)} python blocks with {marker!r}"
    *body, last = found[0].strip().splitlines()
    return "\n".join(body), last.split("  #")[0].strip()


def test_the_readme_tour_prints_what_it_shows(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    found = blocks(README.read_text(encoding="utf-8"))
    shown = [b for b in found if b.output is not None]
    assert shown, "the README's tour has no python block with an output block"
    assert all(b.output is not None or b.shown_only for b in found), (
        "each python block of the README shows its output, or is marked <!-- not run: why --> (and checked below)")
    namespace: dict = {"__name__": "__main__"}
    with pd.option_context(*DISPLAY):
        for block in shown:
            printed = run(block, namespace, README)
            assert normalised(printed) == normalised(block.output), (
                f"README.md:{block.line} printed something else than its output block "
                "(python tests/test_docs.py --update README.md rewrites it)")


def _target(node: ast.expr):
    """What a call's function is, for ``tk.f`` and ``tk.C(...).method``: the callable and whether it
    is a method called on an instance (its ``self`` is then bound first); None for anything else."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "tk":
        return getattr(tk, node.attr), False
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Call):
        owner = _target(node.value.func)
        if owner is not None and inspect.isclass(owner[0]):
            return getattr(owner[0], node.attr), True
    return None


#: the keywords a function's ``**settings`` takes
SETTINGS = {field.name for field in dataclasses.fields(tk.Conventions)}


def test_the_readme_calls_the_api_by_names_and_keywords_it_takes():
    """The README's block of other inputs needs files and data a reader has: it is not run, but every
    call of topkeval in it binds to the function's signature (its names, its keywords, its arity)."""
    listed = [b for b in blocks(README.read_text(encoding="utf-8")) if b.shown_only]
    assert listed, "the README has no python block of other inputs"
    calls = 0
    for block in listed:
        for node in ast.walk(ast.parse(block.code)):
            if not isinstance(node, ast.Call) or (target := _target(node.func)) is None:
                continue
            function, is_method = target
            args = [None] * (len(node.args) + is_method)
            kwargs = {k.arg: None for k in node.keywords if k.arg is not None}
            where = f"README.md:{block.line + node.lineno}: {ast.unparse(node)}"
            signature = inspect.signature(function)
            try:
                signature.bind(*args, **kwargs)
            except TypeError as exc:
                raise AssertionError(f"{where}: {exc}") from exc
            named = {name for name, p in signature.parameters.items() if p.kind is not p.VAR_KEYWORD}
            unknown = set(kwargs) - named - SETTINGS  # **settings takes the conventions' names only
            assert not unknown, f"{where}: {function.__qualname__} takes no keyword {sorted(unknown)}"
            calls += 1
    assert calls >= 6


def _slug(heading: str) -> str:
    """The anchor mkdocs (Python-Markdown's toc) gives a heading."""
    text = re.sub(r"[^\w\s-]", "", re.sub(r"`", "", heading).strip().lower())
    return re.sub(r"[-\s]+", "-", text)


def test_every_link_of_the_readme_leads_somewhere():
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\((?!https?://)([^)#\s]+)(?:#([^)\s]+))?\)", text)
    assert len(links) > 20
    for path, anchor in links:
        target = ROOT / path
        assert target.exists(), f"README.md links to {path}, which does not exist"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", target.read_text(encoding="utf-8"), re.M)
            assert anchor in {_slug(h) for h in headings}, f"README.md links to {path}#{anchor}: no such heading"


def test_the_define_metric_example_gives_the_numbers_it_states():
    body, last = _block(EXTENDING, "tk.define_metric(")
    namespace: dict = {}
    try:
        exec(body, namespace)
        summary = eval(last, namespace)
    finally:
        if "shown_precision" in tk.FAMILIES:  # defined by the example: forgotten, for the other tests
            forget_metric("shown_precision")
    # query 1: 2 relevant of 3 listed; query 2: 1 relevant of its 2 candidates (precision@3 pads to 3)
    assert summary.loc["score", "shown_precision@3"] == pytest.approx((2 / 3 + 1 / 2) / 2)
    assert summary.loc["score", "precision@3"] == pytest.approx(0.5)
    assert "0.5833 and 0.5" in EXTENDING.read_text(encoding="utf-8")


def test_the_output_format_example_writes_the_models_as_the_first_column(monkeypatch):
    monkeypatch.setattr(formats, "FORMATS", dict(formats.FORMATS))  # the example's format goes with the test
    body, last = _block(EXTENDING, "register_format(")
    log = pd.DataFrame({"query": [1, 1, 1, 2, 2], "relevance": [1, 0, 1, 0, 1], "old": [0.9, 0.8, 0.1, 0.5, 0.4],
                        "new": [0.1, 0.8, 0.9, 0.5, 0.6]})
    namespace: dict = {"res": tk.evaluate(log, ["recall@2", "ndcg@2"], score=["old", "new"])}
    exec(body, namespace)
    text = eval(last, namespace)
    rows = [line.split("\t") for line in text.splitlines()]
    assert rows[0] == ["model", "recall@2", "ndcg@2"]
    assert [r[0] for r in rows[1:]] == ["old", "new"]
    per_query = [line.split("\t") for line in namespace["res"].to_string("tsv", per_query=True).splitlines()]
    assert per_query[0] == ["model", "query", "recall@2", "ndcg@2"]  # per query, the model is a column
