"""Results.log_mlflow against a local MLflow store, read back with MlflowClient."""

from __future__ import annotations

import math
import sys

import numpy as np
import pandas as pd
import pytest

import topkeval as tk

mlflow = pytest.importorskip("mlflow", reason="mlflow is an optional extra (topkeval[mlflow])")
from mlflow import MlflowClient  # noqa: E402

METRICS = ["recall@2", "P@1", "fbeta(beta=0.5)@2"]
NAMES = {"recall@2": "recall_at_2", "P@1": "P_at_1", "fbeta(beta=0.5)@2": "fbeta_beta_0.5_at_2"}


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A file store in the test's folder. MLflow 3 keeps the file store in maintenance mode and refuses it
    unless MLFLOW_ALLOW_FILE_STORE is set; its sqlite store needs SQLAlchemy, which mlflow-skinny lacks."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "file:" + str(tmp_path / "mlruns"))
    monkeypatch.chdir(tmp_path)
    yield MlflowClient()
    while mlflow.active_run() is not None:  # a failed test leaves no run active for the next one
        mlflow.end_run()


def _results(**options):
    rng = np.random.default_rng(5)
    rows = [(model, f"u{u}", f"i{i}", float(rng.random()), int(rng.random() < 0.4))
            for model in ("team/v2", "pop") for u in range(8) for i in range(2 + u % 3)]
    frame = pd.DataFrame(rows, columns=["model", "user", "item", "score", "relevance"])
    return tk.evaluate(frame, METRICS, query="user", item="item", model="model", **options)


def _runs(client):
    return client.search_runs(experiment_ids=["0"])


def test_a_new_run_gets_the_means_and_the_artifacts_and_is_ended(store, tmp_path):
    res = _results()
    run_id = res.log_mlflow()
    run = store.get_run(run_id)
    assert run.info.status == "FINISHED" and mlflow.active_run() is None
    want = {f"{model.replace('/', '_')}/{NAMES[m]}": res.summary.loc[model, m]
            for model in res.models for m in METRICS}
    assert run.data.metrics.keys() == want.keys()
    for name, value in want.items():
        assert run.data.metrics[name] == pytest.approx(value, rel=1e-12, nan_ok=True)
    files = sorted(a.path for a in store.list_artifacts(run_id, "topkeval"))
    assert files == ["topkeval/info.json", "topkeval/per_query.parquet", "topkeval/report.html"]
    folder = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="topkeval", dst_path=str(tmp_path / "d"))
    logged = pd.read_parquet(f"{folder}/per_query.parquet")
    pd.testing.assert_frame_equal(logged, res.to_pandas(), check_dtype=False)
    assert logged["user"].tolist() == res.to_pandas()["user"].tolist()  # text ids as text
    with open(f"{folder}/report.html", encoding="utf-8") as f:
        assert "Comparison with team/v2" in f.read()
    with open(f"{folder}/info.json", encoding="utf-8") as f:
        assert '"evaluated_per_model"' in f.read()


def test_the_active_run_is_logged_into_and_left_active_with_intervals(store):
    res = _results()
    with mlflow.start_run() as run:
        run_id = res.log_mlflow(prefix="val/", ci=0.9, n_resamples=500, per_query=False, report=False)
        assert run_id == run.info.run_id and mlflow.active_run().info.run_id == run_id
        assert store.get_run(run_id).info.status == "RUNNING"  # not ended by log_mlflow
    metrics = store.get_run(run_id).data.metrics
    ci = res.summary_ci(confidence=0.9, n_resamples=500)
    assert len(metrics) == 3 * len(ci) == 3 * 2 * len(METRICS)
    for row in ci.itertuples():
        base = f"val/{row.model.replace('/', '_')}/{NAMES[row.metric]}"
        assert metrics[base] == pytest.approx(row.mean, rel=1e-12)
        assert metrics[base + "_ci_low"] == pytest.approx(row.ci_low, rel=1e-12)
        assert metrics[base + "_ci_high"] == pytest.approx(row.ci_high, rel=1e-12)
        assert row.ci_low <= row.mean <= row.ci_high
    assert [a.path for a in store.list_artifacts(run_id, "topkeval")] == ["topkeval/info.json"]


def test_a_run_given_by_id_is_logged_into_and_no_other(store):
    res = _results()
    target = store.create_run(experiment_id="0")
    with mlflow.start_run() as active:
        assert res.log_mlflow(target.info.run_id, report=False, artifact_path="eval/test") == target.info.run_id
        assert mlflow.active_run().info.run_id == active.info.run_id
    assert store.get_run(target.info.run_id).info.status == "RUNNING"  # created by the caller: left as it was
    assert len(store.get_run(target.info.run_id).data.metrics) == 2 * len(METRICS)
    assert store.get_run(active.info.run_id).data.metrics == {}
    assert sorted(a.path for a in store.list_artifacts(target.info.run_id, "eval/test")) == [
        "eval/test/info.json", "eval/test/per_query.parquet"]
    # a step per call: the history of a metric across epochs
    res.log_mlflow(target.info.run_id, step=1, per_query=False, report=False)
    history = store.get_metric_history(target.info.run_id, "pop/recall_at_2")
    assert [m.step for m in history] == [0, 1]


def test_errors_log_nothing(store, monkeypatch):
    res = _results()
    with pytest.raises(tk.ParameterError, match="run_id 'nosuchrun' names no run of the MLflow tracking store"):
        res.log_mlflow("nosuchrun")
    with pytest.raises(tk.ParameterError, match="'prefix' parameter of log_mlflow"):
        res.log_mlflow(prefix="/val")
    with pytest.raises(tk.ParameterError, match="baseline 'popp' is not a model .*Did you mean 'pop'"):
        res.log_mlflow(baseline="popp")
    clash = tk.Results.from_per_query(pd.DataFrame({"model": ["a/b", "a_b"], "query": [1, 1], "P@1": [1.0, 0.0]}))
    with pytest.raises(tk.ParameterError, match="would both be logged to MLflow as 'a_b/P_at_1'"):
        clash.log_mlflow(report=False)
    assert _runs(store) == [] and mlflow.active_run() is None
    monkeypatch.setitem(sys.modules, "mlflow", None)
    with pytest.raises(tk.ParameterError) as info:
        res.log_mlflow()
    assert str(info.value) == ('log_mlflow needs mlflow, an optional dependency of topkeval: '
                               'pip install "topkeval[mlflow]"')


def test_results_that_kept_only_the_means(store, tmp_path):
    path = tmp_path / "log.parquet"
    frame = pd.DataFrame({"query": np.repeat(np.arange(6), 3), "relevance": [1, 0, 0] * 6,
                          "s": np.linspace(0, 1, 18)})
    frame.to_parquet(path)
    res = tk.evaluate(path, ["recall@1"], score="s", chunk_rows=6, keep_per_query=False)
    with pytest.raises(tk.ParameterError, match="log_mlflow\\(per_query=True\\) works on the per-query values"):
        res.log_mlflow()
    run = store.get_run(res.log_mlflow(per_query=False, report=False))
    assert run.data.metrics == {"s/recall_at_1": res.summary.loc["s", "recall@1"]}


def test_nan_means_are_logged_as_nan(store):
    """A mean with no defined value (every query's value undefined, undefined="nan") is NaN in MLflow too."""
    res = tk.Results.from_per_query(pd.DataFrame({"model": ["a", "b"], "query": [1, 1], "P@1": [math.nan, 1.0]}))
    assert math.isnan(res.summary.loc["a", "P@1"])
    metrics = store.get_run(res.log_mlflow(report=False)).data.metrics
    assert math.isnan(metrics["a/P_at_1"]) and metrics["b/P_at_1"] == 1.0


def test_a_metric_named_like_an_interval_is_refused_with_ci(store):
    from topkeval.metrics.define import forget_metric

    for name in ("share", "share_ci_low"):
        tk.define_metric(name, lambda c: c.h / c.listed, cutoff="none", summary="s", formula="h / listed",
                         replace=True)
    try:
        res = tk.evaluate({"query": [1, 1, 2, 2], "relevance": [1, 0, 0, 1], "s": [0.9, 0.1, 0.2, 0.3]},
                          ["share", "share_ci_low"], score="s")
        with pytest.raises(tk.ParameterError, match="would take one MLflow name"):
            res.log_mlflow(ci=0.9, n_resamples=200, report=False)
        assert _runs(store) == []
        assert set(store.get_run(res.log_mlflow(report=False)).data.metrics) == {"s/share", "s/share_ci_low"}
    finally:
        for name in ("share", "share_ci_low"):
            forget_metric(name)


def test_a_store_mlflow_refuses_is_one_topkeval_error(tmp_path, monkeypatch):
    """A file store on an existing empty folder has no default experiment: MLflow's refusal comes back
    as one topkeval error naming the store, not as MLflow's traceback."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "file:" + str(empty))
    with pytest.raises(tk.TopkevalError, match="MLflow refused to log into the tracking store") as caught:
        _results().log_mlflow(report=False)
    assert str(empty) in str(caught.value)
    while mlflow.active_run() is not None:
        mlflow.end_run()


def test_a_store_mlflow_cannot_open_is_one_error_that_names_a_store_that_works(store, monkeypatch):
    """With no tracking URI set, MLflow 3 opens sqlite:///mlflow.db, which mlflow-skinny (the extra) cannot: the
    user gets a ParameterError naming the store and the ways to name another, not MLflow's traceback, before
    the intervals or the report are computed."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "nosuchscheme:///nowhere")
    res = _results()
    computed = []
    monkeypatch.setattr(tk.Results, "summary_ci", lambda *a, **k: computed.append("summary_ci"))
    with pytest.raises(tk.ParameterError, match="MLflow cannot open its tracking store 'nosuchscheme:///nowhere'") as info:
        res.log_mlflow(ci=0.9)
    assert "mlflow.set_tracking_uri('file:./mlruns') with the variable MLFLOW_ALLOW_FILE_STORE=true" in str(info.value)
    assert computed == []
