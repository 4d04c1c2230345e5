"""Every output format prints the numbers of the Results it is given: the means, the per-query rows,
the intervals at the level asked for, the segments and their weights, in table, markdown, CSV,
JSON and trec_eval's lines, each read back here and compared with the Results' own tables."""

from __future__ import annotations

import io
import json
import math
import re

import numpy as np
import pandas as pd
import pytest

import topkeval as tk
from topkeval.outputs.text import json_ready, p_value_text, whole


def _log(seed=0, n_queries=14):
    """Two models over queries of 4 to 8 candidates, one query without a relevant item (skipped): a
    recall and an nDCG, a geometric mean (gm_map) and a count; a segment and a weight per query."""
    rng = np.random.default_rng(seed)
    frames = []
    for q in range(n_queries):
        n = int(rng.integers(4, 9))
        grades = rng.integers(0, 3, n) if q != 3 else np.zeros(n, int)
        frames.append(pd.DataFrame({"query": f"q{q:02d}", "item": np.arange(n), "relevance": grades,
                                    "a": rng.random(n), "b": rng.random(n), "device": rng.choice(["m", "d"]),
                                    "w": rng.choice([1.0, 2.0, 0.5])}))
    return pd.concat(frames, ignore_index=True)


METRICS = ["recall@2", "ndcg@3", "gm_map", "num_rel"]


@pytest.fixture(scope="module")
def res():
    return tk.evaluate(_log(), METRICS, score=["a", "b"], item="item", ties="first", qrels=None)


def _markdown_rows(text: str) -> list[list[str]]:
    rows = [line for line in text.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def _table_rows(text: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip("│").split("│")] for line in text.splitlines() if line.startswith("│")]


def test_csv_and_json_print_the_means_at_full_precision(res):
    csv = pd.read_csv(io.StringIO(res.to_string("csv"))).set_index("model")
    pd.testing.assert_frame_equal(csv, res.summary, check_names=False)
    payload = json.loads(res.to_string("json"))
    for model in res.models:
        for metric in METRICS:
            assert payload["summary"][model][metric] == res.summary.loc[model, metric]
    assert payload["info"]["skipped_empty"] == res.info["skipped_empty"] == 1


@pytest.mark.parametrize("digits", [4, 6])
def test_table_and_markdown_print_the_means_to_the_digits_asked(res, digits):
    for fmt, rows in (("markdown", _markdown_rows), ("table", _table_rows)):
        got = rows(res.to_string(fmt, digits=digits))
        assert [r[0] for r in got] == res.models
        for model, cells in zip(res.models, got):
            assert cells[1:] == [f"{res.summary.loc[model, m]:.{digits}f}" for m in METRICS], (fmt, model)
    assert "13 of 14 queries evaluated; 1 without a relevant item skipped" in res.to_string("markdown")


def test_per_query_rows_in_every_format(res):
    rows = res.to_pandas()
    csv = pd.read_csv(io.StringIO(res.to_string("csv", per_query=True)))
    assert csv[METRICS].to_numpy().tolist() == rows[METRICS].to_numpy().tolist()
    assert csv["query"].tolist() == rows["query"].tolist()
    payload = json.loads(res.to_string("json", per_query=True))
    assert [r["recall@2"] for r in payload["per_query"]] == rows["recall@2"].tolist()
    markdown = _markdown_rows(res.to_string("markdown", per_query=True))[: len(rows)]
    assert [r[2:] for r in markdown] == [[f"{v:.4f}" for v in row] for row in rows[METRICS].to_numpy()]


def test_trec_lines_print_each_query_and_the_all_lines(res):
    """trec_eval's format: a line per query and metric (not for gm_map, a geometric mean, which has
    only its all line: exp of the mean log), one num_q line, counts summed on the all line."""
    lines = [line.split() for line in res.to_string("trec", per_query=True).splitlines()]
    per_query = res.to_pandas().set_index(["model", "query"])
    blocks: list[list] = []  # a model's block: its per-query lines, runid, num_q, its all lines (trec_eval's order)
    for i, line in enumerate(lines):
        if i == 0 or (line[1] != "all" and lines[i - 1][1] == "all"):
            blocks.append([])
        blocks[-1].append(line)
    assert [next(line[2] for line in block if line[0] == "runid") for block in blocks] == res.models
    for model, block in zip(res.models, blocks):
        at = [line[0] for line in block].index("runid")
        assert block[at + 1][0] == "num_q" and all(line[1] != "all" for line in block[:at])
        queries = [line[1] for line in block[:at]]
        assert queries == sorted(queries)  # trec_eval's order: query ids sorted as text
        assert [line for line in block if line[0] == "num_q"] == [["num_q", "all", "13"]]
        assert not [line for line in block if line[0] == "gm_map" and line[1] != "all"]
        for name, query, value in (line for line in block if line[0] not in ("runid", "num_q")):
            metric = {"recall_2": "recall@2", "ndcg_cut_3": "ndcg@3", "gm_map": "gm_map", "num_rel": "num_rel"}[name]
            if query == "all":
                want = res.summary.loc[model, metric]
                want = math.exp(want) if metric == "gm_map" else want * 13 if metric == "num_rel" else want
            else:
                want = per_query.loc[(model, query), metric]
            assert value == (str(int(round(want))) if metric == "num_rel" else f"{want:.4f}"), (model, name, query)


@pytest.mark.parametrize("level", [0.9, 0.99])
def test_intervals_are_those_of_summary_ci_at_the_level_asked(res, level):
    """--ci: the CSV's ci_low / ci_high columns, the JSON's summary_ci and the people's [low, high]
    are summary_ci(confidence=level)'s, low first."""
    ci = res.summary_ci(confidence=level).set_index(["model", "metric"])
    csv = pd.read_csv(io.StringIO(res.to_string("csv", ci=level))).set_index("model")
    payload = json.loads(res.to_string("json", ci=level))
    got = {(r["model"], r["metric"]): r for r in payload["summary_ci"]}
    table = {row[0]: row[1:] for row in _table_rows(res.to_string("table", ci=level))}
    assert f"{level:.0%} CI" in res.to_string("markdown", ci=level)
    for model in res.models:
        for j, metric in enumerate(METRICS):
            low, high = ci.loc[(model, metric), ["ci_low", "ci_high"]]
            assert low < high
            assert (csv.loc[model, f"{metric} ci_low"], csv.loc[model, f"{metric} ci_high"]) == (low, high)
            assert (got[(model, metric)]["ci_low"], got[(model, metric)]["ci_high"]) == (low, high)
            assert table[model][2 * j + 1] == f"[{low:.4f}, {high:.4f}]"


def test_intervals_with_segments_are_those_over_every_query():
    """With by=, the summary holds every query: its intervals are summary_ci's '(all)' rows."""
    res = tk.evaluate(_log(1), ["recall@2"], score=["a", "b"], item="item", by="device")
    ci = res.summary_ci(confidence=0.9)
    overall = ci[ci["device"] == "(all)"].set_index("model")
    csv = pd.read_csv(io.StringIO(res.to_string("csv", ci=0.9))).set_index("model")
    for model in res.models:
        assert csv.loc[model, "recall@2 ci_low"] == overall.loc[model, "ci_low"]
        assert csv.loc[model, "recall@2 ci_high"] == overall.loc[model, "ci_high"]


def test_segments_and_their_weights_in_every_format():
    """by= and weight=: each format prints res.segments (per segment and overall, per model); whole
    weights without decimals for people, other weights with them, every weight exactly in CSV."""
    res = tk.evaluate(_log(2), ["recall@2"], score=["a", "b"], item="item", by="device", weight="w")
    seg = res.segments.reset_index()
    csv = pd.read_csv(io.StringIO(res.to_string("csv")))
    assert csv["recall@2"].tolist() == seg["recall@2"].tolist() and csv["weight"].tolist() == seg["weight"].tolist()
    cells = _markdown_rows(res.to_string("markdown"))
    assert not all(float(w).is_integer() for w in seg["weight"])  # the column has decimals: all shown with them
    assert [c[-1] for c in cells] == [f"{w:.4f}" for w in seg["weight"]]
    assert [c[-3] for c in cells] == [f"{v:.4f}" for v in seg["recall@2"]]
    ones = tk.evaluate(_log(2).assign(w=2.0), ["recall@2"], score=["a", "b"], item="item", by="device", weight="w")
    assert all(re.fullmatch(r"\d+", c[-1]) for c in _markdown_rows(ones.to_string("markdown")))


def test_the_compare_command_prints_results_compare_in_csv_and_json(tmp_path, capsys):
    """topkeval compare --format csv / json: the rows of Results.compare with the same options, at
    full precision (the CSV read back, the JSON's comparison)."""
    from topkeval.cli import main

    path = tmp_path / "log.csv"
    _log(3).to_csv(path, index=False)
    want = tk.evaluate(path, ["recall@2", "ndcg@3"], score=["a", "b"], item="item").compare(
        baseline="a", test="t", n_resamples=1000)
    args = ["compare", str(path), "--item", "item", "--baseline", "a", "--score", "b", "-m", "recall@2", "-m", "ndcg@3",
            "--test", "t", "--resamples", "1000"]
    assert main(args + ["--format", "csv"]) == 0
    csv = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert main(args + ["--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["comparison"]
    for column in ("baseline", "value", "delta", "ci_low", "ci_high", "p_value", "p_adjusted", "effect_size", "wins"):
        assert csv[column].tolist() == want[column].tolist(), column
        assert [r[column] for r in rows] == want[column].tolist(), column
    assert csv["verdict"].tolist() == want["verdict"].tolist()


def test_text_helpers_by_hand():
    """The small formatters every format uses: p-values at the resampling floor, whole numbers,
    JSON's infinities."""
    assert p_value_text(1 / 101, 100) == "< 1e-02"  # the floor 1/101 of 100 resamples, not 10^-4
    assert p_value_text(1 / 10001, 10_000) == "< 1e-04" and p_value_text(0.5, 100) == "0.5000"
    assert p_value_text(0.00004) == "< 1e-04"
    assert (whole(4792.0), whole(2.5), whole(2.5, 2)) == ("4792", "2.5000", "2.50")
    assert json_ready([float("inf"), float("-inf"), float("nan")]) == ["inf", "-inf", None]


def test_the_html_summary_prints_the_means(res):
    """What a notebook shows (Results._repr_html_): a row per model, the means to 4 digits."""
    page = res._repr_html_()
    rows = re.findall(r"<tr><td class=\"id\">(.*?)</td>(.*?)</tr>", page)
    assert [model for model, _ in rows] == res.models
    for model, cells in rows:
        values = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", cells)]
        assert values == [f"{res.summary.loc[model, m]:.4f}" for m in METRICS], model


def test_trec_lines_of_results_kept_without_their_rows(tmp_path):
    """A streamed file evaluated with keep_per_query=False keeps no per-query rows: its num_q line is
    the number of queries evaluated, and the summed counts are the means times that number."""
    path = tmp_path / "log.parquet"
    frame = _log(4, n_queries=40)
    frame.to_parquet(path)
    res = tk.evaluate(path, ["P@2", "num_rel"], score="a", item="item", chunk_rows=50, keep_per_query=False)
    full = tk.evaluate(frame, ["P@2", "num_rel"], score="a", item="item")
    assert len(res.to_pandas()) == 0 and res.info["evaluated"] == full.info["evaluated"] == 39
    lines = {line.split()[0]: line.split()[2] for line in res.to_string("trec").splitlines()}
    assert lines["num_q"] == "39" and lines["num_rel"] == str(int(full.per_query["num_rel"].sum()))
    assert lines["P_2"] == f"{full.summary.loc['a', 'P@2']:.4f}"
