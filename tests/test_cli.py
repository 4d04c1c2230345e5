"""The command line: formats, conventions flags, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

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
