"""trec_eval conformance (its own test files, when ../shared is present), TREC file reading and
writing, judgments apart from runs, and the trec output format."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

import topkeval as tk
from topkeval.inputs import read_qrels, read_run, write_run
from topkeval.metrics.names import is_geometric, is_summed, trec_name

COMMON = ["P_{k}", "recall_{k}", "Rprec", "recip_rank", "map", "map_cut_{k}", "ndcg", "ndcg_cut_{k}",
          "success_{k}", "num_ret", "num_rel", "num_rel_ret"]
CASES = [  # expected output, qrels, run, evaluate() options (the flags of trec_eval's Makefile)
    ("out.test", "qrels.test", "results.test", {}),
    ("out.test.a", "qrels.test", "results.test", {}),
    ("out.test.aq", "qrels.test", "results.test", {}),
    ("out.test.aqc", "qrels.test", "results.trunc", {"missing_queries": "zero"}),
    ("out.test.aqcM", "qrels.test", "results.trunc", {"missing_queries": "zero", "depth": 100}),
    ("out.test.aql", "qrels.rel_level", "results.test", {"threshold": 2}),
    ("out.test.meas_params", "qrels.test", "results.test", {}),
]


def _numbers_as_values(name: str) -> str:
    """A trec_eval name with each number written as its value (``11pt_avg_.25,.5`` and
    ``11pt_avg_0.25,0.5`` are the same name: trec_eval prints parameters as they were typed)."""
    return re.sub(r"[0-9]*\.?[0-9]+", lambda m: repr(float(m.group())), name)


#: trec_eval's output lines that hold no number of a metric: the run's name and relevance strings
NOT_NUMBERS = ("runid", "relstring")


def _ours(trec: str) -> str | None:
    """The metric of a trec_eval output name, when the registry knows it under that very name
    (trec_eval's plain rbp is rbp_trec: topkeval's rbp needs its p)."""
    try:
        metric = tk.parse_metric("rbp_trec" if trec == "rbp" else trec)
    except tk.UnknownMetricError:
        return None
    return str(metric) if _numbers_as_values(trec_name(metric)) == _numbers_as_values(trec) else None


@pytest.mark.parametrize("expected,qrels,run,options", CASES, ids=[c[0] for c in CASES])
def test_trec_eval_conformance(shared_dir, expected, qrels, run, options):
    base = shared_dir / "conformance" / "trec_eval"
    lines = [line.split() for line in (base / expected).read_text().splitlines() if line.strip()]
    wanted = {(m, q): v for m, q, v in lines if _ours(m)}
    measures = sorted({m for m, _ in wanted})
    # every name trec_eval prints is read back, and printed back as trec_eval prints it
    assert not {m for m, _, _ in lines if not _ours(m) and not m.startswith(NOT_NUMBERS)}, expected
    assert len(measures) >= 5, measures
    for second_pass in ("bpref", "infAP", "11pt_avg", "set_map", "utility", "gm_map", "gm_bpref", "Rprec_mult_0.20",
                        "Rprec_mult_2.00", "binG", "G", "Rndcg", "ndcg_rel", "num_nonrel_judged_ret",
                        "utility_2,-1,0,0", "11pt_avg_.25,.5,.75", "Rprec_mult_5.00", "relative_P_10"):
        # printed by -m all_trec or with parameters: they must be compared
        assert second_pass in measures or all(m != second_pass for m, _, _ in lines), second_pass
    res = tk.evaluate(base / run, qrels=base / qrels, metrics=[_ours(m) for m in measures],
                      conventions="trec_eval", **options)
    pq = res.per_query.set_index("query")
    checked = 0
    for (measure, query), value in wanted.items():
        ours = _ours(measure)
        if query == "all":
            got = pq[ours].sum() if is_summed(ours) else res.summary.iloc[0][ours]
            got = math.exp(got) if is_geometric(ours) else got  # gm_map: the mean of the logs
        else:
            got = pq.loc[query, ours]
        text = str(int(round(got))) if is_summed(ours) else f"{got:.4f}"
        assert text == value, (expected, measure, query, got, value)
        checked += 1
    assert checked >= len(measures)


def test_judgments_apart_from_run():
    run = pd.DataFrame({"query": ["a", "a", "a", "b", "b", "c"], "item": ["x", "y", "z", "x", "w", "x"],
                        "score": [3.0, 2.0, 1.0, 1.0, 2.0, 1.0]})
    qrels = pd.DataFrame({"query": ["a", "a", "a", "b", "b", "d"], "item": ["y", "q", "z", "x", "v", "x"],
                          "relevance": [1, 2, 0, 1, 0, 1]})
    res = tk.evaluate(run, qrels=qrels, metrics=["recall@2", "P@2", "num_rel", "num_ret"], item="item")
    pq = res.per_query.set_index("query")
    # a: judged relevant y and q (q never retrieved): R = 2, top 2 = x (unjudged), y
    assert pq.loc["a", "recall@2"] == 0.5 and pq.loc["a", "num_rel"] == 2 and pq.loc["a", "P@2"] == 0.5
    assert pq.loc["b", "recall@2"] == 1.0
    assert list(pq.index) == ["a", "b"]  # c has no judgments; d is not in the run
    assert res.info["run_queries_without_judgments"] == {"score": 1}
    assert res.info["missing_from_run"] == {"score": 1}
    zero = tk.evaluate(run, qrels=qrels, metrics=["recall@2"], item="item", missing_queries="zero")
    assert zero.per_query.set_index("query").loc["d", "recall@2"] == 0.0
    assert zero.summary.iloc[0, 0] == pytest.approx((0.5 + 1 + 0) / 3)


def test_runs_as_a_model_column_and_several_runs():
    run = pd.DataFrame({"query": ["a"] * 4, "item": ["x", "y", "x", "y"], "score": [2.0, 1.0, 1.0, 2.0],
                        "run": ["r1", "r1", "r2", "r2"]})
    qrels = pd.DataFrame({"query": ["a", "a"], "item": ["x", "y"], "relevance": [1, 0]})
    res = tk.evaluate(run, qrels=qrels, metrics=["P@1", "rr"], item="item", model="run")
    assert res.summary["P@1"].to_dict() == {"r1": 1.0, "r2": 0.0}  # the column is labelled as asked
    assert res.summary["rr"].to_dict() == {"r1": 1.0, "r2": 0.5}
    table = res.compare(baseline="r1", n_resamples=200)
    assert set(table.model) == {"r2"}


def test_trec_files_round_trip(tmp_path):
    frame = pd.DataFrame({"query": ["1", "1", "2"], "item": ["d1", "d2", "d1"], "score": [0.5, 0.7, 0.1]})
    write_run(frame, tmp_path / "run.txt", run_name="mine")
    back = read_run(tmp_path / "run.txt")
    assert back["item"].tolist() == ["d2", "d1", "d1"] and set(back["run"]) == {"mine"}
    (tmp_path / "qrels.txt").write_text("# judged\n1 0 d1 1\n\n1 0 d2 0\n2 0 d1 2\n")
    q = read_qrels(tmp_path / "qrels.txt")
    assert q["relevance"].tolist() == [1, 0, 2]
    res = tk.evaluate(tmp_path / "run.txt", qrels=tmp_path / "qrels.txt", metrics=["P@1"])
    assert res.summary.loc["mine", "P@1"] == 0.5


def test_gzip(tmp_path):
    import gzip

    with gzip.open(tmp_path / "q.gz", "wt") as f:
        f.write("1 0 d1 1\n")
    assert read_qrels(tmp_path / "q.gz")["item"].tolist() == ["d1"]


@pytest.mark.parametrize("text,reader,pattern", [
    ("1 Q0 d1 1 0.5\n", read_run, "line 1: a run line needs 6 fields"),
    ("1 Q0 d1 1 0.5 r\n1 Q0 d2 2 high r\n", read_run, "line 2: the score 'high' is not a finite number"),
    ("1 Q0 d1 1 nan r\n", read_run, "not a finite number"),
    ("1 0 d1\n", read_qrels, "line 1: a qrels line needs 4 fields"),
    ("1 0 d1 yes\n", read_qrels, "the grade 'yes' is not an integer"),
    ("# only a comment\n", read_qrels, "no qrels lines"),
])
def test_malformed_lines(tmp_path, text, reader, pattern):
    path = tmp_path / "f.txt"
    path.write_text(text)
    with pytest.raises(tk.DataError, match=pattern):
        reader(path)


def test_duplicates_in_runs_and_judgments():
    run = pd.DataFrame({"query": ["a", "a"], "item": ["x", "x"], "score": [1.0, 2.0]})
    qrels = pd.DataFrame({"query": ["a"], "item": ["x"], "relevance": [1]})
    with pytest.raises(tk.DataError, match="twice"):
        tk.evaluate(run, qrels=qrels, item="item", metrics=["P@1"])
    with pytest.raises(tk.DataError, match="twice"):
        tk.evaluate(qrels.assign(score=1.0), qrels=pd.concat([qrels, qrels]), item="item", metrics=["P@1"])
    with pytest.raises(tk.ParameterError, match="item="):
        tk.evaluate(run, qrels=qrels, metrics=["P@1"])
    with pytest.raises(tk.ParameterError, match="deterministic"):
        tk.evaluate(run, qrels=qrels, item="item", metrics=["P@1"], depth=5)


def test_depth_equals_cutting_the_run():
    rng = np.random.default_rng(0)
    run = pd.DataFrame({"query": np.repeat(["a", "b"], 30), "item": np.tile(np.arange(30), 2),
                        "score": rng.integers(0, 5, 60).astype(float)})
    qrels = run[["query", "item"]].assign(relevance=rng.integers(0, 2, 60))
    full = tk.evaluate(run, qrels=qrels, item="item", metrics=["ap", "ndcg", "num_ret", "recall@50"],
                       ties="item_desc", depth=10)
    order = run.sort_values(["query", "score", "item"], ascending=[True, False, False])
    cut = order.groupby("query").head(10)
    manual = tk.evaluate(cut, qrels=qrels, item="item", metrics=["ap", "ndcg", "num_ret", "recall@50"],
                         ties="item_desc")
    pd.testing.assert_frame_equal(full.summary, manual.summary)


def test_trec_names():
    assert [trec_name(m) for m in ("P@5", "recall@20", "Rprec", "map", "ap@100", "ndcg", "success@10", "infap")] == [
        "P_5", "recall_20", "Rprec", "map", "map_cut_100", "ndcg", "success_10", "infAP"]


def test_run_file_without_judgments_is_a_clear_error(tmp_path):
    path = tmp_path / "run.txt"
    path.write_text("q1 Q0 d1 1 0.5 r\n")
    with pytest.raises(tk.ParameterError, match="needs judgments: pass qrels="):
        tk.evaluate(path, metrics=["P@1"])


def test_depth_on_a_wide_log_keeps_r_of_the_whole_list():
    """depth on one table with two score columns: each model keeps its own top N; recall still
    divides by every relevant candidate of the query (trec_eval -M)."""
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"query": np.repeat(["a", "b", "c"], 20), "item": np.tile(np.arange(20), 3),
                          "relevance": rng.integers(0, 2, 60), "s1": rng.random(60), "s2": rng.random(60)})
    res = tk.evaluate(frame, metrics=["recall@50", "num_ret", "ap"], score=["s1", "s2"], item="item",
                      ties="first", depth=5)
    for model in ("s1", "s2"):
        top = frame.sort_values(["query", model], ascending=[True, False]).groupby("query").head(5)
        R = frame.groupby("query")["relevance"].sum()
        want = (top.groupby("query")["relevance"].sum() / R).mean()
        assert res.summary.loc[model, "recall@50"] == pytest.approx(want)
        assert res.summary.loc[model, "num_ret"] == 5


def test_fast_and_line_readers_agree_on_irregular_lines(tmp_path):
    """Lines that Arrow's reader would split otherwise than on every blank (a tab inside a line of a
    space-separated file, two spaces in a row, a comment of six fields) are read by the line reader,
    as trec_eval reads them: split at every blank."""
    regular = "q1 Q0 d1 1 0.5 r\nq1 Q0 d2 2 0.25 r\n"
    for text in ("q1 Q0 d1 1 0.5 r\nq1 Q0 d2\t2 0.25 r\n",   # a tab between two fields
                 "q1 Q0 d1 1 0.5 r\nq1  Q0 d2 2 0.25 r\n",   # two spaces: an empty field for Arrow
                 "# a comment of six fields\nq1 Q0 d1 1 0.5 r\nq1 Q0 d2 2 0.25 r\n"):
        path = tmp_path / "run.txt"
        path.write_text(text)
        got = read_run(path)
        path.write_text(regular)
        want = read_run(path)
        pd.testing.assert_frame_equal(got, want)
    path.write_text("q1 Q0 d1\tx 1 0.5 r\n")  # a tab inside: seven fields, the rank is 'x', the score 1
    assert read_run(path)["item"].tolist() == ["d1"] and read_run(path)["score"].tolist() == [1.0]


def test_text_ids_of_runs_and_judgments_coded_together():
    """Arrow text ids of the judgments and of a run get codes in one label space in one hashing (ids
    that come in runs, hashed once per run): the same codes and labels as matching the two sides'
    distinct ids, ordered or in order of appearance."""
    import pyarrow as pa

    from topkeval.inputs.ids import arrow_codes_together
    from topkeval.inputs.judgments import codes_together

    rng = np.random.default_rng(3)
    for judged_ids, run_ids in (
        (rng.integers(0, 50, 300), np.repeat(rng.integers(0, 80, 40), rng.integers(1, 30, 40))),  # runs of ids
        (rng.integers(0, 500, 300), rng.integers(0, 800, 5000)),  # no runs
        (np.array([7]), np.array([7] * 100)),
    ):
        judged = pa.chunked_array([pa.array([f"0{v}" for v in judged_ids[:100]], pa.string()),
                                   pa.array([f"0{v}" for v in judged_ids[100:]], pa.string())])
        run = pa.array([f"0{v}" for v in run_ids])
        for ordered in (False, True):
            jc, rc, labels = codes_together(judged, run, "query", "query", ordered)
            # by Python objects: the path taken by ids that are not both Arrow text
            ojc, orc, olabels = codes_together(np.array(judged.to_pylist(), dtype=object),
                                               np.array(run.to_pylist(), dtype=object), "query", "query", ordered)
            assert labels.tolist() == olabels.tolist() and jc.tolist() == ojc.tolist() and rc.tolist() == orc.tolist()
            assert [labels[c] for c in rc] == run.to_pylist()  # "007" stays "007"
            if ordered:
                assert labels.tolist() == sorted(labels.tolist())
        jc, rc, labels = arrow_codes_together(judged, run.cast(pa.large_string()), ordered=False)
        assert [labels[c] for c in jc] == judged.to_pylist() and [labels[c] for c in rc] == run.to_pylist()


def test_one_run_name_found_without_hashing():
    import pyarrow as pa

    from topkeval.inputs.ids import Encoded, single_value

    assert single_value(pa.array(["bm25"] * 100)) == (True, "bm25")
    assert single_value(pa.array(["bm25"] * 99 + ["x"])) == (False, None)
    assert single_value(pa.array(["bm25"] * 50 + [None] * 50)) == (False, None)  # refused later, as missing
    assert single_value(pa.array(["a", "b"] * 50)) == (False, None)
    assert single_value(np.array([3, 3, 3])) == (True, 3)
    assert single_value(np.array([np.nan, np.nan])) == (False, None)
    assert single_value(Encoded(np.array([1, 1]), np.array(["a", "b"], dtype=object))) == (True, "b")
    assert single_value(Encoded(np.array([-1, -1]), np.array(["a"], dtype=object))) == (False, None)
    # several runs in one table with a run column: each evaluated apart, as before
    run = pd.DataFrame({"query": ["a"] * 4, "item": ["x", "y", "x", "y"], "score": [2.0, 1.0, 1.0, 2.0],
                        "run": pd.array(["r1", "r1", "r2", "r2"], dtype="string[pyarrow]")})
    qrels = pd.DataFrame({"query": ["a", "a"], "item": ["x", "y"], "relevance": [1, 0]})
    assert tk.evaluate(run, qrels=qrels, metrics=["P@1"], item="item", model="run").summary["P@1"].to_dict() == {
        "r1": 1.0, "r2": 0.0}


def test_arrow_ids_in_runs_encoded_like_every_row():
    """Ids that come in runs (a query column) are hashed once per run; the codes are those of
    hashing every row, in order of first appearance, also when a value comes back later."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from topkeval.inputs.ids import _arrow_encode

    values = pa.chunked_array([pa.array(["b"] * 70 + ["a"] * 30), pa.array(["a"] * 10 + ["c"] * 60 + ["b"] * 5)])
    codes, labels = _arrow_encode(values)
    want = pc.dictionary_encode(values.combine_chunks())
    assert codes.tolist() == want.indices.to_pylist() and labels.tolist() == want.dictionary.to_pylist() == ["b", "a", "c"]


def test_default_metrics_leave_out_specificity_with_judgments_apart():
    """Top-N lists against the true interactions (qrels=): each list holds only what the model
    retrieved, so specificity@20 of a list of 20 or fewer is 0 for every query; the defaults
    leave it out there (named, it is computed: 0 here), and keep it for a log of every candidate."""
    top = pd.DataFrame({"query": [1, 1, 1, 2, 2], "item": ["a", "b", "c", "a", "d"], "score": [3, 2, 1, 2, 1]})
    truth = pd.DataFrame({"query": [1, 2, 2], "item": ["b", "x", "d"], "relevance": [1, 1, 1]})
    res = tk.evaluate(top, qrels=truth, item="item")
    assert list(res.summary.columns) == ["recall@20", "precision@20", "f1@20", "r_precision"]
    named = tk.evaluate(top, ["recall@20", "specificity@20"], qrels=truth, item="item")
    assert named.summary["specificity@20"].tolist() == [0.0]
    log = top.assign(relevance=[0, 1, 0, 0, 1])
    assert "specificity@20" in tk.evaluate(log, item="item").summary.columns


def test_models_missing_different_judged_queries_say_so():
    """Under missing_queries='skip' a model that lists a few users only is averaged over those: the
    results say how many queries each model was evaluated on, and that such means do not compare
    (found by the new-user trial: a model with one user right came out best)."""
    from topkeval.outputs.text import info_lines

    recs = pd.DataFrame({"user": ["u1"] * 3 + ["u2"] * 3 + ["u1"] * 3, "item": list("abcadebcx"),
                         "score": [3, 2, 1] * 3, "model": ["pop"] * 6 + ["cold"] * 3})
    truth = pd.DataFrame({"user": ["u1", "u1", "u2"], "item": ["b", "c", "d"], "relevance": 1})
    res = tk.evaluate(recs, ["recall@3"], query="user", item="item", model="model", qrels=truth)
    lines = info_lines(res.info)
    assert lines[0] == "queries evaluated (of 2): pop 2, cold 1"
    assert "the means do not compare" in lines[1] and "missing_queries='zero'" in lines[1]
    assert "pop 2, cold 1" in repr(res)
    zero = tk.evaluate(recs, ["recall@3"], query="user", item="item", model="model", qrels=truth,
                       missing_queries="zero")
    assert zero.summary["recall@3"].tolist() == [1.0, 0.5]
    assert info_lines(zero.info)[0] == "2 of 2 queries evaluated"
    assert not any("do not compare" in line for line in info_lines(zero.info))


@pytest.mark.parametrize("named", [["recall@20", "precision@20", "f1@20", "specificity@20", "r_precision"],
                                   ("recall@20", "precision@20", "f1@20", "specificity@20", "r_precision")],
                         ids=["list", "tuple"])
def test_the_default_metrics_named_one_by_one_keep_specificity_with_judgments_apart(named):
    """Fixed: the five default metrics named by hand (the same list as the defaults) lost
    specificity@20 with qrels=, silently, though named; only the defaults left unsaid leave it out."""
    top = pd.DataFrame({"query": [1, 1, 1, 2, 2], "item": ["a", "b", "c", "a", "d"], "score": [3, 2, 1, 2, 1]})
    truth = pd.DataFrame({"query": [1, 2, 2], "item": ["b", "x", "d"], "relevance": [1, 1, 1]})
    res = tk.evaluate(top, named, qrels=truth, item="item")
    assert list(res.summary.columns) == list(named)
    assert res.summary["specificity@20"].tolist() == [0.0]


def _pairs_case():
    recs = pd.DataFrame({"user": [1, 1, 1, 2, 2, 2, 3], "item": ["a", "b", "c", "a", "d", "e", "f"],
                         "score": [3, 2, 1, 3, 2, 1, 1]})
    # interactions: user 1 bought b twice, and z (never recommended); user 2 bought d
    truth = pd.DataFrame({"user": [1, 1, 1, 2], "item": ["b", "z", "b", "d"]})
    return recs, truth


@pytest.mark.parametrize("form", ["pandas", "arrow", "dict", "parquet", "csv"])
def test_relevance_none_reads_a_table_of_relevant_pairs(form, tmp_path):
    """relevance=None with a qrels table of (query, item) pairs: each pair relevant with grade 1, a
    pair listed twice counted once; the numbers by hand (user 1: b of {b, z} in the top 3; user 2:
    d of {d}; user 3 has no interaction: not judged, left out), and equal to a column of ones."""
    import pyarrow as pa

    recs, truth = _pairs_case()
    given = {"pandas": truth, "arrow": pa.Table.from_pandas(truth), "dict": truth.to_dict("list")}.get(form)
    if form == "parquet":
        given = tmp_path / "t.parquet"
        truth.to_parquet(given)
    elif form == "csv":
        given = tmp_path / "t.csv"
        truth.to_csv(given, index=False)
    metrics = ["recall@3", "precision@3", "r_precision", "hit_rate@1"]
    res = tk.evaluate(recs, metrics, query="user", item="item", qrels=given, relevance=None)
    assert res.summary.iloc[0].tolist() == pytest.approx([(1 / 2 + 1) / 2, (1 / 3 + 1 / 3) / 2, (1 / 2 + 0) / 2, 0.0])
    ones = tk.evaluate(recs, metrics, query="user", item="item",
                       qrels=truth.drop_duplicates().assign(relevance=1))
    pd.testing.assert_frame_equal(res.summary, ones.summary)
    assert res.info["judged_queries"] == 2 and res.info["run_queries_without_judgments"] == {"score": 1}


def test_relevance_none_needs_a_qrels_table(tmp_path):
    recs, truth = _pairs_case()
    with pytest.raises(tk.ParameterError, match="needs judgments apart"):
        tk.evaluate(recs.assign(relevance=1), ["recall@3"], query="user", item="item", relevance=None)
    qrels = tmp_path / "pairs.qrels"
    qrels.write_text("1 0 b 1\n")
    with pytest.raises(tk.ParameterError, match="TREC qrels file has its own grades"):
        tk.evaluate(recs, ["recall@3"], query="user", item="item", qrels=qrels, relevance=None)
    with pytest.raises(tk.ColumnError, match="relevance=None"):  # the hint of a missing relevance column
        tk.evaluate(recs, ["recall@3"], query="user", item="item", qrels=truth)


@pytest.mark.parametrize("role", ["query", "item"])
def test_relevance_none_with_an_id_column_named_like_the_inner_grade_column(role):
    """relevance=None reads the pairs' grade 1 into a column of its own: a query or item column that
    happens to be called ``_topkeval_relevance`` keeps its ids (it was overwritten by the ones, and
    every number came out 0 or wrong)."""
    recs, truth = _pairs_case()
    name = "_topkeval_relevance"
    query, item = (name, "item") if role == "query" else ("user", name)
    metrics = ["recall@3", "precision@3", "r_precision", "hit_rate@1"]
    old = "user" if role == "query" else "item"
    res = tk.evaluate(recs.rename(columns={old: name}), metrics, query=query, item=item,
                      qrels=truth.rename(columns={old: name}), relevance=None)
    assert res.summary.iloc[0].tolist() == pytest.approx([(1 / 2 + 1) / 2, (1 / 3 + 1 / 3) / 2, (1 / 2 + 0) / 2, 0.0])
    assert res.info["judged_queries"] == 2


@pytest.mark.parametrize("column", ["relevance", "grade", "Click"])
def test_relevance_none_refuses_judgments_with_a_grade_column(column):
    """A qrels table with a column of grades (some may be 0) read with relevance=None would count
    its pairs graded 0 as relevant: refused, with the two ways out."""
    recs, truth = _pairs_case()
    graded = truth.assign(**{column: [1, 0, 1, 1]})
    with pytest.raises(tk.ParameterError, match=f"column '{column}' that looks like grades.*relevance='{column}'"):
        tk.evaluate(recs, ["recall@3"], query="user", item="item", qrels=graded, relevance=None)


@pytest.mark.parametrize("options", [dict(conventions="surprise"), dict(threshold=2)])
def test_relevance_none_refuses_a_threshold_above_its_grade_1(options):
    """Every listed pair has grade 1: under a threshold above 1 (Surprise's 3.5) nothing would be
    relevant, every query empty: refused, not evaluated to nothing."""
    recs, truth = _pairs_case()
    with pytest.raises(tk.ParameterError, match="below the relevance threshold"):
        tk.evaluate(recs, ["recall@3"], query="user", item="item", qrels=truth, relevance=None, **options)
    with pytest.raises(tk.ParameterError, match="below the relevance threshold 2"):
        tk.evaluate(recs, ["ndcg(rel=2)@3"], query="user", item="item", qrels=truth, relevance=None)


def test_runs_written_rank_by_rank_rank_only_their_tied_items_and_keep_every_value(tmp_path):
    """A run whose scores fall (or rise) within each query has its equal scores side by side: the
    item tie rules then rank the item ids of the tied rows alone (ranking every id was the costliest
    step after reading a TREC run), and the values are those of the same rows shuffled (which ranks
    every id), in memory and from a run file (ids as Arrow text)."""
    from topkeval.engine.rules import _tied_in_order
    from topkeval.kernels import jit

    offsets = np.array([0, 0, 3, 3, 5, 5])  # empty queries first, between and last
    for compiled in (False, True):  # numpy's passes, or the compiled single pass
        with pytest.MonkeyPatch.context() as m:
            m.setattr(jit, "runs_compiled", lambda size, compiled=compiled: compiled)
            assert _tied_in_order(offsets, np.array([3.0, 2.0, 1.0, 9.0, 8.0])).tolist() == [False] * 5
            assert _tied_in_order(offsets, np.array([1.0, 2.0, 3.0, 0.0, 5.0])).tolist() == [False] * 5
            assert _tied_in_order(offsets, np.array([3.0, 2.0, 2.0, 9.0, 9.0])).tolist() == [False, True, True, True,
                                                                                               True]
            assert _tied_in_order(offsets, np.array([3.0, 2.0, 2.0, 2.0, 1.0])).tolist() == [False, True, True, False,
                                                                                               False]
            assert _tied_in_order(offsets, np.array([3.0, 2.0, 4.0, 9.0, 8.0])) is None  # neither falling nor rising
            assert _tied_in_order(offsets, np.array([3.0, 2.0, 1.0, 8.0, 9.0])) is None  # falling, then rising
            assert _tied_in_order(offsets, np.array([3.0, np.nan, 1.0, 9.0, 8.0])) is None
            assert _tied_in_order(offsets, np.array([3.0, 2.0, 1.0, 9.0, -np.inf])) is None
    rng = np.random.default_rng(11)
    for _ in range(200):  # the compiled pass against numpy's, on runs of every kind
        sizes = rng.integers(0, 6, rng.integers(1, 6))
        offs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        scores = np.round(rng.random(offs[-1]) * 3) / 2
        kind = rng.integers(0, 3)
        if kind < 2:  # falling (or rising) within each query
            scores = np.concatenate([np.sort(scores[a:z])[::-1 if kind == 0 else 1] for a, z in zip(offs, offs[1:])])
        got = {}
        for compiled in (False, True):
            with pytest.MonkeyPatch.context() as m:
                m.setattr(jit, "runs_compiled", lambda size, compiled=compiled: compiled)
                got[compiled] = _tied_in_order(offs, scores)
        assert (got[True] is None) == (got[False] is None)
        if got[True] is not None:
            assert got[True].tolist() == got[False].tolist()
    rng = np.random.default_rng(5)
    rows = []
    for q in range(40):
        n = int(rng.integers(1, 30))
        scores = np.sort(rng.choice(np.arange(60) / 4.0, n, replace=q % 3 != 0))[::-1]  # ties in 2 queries of 3
        # ids whose text order is not their number's ("d9" > "d10"): a rank of codes would be wrong
        rows += [(f"q{q}", f"d{rng.integers(0, 120)}_{i}", s) for i, s in enumerate(scores)]
    run = pd.DataFrame(rows, columns=["query", "item", "score"])
    qrels = run.sample(frac=0.4, random_state=1).assign(relevance=lambda f: rng.integers(0, 3, len(f)))
    qrels = qrels[["query", "item", "relevance"]]
    metrics = ["P@5", "map", "ndcg@10", "rr", "rprec"]
    path = tmp_path / "a.run"
    path.write_text("".join(f"{q} Q0 {d} {i + 1} {float(s)!r} a\n" for i, (q, d, s) in enumerate(rows)))
    for ties in ("item_desc", "item_asc"):
        for part in (run[run["query"].isin([f"q{q}" for q in range(40) if q % 3 == 0])], run):  # no tie / ties
            shuffled = part.sample(frac=1.0, random_state=2)
            a = tk.evaluate(part, metrics, item="item", qrels=qrels, ties=ties)
            b = tk.evaluate(shuffled, metrics, item="item", qrels=qrels, ties=ties)
            pd.testing.assert_frame_equal(a.per_query.sort_values("query").reset_index(drop=True),
                                          b.per_query.sort_values("query").reset_index(drop=True))
        from_file = tk.evaluate(path, metrics, qrels=qrels, ties=ties)
        whole = tk.evaluate(run.sample(frac=1.0, random_state=3), metrics, item="item", qrels=qrels, ties=ties)
        per_query = [r.per_query.assign(query=r.per_query["query"].astype(str)).sort_values("query")[metrics]
                     for r in (from_file, whole)]
        assert per_query[0].to_numpy().tolist() == per_query[1].to_numpy().tolist()


def test_a_model_without_ties_leaves_the_item_key_of_the_next_one_intact(tmp_path):
    """Models of one call share what depends on the log only: the first model's scores never tie
    (no item key needed) but the second one's do, and its ties are still broken by item id, in
    memory and streamed, as when it is evaluated alone."""
    rng = np.random.default_rng(8)
    n = 12
    log = pd.DataFrame({"query": np.repeat(np.arange(30), n), "item": np.tile([f"d{i}" for i in range(n)], 30),
                        "relevance": rng.integers(0, 3, 30 * n)})
    log = log.drop(index=[0, 13, 26])  # lists of 11 and 12 candidates (not a top-N log)
    log["distinct"] = -np.arange(len(log), dtype=float)  # falling row by row: no tie
    log["tied"] = rng.integers(0, 3, len(log)).astype(float)  # many ties across every cutoff
    path = tmp_path / "log.parquet"
    log.to_parquet(path)
    metrics = ["P@3", "ndcg@5", "map"]
    for ties in ("item_desc", "item_asc"):
        alone = tk.evaluate(log, metrics, score="tied", item="item", ties=ties).summary.loc["tied"]
        assert alone.to_dict() != tk.evaluate(log, metrics, score="tied", item="item", ties="first").summary.loc[
            "tied"].to_dict()  # the premise: the tie rule matters here
        for data in (log, path):
            both = tk.evaluate(data, metrics, score=["distinct", "tied"], item="item", ties=ties, chunk_rows=100) \
                if data is path else tk.evaluate(data, metrics, score=["distinct", "tied"], item="item", ties=ties)
            pd.testing.assert_series_equal(both.summary.loc["tied"], alone)


MORE = __import__("pathlib").Path(__file__).parent / "trec_eval_10_more.txt"


def _more_cases() -> dict:
    """trec_eval 10.0's outputs of tests/trec_eval_10_more.txt: (flags, qrels, run) -> {(name, query): value}."""
    cases: dict = {}
    lines = None
    for line in MORE.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("> "):
            words = line[2:].split()  # trec_eval -q -m MEASURE [FLAGS] QRELS RUN
            lines = cases.setdefault((tuple(words[4:-2]), words[-2], words[-1]), {})
        else:
            name, query, value = line.split()
            lines[(name, query)] = value
    return cases


def _flag_options(flags) -> dict:
    """trec_eval's flags as evaluate() keywords."""
    out: dict = {}
    for flag in flags:
        if flag == "-c":
            out["missing_queries"] = "zero"
        elif flag == "-J":
            out["judged_only"] = True
        elif flag.startswith("-l"):
            out["threshold"] = int(flag[2:])
        elif flag.startswith("-M"):
            out["depth"] = int(flag[2:])
    return out


@pytest.mark.parametrize("case", list(_more_cases()), ids=lambda c: " ".join((*c[0], c[1], c[2])))
def test_trec_eval_10_measures_beyond_its_own_test_outputs(shared_dir, case):
    """ideal_dcg, dcg, yaap, num_q, rbp and rbp.p=x (rbp_trec), rbp_resid.p=x, set_F.0.25, ndcg_p and
    gain maps under -c, -l2, -M50 and -J, against trec_eval 10.0's own output (the file's header says
    how it was made). Two lines differ, each as docs/conventions.md says: under -c a judged topic the
    run lacks is a list of one unjudged document to trec_eval, whose rbp_resid_p=x (a parameter given)
    is then p + (1 - p) = 1 (its reset to 0 compares the name with "rbp_resid" exactly), an empty list
    here (0); and trec_eval's num_rel 'all' line under -c counts every judgment of grade > 0, whatever
    -l, where here it is the sum of the per-query lines."""
    flags, qrels, run = case
    wanted = _more_cases()[case]
    base = shared_dir / "conformance" / "trec_eval"
    ours = {name: tk.parse_metric("rbp_trec" if name == "rbp" else name) for name, _ in wanted}
    res = tk.evaluate(base / run, qrels=base / qrels, metrics=list(dict.fromkeys(ours.values())),
                      conventions="trec_eval", **_flag_options(flags))
    pq = res.per_query.set_index("query")
    absent = set(read_qrels(base / qrels)["query"]) - set(read_run(base / run)["query"])
    judged_relevant = int((read_qrels(base / qrels)["relevance"] > 0).sum())
    differs = 0
    for (name, query), text in wanted.items():
        label = res.label(ours[name])
        column = pq[label]
        got = column.sum() if query == "all" and is_summed(label) else res.summary.iloc[0][label] if query == "all" \
            else column.loc[query]
        value = float(text)
        if "-c" in flags and name.startswith("rbp_resid_p=") and (query in absent or query == "all") and absent:
            # trec_eval's bogus document: the absent topic's residual is 1, not reset
            theirs = column.where(~column.index.isin(absent), 1.0)
            assert (column[list(absent)] == 0).all()
            assert value == pytest.approx(theirs.mean() if query == "all" else 1.0, abs=5e-5)
            differs += 1
        elif "-c" in flags and name == "num_rel" and query == "all" and any(f.startswith("-l") for f in flags):
            assert int(text) == judged_relevant != int(got)  # every judgment of grade > 0
            differs += 1
        elif is_summed(label):
            assert str(int(round(got))) == text, (case, name, query, got, text)
        else:
            assert got == pytest.approx(value, abs=5e-5), (case, name, query, got, text)
    assert differs == {("-c",): 2, ("-c", "-l2", "-M50"): 3}.get(flags, 0)


def test_trec_eval_stops_on_a_judged_topic_the_run_lacks_and_topkeval_skips_it(shared_dir):
    """trec_eval 10.0 without -c exits (status 4) on a judged topic absent from the run (the header of
    tests/trec_eval_10_more.txt); trec_eval 9 and pytrec_eval left it out of the mean, as topkeval
    does by default (missing_queries="skip"), counting it in info."""
    base = shared_dir / "conformance" / "trec_eval"
    res = tk.evaluate(base / "results.trunc", qrels=base / "qrels.test", metrics=["map", "num_q"],
                      conventions="trec_eval")
    assert sorted(res.per_query["query"]) == ["301", "303"]
    assert res.info["missing_from_run"] == {"STANDARD": 1}
    assert res.per_query["num_q"].sum() == 2


def test_trec_eval_printed_names_of_parameters_read_back():
    """trec_eval prints a measure with parameters as name_params (set_F_0.25, rbp_p=0.5,
    rbp_resid_p=0.8, ideal_dcg_1=3,2=9): each is read back, and trec_name prints it so."""
    cases = {"set_F_0.25": "set_f(beta=0.5)", "set_F.0.25": "set_f(beta=0.5)", "rbp_p=0.5": "rbp_trec(p=0.5)",
             "rbp.p=0.5": "rbp_trec(p=0.5)", "rbp_resid_p=0.8": "rbp_resid(p=0.8)",
             "rbp_resid.p=0.8": "rbp_resid(p=0.8)", "ideal_dcg_1=3,2=9": "ideal_dcg(gain={1:3,2:9})",
             "ndcg_p.1=3": "ndcg_p(gain={1:3})", "dcg_1=3": "dcg(gain={1:3})", "yaap": "yaap", "num_q": "num_q",
             "rbp.95": "rbp(p=0.95)"}  # ranx's rbp.95 stays ranx's
    for text, canonical in cases.items():
        assert str(tk.parse_metric(text)) == canonical, text
    assert [trec_name(m) for m in ("set_f(beta=0.5)", "rbp_trec(p=0.5)", "rbp_trec", "rbp_resid(p=0.8)", "rbp_resid",
                                   "ideal_dcg(gain={1:3,2:9})")] == [
        "set_F_0.25", "rbp_p=0.5", "rbp", "rbp_resid_p=0.8", "rbp_resid", "ideal_dcg_1=3,2=9"]
    with pytest.raises(tk.UnknownMetricError, match="gain maps are not reproduced"):
        tk.parse_metric("rbp.p=0.5,1=3")
    with pytest.raises(tk.UnknownMetricError, match="needs a parameter"):
        tk.parse_metric("rbp")  # topkeval's rbp needs its p: trec_eval's plain rbp is rbp_trec


def test_the_trec_output_prints_num_q_once_and_sums_it(tmp_path):
    """num_q asked for as a measure: one 'num_q all' line (trec_eval prints no per-query num_q)."""
    run = pd.DataFrame({"query": ["a", "a", "b", "c"], "item": ["x", "y", "x", "z"], "score": [2.0, 1.0, 1.0, 1.0]})
    qrels = pd.DataFrame({"query": ["a", "b", "c"], "item": ["y", "x", "q"], "relevance": [1, 1, 1]})
    res = tk.evaluate(run, qrels=qrels, item="item", metrics=["num_q", "P@1", "num_rel"])
    lines = [line.split() for line in res.to_string("trec", per_query=True).splitlines()]
    assert [line for line in lines if line[0] == "num_q"] == [["num_q", "all", "3"]]
    assert ["num_rel", "all", "3"] in lines and ["P_1", "all", "0.3333"] in lines


@pytest.mark.parametrize("regular", [True, False], ids=["fast reader", "line reader"])
def test_a_byte_order_mark_is_not_part_of_the_first_query_id(tmp_path, regular):
    """A UTF-8 byte order mark opens many files written on Windows: the first query id is read
    without it by both readers (the line reader runs on irregular lines: here two blanks in a row)."""
    blank = " " if regular else "  "
    run, qrels = tmp_path / "run.txt", tmp_path / "qrels.txt"
    run.write_bytes(b"\xef\xbb\xbf" + f"q1 Q0 d1 1{blank}0.5 r\nq1 Q0 d2 2 0.4 r\nq2 Q0 d1 1 0.3 r\n".encode())
    qrels.write_bytes(b"\xef\xbb\xbf" + f"q1 0{blank}d2 1\nq2 0 d1 -1\nq2 0 d3 2\n".encode())
    assert read_run(run)["query"].tolist() == ["q1", "q1", "q2"]
    judged = read_qrels(qrels)
    assert judged["query"].tolist() == ["q1", "q2", "q2"] and judged["relevance"].tolist() == [1, -1, 2]
    res = tk.evaluate(run, qrels=qrels, metrics=["P@2", "num_rel"], conventions="trec_eval")
    assert res.per_query.set_index("query")["P@2"].to_dict() == {"q1": 0.5, "q2": 0.0}  # q1 matched its judgment


def test_an_infinite_score_among_finite_ones_is_refused_with_its_line(tmp_path):
    """A score of inf (which Arrow's reader parses) is refused with its line number, as nan is."""
    path = tmp_path / "run.txt"
    path.write_text("q1 Q0 d1 1 0.5 r\nq1 Q0 d2 2 inf r\nq1 Q0 d3 3 0.25 r\n")
    with pytest.raises(tk.DataError, match="line 2: the score 'inf' is not a finite number"):
        read_run(path)


def test_comment_lines_that_look_like_run_lines_are_skipped(tmp_path):
    """trec_eval 10 skips lines starting with '#', even those of six fields whose fifth is a number."""
    path = tmp_path / "run.txt"
    path.write_text("# made by bm25 0.5 tuned\nq1 Q0 d1 1 0.5 r\nq1 Q0 d2 2 0.25 r\n")  # six fields, a number fifth
    got = read_run(path)
    assert got["query"].tolist() == ["q1", "q1"] and got["score"].tolist() == [0.5, 0.25]
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("# 0 d1 1\nq1 0 d1 1\n")  # four fields, a grade fourth
    assert read_qrels(qrels)["query"].tolist() == ["q1"]


# trec_eval's measure sets: all_trec, official, set ------------------------------------------------------------

#: (expected output, qrels, run, evaluate() options, the set its measures are, -q): out.test is trec_eval
#: without -m (its "official" set), the others -m all_trec under -q, -c, -M100 and -l2 (the README of the
#: conformance files); the "set" set has no output of its own: its measures' lines of out.test.a, since
#: trec_eval computes each measure alone
SET_CASES = [
    ("out.test", "qrels.test", "results.test", {}, "official", False),
    ("out.test.a", "qrels.test", "results.test", {}, "all_trec", False),
    ("out.test.a", "qrels.test", "results.test", {}, "set", False),
    ("out.test.aq", "qrels.test", "results.test", {}, "all_trec", True),
    ("out.test.aqc", "qrels.test", "results.trunc", {"missing_queries": "zero"}, "all_trec", True),
    ("out.test.aqcM", "qrels.test", "results.trunc", {"missing_queries": "zero", "depth": 100}, "all_trec", True),
    ("out.test.aql", "qrels.rel_level", "results.test", {"threshold": 2}, "all_trec", True),
]
#: the measures of trec_eval's "set" set (measures.c), to pick their lines out of out.test.a
SET_MEASURES = ("num_q", "num_ret", "num_rel", "num_rel_ret", "utility", "set_P", "set_recall", "set_relative_P",
                "set_map", "set_F")


def _trec_lines(text: str, keep=lambda name: True) -> list[tuple[str, ...]]:
    """trec_eval's output lines as fields, but runid (the run's name) and relstring (a string of
    digits): the lines that are no metric's number."""
    return [tuple(line.split()) for line in text.splitlines()
            if line.strip() and not line.startswith(NOT_NUMBERS) and keep(line.split()[0])]


@pytest.mark.parametrize("expected,qrels,run,options,name,per_query", SET_CASES,
                         ids=[f"{c[4]} {c[0]}" for c in SET_CASES])
def test_trec_eval_sets_give_trec_eval_s_own_output(shared_dir, expected, qrels, run, options, name, per_query):
    """metrics="all_trec" ("official", "set") evaluates each measure trec_eval prints for that set
    that is a number, in trec_eval's order, each column labelled with trec_eval's name (its plain
    rbp is topkeval's rbp_trec), with trec_eval's values: the TREC output is trec_eval's own output
    file, line for line, in its order (runid included; relstring, a string, left out)."""
    base = shared_dir / "conformance" / "trec_eval"
    keep = (lambda m: m in SET_MEASURES) if name == "set" else (lambda m: True)
    theirs = _trec_lines((base / expected).read_text(), keep)
    res = tk.evaluate(base / run, qrels=base / qrels, metrics=name, conventions="trec_eval", **options)
    names = list(dict.fromkeys(line[0] for line in theirs if line[1] == "all"))  # in trec_eval's order
    assert [trec_name(label) for label in res.metrics] == names
    assert res.metrics == ["rbp_trec" if m == "rbp" else m for m in names]  # labelled as trec_eval names them
    text = res.to_string("trec", per_query=per_query)
    assert _trec_lines(text) == theirs  # line for line, in trec_eval's order (-q: queries sorted, -c's among them)
    mine = [line.split()[:2] for line in text.splitlines()]
    file = [line.split()[:2] for line in (base / expected).read_text().splitlines() if not line.startswith("relstring")]
    assert mine.index(["runid", "all"]) == file.index(["runid", "all"])  # first, or (-q) just before num_q
    if per_query:
        return
    # the numbers themselves, apart from the TREC output: means at 4 decimals, counts summed, gm_ exp'd
    row = res.summary.loc["STANDARD"]
    pq = res.per_query
    for measure, _, value in theirs:
        label = "rbp_trec" if measure == "rbp" else measure
        if is_summed(label):
            got = str(len(pq) if label == "num_q" else int(round(pq[label].sum())))
        else:
            got = f"{math.exp(row[label]) if is_geometric(label) else row[label]:.4f}"
        assert got == value, (measure, got, value)


def test_the_command_line_of_trec_eval_s_measure_parameters_test_gives_its_numbers(shared_dir, capsys):
    """The -m arguments of trec_eval's own out.test.meas_params command, as written there (ndcg_cut.10,20,23.4
    included: trec_eval reads the cutoff 23.4 as 23), give every number of that file (-q)."""
    from topkeval.cli import main

    base = shared_dir / "conformance" / "trec_eval"
    flags = ["iprec_at_recall..10,.20,.25,.75,.50", "P.5,7,3", "recall.20,2000", "Rprec_mult.5.0,0.2,0.35",
             "utility.2,-1,0,0", "11pt_avg..25,.5,.75", "ndcg.1=3,2=9,4=4.5", "ndcg_cut.10,20,23.4", "success.2,5,20"]
    code = main(["evaluate", "--qrels", str(base / "qrels.test"), "--run", str(base / "results.test"), "--conventions",
                 "trec_eval", "--format", "trec", "--per-query"] + [arg for flag in flags for arg in ("-m", flag)])
    out, err = capsys.readouterr()
    assert code == 0, err

    def numbers(text):
        return {(_numbers_as_values(m), q): v for m, q, v in (line.split() for line in text.splitlines())
                if m not in ("runid", "num_q")}

    theirs = numbers((base / "out.test.meas_params").read_text())
    assert numbers(out) == theirs and len(theirs) >= 80


def test_the_command_line_s_trec_eval_sets_print_trec_eval_s_output(shared_dir, capsys):
    """topkeval evaluate -m all_trec (-m official) --format trec prints trec_eval's own output file,
    every line, in order (runid included: without -q trec_eval prints it first too)."""
    from topkeval.cli import main

    base = shared_dir / "conformance" / "trec_eval"
    for name, expected in (("all_trec", "out.test.a"), ("official", "out.test")):
        code = main(["evaluate", "--qrels", str(base / "qrels.test"), "--run", str(base / "results.test"),
                     "--conventions", "trec_eval", "-m", name, "--format", "trec"])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert [line.split() for line in out.splitlines()] == [
            line.split() for line in (base / expected).read_text().splitlines()], name
    code = main(["evaluate", "--qrels", str(base / "qrels.test"), "--run", str(base / "results.test"),
                 "--conventions", "trec_eval", "-m", "official,ndcg_cut.3", "-m", "P@10", "--format", "trec"])
    out, err = capsys.readouterr()
    lines = [tuple(line.split()) for line in out.splitlines()]
    assert code == 0, err
    assert lines[:-1] == [tuple(line.split()) for line in (base / "out.test").read_text().splitlines()]
    assert lines[-1][:2] == ("ndcg_cut_3", "all")  # P@10 is the set's P_10, printed once


def _three_topics() -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(7)
    run = pd.DataFrame({"query": np.repeat(["q1", "q2", "q3"], 12), "item": np.tile([f"d{i:02d}" for i in range(12)], 3),
                        "score": rng.permutation(36).astype(float)})
    qrels = run[["query", "item"]].assign(relevance=rng.integers(-1, 3, 36))
    return run, qrels


def test_a_trec_eval_set_beside_other_names_is_each_metric_alone():
    """A set name expands where it stands: ["all_trec", "ndcg@3"] is the set's columns, then ndcg@3;
    each number equals that metric evaluated alone (no value depends on the others of the call); a
    metric of the set named again, apart or by a second set, keeps the set's label, once."""
    run, qrels = _three_topics()
    options = {"qrels": qrels, "item": "item", "conventions": "trec_eval"}
    both = tk.evaluate(run, metrics=["all_trec", "ndcg@3"], **options)
    alone = tk.evaluate(run, metrics="all_trec", **options)
    assert both.metrics == alone.metrics + ["ndcg@3"] and len(alone.metrics) == 98
    pd.testing.assert_frame_equal(both.per_query[alone.per_query.columns], alone.per_query)
    for label in ("ndcg@3", "P_5", "gm_map", "rbp_trec", "unj_20", "iprec_at_recall_0.30"):
        one = tk.evaluate(run, metrics=[label], **options)
        assert both.per_query[label].tolist() == one.per_query[label].tolist(), label
    again = tk.evaluate(run, metrics=["official", "P@10", "map", "set", "all_trec"], **options)
    official = tk.evaluate(run, metrics="official", **options).metrics
    of_set = tk.evaluate(run, metrics="set", **options).metrics
    assert again.metrics == list(dict.fromkeys(official + of_set + alone.metrics))  # each once, where first named
    assert again.metrics[29:35] == ["utility", "set_P", "set_relative_P", "set_recall", "set_map", "set_F"]
    assert again.label("precision@10") == "P_10" and again.label("ap") == "map"
    mixed = tk.evaluate(run, metrics=["P@10", "official"], **options)
    assert mixed.metrics == ["P@10"] + [m for m in official if m != "P_10"]


@pytest.mark.parametrize("spelling", ["all_trec", "ALL_TREC", " official ", "Official", "set"])
def test_trec_eval_set_names_in_every_form_a_name_is_given(spelling):
    """A set name in a list, a Python set, a tuple, alone, with blanks or another case (names are
    case-insensitive here), and in the names the command line splits."""
    from topkeval.metrics.names import labelled_metrics, parse_metrics, split_names
    from topkeval.metrics.trec import trec_set

    labels = trec_set(spelling)
    assert labels is not None and len(labels) == {"all_trec": 98, "official": 29, "set": 10}[spelling.strip().lower()]
    for given in (spelling, [spelling], {spelling}, (spelling,)):
        assert labelled_metrics(given)[0] == labels
        assert [str(m) for m in parse_metrics(given)] == [str(tk.parse_metric(label)) for label in labels]
    assert split_names(f"{spelling.strip()},P@3") == [spelling.strip(), "P@3"]


def test_each_metric_of_a_trec_eval_set_prints_under_trec_eval_s_name():
    """The TREC output prints each set member under trec_eval's own name (P_5, Rprec_mult_0.20,
    iprec_at_recall_1.00, set_F, 11pt_avg, rbp): trec_name of the label is trec_eval's printed name,
    the one of trec_eval's measure list (measures.c and each m_*.c file's default parameters)."""
    from topkeval.metrics.trec import TREC_EVAL_MEASURES, trec_set

    printed = [name for _, names in TREC_EVAL_MEASURES for name in names]
    assert [trec_name(label) for label in trec_set("all_trec")] == printed
    assert len(printed) == len(set(printed)) == len(set(map(tk.parse_metric, trec_set("all_trec"))))
    assert {measure for measure, names in TREC_EVAL_MEASURES if not names} == {"runid", "relstring"}


@pytest.mark.parametrize("name,pattern", [
    ("all_trek", r"Did you mean 'all_trec'"),
    ("oficial", r"Did you mean 'official'"),
    ("all-trec", r"Did you mean 'all_trec'"),
    ("all_trec@10", r"'all_trec' is trec_eval's set of measures.*takes no cutoff"),
    ("official(rel=2)", r"'official' is trec_eval's set of measures.*takes no cutoff or parameters"),
    ("prefs", r"preference judgments"),
    ("all_prefs", r"preference judgments"),
    ("qrels_jg", r"several judges"),
])
def test_set_like_names_that_are_no_set_are_refused_with_the_closest_name(name, pattern):
    with pytest.raises(tk.UnknownMetricError, match=pattern):
        tk.evaluate(*_three_topics()[:1], qrels=_three_topics()[1], item="item", metrics=["map", name],
                    conventions="trec_eval")


def test_a_set_name_is_not_one_metric():
    """Where one metric is meant (parse_metric, a column lookup), a set name says it is several."""
    with pytest.raises(tk.UnknownMetricError, match="set of 98 measures, not one metric"):
        tk.parse_metric("all_trec")
    run, qrels = _three_topics()
    res = tk.evaluate(run, qrels=qrels, item="item", metrics="official", conventions="trec_eval")
    with pytest.raises(tk.ParameterError, match="set of 29 measures, not one metric"):
        res.label("official")
    with pytest.raises(tk.ParameterError, match="trec_eval's set of measures"):
        tk.define_metric("official", lambda st: st.n, cutoff="none", summary="s", formula="f")


def test_explaining_a_set_lists_its_metrics(capsys):
    from topkeval.cli import main
    from topkeval.metrics.trec import trec_set

    text = tk.explain_metric("official")
    assert text.endswith(": " + ", ".join(trec_set("official"))) and "set of 29 measures" in text
    assert main(["metrics", "all_trec"]) == 0
    assert "P_1000, recall_5" in capsys.readouterr().out


def test_the_command_line_refuses_a_misspelt_set_in_one_line(tmp_path, capsys):
    from topkeval.cli import main

    run, qrels = _three_topics()
    run.to_csv(tmp_path / "run.csv", index=False)
    qrels.to_csv(tmp_path / "qrels.csv", index=False)
    code = main(["evaluate", str(tmp_path / "run.csv"), "--qrels", str(tmp_path / "qrels.csv"), "--item", "item",
                 "-m", "all_trek", "--conventions", "trec_eval"])
    out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "Did you mean 'all_trec'" in err, err


@pytest.mark.parametrize("name,pattern", [
    ("rbp", "rbp_trec"),  # trec_eval's rbp: a trec_eval user types it first
    ("relstring.20", "holds no number"), ("runid", "holds no number"),
    ("ndcg_cut.x", r"whole-number cutoffs x, as in 'ndcg_cut\.10'"), ("P.5,-3", "whole-number cutoffs"),
])
def test_trec_eval_names_topkeval_does_not_take_are_refused_saying_why(name, pattern):
    with pytest.raises(tk.UnknownMetricError, match=pattern):
        tk.evaluate(pd.DataFrame({"query": [1, 1], "item": [1, 2], "relevance": [1, 0], "score": [2.0, 1.0]}), [name],
                    item="item", conventions="trec_eval")
