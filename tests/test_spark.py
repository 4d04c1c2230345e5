"""On Apache Spark (local[2], one session for the test run): exactly the numbers of the local engine."""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, given, settings

import topkeval as tk
from strategies import DETERMINISTIC_ONLY, conventions, logs, metric_specs

pyspark = pytest.importorskip("pyspark", reason="pyspark is a test extra (the Spark backend)")
pa = pytest.importorskip("pyarrow")

# the tests' own createDataFrame: pyspark says it does not fully support pandas 3 (topkeval's calls
# silence it themselves: test_topkeval_passes_on_no_warning_from_pyspark)
pytestmark = pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas:FutureWarning:pyspark")


def _sdf(spark, frame: pd.DataFrame, partitions: int = 3):
    """A Spark DataFrame of a pandas one, its rows spread over partitions (queries split across them)."""
    return spark.createDataFrame(pa.Table.from_pandas(frame, preserve_index=False)).repartition(partitions)


def _same(spark_res, local, query="query"):
    got = spark_res.to_pandas().sort_values(["model", query]).reset_index(drop=True)
    want = local.per_query.sort_values(["model", query]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_exact=True, check_dtype=False)
    pd.testing.assert_frame_equal(spark_res.summary, local.summary, rtol=1e-12)
    for key in ("queries", "evaluated", "skipped_empty", "rows", "ties_at_cutoff", "evaluated_per_model"):
        assert spark_res.info[key] == local.info[key], key


@settings(max_examples=int(os.environ.get("TOPKEVAL_SPARK_EXAMPLES", "12")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], phases=[Phase.explicit, Phase.reuse, Phase.generate])
@given(rows=logs(max_queries=7), conv=conventions(), specs=metric_specs())
def test_spark_equals_the_local_engine(spark, rows, conv, specs):
    """Every convention, shuffled rows, queries spread over partitions, string query ids, empty
    queries, ties across the cutoff: per-query values identical, means to the last bits."""
    frame = pd.DataFrame(rows).sample(frac=1, random_state=0).reset_index(drop=True)
    # interpolated precision is refused under ties="expected" (test_reference.py checks the refusal)
    metrics = [s[0] for s in specs if not (s[1] in DETERMINISTIC_ONLY and conv["ties"] == "expected")]
    local = tk.evaluate(frame, metrics, relevance="grade", score=["a", "b"], item="item", **conv)
    # ties="first" follows the order of the input: a DataFrame Spark has shuffled has none, so that
    # case keeps the pandas order (as a Parquet file read keeps the file's)
    sdf = _sdf(spark, frame) if conv["ties"] not in ("first", "ranx") else spark.createDataFrame(
        pa.Table.from_pandas(frame, preserve_index=False))
    on_spark = tk.evaluate(sdf, metrics, relevance="grade", score=["a", "b"], item="item", **conv)
    _same(on_spark, local)


def test_spark_with_judgments_apart_equals_trec_eval_numbers(spark):
    rng = np.random.default_rng(4)
    run = pd.DataFrame({"query": rng.choice([f"t{i}" for i in range(30)], 2000), "item": rng.integers(0, 300, 2000),
                        "score": rng.integers(0, 8, 2000) / 2}).drop_duplicates(["query", "item"])
    run = run.assign(item=run["item"].astype(str))
    qrels = pd.DataFrame({"query": rng.choice([f"t{i}" for i in range(35)], 900),
                          "item": rng.integers(0, 300, 900).astype(str),
                          "relevance": rng.choice([-1, 0, 1, 2], 900)}).drop_duplicates(["query", "item"])
    metrics = ["P@10", "map", "ndcg_cut_10", "recip_rank", "Rprec", "num_rel_ret", "set_F.0.5", "bpref", "11pt_avg",
               "judged@10", "err@10"]
    for options in ({}, {"missing_queries": "zero"}, {"judged_only": True, "depth": 20}):
        local = tk.evaluate(run, qrels=qrels, metrics=metrics, item="item", conventions="trec_eval", **options)
        on_spark = tk.evaluate(_sdf(spark, run), qrels=_sdf(spark, qrels, 2), metrics=metrics, item="item",
                               conventions="trec_eval", **options)
        _same(on_spark, local)
        assert on_spark.info["missing_from_run"] == local.info["missing_from_run"]
        assert on_spark.info["run_queries_without_judgments"] == local.info["run_queries_without_judgments"]
    # runs stacked in one table, a column naming them (one run lacks most queries): in the order
    # the runs first appear
    stacked = pd.concat([run.assign(system="zeta"), run[run["query"] < "t2"].assign(system="alpha", score=1.0)])
    metrics.remove("11pt_avg")  # default ties ("expected") from here: interpolated precision is refused
    for options in ({}, {"missing_queries": "zero"}):
        local = tk.evaluate(stacked, qrels=qrels, metrics=metrics, item="item", model="system", **options)
        on_spark = tk.evaluate(_sdf(spark, stacked, 1), qrels=_sdf(spark, qrels, 2), metrics=metrics, item="item",
                               model="system", **options)
        assert list(on_spark.summary.index) == ["zeta", "alpha"]
        _same(on_spark, local)
        assert on_spark.info["missing_from_run"] == local.info["missing_from_run"]


def test_spark_never_counts_an_unjudged_document_relevant_whatever_the_threshold(spark):
    """A relevance threshold of 0 or less with judgments apart: each partition matches its rows to the
    judgments as the local engine does, so an unjudged document stays not relevant there too (recall at
    most 1; the local engine is tested against the brute-force reference on such thresholds)."""
    rng = np.random.default_rng(9)
    run = pd.DataFrame({"query": rng.choice([f"t{i}" for i in range(20)], 800), "item": rng.integers(0, 100, 800),
                        "score": rng.integers(0, 6, 800) / 2}).drop_duplicates(["query", "item"])
    run = run.assign(item=run["item"].astype(str))
    qrels = pd.DataFrame({"query": rng.choice([f"t{i}" for i in range(20)], 300),
                          "item": rng.integers(0, 100, 300).astype(str),
                          "relevance": rng.choice([-1, 0, 1], 300)}).drop_duplicates(["query", "item"])
    metrics = ["recall@10", "P@10", "map", "bpref", "ndcg@10"]
    for threshold in (0, -1):
        local = tk.evaluate(run, qrels=qrels, metrics=metrics, item="item", threshold=threshold, ties="item_desc")
        assert local.per_query["recall@10"].max() <= 1.0 and local.per_query["map"].max() <= 1.0
        on_spark = tk.evaluate(_sdf(spark, run), qrels=_sdf(spark, qrels, 2), metrics=metrics, item="item",
                               threshold=threshold, ties="item_desc")
        _same(on_spark, local)


def test_spark_reads_a_table_of_relevant_pairs_as_the_local_engine(spark):
    """relevance=None: judgments that list the relevant (query, item) pairs only, a pair twice
    counted once: on Spark as on this machine."""
    rng = np.random.default_rng(8)
    run = pd.DataFrame({"query": rng.integers(0, 40, 1500), "item": rng.integers(0, 200, 1500).astype(str),
                        "score": rng.random(1500)}).drop_duplicates(["query", "item"])
    pairs = pd.DataFrame({"query": rng.integers(0, 45, 500), "item": rng.integers(0, 200, 500).astype(str)})
    assert pairs.duplicated().any()  # repeat interactions
    metrics = ["recall@10", "precision@10", "ndcg@10", "r_precision"]
    local = tk.evaluate(run, metrics, item="item", qrels=pairs, relevance=None)
    on_spark = tk.evaluate(_sdf(spark, run), metrics, item="item", qrels=_sdf(spark, pairs, 2), relevance=None)
    _same(on_spark, local)
    ones = tk.evaluate(run, metrics, item="item", qrels=pairs.drop_duplicates().assign(relevance=1))
    pd.testing.assert_frame_equal(local.summary, ones.summary)


def test_compare_summary_ci_diff_and_report_on_spark(spark, tmp_path):
    rng = np.random.default_rng(1)
    n = 1500
    frame = pd.DataFrame({"query": rng.integers(0, 40, n), "item": np.arange(n) % 97, "relevance": rng.integers(0, 2, n),
                          "old": rng.integers(0, 4, n) / 3, "new": rng.random(n)}).drop_duplicates(["query", "item"])
    local = tk.evaluate(frame, ["recall@5", "ndcg@5"], score=["old", "new"], item="item")
    on_spark = tk.evaluate(_sdf(spark, frame), ["recall@5", "ndcg@5"], score=["old", "new"], item="item")
    pd.testing.assert_frame_equal(on_spark.compare(baseline="old", seed=3), local.compare(baseline="old", seed=3),
                                  rtol=1e-12)
    pd.testing.assert_frame_equal(on_spark.summary_ci(seed=3), local.summary_ci(seed=3), rtol=1e-12)
    a = on_spark.diff("old", "new", "recall@5").sort_values("query").reset_index(drop=True)
    b = local.diff("old", "new", "recall@5").sort_values("query").reset_index(drop=True)
    assert a["gained"].map(sorted).tolist() == b["gained"].map(sorted).tolist()
    assert a["lost"].map(sorted).tolist() == b["lost"].map(sorted).tolist()
    pd.testing.assert_frame_equal(a.drop(columns=["gained", "lost"]), b.drop(columns=["gained", "lost"]))
    assert "model" in on_spark.per_query.columns  # the per-query values stay a Spark DataFrame
    # curves evaluate the Spark DataFrame again at every cutoff; the report collects like compare
    pd.testing.assert_frame_equal(on_spark.curves(), local.curves(), rtol=1e-12)
    page = Path(on_spark.report(tmp_path / "spark.html", baseline="old", worst=2, n_resamples=500)).read_text(
        encoding="utf-8")
    assert f'data-value="{float(on_spark.summary.loc["new", "recall@5"])!r}"' in page
    assert "evaluate the rows of the queries you want to see" in page  # no side by side: the rows stay on Spark


def test_topkeval_passes_on_no_warning_from_pyspark(spark):
    frame = pd.DataFrame({"query": [1, 1, 2, 2, 3], "item": ["x", "y", "x", "z", "x"], "relevance": [1, 0, 0, 1, 1],
                          "a": [0.5, 0.1, 0.2, 0.9, 0.3], "b": [0.1, 0.5, 0.9, 0.2, 0.3]})
    sdf, qrels = _sdf(spark, frame), _sdf(spark, frame[["query", "item", "relevance"]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # ordinary input: no warning at all
        res = tk.evaluate(sdf, ["recall@1"], item="item", score=["a", "b"])
        lost = res.diff("a", "b", "recall@1").set_index("query")["lost"]  # a ranks x, z, x first; b y, x, x
        assert lost.to_dict() == {1: ["x"], 2: ["z"], 3: []}
        assert len(res.to_pandas()) == 6  # 2 models x 3 queries
        judged = tk.evaluate(sdf.drop("relevance"), ["recall@1"], item="item", score="a", qrels=qrels)
        assert judged.summary.loc["a", "recall@1"] == res.summary.loc["a", "recall@1"]


@pytest.mark.parametrize("change,exc,pattern", [
    (lambda f: f.assign(a=np.where(np.arange(len(f)) == 3, np.nan, f["a"])), tk.DataError, "non-finite scores"),
    (lambda f: f.assign(a=f["a"].astype(str)), tk.ColumnError, "numeric scores"),
    (lambda f: pd.concat([f, f.iloc[:1]]), tk.DataError, "duplicate \\(query, item\\)"),
    (lambda f: f.rename(columns={"a": "scroe"}), tk.ColumnError, "Column 'a' \\(score=\\) not found"),
])
def test_bad_input_gives_the_same_error_on_spark(spark, change, exc, pattern):
    frame = pd.DataFrame({"query": [1, 1, 2, 2, 3], "item": ["x", "y", "x", "z", "x"], "relevance": [1, 0, 0, 1, 1],
                          "a": [0.5, 0.1, 0.2, 0.9, 0.3]})
    bad = change(frame)
    with pytest.raises(exc, match=pattern):
        tk.evaluate(bad, ["P@1"], score="a", item="item")
    with pytest.raises(exc, match=pattern):
        tk.evaluate(_sdf(spark, bad, 2), ["P@1"], score="a", item="item")


def test_cli_reads_a_parquet_directory_through_spark(spark, tmp_path, capsys):
    from topkeval.cli import main

    frame = pd.DataFrame({"query": [1, 1, 2, 2, 3, 3], "item": list("abcabc"), "relevance": [1, 0, 0, 1, 1, 0],
                          "score": [0.9, 0.1, 0.2, 0.8, 0.6, 0.4]})
    folder = tmp_path / "log"
    folder.mkdir()
    frame.iloc[:3].to_parquet(folder / "part-0.parquet")
    frame.iloc[3:].to_parquet(folder / "part-1.parquet")
    assert main(["evaluate", str(folder), "--spark", "local[2]", "--item", "item", "-m", "P@1,recall@2",
                 "--format", "json"]) == 0
    import json

    payload = json.loads(capsys.readouterr().out)
    assert payload["summary"] == tk.evaluate(frame, ["P@1", "recall@2"], item="item").to_dict()["summary"]
    assert payload["info"]["spark"]["partitions"] >= 1
    for extra in ([], ["--per-query"]):  # trec lines, with and without the per-query ones
        assert main(["evaluate", str(folder), "--spark", "--item", "item", "-m", "P@1,num_rel_ret", "--format", "trec",
                     *extra]) == 0
        on_spark = capsys.readouterr().out
        frame.to_parquet(tmp_path / "whole.parquet")
        assert main(["evaluate", str(tmp_path / "whole.parquet"), "--item", "item", "-m", "P@1,num_rel_ret",
                     "--format", "trec", *extra]) == 0
        local = capsys.readouterr().out
        assert sorted(on_spark.splitlines()) == sorted(local.splitlines())
        assert ("\t1\t" in on_spark) == bool(extra)


def test_an_executor_without_topkeval_is_named():
    from topkeval.backends.spark import _unwrap

    raised = RuntimeError("PythonException: ...\nModuleNotFoundError: No module named 'topkeval'\n")
    message = str(_unwrap(raised))
    assert "not installed in the Python of the Spark executors" in message and "PYSPARK_PYTHON" in message
    other = RuntimeError("java.lang.OutOfMemoryError")
    assert _unwrap(other) is other


def test_segments_and_weights_on_spark_equal_the_local_engine(spark):
    rng = np.random.default_rng(4)
    n = 900
    q = rng.integers(0, 60, n)
    frame = pd.DataFrame({"query": q, "item": np.arange(n) % 37, "relevance": rng.integers(0, 2, n),
                          "old": rng.integers(0, 4, n) / 3, "new": rng.random(n), "device": np.where(q % 3, "m", "d"),
                          "traffic": (q % 5).astype(float)}).drop_duplicates(["query", "item"])
    kw = dict(score=["old", "new"], item="item", by="device", weight="traffic")
    local = tk.evaluate(frame, ["recall@5", "ndcg@5"], **kw)
    on_spark = tk.evaluate(_sdf(spark, frame), ["recall@5", "ndcg@5"], **kw)
    pd.testing.assert_frame_equal(on_spark.segments, local.segments, rtol=1e-12)
    pd.testing.assert_frame_equal(on_spark.summary, local.summary, rtol=1e-12)
    pd.testing.assert_frame_equal(on_spark.compare(baseline="old", seed=1), local.compare(baseline="old", seed=1),
                                  rtol=1e-12)
    bad = frame.assign(device=np.where(frame["item"] == 1, "x", frame["device"]))
    with pytest.raises(tk.DataError, match="same on every row of a query"):
        tk.evaluate(_sdf(spark, bad), ["recall@5"], **kw)
    with pytest.raises(tk.DataError, match=">= 0"):
        tk.evaluate(_sdf(spark, frame.assign(traffic=-frame["traffic"] - 1)), ["recall@5"], **kw)


# ----------------------------------------------------------------------------------------------
# Spark that cannot start, and the paths --spark reads (no Java needed: nothing starts)


def _no_java(monkeypatch, tmp_path, java_home: str | None):
    """An environment without Java: JAVA_HOME unset or pointing nowhere, a PATH without java."""
    empty = tmp_path / "bin"
    empty.mkdir(exist_ok=True)
    monkeypatch.setenv("PATH", str(empty))
    if java_home is None:
        monkeypatch.delenv("JAVA_HOME", raising=False)
    else:
        monkeypatch.setenv("JAVA_HOME", java_home)


@pytest.mark.parametrize("java_home,pattern", [
    (None, r"Spark could not start: Java is not installed \(no JAVA_HOME, no java on the PATH\).*apt-get install"),
    ("/nonexistent/jdk", r"Spark could not start: JAVA_HOME is '/nonexistent/jdk', which has no bin/java"),
])
def test_spark_without_java_is_one_clear_error(monkeypatch, tmp_path, java_home, pattern):
    from pyspark.sql import SparkSession

    from topkeval.backends.spark import read_parquet, start_session

    _no_java(monkeypatch, tmp_path, java_home)
    with pytest.raises(tk.TopkevalError, match=pattern):
        start_session("local[1]")
    monkeypatch.setattr(SparkSession, "getActiveSession", staticmethod(lambda: None))
    path = tmp_path / "log.parquet"
    pd.DataFrame({"query": [1], "relevance": [1], "score": [0.5]}).to_parquet(path)
    with pytest.raises(tk.TopkevalError, match=pattern):
        read_parquet(path, "local[1]")


def test_spark_that_fails_to_launch_is_one_clear_error(monkeypatch):
    from pyspark.sql import SparkSession

    from topkeval.backends.spark import start_session

    def fail(self):
        raise RuntimeError("[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number.\n"
                           "more lines")

    monkeypatch.setattr(type(SparkSession.builder), "getOrCreate", fail)
    monkeypatch.setattr("topkeval.backends.spark.java_problem", lambda: None)
    with pytest.raises(tk.TopkevalError, match=r"Spark could not start on master 'local\[1\]': \[JAVA_GATEWAY_EXITED\] "
                                               r"Java gateway process exited before sending its port number\. Check"):
        start_session("local[1]")


def test_cli_spark_without_java_exits_2_with_one_line(tmp_path):
    import subprocess

    path = tmp_path / "log.parquet"
    pd.DataFrame({"query": [1, 1], "relevance": [1, 0], "score": [0.5, 0.2]}).to_parquet(path)
    (tmp_path / "bin").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"} | {"PATH": str(tmp_path / "bin")}
    for extra in ({}, {"JAVA_HOME": str(tmp_path / "jdk")}):
        proc = subprocess.run([sys.executable, "-m", "topkeval", "evaluate", str(path), "--spark", "local[1]"],
                              capture_output=True, text=True, env=env | extra, timeout=300)
        assert proc.returncode == 2 and proc.stdout == "", proc
        assert proc.stderr.startswith("topkeval: error: Spark could not start: ") and proc.stderr.count("\n") == 1, \
            proc.stderr


def test_spark_paths_are_checked_before_spark_starts(tmp_path):
    from topkeval.backends.spark import read_parquet

    (tmp_path / "empty").mkdir()
    with pytest.raises(tk.InputFileError, match="is an empty folder"):
        read_parquet(tmp_path / "empty", "local[1]")
    (tmp_path / "text.parquet").write_text("query,score\n")
    with pytest.raises(tk.InputFileError, match="as parquet: it holds text"):
        read_parquet(tmp_path / "text.parquet", "local[1]")
    with pytest.raises(tk.InputFileError, match="File not found"):
        read_parquet(tmp_path / "nope.parquet", "local[1]")


def test_spark_results_are_results_with_the_per_query_values_on_the_cluster(spark):
    """Results of Spark are plain Results (built by the one results builder): per_query stays a lazy
    Spark DataFrame, everything that needs the rows collects them (to_dict with per_query too)."""
    frame = pd.DataFrame({"query": [1, 1, 2, 2, 3, 3], "item": list("abcabc"), "relevance": [1, 0, 0, 1, 1, 0],
                          "a": [0.9, 0.1, 0.2, 0.8, 0.6, 0.4], "b": [0.1, 0.9, 0.8, 0.2, 0.6, 0.4]})
    res = tk.evaluate(spark.createDataFrame(frame), ["P@1", "recall@2"], score=["a", "b"], item="item")
    local = tk.evaluate(frame, ["P@1", "recall@2"], score=["a", "b"], item="item")
    assert type(res) is tk.Results and type(res.per_query).__module__.startswith("pyspark")
    payload = res.to_dict(per_query=True)
    assert payload["per_query"] == local.to_dict(per_query=True)["per_query"]
    assert payload["summary"] == local.to_dict()["summary"]
    pd.testing.assert_frame_equal(res.to_pandas(), local.per_query)


def test_the_executors_run_this_topkeval(spark):
    """The Python workers import the topkeval under test, not another install (a relative PYTHONPATH
    is lost where Spark Connect runs its workers in a folder of their own); and the session is the
    kind asked for (TOPKEVAL_SPARK_CONNECT=1: a Spark Connect client, tests/test_spark_connect.py)."""
    from pyspark.sql.types import StringType, StructField, StructType

    def where(batches):
        import topkeval

        for _ in batches:
            pass
        yield pa.RecordBatch.from_pydict({"file": [str(Path(topkeval.__file__).resolve())]})

    schema = StructType([StructField("file", StringType())])
    found = {r["file"] for r in spark.range(2).repartition(2).mapInArrow(where, schema).collect()}
    assert found == {str(Path(tk.__file__).resolve())}
    connect = type(spark).__module__.startswith("pyspark.sql.connect.")
    assert connect == (os.environ.get("TOPKEVAL_SPARK_CONNECT") == "1")


def test_a_small_table_is_not_spread_over_many_partitions(spark):
    """Classic Spark: as many partitions as the input and the cores; Spark Connect, which cannot ask:
    Spark's shuffle partitions, coalesced by adaptive execution (not 200 tasks for 60 queries)."""
    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"query": np.repeat(np.arange(60), 5), "item": np.tile(np.arange(5), 60),
                          "relevance": rng.integers(0, 2, 300), "score": rng.random(300)})
    res = tk.evaluate(_sdf(spark, frame), ["recall@2"], item="item")
    assert res.info["spark"]["partitions"] <= 4  # partitions that held rows
    local = tk.evaluate(frame, ["recall@2"], item="item")
    pd.testing.assert_frame_equal(res.summary, local.summary, rtol=1e-12)


def test_spark_results_pickle_with_their_per_query_values(spark):
    """Results of a Spark evaluation pickle (and copy): the per-query values, kept on the cluster, are
    collected into the pickle; what reads the DataFrame again (curves) cannot be pickled and says so
    after unpickling; compare and the rest answer as on the original."""
    import copy
    import pickle

    frame = pd.DataFrame({"query": [1, 1, 2, 2, 3, 3], "item": list("abacab"), "relevance": [1, 0, 0, 1, 1, 1],
                          "a": [0.9, 0.1, 0.8, 0.2, 0.5, 0.4], "b": [0.1, 0.9, 0.2, 0.8, 0.5, 0.5]})
    res = tk.evaluate(spark.createDataFrame(frame), ["P@1", "recall@2"], score=["a", "b"], item="item")
    back = pickle.loads(pickle.dumps(res))
    pd.testing.assert_frame_equal(back.summary, res.summary, check_exact=True)
    collected = res.to_pandas().sort_values(["model", "query"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(back.per_query.sort_values(["model", "query"]).reset_index(drop=True), collected,
                                  check_exact=True)
    assert repr(back.info) == repr(res.info)
    pd.testing.assert_frame_equal(back.compare(n_resamples=100), res.compare(n_resamples=100), check_exact=True)
    with pytest.raises(tk.ParameterError, match="unpickled without how to evaluate its data at other metrics"):
        back.curves(ks=[1, 2])
    assert copy.copy(res).summary.equals(res.summary) and copy.deepcopy(res).summary.equals(res.summary)
