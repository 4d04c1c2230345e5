"""The command line: formats, conventions flags, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pandas as pd
import pytest
from scipy import stats

from topkeval.cli import main


@pytest.fixture
def log_file(tmp_path):
    frame = pd.DataFrame({"q": [1, 1, 1, 2, 2, 3], "rel": [1, 0, 1, 0, 1, 0], "item": list("abcabc"),
                          "old": [0.9, 0.8, 0.1, 0.5, 0.4, 0.3], "new": [0.9, 0.1, 0.8, 0.4, 0.5, 0.2]})
    path = tmp_path / "log.parquet"
    frame.to_parquet(path)
    return path


def run(argv, capsys):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_shape(log_file, capsys):
    code, out, err = run(["evaluate", log_file, "--query", "q", "--relevance", "rel", "--score", "old",
                          "--score", "new", "-m", "recall@2", "-m", "P@1", "--format", "json"], capsys)
    assert code == 0 and err == ""
    payload = json.loads(out)
    assert payload["summary"]["old"]["recall@2"] == 0.75
    assert payload["summary"]["new"]["recall@2"] == 1.0
    assert payload["summary"]["old"]["precision@1"] == 0.5
    assert payload["summary"]["new"]["precision@1"] == 1.0
    assert payload["info"]["skipped_empty"] == 1


def test_table_csv_markdown(log_file, capsys):
    base = ["evaluate", log_file, "--query", "q", "--relevance", "rel", "--score", "old", "-m", "recall@2"]
    code, out, _ = run(base, capsys)
    assert code == 0 and "recall@2" in out and "0.7500" in out and "skipped" in out
    code, out, _ = run(base + ["--format", "csv"], capsys)
    assert out.splitlines() == ["model,recall@2", "old,0.75"]
    code, out, _ = run(base + ["--format", "markdown"], capsys)
    assert "| old | 0.7500 |" in out
    code, out, _ = run(base + ["--format", "csv", "--per-query", "--empty-queries", "keep"], capsys)
    assert len(out.splitlines()) == 4


def test_convention_flags(log_file, capsys):
    base = ["evaluate", log_file, "--query", "q", "--relevance", "rel", "--score", "old", "-m", "P@5",
            "--format", "json"]
    _, out, _ = run(base + ["--short-lists", "shrink"], capsys)
    assert json.loads(out)["summary"]["old"]["precision@5"] == pytest.approx((2 / 3 + 1 / 2) / 2)
    _, out, _ = run(base + ["--empty-queries", "keep", "--undefined", "nan"], capsys)
    assert json.loads(out)["info"]["evaluated"] == 3


@pytest.mark.parametrize("argv,pattern", [
    (["evaluate", "/no/such.parquet"], "File not found"),
    (["evaluate", "{log}", "--query", "qq"], "Column 'qq' (--query) not found"),
    (["evaluate", "{log}", "--query", "q", "--relevance", "rel", "--score", "old", "-m", "recal@5"], "Did you mean"),
    (["evaluate", "{log}", "--format", "xml"], "invalid choice"),
    (["evaluate", "{log}", "--ties", "random"], "invalid choice"),
    (["evaluate"], "give a FILE"),
    (["frobnicate"], "invalid choice"),
    (["evaluate", "{log}", "--query", "q", "--relevance", "rel", "--score", "old", "--item", "item",
      "--ties", "item_desc", "--empty-queries", "error"], "no relevant item"),
])
def test_errors_are_one_line_exit_2(log_file, capsys, argv, pattern):
    code, out, err = run([a.replace("{log}", str(log_file)) for a in argv], capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and pattern in err and err.startswith("topkeval: error:")


def test_demo_runs_in_a_subprocess():
    proc = subprocess.run([sys.executable, "-m", "topkeval.cli", "demo", "--queries", "200"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "new_ranker" in proc.stdout and "Verdict" in proc.stdout


def test_metrics_listing(capsys):
    code, out, _ = run(["metrics"], capsys)
    assert code == 0 and "r_precision" in out and "fbeta(beta=0.5)@10" in out


def test_compare_command(tmp_path, capsys):
    from topkeval.demo import example_log

    path = tmp_path / "demo.parquet"
    example_log(300).to_parquet(path)
    base = ["compare", path, "--relevance", "click", "--baseline", "old_ranker", "--score", "new_ranker",
            "-m", "recall@20", "-m", "precision@5", "--resamples", "1000"]
    code, out, err = run(base, capsys)
    assert code == 0 and any(w in out for w in ("better", "no detectable difference", "worse"))
    code, out, _ = run(base + ["--format", "json", "--test", "t", "--correction", "none"], capsys)
    rows = json.loads(out)["comparison"]
    assert [r["metric"] for r in rows] == ["recall@20", "precision@5"]
    assert all(r["p_value"] == r["p_adjusted"] for r in rows)
    assert {r["verdict"] for r in rows} <= {"better", "worse", "no detectable difference"}
    # the numbers, on a log whose per-query values are known by hand: six queries of one relevant and
    # one non-relevant item; "old" ranks the relevant one first in queries 1-2, "new" in queries 1-5
    small = tmp_path / "small.csv"
    first_old, first_new = {1, 2}, {1, 2, 3, 4, 5}
    pd.DataFrame([{"q": q, "item": i, "rel": int(i == 0),
                   "old": float((i == 0) == (q in first_old)), "new": float((i == 0) == (q in first_new))}
                  for q in range(1, 7) for i in range(2)]).to_csv(small, index=False)
    old, new = [1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 0]  # recall@1; precision@2 is 0.5 for both
    args = ["compare", small, "--query", "q", "--relevance", "rel", "--item", "item", "--baseline", "old",
            "--score", "new", "-m", "recall@1", "-m", "precision@2", "--format", "json"]
    code, out, err = run(args + ["--test", "t", "--correction", "none"], capsys)
    assert code == 0, err
    recall, precision = json.loads(out)["comparison"]
    assert recall["p_value"] == pytest.approx(stats.ttest_rel(new, old).pvalue, rel=1e-12)
    assert recall["baseline"] == pytest.approx(2 / 6) and recall["value"] == pytest.approx(5 / 6)
    assert recall["delta"] == pytest.approx(0.5) and recall["relative_delta"] == pytest.approx(0.5 / (2 / 6))
    assert recall["effect_size"] == pytest.approx(0.5 / math.sqrt(1.5 / 5))  # d = (0, 0, 1, 1, 1, 0)
    assert (recall["wins"], recall["ties"], recall["losses"], recall["n_queries"]) == (3, 3, 0, 6)
    assert precision["delta"] == 0 and precision["p_value"] == 1.0 and precision["ties"] == 6
    # exact sign flips of d: |sum| = 3 only when the three ones share a sign (2 of 8); Holm over 2 rows
    code, out, err = run(args + ["--test", "permutation", "--correction", "holm"], capsys)
    recall, precision = json.loads(out)["comparison"]
    assert recall["p_value"] == pytest.approx(0.25) and recall["p_adjusted"] == pytest.approx(0.5)
    assert precision["p_adjusted"] == 1.0 and recall["verdict"] == "no detectable difference"
    code, out, err = run(["compare", path, "--relevance", "click", "--baseline", "old_ranker", "--score",
                          "old_ranker"], capsys)
    assert code == 2 and "other than --baseline" in err


def test_trec_format_matches_trec_eval_lines(shared_dir, capsys):
    base = shared_dir / "conformance" / "trec_eval"
    code, out, err = run(["evaluate", "--qrels", base / "qrels.test", "--run", base / "results.test",
                          "--conventions", "trec_eval", "-m", "P@5", "-m", "map", "-m", "num_ret", "-m", "Rprec",
                          "--format", "trec", "--per-query"], capsys)
    assert code == 0, err
    expected = {tuple(line.split()) for line in (base / "out.test.aq").read_text().splitlines()}
    ours = [tuple(line.split()) for line in out.splitlines()]
    assert len(ours) == 3 * 4 + 1 + 1 + 4
    assert all(line in expected for line in ours), [line for line in ours if line not in expected]


def test_run_needs_qrels(capsys):
    code, _, err = run(["evaluate", "--run", "x.run"], capsys)
    assert code == 2 and "--run needs --qrels" in err


def test_streamed_file_and_no_progress_bar_off_a_terminal(log_file, capsys):
    code, out, err = run(["evaluate", log_file, "--query", "q", "--relevance", "rel", "--score", "old",
                          "-m", "recall@2", "--chunk-rows", "2", "--format", "json"], capsys)
    assert code == 0 and err == ""  # stderr is not a terminal here: no bar
    assert json.loads(out)["summary"]["old"]["recall@2"] == 0.75


BASE = ["--query", "q", "--relevance", "rel", "--item", "item"]


def test_evaluate_ci_prints_the_intervals_of_summary_ci(log_file, capsys):
    import topkeval as tk

    code, out, err = run(["evaluate", log_file, *BASE, "--score", "old", "--score", "new", "-m", "recall@2",
                          "--ci", "0.9", "--format", "csv"], capsys)
    assert code == 0, err
    frame = pd.read_csv(__import__("io").StringIO(out)).set_index("model")
    res = tk.evaluate(pd.read_parquet(log_file), ["recall@2"], query="q", relevance="rel", score=["old", "new"])
    ci = res.summary_ci(confidence=0.9).set_index("model")
    for model in ("old", "new"):
        lo, hi = ci.loc[model, ["ci_low", "ci_high"]]
        assert (frame.loc[model, "recall@2 ci_low"], frame.loc[model, "recall@2 ci_high"]) == (lo, hi)
    code, out, err = run(["evaluate", log_file, *BASE, "--score", "old", "--score", "new", "-m", "recall@2",
                          "--ci", "0.9", "--format", "json"], capsys)
    rows = json.loads(out)["summary_ci"]
    assert [(r["model"], r["ci_low"], r["ci_high"]) for r in rows] == list(zip(ci.index, ci.ci_low, ci.ci_high))
    code, out, err = run(["evaluate", log_file, *BASE, "--score", "old", "-m", "recall@2", "--ci", "0.9"], capsys)
    lo, hi = ci.loc["old", ["ci_low", "ci_high"]]
    assert code == 0 and f"[{lo:.4f}, {hi:.4f}]" in out
    code, out, err = run(["evaluate", log_file, *BASE, "--score", "old", "--ci", "--format", "trec"], capsys)
    assert code == 2 and "--ci" in err
    code, out, err = run(["evaluate", log_file, *BASE, "--score", "old", "--ci", "1.5"], capsys)
    assert code == 2 and "confidence" in err and "Traceback" not in err


def test_diff_lists_regressions_and_shows_a_query(log_file, capsys):
    code, out, err = run(["diff", log_file, *BASE, "--baseline", "old", "--score", "new", "-m", "recall@1",
                          "--format", "csv"], capsys)
    assert code == 0, err
    frame = pd.read_csv(__import__("io").StringIO(out))
    assert list(frame.columns[:4]) == ["q", "baseline", "model", "delta"]
    code, out, err = run(["diff", log_file, *BASE, "--baseline", "old", "--score", "new", "-m", "recall@1",
                          "--show", "1", "-k", "2", "--format", "json"], capsys)
    assert code == 0, err
    rows = json.loads(out)
    assert [r["old item"] for r in rows] == ["a", "b"] and [r["new item"] for r in rows] == ["a", "c"]
    assert rows[1]["new change"] == "gained" and rows[1]["old change"] == ""
    code, out, err = run(["diff", log_file, *BASE, "--baseline", "old", "--score", "new", "--show", "9"], capsys)
    assert code == 2 and "query '9' is not among the queries" in err
    code, out, err = run(["diff", log_file, *BASE, "--baseline", "old", "--score", "new", "--show", "3",
                          "--format", "csv"], capsys)  # no relevant item: skipped from the means, still shown
    assert code == 0 and "old item" in out
    code, out, err = run(["diff", log_file, "--query", "1", "--relevance", "rel", "--baseline", "old",
                          "--score", "new"], capsys)
    assert code == 2 and "--show 1" in err and "Traceback" not in err


def test_report_command_and_demo_report(log_file, tmp_path, capsys):
    target = tmp_path / "r.html"
    argv = ["report", log_file, *BASE, "--score", "old", "--score", "new", "--baseline", "old", "-m", "recall@2",
            "-o", target, "--resamples", "200", "--show", "2"]
    code, out, err = run(argv, capsys)
    assert code == 0 and f"wrote {target}" in out, err
    text = target.read_text(encoding="utf-8")
    assert "Comparison with old" in text and 'id="q0"' in text
    code, out, err = run(argv, capsys)
    assert code == 2 and "already exists" in err and "--force" in err and "overwrite" not in err
    code, out, err = run(argv + ["--force"], capsys)
    assert code == 0
    code, out, err = run(["report", log_file, *BASE, "--score", "old", "-o", tmp_path / "no" / "r.html"], capsys)
    assert code == 2 and "does not exist" in err
    code, out, err = run(["demo", "--queries", "50", "--report", tmp_path / "demo.html"], capsys)
    assert code == 0 and (tmp_path / "demo.html").stat().st_size > 10_000


def test_diff_compares_the_model_named_by_score(tmp_path, capsys):
    qrels = tmp_path / "q.txt"
    qrels.write_text("1 0 x 1\n1 0 y 0\n")
    runs = []
    for tag, first in (("A", "y"), ("B", "y"), ("C", "x")):
        path = tmp_path / f"{tag}.run"
        other = "x" if first == "y" else "y"
        path.write_text(f"1 Q0 {first} 1 2.0 {tag}\n1 Q0 {other} 2 1.0 {tag}\n")
        runs += ["--run", path]
    code, out, err = run(["diff", "--qrels", qrels, *runs, "--baseline", "A", "--score", "C", "-m", "precision@1",
                          "--format", "csv"], capsys)
    assert code == 0, err
    frame = pd.read_csv(__import__("io").StringIO(out))
    assert frame["model"].tolist() == [1.0] and frame["baseline"].tolist() == [0.0]  # C (x first) against A
    code, out, err = run(["diff", "--qrels", qrels, *runs, "--baseline", "A", "-m", "precision@1"], capsys)
    assert code == 2 and "name the other one with --score" in err and "Traceback" not in err
    code, out, err = run(["diff", "--qrels", qrels, "--run", runs[1], "--baseline", "A", "-m", "P@1"], capsys)
    assert code == 2 and "Traceback" not in err
