"""The README's examples of extending topkeval (a metric of your own, an output format) run as written
and give what their comments say."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

import topkeval as tk
from topkeval.metrics.define import forget_metric
from topkeval.outputs import formats

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)


def _block(marker: str) -> tuple[str, str]:
    """The one python block of the README that contains ``marker``: its statements, and its last line
    as an expression (without its comment)."""
    found = [b for b in BLOCKS if marker in b]
    assert len(found) == 1, f"the README has {len(found)} python blocks with {marker!r}"
    *body, last = found[0].strip().splitlines()
    return "\n".join(body), last.split("  #")[0].strip()


def test_the_define_metric_example_gives_the_numbers_it_states():
    body, last = _block("tk.define_metric(")
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
    assert "0.5833 and 0.5" in README


def test_the_output_format_example_writes_the_models_as_the_first_column(monkeypatch):
    monkeypatch.setattr(formats, "FORMATS", dict(formats.FORMATS))  # the example's format goes with the test
    body, last = _block("register_format(")
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


def test_the_click_log_example_runs_and_estimates_what_it_says():
    body, last = _block("estimate_position_bias(")
    namespace: dict = {"tk": tk, "pd": pd}
    exec(body.replace("20_000", "4000"), namespace)  # a smaller log: the same statements
    assert eval(last, namespace) == {"a": 1.0, "b": 0.5}  # as its comment says
    res, bias = namespace["res"], namespace["bias"]
    assert res.info["ips"]["estimators"] == {"precision@10": "ips", "dcg@10": "ips"}
    assert abs(bias.curve.loc[2, "propensity"] - 0.5) < 0.06  # examination 1/position
    bounds = namespace["res"].bounds()
    assert (bounds["lower"] <= bounds["upper"]).all()


def test_the_many_models_example_runs():
    body, last = _block("res.compare_all(test=\"tukey\")")
    namespace: dict = {"tk": tk}
    exec(body.replace("n_resamples=10_000", "n_resamples=500"), namespace)
    sized = eval(last, namespace)
    assert sized.iloc[0]["queries_needed"] > 2 and sized.iloc[0]["queries_now"] <= 300
    letters = namespace["res"].compare_all()
    assert set(letters["model_a"]) | set(letters["model_b"]) == {"m1", "m2", "m3", "m4", "m5"}
