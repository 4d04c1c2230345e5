"""The views of Results: side by side, metric@k curves, LaTeX, notebooks, the HTML report.

The side-by-side view is checked against the reference ranking (tests/reference.py) under every
convention; curves against evaluating each cutoff on its own; every number of the HTML report
against the API that gives it; hostile ids against every output.
"""

from __future__ import annotations

import math
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import topkeval as tk
from reference import ranked_orders
from strategies import conventions, logs
from topkeval.errors import InputFileError, ParameterError

HOSTILE_QUERIES = ["<script>alert(1)</script>", '"><img src=x onerror=alert(2)>', "a&amp;b", "plain"]
HOSTILE_MODELS = ["<b>old</b>", "new\"'><svg onload=alert(3)>$x$"]


def demo_results(n=300, metrics=("recall@10", "precision@10", "ndcg@10", "r_precision")):
    from topkeval.demo import example_log

    return tk.evaluate(example_log(n), metrics=list(metrics), query="query", relevance="click",
                       score=["old_ranker", "new_ranker"], item="image")


def hostile_log(seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for q in HOSTILE_QUERIES:
        for j in range(12):
            rows.append({"query": q, "item": f"<i>{j}</i>" if j % 2 else f"it{j}\"'>", "click": int(rng.random() < 0.35),
                         HOSTILE_MODELS[0]: float(rng.integers(0, 5)), HOSTILE_MODELS[1]: float(rng.normal())})
    frame = pd.DataFrame(rows)
    frame.loc[frame.groupby("query").head(1).index, "click"] = 1  # every query has a relevant item
    return frame


def hostile_results():
    return tk.evaluate(hostile_log(), metrics=["recall@5", "ndcg@5"], query="query", relevance="click",
                       score=HOSTILE_MODELS, item="item")


# ----------------------------------------------------------------------------------------------
# side by side


def _reference_view(rows, model, conv, k):
    """Per query: the items at positions 1..k, and each relevant item's chance of being in the top k."""
    threshold = conv["threshold"]
    out = {}
    for q in dict.fromkeys(r["query"] for r in rows):
        cands = [r for r in rows if r["query"] == q]
        rel = [(c["grade"] > 0) if threshold is None else (c["grade"] >= threshold) for c in cands]
        scores = [c[model] for c in cands]
        items = [c["item"] for c in cands]
        grades = [c["grade"] for c in cands]
        orders = ranked_orders(scores, rel, items, conv, grades)
        shown_rule = dict(conv, ties="first") if conv["ties"] == "expected" else conv
        shown = ranked_orders(scores, rel, items, shown_rule, grades)[0][:k]
        chance = {items[i]: sum(i in o[:k] for o in orders) / len(orders) for i in range(len(cands)) if rel[i]}
        out[q] = ([items[i] for i in shown], chance)
    return out


@settings(max_examples=60, deadline=None)
@given(rows=logs(max_queries=3, max_len=6), conv=conventions(), k=st.integers(1, 7))
def test_side_by_side_equals_reference(rows, conv, k):
    conv = dict(conv, empty_queries="keep")
    res = tk.evaluate(pd.DataFrame(rows), ["recall@1"], relevance="grade", score=["a", "b"], item="item", **conv)
    ref = {m: _reference_view(rows, m, conv, k) for m in ("a", "b")}
    for q in ref["a"]:
        view = res.side_by_side(q, k=k, baseline="a", model="b")
        assert len(view) == max(len(ref["a"][q][0]), len(ref["b"][q][0]))  # positions past every list: dropped
        for m, other in (("a", "b"), ("b", "a")):
            items, chance = ref[m][q]
            got = [i for i in view[(m, "item")] if i is not None]
            assert got == items, (q, m)
            assert view[(m, "item")].isna().sum() == len(view) - len(items)
            for pos, item in enumerate(got):
                mark = view[(m, "change")].iloc[pos]
                if item in chance:
                    better = chance[item] > ref[other][q][1].get(item, 0.0) + 1e-12
                    assert mark == (("gained" if m == "b" else "lost") if better else "")
                else:
                    assert mark == ""


def test_side_by_side_tied_ranks_and_other_rank():
    res = tk.evaluate({"query": [1] * 5, "relevance": [1, 0, 0, 1, 0], "item": list("vwxyz"),
                       "a": [3.0, 2.0, 2.0, 2.0, 1.0], "b": [1.0, 2.0, 3.0, 4.0, 5.0]},
                      metrics=["recall@2"], score=["a", "b"], item="item")
    view = res.side_by_side(1, k=4)
    assert view[("a", "item")].tolist() == ["v", "w", "x", "y"]
    assert view[("a", "tied_ranks")].tolist() == ["", "2-4", "2-4", "2-4"]
    assert view[("a", "other_rank")].tolist() == [5.0, 4.0, 3.0, 2.0]
    # top 4: y is in both (a: ranks 2-4 all inside); v is in a's, not b's (rank 5): lost
    assert view[("b", "change")].tolist() == ["", "", "", ""]
    assert view[("a", "change")].tolist() == ["lost", "", "", ""]
    # top 2: y's chance is 1/3 under a (one slot for three tied), 1 under b (rank 2): gained
    view = res.side_by_side(1, k=2)
    assert view[("b", "item")].tolist() == ["z", "y"] and view[("b", "change")].tolist() == ["", "gained"]
    assert view[("a", "change")].tolist() == ["lost", ""]


def test_side_by_side_ascending_shows_scores_as_given():
    res = tk.evaluate({"query": [1, 1, 1], "relevance": [1, 0, 0], "item": ["x", "y", "z"], "rank": [3, 1, 2]},
                      metrics=["recall@1"], score="rank", item="item", ascending=True)
    view = res.side_by_side(1, k=3)
    assert view[("rank", "item")].tolist() == ["y", "z", "x"]
    assert view[("rank", "score")].tolist() == [1, 2, 3]


def test_side_by_side_with_qrels_and_runs_lacking_items():
    run = {"query": ["q1", "q1", "q1", "q1"], "item": ["a", "b", "c", "a"], "score": [3.0, 2.0, 1.0, 1.0],
           "run": ["r1", "r1", "r1", "r2"]}
    qrels = {"query": ["q1", "q1"], "item": ["c", "z"], "relevance": [1, 1]}
    res = tk.evaluate(run, ["recall@1"], item="item", qrels=qrels, model="run")
    view = res.side_by_side("q1", k=3, baseline="r1", model="r2")
    assert view[("r1", "item")].tolist() == ["a", "b", "c"]
    assert view[("r2", "item")].tolist()[:1] == ["a"]
    assert view[("r1", "relevance")].tolist() == [0.0, 0.0, 1.0]
    assert view.attrs["relevant"] == {"r1": 2, "r2": 2}  # R counts the judged item nobody retrieved


def test_side_by_side_errors():
    res = demo_results(50)
    with pytest.raises(ParameterError, match="not among the queries"):
        res.side_by_side("no such query")
    with pytest.raises(ParameterError, match="not a model"):
        res.side_by_side("q1", baseline="old")
    with pytest.raises(ParameterError, match="k"):
        res.side_by_side("q1", k=0)
    no_items = tk.evaluate({"query": [1, 1], "relevance": [1, 0], "s": [1.0, 2.0]}, ["recall@1"], score="s")
    with pytest.raises(ParameterError, match="item="):
        no_items.side_by_side(1)
    matrix = tk.evaluate_matrix(np.array([[0.9, 0.1]]), np.array([[1, 0]]), metrics=["recall@1"])
    with pytest.raises(ParameterError, match="do not keep"):
        matrix.side_by_side(0)


# ----------------------------------------------------------------------------------------------
# curves


@settings(max_examples=25, deadline=None)
@given(rows=logs(max_queries=4, max_len=6), conv=conventions())
def test_curves_equal_each_cutoff_evaluated_alone(rows, conv):
    frame = pd.DataFrame(rows)
    res = tk.evaluate(frame, ["recall@4", "ndcg@2", "r_precision"], relevance="grade", score=["a", "b"],
                      item="item", **conv)
    got = res.curves()
    assert sorted(set(got["metric"])) == ["ndcg", "recall"] and sorted(set(got["k"])) == [1, 2, 3, 4]
    for k in range(1, 5):
        alone = tk.evaluate(frame, [f"recall@{k}", f"ndcg@{k}"], relevance="grade", score=["a", "b"], item="item",
                            **conv).summary
        for fam in ("recall", "ndcg"):
            for model in ("a", "b"):
                v = got[(got.metric == fam) & (got.k == k) & (got.model == model)]["value"].item()
                w = alone.loc[model, f"{fam}@{k}"]
                assert (math.isnan(v) and math.isnan(w)) or v == w


def test_curves_on_every_input_path(tmp_path):
    from topkeval.demo import example_log

    log = example_log(80)
    path = tmp_path / "log.parquet"
    log.to_parquet(path)
    mem = tk.evaluate(log, ["precision@5"], relevance="click", score=["old_ranker", "new_ranker"], item="image")
    streamed = tk.evaluate(str(path), ["precision@5"], relevance="click", score=["old_ranker", "new_ranker"],
                           item="image", chunk_rows=1000)
    truth = log[log.click > 0][["query", "image"]].assign(relevance=1)
    run = log.melt(id_vars=["query", "image"], value_vars=["old_ranker", "new_ranker"], var_name="run",
                   value_name="score")
    judged = tk.evaluate(run, ["precision@5"], item="image", qrels=truth.rename(columns={"image": "image"}),
                         model="run")
    a = mem.curves()
    pd.testing.assert_frame_equal(a, streamed.curves())
    b = judged.curves().set_index(["model", "k"])["value"]
    pd.testing.assert_series_equal(a.set_index(["model", "k"])["value"], b.loc[a.set_index(["model", "k"]).index])


def test_curves_errors():
    res = tk.evaluate({"query": [1, 1], "relevance": [1, 0], "s": [1.0, 2.0]}, ["r_precision", "ap"], score="s")
    with pytest.raises(ParameterError, match="takes a cutoff"):
        res.curves()
    assert res.curves("recall")["k"].tolist() == list(range(1, 21))
    with pytest.raises(tk.TopkevalError, match="takes no cutoff"):
        res.curves("r_precision")
    with pytest.raises(ParameterError, match="positive"):
        res.curves("recall", ks=[0, 1])


# ----------------------------------------------------------------------------------------------
# LaTeX, markdown, notebooks


def test_latex_bold_best_and_marks_follow_summary_and_compare():
    res = demo_results(400, metrics=("recall@10", "fp@10", "precision@1"))
    text = res.to_latex(baseline="old_ranker")
    lines = {line.split(" & ")[0]: line for line in text.splitlines() if " & " in line}
    summary = res.summary
    for metric, col in zip(res.metrics, range(1, 4)):
        best = summary[metric].idxmin() if metric.startswith("fp") else summary[metric].idxmax()
        for model in res.models:
            cell = lines[model.replace("_", r"\_")].rstrip(" \\").split(" & ")[col]
            assert (r"\textbf{" in cell) == (model == best), (metric, model)
            assert f"{summary.loc[model, metric]:.4f}" in cell
    table = res.compare(baseline="old_ranker")
    for row in table.itertuples():
        cell = lines[row.model.replace("_", r"\_")].rstrip(" \\").split(" & ")[res.metrics.index(row.metric) + 1]
        good = row.significant and ((row.delta < 0) if row.metric.startswith("fp") else (row.delta > 0))
        assert (r"\dagger" in cell) == good
    assert text.splitlines()[0] == r"\begin{tabular}{lrrr}" and r"\bottomrule" in text


def test_latex_letters_without_baseline_and_escaping():
    res = hostile_results()
    text = res.to_latex()
    assert r"\textless{}b\textgreater{}old\textless{}/b\textgreater{}" in text
    assert r"\$x\$" in text
    assert "Superscripts" not in text and "$^{" not in text  # no model is significantly better: nothing to explain
    body = "\n".join(line for line in text.splitlines() if not line.startswith("%"))
    assert "$x$" not in body.replace(r"\$x\$", "")


def test_latex_explains_the_marks_it_shows_and_no_others():
    res = demo_results(400, metrics=("recall@10",))
    body, note = res.to_latex(baseline="old_ranker").split(r"\end{tabular}")
    assert r"$^{\dagger}$" in body and r"$^{\dagger}$ significantly better than old\_ranker" in note
    body, note = res.to_latex().split(r"\end{tabular}")
    assert "$^{a}$" in body and "Superscripts: significantly better than the model of that letter (a: old\\_ranker" in note
    log = {"query": [1, 1, 2, 2], "relevance": [1, 0, 1, 0], "a": [0.9, 0.1, 0.1, 0.9], "b": [0.9, 0.1, 0.1, 0.9]}
    same = tk.evaluate(log, ["precision@1"], score=["a", "b"])
    for text in (same.to_latex(baseline="a", n_resamples=200), same.to_latex(n_resamples=200)):
        assert text.endswith(r"\end{tabular}") and "dagger" not in text and "Superscripts" not in text


def test_markdown_and_repr_html_escape():
    res = hostile_results()
    md = res.to_markdown()
    assert "&lt;b&gt;old&lt;/b&gt;" in md and "<b>" not in md
    notes = res.to_string("markdown").split("\n\n", 1)[1]  # the notes name the model too (ties at a cutoff)
    assert "&lt;b&gt;old&lt;/b&gt;: 1 query" in notes and "<b>" not in notes and "<svg" not in notes
    page = res._repr_html_()
    assert "<b>old</b>" not in page and "&lt;b&gt;old&lt;/b&gt;" in page
    assert "<svg onload" not in page
    cells = re.findall(r'data-value="([^"]+)"', page)
    assert [float(c) for c in cells] == [res.summary.loc[m, c] for m in res.models for c in res.metrics]


# ----------------------------------------------------------------------------------------------
# the HTML report


class _Page(HTMLParser):
    """Tables (cells with their data-value), element names and attributes of a page."""

    def __init__(self):
        super().__init__()
        self.all_tables: dict[str, list[list[list[tuple[str, str | None]]]]] = {}  # class -> tables -> rows
        self.tags: list[tuple[str, dict]] = []
        self._table = None
        self._cell = None
        self._text = ""
        self.spans: list[dict] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "table":
            self._table = a.get("class", "")
            self.all_tables.setdefault(self._table, []).append([])
        elif tag == "tr" and self._table is not None:
            self.all_tables[self._table][-1].append([])
        elif tag in ("td", "th"):
            self._cell, self._text = a, ""
        elif tag == "span" and "data-low" in a:
            self.spans.append(a)

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.all_tables[self._table][-1][-1].append((self._text, self._cell.get("data-value")))
            self._cell = None
        elif tag == "table":
            self._table = None

    @property
    def tables(self):
        """class -> the rows of the first table of that class"""
        return {name: tables[0] for name, tables in self.all_tables.items()}

    def handle_data(self, data):
        if self._cell is not None:
            self._text += data


def _parse(text) -> _Page:
    page = _Page()
    page.feed(text)
    return page


def _same(a, b) -> bool:
    return (isinstance(a, float) and math.isnan(a) and math.isnan(b)) or a == b


def test_report_numbers_are_the_api_numbers(tmp_path):
    res = demo_results(300)
    path = res.report(tmp_path / "r.html", baseline="old_ranker", worst=3, n_resamples=2000, seed=1)
    page = _parse(Path(path).read_text(encoding="utf-8"))
    # summary: the means, then the intervals of summary_ci
    rows = page.tables["summary"][1:]
    assert [r[0][0] for r in rows] == res.models
    for model, row in zip(res.models, rows):
        assert [float(v) for _, v in row[1:]] == [res.summary.loc[model, m] for m in res.metrics]
    ci = res.summary_ci(n_resamples=2000, seed=1)
    assert [(float(s["data-low"]), float(s["data-high"])) for s in page.spans] == list(zip(ci.ci_low, ci.ci_high))
    # comparison
    table = res.compare(baseline="old_ranker", n_resamples=2000, seed=1)
    for row, (_, r) in zip(page.tables["compare"][1:], table.iterrows()):
        assert row[0][0] == r.model and row[1][0] == r.metric and row[2][0] == r.verdict
        values = [float(v) for _, v in row[3:]]
        assert values == [r.baseline, r.value, r.delta, r.ci_low, r.ci_high, r.p_value, r.p_adjusted, r.wins,
                          r.ties, r.losses, r.detectable_delta]
    # curves: one table per family, k down, models across
    curves = res.curves()
    curve_cells = [float(v) for table in page.all_tables["curve"] for row in table[1:] for _, v in row[1:]]
    expected = [curves[(curves.metric == fam) & (curves.k == k) & (curves.model == m)]["value"].item()
                for fam in dict.fromkeys(curves.metric) for k in range(1, 11) for m in res.models]
    assert curve_cells == expected
    # worst regressions: the head of diff
    d = res.diff("old_ranker", "new_ranker", res.metrics[0])
    worst = d[d.delta < 0].head(3)
    got = page.tables["worst"][1:]
    assert [r[0][0] for r in got] == list(worst["query"])
    assert [[float(v) for _, v in r[1:4]] for r in got] == worst[["baseline", "model", "delta"]].values.tolist()
    # side by side: the same items as the API's view, for each worst query
    sbs = page.tables["sbs"]
    view = res.side_by_side(worst["query"].iloc[0], k=10, baseline="old_ranker", model="new_ranker")
    first = sbs[2:12]  # two header rows
    assert [r[1][0] for r in first] == view[("old_ranker", "item")].tolist()
    # conventions
    conv_rows = {r[0][0]: r[1][0] for r in page.tables["conventions"][1:]}
    assert conv_rows == {k: v if isinstance(v, str) else repr(v) for k, v in res.info["conventions"].items()}


def test_report_escapes_hostile_ids_and_runs_no_script(tmp_path):
    res = hostile_results()
    path = res.report(tmp_path / "r.html", queries=HOSTILE_QUERIES, n_resamples=500)
    text = Path(path).read_text(encoding="utf-8")
    page = _parse(text)
    names = {tag for tag, _ in page.tags}
    assert "script" not in names and "iframe" not in names
    for tag, attrs in page.tags:
        assert not any(a.lower().startswith("on") for a in attrs), (tag, attrs)
        if tag == "img":
            assert attrs.get("src", "").startswith(("http", "data:image"))
    for q in HOSTILE_QUERIES + HOSTILE_MODELS:
        assert q not in text or q == "plain"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "&lt;b&gt;old&lt;/b&gt;" in text
    assert text.count('<h3 id="q') == len(HOSTILE_QUERIES)  # each shown side by side
    assert "Content-Security-Policy" in text and "default-src 'none'" in text


def test_report_without_matplotlib_or_rows(tmp_path, monkeypatch):
    import sys

    res = demo_results(60)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.warns(tk.TopkevalWarning, match="The report has no plots: Plots need matplotlib"):
        path = res.report(tmp_path / "a.html", n_resamples=200)
    text = Path(path).read_text(encoding="utf-8")
    assert "<svg" not in text and "pip install" in text
    with pytest.raises(ParameterError, match="matplotlib"):
        res.plot_curve("recall")
    monkeypatch.undo()
    log = tmp_path / "log.parquet"
    pd.DataFrame({"query": [1, 1, 2], "relevance": [1, 0, 1], "s": [1.0, 2.0, 1.0]}).to_parquet(log)
    summary_only = tk.evaluate(log, ["recall@1"], score="s", chunk_rows=2, keep_per_query=False)
    assert len(summary_only.per_query) == 0
    text = Path(summary_only.report(tmp_path / "b.html")).read_text(encoding="utf-8")
    assert "no intervals" in text


def test_report_of_per_query_values_shows_ids_as_ids_and_says_what_is_unknown(tmp_path):
    """A report of Results.from_per_query: integer query ids as written (8, not 8.0000) in the worst
    regressions, as in the report of the same values evaluated from a table; rows read, ties at a
    cutoff and conventions said not to be known (not 0 rows, not an empty table)."""
    import re

    rng = np.random.default_rng(3)
    log = pd.DataFrame({"query": np.repeat(np.arange(8, 38), 4), "relevance": rng.integers(0, 2, 120),
                        "a": rng.random(120), "b": rng.random(120)})
    evaluated = tk.evaluate(log, ["recall@2"], score=["a", "b"])
    given = tk.Results.from_per_query(evaluated.per_query)
    assert given.per_query["query"].dtype == np.int64
    assert given.info["rows"] is None and set(given.info["ties_at_cutoff"].values()) == {None}
    pages = [Path(r.report(tmp_path / f"{n}.html", baseline="a", n_resamples=200, curves=False)).read_text("utf-8")
             for n, r in (("e", evaluated), ("g", given))]
    worst = [re.findall(r'<td class="id"><a href="#q\d+">([^<]*)</a>', page) for page in pages]
    want = evaluated.diff("a", "b", "recall@2")
    want = want[want["delta"] < 0]["query"].head(10).astype(str).tolist()
    assert worst[0] == worst[1] == want and want and all(w.isdigit() for w in want)
    page = pages[1]
    assert "rows read: not known" in page and " 0 rows" not in page and "rows read</td>" not in page
    assert "Conventions: not known" in page and 'class="conventions"' not in page
    assert "ties across a cutoff" not in page
    assert "rows read</td>" in pages[0] and 'class="conventions"' in pages[0]


def test_report_file_safety(tmp_path):
    res = demo_results(40)
    target = tmp_path / "r.html"
    target.write_text("mine")
    with pytest.raises(InputFileError, match="already exists"):
        res.report(target, curves=False)
    assert target.read_text() == "mine"
    other = tmp_path / "other.txt"
    other.write_text("keep")
    link = tmp_path / "link.html"
    link.symlink_to(other)
    with pytest.raises(InputFileError, match="symbolic link"):  # only regular files are ever replaced
        res.report(link, overwrite=True, curves=False, n_resamples=200)
    assert other.read_text() == "keep" and link.is_symlink()
    with pytest.raises(InputFileError, match="does not exist"):
        res.report(tmp_path / "nope" / "r.html")
    with pytest.raises(InputFileError, match="directory"):
        res.report(tmp_path, overwrite=True)
    mode = os.stat(res.report(tmp_path / "m.html", curves=False, n_resamples=200)).st_mode & 0o777
    assert mode & 0o044 == 0o044 & ~_umask()  # readable as a file open() creates
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".topkeval-")]
    with pytest.raises(ParameterError, match="not a model"):
        res.report(tmp_path / "x.html", baseline="nope")
    with pytest.raises(ParameterError, match="not evaluated"):
        res.report(tmp_path / "x.html", metric="ap")


def _umask():
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_report_images_only_safe_urls(tmp_path):
    res = demo_results(40)
    urls = {"img0": "javascript:alert(1)"}
    text = Path(res.report(tmp_path / "r.html", images=lambda item: urls.get(item, f"https://cdn.test/{item}.jpg"),
                           worst=2, curves=False, n_resamples=200)).read_text(encoding="utf-8")
    assert "javascript:" not in text and 'src="https://cdn.test/img' in text


def test_plots_numbers_and_hostile_names():
    pytest.importorskip("matplotlib")
    res = hostile_results()
    fig = res.plot_curve("recall")
    curves = res.curves("recall")
    for line, model in zip(fig.axes[0].get_lines(), res.models):
        assert line.get_ydata().tolist() == curves[curves.model == model]["value"].tolist()
    fig.canvas.draw()  # mathtext would fail on an unbalanced $ in a name
    fig = res.plot_deltas("ndcg@5")
    fig.canvas.draw()
    heights = sum(h for _, _, _, h in _bars(fig.axes[0]))
    assert heights == len(res.diff(res.models[0], res.models[1], "ndcg@5"))
    with pytest.raises(ParameterError, match="one"):
        tk.evaluate({"query": [1, 1], "relevance": [1, 0], "s": [1.0, 2.0]}, ["recall@1"], score="s").plot_deltas(
            "recall@1")


def test_import_does_not_load_matplotlib():
    import subprocess
    import sys

    code = "import sys, topkeval; topkeval.evaluate({'query':[1],'relevance':[1],'score':[1.0]}); " \
           "print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ----------------------------------------------------------------------------------------------
# in a real browser

CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]


def _chromium():
    import shutil

    path = os.environ.get("TOPKEVAL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("no Chromium on this machine (.ci/run installs Debian's chromium; or set TOPKEVAL_CHROMIUM)")
    pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra: pip install -e '.[test]'")
    return path


def open_in_chromium(path, screenshot=None, width=1280):
    """Open an HTML file in headless Chromium; return what a reader would see and what went wrong:
    (texts of the cells, number of svg plots, console errors, page errors, dialogs opened)."""
    from playwright.sync_api import sync_playwright

    console, errors, dialogs = [], [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(f"file://{os.path.abspath(path)}", wait_until="load")
            cells = page.locator("td, h3, th").all_inner_texts()
            svgs = page.locator("svg").count()
            if screenshot is not None:
                page.screenshot(path=str(screenshot), full_page=False)
        finally:
            browser.close()
    return cells, svgs, console, errors, dialogs


@pytest.mark.slow
def test_demo_report_opens_in_chromium(tmp_path):
    _chromium()
    from topkeval.cli import main

    path = tmp_path / "demo.html"
    assert main(["demo", "--queries", "400", "--report", str(path)]) == 0
    cells, svgs, console, errors, dialogs = open_in_chromium(path, tmp_path / "demo.png")
    assert svgs >= 6  # 3 curves and the per-query differences of each metric
    assert not errors and not dialogs
    assert not [c for c in console if c.startswith("error")], console
    assert (tmp_path / "demo.png").stat().st_size > 10_000
    assert "new_ranker" in cells and "better" in cells


@pytest.mark.slow
def test_hostile_report_in_chromium_shows_ids_as_text(tmp_path):
    _chromium()
    res = hostile_results()
    data_png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    path = res.report(tmp_path / "r.html", queries=HOSTILE_QUERIES, n_resamples=300,
                      images=lambda item: data_png if "1" in str(item) else "javascript:alert(4)")
    cells, svgs, console, errors, dialogs = open_in_chromium(path)
    assert not dialogs and not errors, (dialogs, errors)
    assert not [c for c in console if c.startswith("error")], console
    shown = "\n".join(cells)
    for text in HOSTILE_QUERIES + HOSTILE_MODELS + ['it0"\'>', "<i>1</i>"]:
        assert text in shown, text


def test_short_lists_unknown_queries_long_cutoffs_and_id_types(tmp_path):
    res = tk.evaluate({"query": [7, 7, 7, 8, 8], "relevance": [1, 0, 0, 0, 1], "item": list("abcab"),
                       "a": [0.3, 0.2, 0.1, 0.5, 0.4], "b": [0.1, 0.2, 0.3, 0.4, 0.5]},
                      metrics=["recall@500"], score=["a", "b"], item="item")
    view = res.side_by_side(8, k=500)
    assert len(view) == 2 and view[("a", "item")].tolist() == ["a", "b"]  # no rows past every list
    assert res.side_by_side("8", k=2)[("b", "item")].tolist() == ["b", "a"]  # text finds a whole-number id
    with pytest.raises(ParameterError, match="not among the queries.*this one is str. Its queries: 7, 8.$"):
        res.side_by_side("08", k=2)  # "08" is not 8, as nowhere in topkeval
    with pytest.raises(ParameterError, match="'9' is not among the queries of model 'a'. Its queries: 7, 8.$"):
        res.side_by_side("9", k=2)  # "9" would find 9: the kinds of ids are not the reason
    text = Path(res.report(tmp_path / "r.html", queries=[7, "8"], n_resamples=200)).read_text(encoding="utf-8")
    assert text.count('<h3 id="q') == 2
    with pytest.raises(ParameterError, match="'nope' of queries= is not among"):
        res.report(tmp_path / "x.html", queries=[7, "nope"])
    assert not (tmp_path / "x.html").exists()
    ks = res.curves()["k"].unique().tolist()
    assert ks[:3] == [1, 2, 3] and ks[-1] == 500 and len(ks) <= 51
    with pytest.raises(ParameterError, match="without a cutoff"):
        res.curves(["recall@10"])
    with pytest.raises(ParameterError, match="Models: 'a', 'b'"):
        res.report(tmp_path / "y.html", baseline="c")


def test_curves_and_report_of_a_score_matrix(tmp_path):
    rng = np.random.default_rng(0)
    scores = np.round(rng.random((60, 40)), 1)  # ties
    relevant = (rng.random((60, 40)) < 0.1).astype(float)
    res = tk.evaluate_matrix({"a": scores, "b": scores[::-1].copy()}, relevant, ["recall@6", "ndcg@4"])
    got = res.curves()
    for k in (1, 4, 6):
        alone = tk.evaluate_matrix({"a": scores, "b": scores[::-1].copy()}, relevant, [f"recall@{k}"]).summary
        part = got[(got.metric == "recall") & (got.k == k)].set_index("model")["value"]
        assert part.to_dict() == alone[f"recall@{k}"].to_dict()
    text = Path(res.report(tmp_path / "m.html", n_resamples=200)).read_text(encoding="utf-8")
    assert "do not keep" in text  # no side by side: a matrix keeps no rows


def test_report_keeps_other_queries_when_a_model_lacks_one_and_r_under_score_threshold(tmp_path):
    run = pd.DataFrame({"query": [1, 1, 2, 2, 3, 3, 1, 1, 2, 2], "item": list("xyxyxyxyxy"),
                        "score": [2.0, 1.0, 1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0, 1.0],
                        "run": ["a"] * 6 + ["#b"] * 4})
    truth = pd.DataFrame({"query": [1, 2, 3], "item": ["x", "x", "x"], "relevance": [1, 1, 1]})
    res = tk.evaluate(run, ["precision@1"], item="item", qrels=truth, model="run")
    text = Path(res.report(tmp_path / "r.html", baseline="a", queries=[3], n_resamples=200)).read_text(
        encoding="utf-8")
    assert 'id="q1"' in text and "not among the queries of model" in text  # query 3: a note; the others shown
    assert "&#35;b" in text and ">b<" not in text  # a model called '#b' keeps its '#'
    res = tk.evaluate({"query": [1] * 4, "relevance": [1, 0, 1, 0], "item": list("wxyz"),
                       "a": [0.9, 0.5, 0.1, 0.4], "b": [0.9, 0.5, 0.6, 0.4]},
                      ["recall@3"], score=["a", "b"], item="item", score_threshold=0.3)
    assert res.side_by_side(1, k=3).attrs["relevant"] == {"a": 2, "b": 2}  # y is below the threshold, still in R
    assert res.summary.loc["a", "recall@3"] == 0.5


# ----------------------------------------------------------------------------------------------
# issue 21: what a new user met in the report, the notebook table and the figures


def test_correction_none_is_no_correction_everywhere(tmp_path):
    res = demo_results(80, metrics=("recall@10", "precision@10"))
    none = res.compare(baseline="old_ranker", correction="none", n_resamples=200)
    pd.testing.assert_frame_equal(none, res.compare(baseline="old_ranker", correction=None, n_resamples=200))
    assert none["p_adjusted"].tolist() == none["p_value"].tolist()
    # the footnote comes with a significant mark: precision@10's p is about 0.026 (sign flips), so
    # 2,000 resamples (a standard error of 0.0036) rather than 200 that leave it above 0.05 for some seeds
    assert "no correction" in res.to_latex(baseline="old_ranker", correction="none", n_resamples=2000)
    text = Path(res.report(tmp_path / "r.html", baseline="old_ranker", correction="none", n_resamples=200,
                           curves=False)).read_text(encoding="utf-8")
    assert "no correction over every row" in text and "none correction" not in text
    with pytest.raises(ParameterError, match="Did you mean 'none'"):
        res.compare(correction="none!")


def _two_runs():
    """Run a retrieves x, y, z; run b retrieves y, w (a shorter list); x and w are relevant."""
    run = {"query": ["q1"] * 5, "item": ["x", "y", "z", "y", "w"], "score": [3.0, 2.0, 1.0, 2.0, 1.0],
           "run": ["a", "a", "a", "b", "b"]}
    return tk.evaluate(run, ["recall@3"], item="item", qrels={"query": ["q1", "q1"], "item": ["x", "w"],
                                                              "relevance": [1, 1]}, model="run")


def test_side_by_side_html_says_not_retrieved_and_leaves_empty_positions_blank(tmp_path):
    res = _two_runs()
    text = Path(res.report(tmp_path / "r.html", baseline="a", queries=["q1"], k=3, n_resamples=200,
                           curves=False)).read_text(encoding="utf-8")
    rows = _parse(text).tables["sbs"][2:]  # two header rows
    # columns: rank | a: item score relevance tied change other | b: item score relevance tied change other
    assert [[c[0] for c in r] for r in rows] == [  # y and z have no judgment: unjudged, not a judged 0
        ["1", "x", "3.0000", "1", "", "lost", "not retrieved", "y", "2.0000", "unjudged", "", "", "2"],
        ["2", "y", "2.0000", "unjudged", "", "", "1", "w", "1.0000", "1", "", "gained", "not retrieved"],
        ["3", "z", "1.0000", "unjudged", "", "", "not retrieved", "", "", "", "", "", ""],
    ]
    assert all(c[0] != "nan" for table in _parse(text).all_tables["sbs"] for r in table for c in r)


def test_side_by_side_frame_for_each_output():
    from topkeval.outputs.text import json_text, markdown, records, side_by_side_frame

    view = _two_runs().side_by_side("q1", k=3, baseline="a", model="b")
    text = side_by_side_frame(view, text=True)
    assert text["a other rank"].tolist() == ["not retrieved", "1", "not retrieved"]
    assert text["b item"].tolist() == ["y", "w", ""] and text["b score"].tolist() == ["2.0000", "1.0000", ""]
    assert "nan" not in markdown(text)
    data = side_by_side_frame(view, text=False)
    assert data["b other rank"].tolist() == [2, None, None]
    assert '"b other rank": null' in json_text(records(data)) and "NaN" not in json_text(records(data))


def _bars(ax):
    """The histogram's bars as (patch, x, width, height): each bin of the filled step outlines (a
    StepPatch per side) and the ties' rectangle; bars of height 0 left out."""
    from matplotlib.patches import Rectangle, StepPatch

    out = []
    for p in ax.patches:
        if isinstance(p, StepPatch):
            values, edges, baseline = p.get_data()
            assert baseline in (0, None) or np.all(np.asarray(baseline) == 0)  # drawn from 0: not stacked
            out += [(p, a, b - a, float(v)) for v, a, b in zip(values, edges[:-1], edges[1:]) if v > 0]
        elif isinstance(p, Rectangle) and p.get_width() > 0 and p.get_height() > 0:
            assert p.get_y() == 0  # not stacked
            out.append((p, p.get_x(), p.get_width(), p.get_height()))
    return out


def test_delta_histogram_hides_no_bar():
    """Every bar is drawn from 0 (none stacked on another) and anything drawn over a coloured bar is
    translucent: many ties at 0 leave the few small wins and losses beside 0 visible."""
    pytest.importorskip("matplotlib")
    from matplotlib.colors import to_hex

    from topkeval.outputs.plots import COLOURS, plot_deltas

    res = demo_results(60)
    delta = np.array([0.0] * 500 + [1e-9, 2e-9, 0.1] + [-1e-9, -0.2] + [0.5, -0.4])  # bins 0.025 wide
    data = pd.DataFrame({"query": np.arange(len(delta)), "delta": delta})
    fig = plot_deltas(res, "recall@10", "old_ranker", "new_ranker", data=data)
    ax = fig.axes[0]
    colour = {to_hex(COLOURS[3]): "worse", to_hex(COLOURS[2]): "better", to_hex(COLOURS[7]): "equal"}
    bars = [(colour[to_hex(p.get_facecolor()[:3])], p, x, w, h) for p, x, w, h in _bars(ax)]
    height = {name: sum(h for n, _, _, _, h in bars if n == name) for name in ("worse", "better", "equal")}
    assert height == {"worse": 3, "better": 4, "equal": 500}
    order = {id(p): i for i, p in enumerate(ax.get_children())}
    for name, p, x0, w, _h in bars:
        if name == "equal":
            continue
        for other_name, q, qx, qw, _qh in bars:
            above = (q.get_zorder(), order[id(q)]) > (p.get_zorder(), order[id(p)])
            shared = min(x0 + w, qx + qw) - max(x0, qx)  # bars side by side share 0
            if q is not p and above and shared > 1e-9 * w:
                assert q.get_alpha() is not None and q.get_alpha() < 1, (name, other_name)
            if q is not p and name != other_name and other_name != "equal":
                assert shared <= 1e-9 * w, (name, other_name)  # a bin holds losses only or wins only
    # the small wins (1e-9, 2e-9) are in a green bar that starts at 0 and has height 2
    beside = [h for n, _, x, w, h in bars if n == "better" and abs(x) < 1e-9 * w]
    assert beside == [2]


def _bold_models(page_html, models, metrics):
    rows = re.findall(r"<tr><td class=\"id\">(.*?)</td>(.*?)</tr>", page_html)
    out = {m: set() for m in metrics}
    for model, cells in rows:
        for metric, cell in zip(metrics, re.findall(r"<td[^>]*>(.*?)</td>", cells)):
            if cell.startswith("<b>"):
                out[metric].add(model)
    return out


def test_notebook_table_bolds_the_best_model_of_each_metric():
    log = {"query": [1, 1, 1, 2, 2, 2], "relevance": [1, 0, 0, 0, 1, 0],
           "a": [0.9, 0.5, 0.1, 0.9, 0.5, 0.1],   # p@1: 1/2, fp@1: 1/2
           "b": [0.1, 0.5, 0.9, 0.1, 0.9, 0.5],   # p@1: 1/2, fp@1: 1/2
           "c": [0.5, 0.9, 0.1, 0.5, 0.1, 0.9]}   # p@1: 0,   fp@1: 1
    res = tk.evaluate(log, ["precision@1", "fp@1"], score=["a", "b", "c"])
    assert _bold_models(res._repr_html_(), res.models, res.metrics) == {
        "precision@1": {"a", "b"},  # a tie: both
        "fp@1": {"a", "b"},         # lower is better
    }
    # a value that differs from the best in its 16th digit (another order of additions) is a tie too;
    # NaN is never best
    res = tk.Results.from_per_query(pd.DataFrame({"model": ["a", "b", "c"], "query": [1, 1, 1],
                                                  "precision@1": [0.5, 0.5, 0.5 * (1 - 1e-15)],
                                                  "fp@1": [0.5, np.nan, 1.0]}))
    assert _bold_models(res._repr_html_(), res.models, res.metrics) == {"precision@1": {"a", "b", "c"},
                                                                        "fp@1": {"a"}}
    res = tk.Results.from_per_query(pd.DataFrame({"model": ["a", "b", "c"], "query": [1, 1, 1],
                                                  "precision@1": [0.5, 0.5, 0.4999], "fp@1": [0.5, np.nan, 1.0]}))
    assert _bold_models(res._repr_html_(), res.models, res.metrics)["precision@1"] == {"a", "b"}


def _click_sized(seed=0):
    """A click log: one click in a few hundred candidates (means of order 1e-4), and scores with
    many digits (y tick labels of 0.00012)."""
    rng = np.random.default_rng(seed)
    n = 6000
    clicks = np.zeros(n, int)
    clicks[[5, 1234, 4321]] = 1  # three clicks: precision@10 of 3 / 6000 = 5e-4 under both models
    log = pd.DataFrame({"query": np.repeat(np.arange(600), 10), "item": np.tile(np.arange(10), 600),
                        "relevance": clicks, "a": rng.random(n), "b": rng.random(n)})
    return tk.evaluate(log, ["precision@10", "recall@100", "dcg@10"], score=["a", "b"], item="item",
                       empty_queries="keep")


def test_report_shows_click_rate_sized_means_with_their_digits_and_a_readable_top_k(tmp_path):
    """Means of 1e-4 were printed 0.0000 (as if none); the side-by-side view showed the largest
    cutoff (100 rows per query for recall@100): the smallest cutoff is shown, at most 20."""
    res = _click_sized()
    page = res.report(tmp_path / "r.html", n_resamples=200, curves=False, queries=[0])
    html = Path(page).read_text(encoding="utf-8")
    summary = html[html.index('<section id="summary">'):]
    summary = summary[:summary.index("</section>")]
    for model in res.models:
        mean = res.summary.loc[model, "precision@10"]
        assert 0 < mean < 1e-3
        assert f">{mean:.3e}<" in summary or f"<b>{mean:.3e}</b>" in summary, mean
    import re

    cells = re.findall(r'data-value="([^"]+)">(?:<b>)?([^<]*)<', summary)
    spans = re.findall(r'data-low="([^"]+)" data-high="([^"]+)">\[([^,]*), ([^\]]*)\]', summary)
    assert len(cells) == 6 and len(spans) == 6
    shown = [(v, t) for v, t in cells] + [(lo, a) for lo, hi, a, b in spans] + [(hi, b) for lo, hi, a, b in spans]
    for value, text in shown:  # a number that is not 0 is never written as 0.0000
        assert float(value) == 0 or float(text) != 0, (value, text)
        assert float(text) == pytest.approx(float(value), rel=1e-3, abs=5e-5), (value, text)
    top = html[html.index('<section id="queries">'):]
    assert "Top 10, side by side" in top
    rows = top[:top.index("</table>")].count("<tr>")
    assert rows == 2 + 10  # two header rows, ten positions


def test_report_figures_keep_their_labels_inside():
    """Wide y tick labels (1.5e-04 and 0.00012, a DCG of thousands) pushed the axis label out of the
    figure, which fixed margins cut off: every text of every figure lies inside it."""
    pytest.importorskip("matplotlib")
    from topkeval.outputs import plots

    res = _click_sized()
    curves = res.curves(ks=[1, 2, 5, 10])
    for metric in ("precision", "dcg"):
        for scale in (1.0, 1e6):
            part = curves[curves["metric"] == metric]
            data = part.assign(value=part["value"] * scale)
            ax = plots.fixed_axes()
            fig = plots.plot_curve(res, metric, ax=ax, data=data)
            plots.fit(fig)
            box = ax.get_tightbbox(fig.canvas.get_renderer())
            assert box.x0 >= 0 and box.y0 >= 0 and box.x1 <= fig.bbox.width and box.y1 <= fig.bbox.height, box
            plots._pyplot().close(fig)


@pytest.mark.parametrize("n", [200, 3000])
def test_delta_histogram_keeps_a_long_title_inside_and_its_legend_off_the_bars(n):
    """Two long model names and DCG differences of 1e5: the title was cut at both ends and the
    legend drawn over the tallest bars. The title wraps inside the figure; the legend sits in the
    room left above the bars (linear and logarithmic counts)."""
    pytest.importorskip("matplotlib")
    from topkeval.outputs import plots

    rng = np.random.default_rng(1)
    a, b = "a_model_with_a_really_long_name_v2", "baseline_production_ranker_2024"
    res = tk.Results.from_per_query(pd.DataFrame({"model": np.repeat([b, a], n), "query": np.tile(np.arange(n), 2),
                                                  "dcg@10": np.r_[rng.random(n) * 1e5, rng.random(n) * 1e5 + 2e4]}))
    ax = plots.fixed_axes()
    fig = plots.plot_deltas(res, "dcg@10", a, b, ax=ax)
    plots.fit(fig)
    renderer = fig.canvas.get_renderer()
    title = ax.title.get_window_extent(renderer)
    assert title.x0 >= 0 and title.x1 <= fig.bbox.width and title.y1 <= fig.bbox.height, title
    assert ax.get_title().replace("\n", " ") == f"dcg@10: {b} - {a} per query"
    legend = ax.get_legend().get_window_extent(renderer)
    tops = [ax.transData.transform((x + w / 2, h))[1] for _, x, w, h in _bars(ax) if h > 0]
    assert tops and legend.y0 > max(tops), (legend.y0, max(tops))  # every bar's top below the legend
    plots._pyplot().close(fig)


def test_unjudged_candidates_are_told_from_judged_non_relevant_ones(tmp_path):
    """With judgments apart, an item the judgments do not list looked like one judged not relevant
    (both 0): side_by_side says which are judged, the report and the command line mark them."""
    from topkeval.cli import main

    run = pd.DataFrame({"query": [1, 1, 1, 1], "item": ["a", "b", "c", "d"], "s": [0.9, 0.8, 0.7, 0.6],
                        "t": [0.1, 0.8, 0.7, 0.9]})
    qrels = pd.DataFrame({"query": [1, 1, 1], "item": ["a", "b", "x"], "relevance": [1, 0, 1]})
    res = tk.evaluate(run, ["recall@4"], score=["s", "t"], item="item", qrels=qrels)
    view = res.side_by_side(1, k=4)
    assert view[("s", "item")].tolist() == ["a", "b", "c", "d"]
    assert view[("s", "judged")].tolist() == [True, True, False, False]
    assert view[("s", "relevance")].tolist() == [1.0, 0.0, 0.0, 0.0]  # the grade counted: not relevant
    page = Path(res.report(tmp_path / "r.html", n_resamples=200, curves=False, queries=[1])).read_text("utf-8")
    section = page[page.index('<section id="queries">'):]
    assert section.count('class="num unjudged"') == 4  # c and d under both models
    assert ">unjudged<" in section and 'data-value="0.0">0<' in section  # b: judged, grade 0
    from topkeval.outputs.text import side_by_side_frame

    shown = side_by_side_frame(view, text=True)
    assert shown["s relevance"].tolist() == ["1", "0", "unjudged", "unjudged"] and "s judged" not in shown
    assert side_by_side_frame(view, text=False)["s judged"].tolist() == [True, True, False, False]
    # a table of candidates (every row judged by its own relevance): no judged column
    assert ("s", "judged") not in tk.evaluate(run.assign(relevance=[1, 0, 0, 0]), ["recall@4"], score=["s", "t"],
                                              item="item").side_by_side(1, k=4).columns
    run.to_csv(tmp_path / "run.csv", index=False)
    qrels.to_csv(tmp_path / "qrels.csv", index=False)
    assert main(["diff", str(tmp_path / "run.csv"), "--qrels", str(tmp_path / "qrels.csv"), "--item", "item",
                 "--baseline", "s", "--score", "t", "--show", "1", "--format", "markdown"]) == 0


@pytest.mark.slow
def test_click_sized_report_in_chromium_keeps_its_figures_inside(tmp_path):
    """The report of click-sized means, opened in headless Chromium: no error; every svg's drawing,
    text included, lies inside its own box (no label cut off)."""
    _chromium()
    from playwright.sync_api import sync_playwright

    path = _click_sized().report(tmp_path / "clicks.html", n_resamples=200)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"file://{os.path.abspath(path)}", wait_until="load")
            outside = page.evaluate("""() => [...document.querySelectorAll('figure svg')].map(svg => {
                const box = svg.getBoundingClientRect();
                return [...svg.querySelectorAll('text')].filter(t => {
                    const b = t.getBoundingClientRect();
                    return b.width > 0 && (b.left < box.left - 1 || b.right > box.right + 1 ||
                                           b.top < box.top - 1 || b.bottom > box.bottom + 1);
                }).map(t => t.textContent);
            })""")
            page.screenshot(path=str(tmp_path / "clicks.png"), full_page=True)
        finally:
            browser.close()
    assert not errors, errors
    assert len(outside) >= 6 and not any(outside), outside


def test_curves_are_titled_as_the_tables_spell_their_metrics(tmp_path):
    """map@10 and mrr@10 (aliases of ap and rr) give curves titled map@k and mrr@k, as the tables say."""
    rng = np.random.default_rng(0)
    log = pd.DataFrame({"query": np.repeat(np.arange(30), 10), "item": np.tile(np.arange(10), 30),
                        "relevance": rng.integers(0, 2, 300), "a": rng.random(300), "b": rng.random(300)}).iloc[:-1]
    res = tk.evaluate(log, ["map@10", "mrr@10", "recall@5"], score=["a", "b"], item="item")
    text = Path(res.report(tmp_path / "r.html")).read_text()
    captions = re.findall(r"<figcaption>([^<]*)@k for k", text)
    assert captions == ["map", "mrr", "recall"]
