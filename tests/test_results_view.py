"""Results are a read-only view of what an evaluation computed: nothing a caller does to what they
return changes another number, and Results built from per-query values computed elsewhere
(Results.from_per_query) refuse what the tables and reports could not show truthfully."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import topkeval as tk
from topkeval import backends, engine
from topkeval.errors import DataError, ParameterError

LOG = pd.DataFrame({"query": [1, 1, 1, 2, 2, 3, 3, 3], "item": list("xyzxyxyz"), "relevance": [1, 0, 1, 0, 1, 1, 0, 0],
                    "a": [0.9, 0.5, 0.1, 0.3, 0.2, 0.8, 0.4, 0.1], "b": [0.1, 0.5, 0.9, 0.2, 0.3, 0.1, 0.4, 0.8]})


def _res(**options):
    return tk.evaluate(LOG, ["recall@2", "ndcg@2"], score=["a", "b"], item="item", **options)


def test_changing_what_results_return_changes_nothing_else():
    res = _res()
    before = (res.summary.copy(), res.per_query.copy(), res.compare("a", n_resamples=200).copy(), dict(res.info))
    summary, per_query, info = res.summary, res.per_query, res.info
    summary.loc["a", "recall@2"] = 99
    per_query.loc[0, "recall@2"] = 42
    del per_query["ndcg@2"]
    info["evaluated"] = -5
    info["models"].append("zzz")
    info["metric_names"]["recall@2"] = "ndcg@5"
    pd.testing.assert_frame_equal(res.summary, before[0])
    pd.testing.assert_frame_equal(res.per_query, before[1])
    pd.testing.assert_frame_equal(res.compare("a", n_resamples=200), before[2])
    assert res.info == before[3] and res.label("recall@2") == "recall@2"
    with pytest.raises(ParameterError, match="not evaluated"):
        res.label("ndcg@5")
    assert "3 of 3 queries" in repr(res)


def test_results_are_built_by_the_front_doors_only():
    res = _res()
    with pytest.raises(ParameterError, match="from_per_query"):
        tk.Results(res.summary)
    with pytest.raises(AttributeError):
        res.summary = res.summary  # a property without a setter


def test_attributes_attached_to_an_evaluation_leave_it_as_it_was():
    res = tk.Results.from_per_query(pd.DataFrame({"model": ["a"] * 3, "query": [1, 2, 3], "recall@10": [0.5, 1, 0]}))
    attrs = pd.DataFrame({"seg": ["x", "y", "x"]}, index=pd.Index([1, 2, 3], name="query"))
    segmented = tk.Results(engine.attach(res.evaluation, attrs, ["seg"], None))
    again = tk.Results(engine.attach(res.evaluation, attrs, ["seg"], None))
    assert list(res.per_query.columns) == ["model", "query", "recall@10"]
    assert list(segmented.per_query.columns) == list(again.per_query.columns) == ["model", "query", "seg", "recall@10"]
    assert segmented.segments.loc[("x", "a"), "recall@10"] == 0.25  # (0.5 + 0) / 2


def _frame(**changes):
    frame = pd.DataFrame({"model": ["a"] * 3 + ["b"] * 3, "query": [1, 2, 3] * 2,
                          "recall@10": [0.5, 1.0, 0.0, 1.0, 1.0, 0.5]})
    return frame.assign(**changes)


@pytest.mark.parametrize("frame,error,match", [
    (_frame().rename(columns={"recall@10": "myscore"}), ParameterError, "not named as a metric"),
    (_frame().rename(columns={"recall@10": "recall @10"}), ParameterError, "not named as a metric"),
    (_frame().rename(columns={"recall@10": "metric"}), ParameterError, "not named as a metric"),
    (_frame(**{"R@10": 0.5}), ParameterError, "name the same metric"),
    (_frame(model=[1, 1, 1, 2, 2, 2]), ParameterError, "model names are text"),
    (_frame(model=["a", "a", "a", None, None, None]), DataError, "missing model name"),
    (_frame(query=[1, 2, np.nan, 1, 2, 3]), DataError, "missing query id"),
    (_frame(query=[1, 2, 3, "1", "2", "3"]), DataError, "mixes text and numbers"),
    (_frame(**{"recall@10": [np.inf, 1, 0, 1, 1, 0.5]}), DataError, "infinite"),
    (_frame(**{"recall@10": np.array([1, 1, 0, 1, 1, 0], dtype=complex)}), ParameterError, "real numbers"),
    (_frame(**{"recall@10": [True, False, True, True, True, False]}), ParameterError, "real numbers"),
    (_frame().iloc[:0], DataError, "no rows"),
    (_frame().set_index(["model", "query"]), ParameterError, "reset_index"),
    (pd.concat([_frame(), _frame().iloc[:1]]), ParameterError, "twice"),
])
def test_per_query_values_from_elsewhere_that_no_table_could_show_are_refused(frame, error, match):
    with pytest.raises(error, match=match):
        tk.Results.from_per_query(frame)


def test_per_query_values_from_elsewhere_give_the_means_and_the_comparison():
    frame = _frame(**{"recall@10": [0.5, 1.0, np.nan, 1.0, 1.0, 0.5]})
    res = tk.Results.from_per_query(frame)
    assert res.summary.loc["a", "recall@10"] == 0.75 and res.summary.loc["b", "recall@10"] == pytest.approx(2.5 / 3)
    row = res.compare("a", n_resamples=200).iloc[0]
    assert (row["n_queries"], row["wins"], row["losses"]) == (2, 1, 0)  # query 3 (NaN) left out: 1 rose, 2 tied
    assert res.to_latex().count("textbf") == 1 and "recall@10" in res.to_markdown()


def test_the_dispatcher_sends_each_kind_of_data_to_its_backend():
    assert backends.select(LOG) == "cpu" and backends.select(LOG.to_dict("list")) == "cpu"
    assert backends.select(np.zeros((2, 3))) == "matrix"
    assert backends.select({"query": np.array([[1], [1]])}) == "cpu"  # a table of columns, never a matrix
    assert [b.name for b in backends.backends()] == ["spark", "matrix", "cpu"]
    with pytest.raises(ParameterError, match="evaluate_matrix"):
        tk.evaluate(np.zeros((2, 3)))
    with pytest.raises(tk.TopkevalError) as caught:
        tk.evaluate({"query": np.array([[1], [1]]), "relevance": np.array([[1], [0]]), "score": np.array([[1.0], [0.5]])})
    assert "evaluate_matrix" not in str(caught.value)


def test_the_top_n_warning_is_the_same_streamed_or_in_memory(tmp_path):
    """Every query with exactly 2 candidates and a metric that needs every relevant item (from the
    registry): the same warning whether the file is read whole or streamed in chunks."""
    log = pd.DataFrame({"query": [1, 1, 2, 2, 3, 3], "relevance": [1, 0, 0, 1, 1, 1], "s": [0.9, 0.1, 0.2, 0.8, 0.6, 0.4]})
    path = tmp_path / "log.parquet"
    log.to_parquet(path)
    for metric in ("recall@1", "bpref", "auc", "num_rel"):
        for options in ({}, {"chunk_rows": 2}):
            with pytest.warns(tk.TopkevalWarning, match="exactly 2 candidates"):
                tk.evaluate(path, [metric], score="s", **options)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tk.evaluate(path, ["precision@1", "rr", "hit_rate@1"], score="s", chunk_rows=2)  # never looks past the list


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "json", "trec"])
def test_results_and_the_command_line_write_each_format_alike(tmp_path, capsys, fmt):
    """One registry of output formats (outputs/formats.py): Results.to_string and `topkeval evaluate
    --format` give the same text, per query too."""
    from topkeval.cli import main

    path = tmp_path / "log.parquet"
    LOG.to_parquet(path)
    res = _res()
    for per_query in (False, True):
        assert main(["evaluate", str(path), "--score", "a", "--score", "b", "--item", "item", "-m", "recall@2,ndcg@2",
                     "--format", fmt, *(["--per-query"] if per_query else [])]) == 0
        assert capsys.readouterr().out == res.to_string(fmt, per_query=per_query)


def test_a_registered_format_reaches_the_command_line_and_results(tmp_path, capsys, monkeypatch):
    from topkeval.cli import main
    from topkeval.outputs import formats

    monkeypatch.setitem(formats.FORMATS, "tsv", formats.OutputFormat(
        "tsv", "tab-separated", lambda doc, width, terminal: doc.blocks[0].frame.to_csv(sep="\t")))
    path = tmp_path / "log.parquet"
    LOG.to_parquet(path)
    assert main(["compare", str(path), "--baseline", "a", "--score", "b", "--item", "item", "-m", "recall@2",
                 "--resamples", "200", "--format", "tsv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split("\t")[1:4] == ["model", "metric", "verdict"] and lines[1].split("\t")[1] == "b"
    assert _res().to_string("tsv").splitlines()[0].split("\t") == ["model", "recall@2", "ndcg@2"]


def _tsv(doc, width, terminal):
    return doc.blocks[0].frame.to_csv(sep="\t")


def test_register_format_refuses_a_built_in_name_a_bad_name_and_a_second_registration(monkeypatch):
    """As define_metric: the built-in formats stay, a name is one --format can take, and a name
    registered before is replaced only with replace=True."""
    from topkeval.outputs import formats

    monkeypatch.setattr(formats, "FORMATS", dict(formats.FORMATS))
    table = formats.FORMATS["table"]
    with pytest.raises(ParameterError, match="'table' is a built-in output format"):
        formats.register_format("table", _tsv, "tab-separated")
    with pytest.raises(ParameterError, match="'table' is a built-in output format"):
        formats.register_format("table", _tsv, "tab-separated", replace=True)
    assert formats.FORMATS["table"] is table
    for bad in ("my tsv", "TSV", "", "1tsv", "t" * 40):
        with pytest.raises(ParameterError, match="'name' parameter of register_format"):
            formats.register_format(bad, _tsv, "tab-separated")
    with pytest.raises(ParameterError, match="'render' parameter of register_format"):
        formats.register_format("tsv", "not a function", "tab-separated")
    assert "tsv" not in formats.FORMATS
    formats.register_format("tsv", _tsv, "tab-separated")
    with pytest.raises(ParameterError, match="'tsv' is registered already; pass replace=True"):
        formats.register_format("tsv", str, "again")
    assert formats.FORMATS["tsv"].render is _tsv
    formats.register_format("tsv", str, "again", replace=True)
    assert formats.FORMATS["tsv"].description == "again" and formats.names()[-1] == "tsv"


@pytest.mark.parametrize("render,match", [
    (lambda doc, width, terminal: None, "must return the text \\(a str\\); it returned NoneType"),
    (lambda doc, width, terminal: doc.blocks[0].frame.to_csv(sep="\t").encode(), "must return .*it returned bytes"),
    (lambda doc, width, terminal: doc.blocks[7], "raised IndexError: list index out of range"),
])
def test_a_broken_format_is_named_on_the_command_line_and_in_results(tmp_path, capsys, monkeypatch, render, match):
    from topkeval.cli import main
    from topkeval.outputs import formats

    monkeypatch.setattr(formats, "FORMATS", dict(formats.FORMATS))
    formats.register_format("broken", render, "a format that fails")
    with pytest.raises(ParameterError, match="render function of output format 'broken' " + match):
        _res().to_string("broken")
    path = tmp_path / "log.parquet"
    LOG.to_parquet(path)
    assert main(["evaluate", str(path), "--score", "a", "--item", "item", "-m", "recall@2", "--format", "broken"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1
    assert err.startswith("topkeval: error: The render function of output format 'broken' ") and match.split()[-1] in err


def test_to_markdown_is_to_string_markdown_segments_included():
    res = tk.evaluate(LOG.assign(device=["m", "m", "m", "d", "d", "m", "m", "m"]), ["recall@2"], score=["a", "b"],
                      by="device")
    md = res.to_markdown(digits=3)
    assert md == res.to_string("markdown", digits=3).rstrip("\n")
    assert md.startswith("| device | model | recall@2 | queries |") and "| (all) | b |" in md
    assert _res().to_markdown() == _res().to_string("markdown").rstrip("\n")


def test_whole_weights_are_shown_without_decimals():
    log = LOG.assign(device=["m", "m", "m", "d", "d", "m", "m", "m"], visits=[4000] * 3 + [792] * 2 + [0.5] * 3)
    res = tk.evaluate(log.assign(visits=log["visits"].round()), ["recall@2"], score=["a"], by="device",
                      weight="visits")  # weights 4000, 792 and 0 (rounded from 0.5): whole numbers
    md = res.to_string("markdown")
    assert "| (all) | a | 0.5826 | 2 | 4792 |" in md and "4792.0000" not in md
    assert "4792.0000" not in res.to_string() and " 4792 " in res.to_string()
    rows = res.to_string("markdown", per_query=True)
    assert "| a | 2 | d | 792 |" in rows and "792.0000" not in rows
    assert "4792.0" in res.to_string("csv")  # files keep the numbers as they are
    fractional = tk.evaluate(log, ["recall@2"], score=["a"], by="device", weight="visits")
    assert "| 4792.5000 |" in fractional.to_string("markdown")
    rows = fractional.to_string("markdown", per_query=True)  # one column, one way: all with decimals
    assert "| 792.0000 |" in rows and "| 0.5000 |" in rows


def test_a_table_wider_than_the_terminal_keeps_its_numbers_and_words_whole():
    """compare's 13 columns in an 80-column terminal: rich folded every cell to a few characters, so that
    0.0663 read as '0.0' above '663'. Numbers and words stay whole; the table is then wider than the terminal."""
    from topkeval.outputs.formats import Block, Document, render

    frame = pd.DataFrame({"model": ["twotower", "mf"], "metric": ["recall@20", "ndcg@20"],
                          "verdict": ["no detectable difference", "better"],
                          **{f"column_{j}": [0.066332 + j, -0.000123] for j in range(10)}})
    out = render("table", Document([Block(frame)]), width=80)
    lines = out.splitlines()
    for cell in ["0.0663", "-1.230e-04", "9.0663", "twotower", "recall@20", "detectable", "column_9"]:
        assert any(cell in line for line in lines), cell
    assert max(len(line) for line in lines) > 80
    assert len(render("table", Document([Block(frame)]), width=400).splitlines()) == 6  # wide enough: one line per row


def test_a_cutoff_beyond_every_list_is_noted_on_every_path(tmp_path):
    """precision@50 over lists of at most 9 candidates divides 9 ranks' hits by 50 (short_lists='pad'):
    the notes say which cutoffs exceed the longest list, from memory, a streamed file and judgments
    apart alike; a cutoff within some list, or lists not counted (per-query values from elsewhere),
    give no such note."""
    from topkeval.outputs.text import info_lines

    rng = np.random.default_rng(0)
    sizes = [5, 7, 9] * 10
    rows = sum(sizes)
    log = pd.DataFrame({"query": np.repeat(np.arange(30), sizes), "item": np.arange(rows),
                        "relevance": (rng.random(rows) < 0.3).astype(int), "s": rng.random(rows)})
    path = tmp_path / "log.parquet"
    log.to_parquet(path)
    qrels = log[log["relevance"] > 0][["query", "item", "relevance"]]
    for res in (tk.evaluate(log, ["P@50", "recall@5", "ndcg@10"], score="s"),
                tk.evaluate(path, ["P@50", "recall@5", "ndcg@10"], score="s", chunk_rows=50),
                tk.evaluate(log.drop(columns="relevance"), ["P@50", "recall@5", "ndcg@10"], score="s", item="item",
                            qrels=qrels)):
        assert res.info["longest_list"] == {"s": 9}
        note = [line for line in info_lines(res.info) if line.startswith("cutoffs beyond")]
        assert note == ["cutoffs beyond the longest list (9 candidates), so that these look at whole lists: P@50, "
                        "ndcg@10; the ranks past a list's end count as not relevant (short_lists='pad': precision@k "
                        "still divides by k; 'shrink' divides by the list's length)"]
        assert res.summary.loc["s", "P@50"] == pytest.approx(
            (log.groupby("query")["relevance"].sum()[lambda r: r > 0] / 50).mean())
    shrink = tk.evaluate(log, ["P@50"], score="s", short_lists="shrink")
    assert [line for line in info_lines(shrink.info) if line.startswith("cutoffs beyond")] == [
        "cutoffs beyond the longest list (9 candidates), so that these look at whole lists: P@50"]
    within = tk.evaluate(log, ["P@9", "recall@5"], score="s")
    assert not any(line.startswith("cutoffs beyond") for line in info_lines(within.info))
    elsewhere = tk.Results.from_per_query(within.per_query)
    assert elsewhere.info["longest_list"] == {"s": None}
    assert not any(line.startswith("cutoffs beyond") for line in info_lines(elsewhere.info))


def test_the_cutoff_note_for_empty_lists_and_for_measures_without_relevance():
    """Found by the hostile review: a score_threshold above every score empties every list (now noted,
    in the notes and in repr), and novelty@10 beyond lists of 5 looks at whole lists without the
    clause on relevance padding (it reads none: pad and shrink give it the same value)."""
    from topkeval.outputs.text import info_lines

    log = pd.DataFrame({"query": np.repeat([1, 2], 5), "item": np.tile(np.arange(5), 2),
                        "relevance": [1, 0, 0, 1, 0, 0, 1, 0, 0, 0], "a": np.linspace(0.1, 0.5, 10)})
    empty = tk.evaluate(log, ["P@3", "hit_rate@3"], score="a", score_threshold=0.99)
    assert empty.info["longest_list"] == {"a": 0} and empty.summary.iloc[0].tolist() == [0.0, 0.0]
    note = ("every list is empty (no candidate retrieved: a score_threshold above every score?), so that every "
            "metric finds nothing")
    assert note in info_lines(empty.info) and "note: " + note in repr(empty)
    novel = tk.evaluate(log, ["P@3"], score="a", item="item").with_beyond(
        ["novelty@10"], popularity=pd.Series([0.5, 0.4, 0.3, 0.2, 0.1], index=np.arange(5)))
    assert [line for line in info_lines(novel.info) if line.startswith("cutoffs beyond")] == [
        "cutoffs beyond the longest list (5 candidates), so that these look at whole lists: novelty@10"]
    within = tk.evaluate(log, ["P@3"], score="a")
    assert "note:" not in repr(within) and "(0 skipped as empty)" in repr(within)


def test_lists_shorter_than_k_are_counted_for_the_metrics_they_lower(tmp_path):
    """Lists of 5 to 30 candidates at P@20 (short_lists='pad' divides their hits by 20 all the same):
    the notes count the evaluated queries shorter than each k of a metric that divides by k
    (precision, F1), not of one that does not (recall); streamed files count the same; shrink, which
    divides by the list's length, needs no note."""
    from topkeval.outputs.text import info_lines

    rng = np.random.default_rng(0)
    sizes = rng.integers(5, 31, 400)
    rows = int(sizes.sum())
    log = pd.DataFrame({"query": np.repeat(np.arange(400), sizes), "relevance": (rng.random(rows) < 0.2).astype(int),
                        "a": rng.random(rows)})
    kept = log.groupby("query")["relevance"].sum() > 0
    n = log.groupby("query").size()[kept]
    path = tmp_path / "log.parquet"
    log.to_parquet(path)
    for res in (tk.evaluate(log, ["P@20", "recall@20", "f1@10"], score="a"),
                tk.evaluate(path, ["P@20", "recall@20", "f1@10"], score="a", chunk_rows=1000)):
        assert res.info["shorter_than_k"] == {"a": {"P@20": int((n < 20).sum()), "f1@10": int((n < 10).sum())}}
        assert (f"lists shorter than a cutoff, whose missing ranks count as not relevant (short_lists='pad'; 'shrink' "
                f"divides by the list's length): P@20: {(n < 20).sum():,}; f1@10: {(n < 10).sum():,} of "
                f"{int(kept.sum()):,} queries") in info_lines(res.info)
    shrink = tk.evaluate(log, ["P@20"], score="a", short_lists="shrink")
    assert not any(line.startswith("lists shorter") for line in info_lines(shrink.info))
