"""The command line: formats, conventions flags, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import math
import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from topkeval.cli import FORMATS, main


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
    assert payload["summary"]["old"]["P@1"] == 0.5  # labelled as asked; info maps labels to canonical names
    assert payload["summary"]["new"]["P@1"] == 1.0 and payload["info"]["metric_names"]["P@1"] == "precision@1"
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
    assert json.loads(out)["summary"]["old"]["P@5"] == pytest.approx((2 / 3 + 1 / 2) / 2)
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


@pytest.mark.parametrize("name", ["log.parquet", "log.csv", "log.tsv"])
def test_demo_saves_its_log_and_the_printed_command_gives_the_demo_numbers(name, tmp_path, capsys, monkeypatch):
    """``demo --save``: the example log as a file, and the command printed evaluates it to the
    demo's own numbers (every score read back to the same float)."""
    monkeypatch.chdir(tmp_path)
    code, demo_csv, err = run(["demo", "--queries", "120", "--format", "csv", "--save", name], capsys)
    assert code == 0, err
    assert f"to {name}; evaluate it with:" in err  # not on stdout: the csv there stays machine-readable
    command = shlex.split(err.strip().splitlines()[-1])
    assert command[:3] == ["topkeval", "evaluate", name]
    code, again, err = run(command[1:] + ["--format", "csv"], capsys)
    assert code == 0, err
    assert again == demo_csv
    code, _, err = run(["demo", "--queries", "120", "--save", name], capsys)
    assert code == 2 and "already exists" in err and "--force" in err
    assert run(["demo", "--queries", "120", "--save", name, "--force"], capsys)[0] == 0


@pytest.mark.parametrize("target,message", [("log.txt", "give a file ending in .parquet, .csv or .tsv"),
                                            ("-", "not to standard output"), ("", "--save is empty"),
                                            ("no/such/folder/log.csv", "does not exist")])
def test_demo_save_refuses_what_it_cannot_write(target, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(["demo", "--queries", "50", "--save", target], capsys)
    assert code == 2 and message in err and out == ""
    assert list(tmp_path.iterdir()) == []


def test_all_relevant_reads_a_truth_table_of_pairs(tmp_path, capsys):
    """--all-relevant: a --qrels table of (user, item) interactions without a relevance column, a
    repeat purchase counted once; refused without --qrels and beside --relevance."""
    recs = pd.DataFrame({"user": [1, 1, 1, 2, 2, 2], "item": list("abcade"), "score": [3, 2, 1, 3, 2, 1]})
    truth = pd.DataFrame({"user": [1, 1, 1, 2], "item": ["b", "z", "b", "d"]})
    recs.to_csv(tmp_path / "recs.csv", index=False)
    truth.to_csv(tmp_path / "truth.csv", index=False)
    base = ["evaluate", str(tmp_path / "recs.csv"), "--query", "user", "--item", "item", "--score", "score",
            "-m", "recall@3,precision@3", "--format", "csv"]
    code, out, err = run(base + ["--qrels", str(tmp_path / "truth.csv"), "--all-relevant"], capsys)
    assert code == 0, err
    assert out.splitlines()[1].split(",")[1:] == [str(0.75), str(1 / 3)]
    code, out, err = run(base + ["--qrels", str(tmp_path / "truth.csv")], capsys)
    assert code == 2 and "--all-relevant" in err
    code, out, err = run(base + ["--all-relevant"], capsys)
    assert code == 2 and "give --qrels" in err
    code, out, err = run(base + ["--qrels", str(tmp_path / "truth.csv"), "--all-relevant", "--relevance", "r"], capsys)
    assert code == 2 and "one or the other" in err
    # --relevance given its default name is still a relevance column named: refused as well, not ignored
    code, out, err = run(base + ["--qrels", str(tmp_path / "truth.csv"), "--all-relevant", "--relevance", "relevance"],
                         capsys)
    assert code == 2 and "one or the other" in err


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
    # --interval t: the paired t interval of d = (0, 0, 1, 1, 1, 0) by hand, mean 0.5 +- t_{0.975}(5) sqrt(0.3 / 6)
    code, out, err = run(args + ["--test", "t", "--interval", "t"], capsys)
    assert code == 0, err
    recall = json.loads(out)["comparison"][0]
    moe = stats.t.ppf(0.975, 5) * math.sqrt(0.3 / 6)
    assert (recall["ci_low"], recall["ci_high"]) == pytest.approx((0.5 - moe, 0.5 + moe), abs=1e-12)
    code, out, err = run(args + ["--all", "--interval", "t"], capsys)
    assert code == 2 and err.count("\n") == 1 and "drop --interval" in err
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


def test_trec_format_of_trec_eval_s_other_measures(shared_dir, capsys):
    """The trec lines of set_map, utility, Rprec_mult, binG, G, Rndcg, ndcg_rel, num_nonrel_judged_ret
    and 11pt_avg are trec_eval's, per query and on the all line; gm_map and gm_bpref have an all line
    only, exp of the mean of their per-query logs; parameters as trec_eval names them."""
    base = shared_dir / "conformance" / "trec_eval"
    names = ["set_map", "utility", "gm_map", "gm_bpref", "Rprec_mult.0.2,2.0", "binG", "G", "Rndcg", "ndcg_rel",
             "num_nonrel_judged_ret", "11pt_avg"]
    code, out, err = run(["evaluate", "--qrels", base / "qrels.test", "--run", base / "results.test",
                          "--conventions", "trec_eval", *[x for n in names for x in ("-m", n)],
                          "--format", "trec", "--per-query"], capsys)
    assert code == 0, err
    expected = {tuple(line.split()) for line in (base / "out.test.aq").read_text().splitlines()}
    ours = [tuple(line.split()) for line in out.splitlines()]
    assert all(line in expected for line in ours), [line for line in ours if line not in expected]
    assert len(ours) == 10 * 4 + 2 + 2 and ("gm_map", "all", "0.1051") in ours  # no per-query gm_map line
    assert not [line for line in ours if line[0].startswith("gm_") and line[1] != "all"]
    code, out, err = run(["evaluate", "--qrels", base / "qrels.test", "--run", base / "results.test",
                          "--conventions", "trec_eval", "-m", "utility.2,-1,0,0", "-m", "Rprec_mult.5.0,0.2,0.35",
                          "-m", "11pt_avg..25,.5,.75", "--format", "trec", "--per-query"], capsys)
    assert code == 0, err
    expected = {tuple(line.split()) for line in (base / "out.test.meas_params").read_text().splitlines()}
    ours = [tuple(line.split()) for line in out.splitlines()]
    # trec_eval prints a parameter list as it was typed (11pt_avg_.25,.5,.75), topkeval as numbers
    ours = [("11pt_avg_.25,.5,.75", *line[1:]) if line[0] == "11pt_avg_0.25,0.5,0.75" else line for line in ours
            if line[0] not in ("runid", "num_q")]  # measures trec_eval prints only without -m
    assert all(line in expected for line in ours), [line for line in ours if line not in expected]
    assert len(ours) == 5 * 4


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
    # --interval t: Sakai's t interval of old's recall@2 values (1/2 and 1; query 3 has no relevant item), by hand
    code, out, err = run(["evaluate", log_file, *BASE, "--score", "old", "-m", "recall@2", "--ci", "0.9",
                          "--interval", "t", "--format", "json"], capsys)
    assert code == 0, err
    row = json.loads(out)["summary_ci"][0]
    moe = stats.t.ppf(0.95, 1) * math.sqrt(0.125 / 2)  # V = ((1/2 - 3/4)^2 + (1 - 3/4)^2) / 1
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((0.75 - moe, 0.75 + moe), abs=1e-12)
    code, out, err = run(["evaluate", log_file, *BASE, "--score", "old", "--interval", "t"], capsys)
    assert code == 2 and err.count("\n") == 1 and "add --ci" in err
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
    # the ids it has, a few of them; not "this one is str": the command line's '9' would find a query 9
    assert "Its queries: 1, 2, 3." in err and "this one is str" not in err
    code, out, err = run(["diff", log_file, *BASE, "--baseline", "old", "--score", "new", "--show", "3",
                          "--format", "csv"], capsys)  # no relevant item: skipped from the means, still shown
    assert code == 0 and "old item" in out
    code, out, err = run(["diff", log_file, "--query", "1", "--relevance", "rel", "--baseline", "old",
                          "--score", "new"], capsys)
    assert code == 2 and "--show 1" in err and "Traceback" not in err
    assert "Column '1' (--query) not found" in err
    # a column missing when --query names an existing column: no word about --show
    code, out, err = run(["diff", log_file, *BASE, "--baseline", "old", "--score", "nwe"], capsys)
    assert code == 2 and "Column 'nwe' (--score) not found" in err and "--show" not in err


@pytest.mark.parametrize("command", ["compare", "diff"])
def test_an_unknown_baseline_is_said_as_the_baseline_with_the_models(log_file, capsys, command):
    code, out, err = run([command, log_file, *BASE, "--baseline", "olf", "--score", "new"], capsys)
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert err.startswith("topkeval: error: --baseline 'olf' is not a column of file") and "Column 'olf' (--score)" not in err
    assert "Did you mean 'old'?" in err and "'q', 'rel', 'item', 'old', 'new'" in err
    code, out, err = run([command, log_file, *BASE, "--baseline", "neww", "--score", "old", "--score", "new"], capsys)
    assert code == 2 and "--baseline 'neww'" in err and "Did you mean 'new'?" in err
    assert "The models (--score): 'old', 'new'" in err


def test_a_missing_column_suggests_a_close_name_or_a_usual_one_never_a_far_one(tmp_path, capsys):
    path = tmp_path / "clicks.parquet"
    pd.DataFrame({"query": [1, 1], "item": ["a", "b"], "click": [1, 0], "device": ["m", "d"],
                  "score": [0.9, 0.1]}).to_parquet(path)
    code, out, err = run(["evaluate", path, "-m", "recall@1"], capsys)  # --relevance left at 'relevance'
    assert code == 2 and "Column 'relevance' (--relevance) not found" in err
    assert "Did you mean 'click'?" in err and "'device'?" not in err
    assert "Available: 'query', 'item', 'click', 'device', 'score'." in err
    code, out, err = run(["evaluate", path, "--relevance", "clikc", "-m", "recall@1"], capsys)
    assert code == 2 and "Did you mean 'click'?" in err
    code, out, err = run(["evaluate", path, "--relevance", "click", "--item", "time", "-m", "recall@1"], capsys)
    assert code == 2 and "Did you mean" not in err and "Available: 'query'" in err  # 'item' is no close name


def test_the_title_of_the_regressions_is_a_sentence_for_none_one_and_some(tmp_path, capsys):
    path = tmp_path / "three.parquet"  # old ranks the relevant item first in every query, new last
    pd.DataFrame({"q": [1, 1, 2, 2, 3, 3], "rel": [1, 0] * 3, "old": [0.9, 0.1] * 3, "new": [0.1, 0.9] * 3,
                  "same": [0.9, 0.1] * 3, "one": [0.1, 0.9] + [0.9, 0.1] * 2}).to_parquet(path)
    diff = ["diff", path, "--query", "q", "--relevance", "rel", "-m", "recall@1"]

    def title(argv):
        code, out, err = run(argv, capsys)
        assert code == 0, err
        return " ".join(out.split("┏")[0].split())  # rich wraps a title to the table's width

    assert title([*diff, "--baseline", "old", "--score", "same"]) == "recall@1: same - old per query: no query got worse (of 3)"
    assert title([*diff, "--baseline", "old", "--score", "new"]) == \
        "recall@1: new - old per query, worst first (the 3 queries that got worse, of 3)"
    assert title([*diff, "--baseline", "old", "--score", "new", "--worst", "2"]) == \
        "recall@1: new - old per query, worst first (the 2 worst of the 3 queries that got worse, of 3)"
    assert title([*diff, "--baseline", "old", "--score", "one"]) == \
        "recall@1: one - old per query, worst first (the one query that got worse, of 3)"


def test_markdown_writes_a_p_value_below_the_floor_with_a_plain_less_than(tmp_path, capsys):
    path = tmp_path / "better.parquet"  # new ranks the relevant item first in each of 40 queries, old last
    pd.DataFrame({"q": [q for q in range(40) for _ in (0, 1)], "rel": [1, 0] * 40, "old": [0.1, 0.9] * 40,
                  "new": [0.9, 0.1] * 40}).to_parquet(path)
    code, out, err = run(["compare", path, "--query", "q", "--relevance", "rel", "--baseline", "old", "--score", "new",
                          "-m", "precision@1", "--resamples", "200", "--format", "markdown"], capsys)
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("| new |"))
    assert "| < 5e-03 |" in row and "&lt;" not in out


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
    code, out, err = run(["diff", "--qrels", qrels, *runs, "--baseline", "C", "--score", "A", "-m", "precision@1",
                          "--format", "csv"], capsys)
    assert code == 0, err
    frame = pd.read_csv(__import__("io").StringIO(out))
    assert frame["model"].tolist() == [0.0] and frame["baseline"].tolist() == [1.0]  # A (y first) against C
    # the other way round nothing got worse: diff lists the queries that got worse only
    code, out, err = run(["diff", "--qrels", qrels, *runs, "--baseline", "A", "--score", "C", "-m", "precision@1",
                          "--format", "csv"], capsys)
    assert code == 0 and pd.read_csv(__import__("io").StringIO(out)).empty
    code, out, err = run(["diff", "--qrels", qrels, *runs, "--baseline", "A", "--score", "C", "-m", "precision@1"],
                         capsys)
    assert code == 0 and "C - A per query: no query got worse (of 1)" in " ".join(out.split())
    code, out, err = run(["diff", "--qrels", qrels, *runs, "--baseline", "A", "-m", "precision@1"], capsys)
    assert code == 2 and "name the other one with --score" in err and "Traceback" not in err
    code, out, err = run(["diff", "--qrels", qrels, "--run", runs[1], "--baseline", "A", "-m", "P@1"], capsys)
    assert code == 2 and "Traceback" not in err


# ----------------------------------------------------------------------------------------------
# issue 21: what a new user met (column flags beside --run, diff --show cells, empty values, paths)


@pytest.fixture
def trec_files(tmp_path):
    """Run a retrieves x, y, z; run b retrieves y, w (a shorter list); x and w are relevant."""
    (tmp_path / "a.run").write_text("q1 Q0 x 1 3 a\nq1 Q0 y 2 2 a\nq1 Q0 z 3 1 a\n")
    (tmp_path / "b.run").write_text("q1 Q0 y 1 2 b\nq1 Q0 w 2 1 b\n")
    (tmp_path / "qrels.txt").write_text("q1 0 x 1\nq1 0 w 1\n")
    return tmp_path


def test_column_flags_name_the_columns_of_a_qrels_table(trec_files, capsys):
    truth = trec_files / "truth.csv"
    truth.write_text("topic,doc,grade\nq1,x,1\nq1,w,1\n")
    base = ["evaluate", "--run", trec_files / "a.run", "--qrels", truth, "-m", "recall@3", "--format", "json"]
    code, out, err = run(base + ["--query", "topic", "--item", "doc", "--relevance", "grade"], capsys)
    assert code == 0, err
    assert json.loads(out)["summary"]["a"]["recall@3"] == 0.5  # x found, w not: 1 of R = 2
    code, out, err = run(base, capsys)
    assert code == 2 and "Column 'query' (--query) not found" in err and "'topic'" in err
    code, out, err = run(base + ["--query", "topic", "--item", "doc"], capsys)
    assert code == 2 and "Column 'relevance' (--relevance) not found" in err


@pytest.mark.parametrize("extra,pattern", [
    (["--score", "s"], "--score names score columns of a table; with --run each run file is a model"),
    (["--spark"], "--spark reads a parquet FILE with Spark; TREC runs are read here"),
])
def test_flags_that_do_not_apply_to_trec_runs(trec_files, capsys, extra, pattern):
    code, _, err = run(["evaluate", "--run", trec_files / "a.run", "--qrels", trec_files / "qrels.txt", *extra],
                       capsys)
    assert code == 2 and pattern in err and len(err.splitlines()) == 1
    if extra[0] == "--score":  # compare and report evaluate every run too; diff's --score names the other run
        for command in (["compare", "--baseline", "a"], ["report", "-o", trec_files / "r.html"]):
            code, _, err = run([*command, "--run", trec_files / "a.run", "--run", trec_files / "b.run", "--qrels",
                                trec_files / "qrels.txt", "--score", "b"], capsys)
            assert code == 2 and pattern in err, err
        code, out, err = run(["diff", "--run", trec_files / "a.run", "--run", trec_files / "b.run", "--qrels",
                              trec_files / "qrels.txt", "--baseline", "a", "--score", "b", "-m", "recall@3"], capsys)
        assert code == 0, err


def test_diff_show_marks_items_the_other_model_did_not_retrieve(trec_files, capsys):
    base = ["diff", "--run", trec_files / "a.run", "--run", trec_files / "b.run", "--qrels", trec_files / "qrels.txt",
            "--baseline", "a", "--score", "b", "--show", "q1", "-k", "3", "-m", "recall@3"]
    code, out, err = run(base, capsys)
    assert code == 0, err
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert [line.count("not retrieved") for line in rows] == [1, 1, 1] and "nan" not in out
    code, out, _ = run(base + ["--format", "markdown"], capsys)
    # y and z have no judgment: "unjudged", told from a judged 0 (their grade counts as 0 all the same)
    assert out.splitlines()[2].endswith("| lost | not retrieved | y | 2.0000 | unjudged |  |  | 2 |") and \
        "nan" not in out
    assert out.splitlines()[4] == "| 3 | z | 1.0000 | unjudged |  |  | not retrieved |  |  |  |  |  |  |"
    code, out, _ = run(base + ["--format", "json"], capsys)
    assert "NaN" not in out
    rows = json.loads(out)
    assert [r["a other rank"] for r in rows] == [None, 1, None] and [r["b other rank"] for r in rows] == [2, None, None]
    assert rows[2]["b item"] is None and rows[2]["b score"] is None
    code, out, _ = run(base + ["--format", "csv"], capsys)
    lines = out.splitlines()
    assert lines[1].endswith(",lost,,y,2.0,0.0,False,,,2") and lines[3] == "3,z,1.0,0.0,False,,,,,,,,,,"


def test_compare_correction_none_says_no_correction(trec_files, capsys):
    code, out, err = run(["compare", "--run", trec_files / "a.run", "--run", trec_files / "b.run", "--qrels",
                          trec_files / "qrels.txt", "--baseline", "a", "--correction", "none", "-m", "recall@3"],
                         capsys)
    assert code == 0, err
    assert "no correction" in out and "none correction" not in out


@pytest.mark.parametrize("extra,pattern", [
    (["-m", ""], "-m '' names no metric"),
    (["-m", ","], "-m ',' names no metric"),
    (["-m", " "], "-m ' ' names no metric"),
    (["-m", "recall@2,"], "-m 'recall@2,' has an empty name"),
    (["-m", "recall@2,,P@1"], "has an empty name"),
    (["--score", ""], "--score is empty (''): give a column name"),
    (["--by", ""], "--by is empty (''): give a column name"),
    (["--query", ""], "--query is empty (''): give a column name"),
    (["--relevance", ""], "--relevance is empty"),
    (["--item", ""], "--item is empty"),
    (["--weight", ""], "--weight is empty"),
    (["--qrels", ""], "--qrels is empty (''): give the path of a file"),
])
def test_empty_values_are_errors_not_defaults(log_file, capsys, extra, pattern):
    code, out, err = run(["evaluate", log_file, "--query", "q", "--relevance", "rel", "--score", "old", *extra],
                         capsys)
    assert code == 2 and out == "" and pattern in err and len(err.splitlines()) == 1, err


def test_empty_file_and_run_and_baseline_values(log_file, capsys):
    for argv, pattern in ((["evaluate", ""], "FILE is empty"),
                          (["evaluate", "--run", "", "--qrels", log_file], "--run is empty"),
                          (["compare", log_file, "--baseline", "", "--score", "new"], "--baseline is empty")):
        code, _, err = run(argv, capsys)
        assert code == 2 and pattern in err, err


@pytest.mark.parametrize("make,argv,pattern", [
    (lambda p: (p / "d").mkdir(), ["evaluate", "{p}/d"], "'{p}/d' is an empty folder"),
    (lambda p: (p / "d").mkdir(), ["evaluate", "--run", "{p}/a.run", "--qrels", "{p}/d"], "is an empty folder"),
    (lambda p: (p / "d").mkdir(), ["evaluate", "--run", "{p}/d", "--qrels", "{p}/qrels.txt"],
     "'{p}/d' is a folder, where a TREC run file (a file) was expected"),
    (lambda p: (p / "e.csv").write_text(""), ["evaluate", "{p}/e.csv"], "is empty (0 bytes)"),
    (lambda p: (p / "h.csv").write_text("query,relevance,score\n"), ["evaluate", "{p}/h.csv"],
     "has columns but no rows"),
    (lambda p: (p / "t.parquet").write_text("query,relevance,score\n1,1,0.5\n"), ["evaluate", "{p}/t.parquet"],
     "as parquet: it holds text"),
    (lambda p: (p / "g.csv").write_bytes(__import__("gzip").compress(b"query,relevance,score\n1,1,0.5\n")),
     ["evaluate", "{p}/g.csv"], "gzip-compressed; name it g.csv.gz"),
    (lambda p: None, ["evaluate", "https://example.com/log.parquet"], "is a URL; topkeval reads local files"),
    (lambda p: None, ["evaluate", "{p}/nope/log.csv"], "The folder '{p}/nope' does not exist either"),
    (lambda p: None, ["evaluate", "--run", "{p}/qrels.txt", "--qrels", "{p}/a.run"], "looks like a qrels line"),
    (lambda p: (p / "bad.run").write_text("q1 Q0 x 1 3 a\nq1 Q0 y 2 a\n"),
     ["evaluate", "--run", "{p}/bad.run", "--qrels", "{p}/qrels.txt"], "bad.run, line 2: a run line needs 6 fields"),
])
def test_input_paths_are_said_for_what_they_are(trec_files, capsys, make, argv, pattern):
    p = str(trec_files)
    make(trec_files)
    code, out, err = run([a.replace("{p}", p) for a in argv], capsys)
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and pattern.replace("{p}", p) in err, err


def test_named_pipe_is_refused_without_blocking(tmp_path):
    import os

    fifo = tmp_path / "log.csv"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-m", "topkeval", "evaluate", str(fifo)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "is a named pipe, not a file" in proc.stderr, proc.stderr


# ---------------------------------------------------------------------------------------------
# warnings, output errors, empty paths: the command always ends, with one line per message

NOISY = '''
import warnings


def noisy():
    warnings.warn("the noisy library\\nsays hello", UserWarning)
    warnings.warn("noisy 2.0 will change this", FutureWarning)
    warnings.warn("noisy.old is deprecated", DeprecationWarning)
    warnings.warn("the noisy library\\nsays hello", UserWarning)  # the same again: still one line
'''

DRIVER = '''
import sys
import warnings

import noisy
import topkeval.api
from topkeval.cli import FORMATS, main
from topkeval.errors import TopkevalWarning

original = topkeval.api.evaluate


def evaluate(*args, **kwargs):  # what every command calls: a third-party library warns inside it
    noisy.noisy()
    warnings.warn("a topkeval warning: use empty_queries='keep'", TopkevalWarning)
    return original(*args, **kwargs)


topkeval.api.evaluate = evaluate
sys.exit(main(sys.argv[1:]))
'''


def _cli_with_noisy_library(tmp_path, argv):
    (tmp_path / "noisy.py").write_text(NOISY)
    (tmp_path / "driver.py").write_text(DRIVER)
    return subprocess.run([sys.executable, str(tmp_path / "driver.py"), *map(str, argv)], capture_output=True,
                          text=True, timeout=60, env=_env(PYTHONPATH=f"{tmp_path}{os.pathsep}{_src()}"))


def _src():
    import topkeval

    return str(Path(topkeval.__file__).parents[1])


def _env(**extra):
    # interpreted kernels: no compilation (nor its one-time notice on stderr) in a fresh process
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "PYTHONPATH")}
    return env | {"TOPKEVAL_JIT": "0"} | extra


@pytest.mark.parametrize("command", ["evaluate", "compare", "diff", "report"])
def test_a_third_party_warning_ends_the_command_with_one_line(log_file, tmp_path, command):
    # the warnings were once re-emitted into the list being read: the command never ended
    argv = [command, log_file, *BASE, "--score", "old", "-m", "recall@2"]
    argv += {"evaluate": [], "compare": ["--baseline", "new", "--resamples", "200"],
             "diff": ["--baseline", "new"], "report": ["-o", tmp_path / "r.html", "--resamples", "200"]}[command]
    proc = _cli_with_noisy_library(tmp_path, argv)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        "topkeval: warning: the noisy library says hello (UserWarning from noisy)",  # once; no source line
        "topkeval: warning: a topkeval warning: use --empty-queries keep",  # in the command line's words
    ]  # the FutureWarning and the DeprecationWarning of a library are not the user's business


def test_an_error_after_a_warning_is_the_only_line(log_file, tmp_path):
    proc = _cli_with_noisy_library(tmp_path, ["evaluate", log_file, *BASE, "--score", "old", "-m", "recal@2"])
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [proc.stderr.strip()] and proc.stderr.startswith("topkeval: error: ")


@pytest.fixture
def deadline():
    """Fail, instead of hanging (and growing without bound), a test that runs past 20 seconds."""
    import signal

    def stop(*_):
        raise TimeoutError("the command did not end within 20 seconds")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, 20)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


def test_the_warnings_policy_holds_under_the_callers_filters(log_file, capsys, monkeypatch, deadline):
    # in-process, under pytest's "error" filter: the command keeps its own policy (a warning is a
    # line, not an exception), and leaves the caller's filters as they were
    import warnings

    import topkeval.api

    original = topkeval.api.evaluate

    def evaluate(*args, **kwargs):
        warnings.warn("from a library", UserWarning, stacklevel=1)
        warnings.warn("later", FutureWarning, stacklevel=1)
        return original(*args, **kwargs)

    monkeypatch.setattr(topkeval.api, "evaluate", evaluate)
    before = list(warnings.filters)
    code, out, err = run(["evaluate", log_file, *BASE, "--score", "old", "-m", "recall@2"], capsys)
    assert code == 0 and "recall@2" in out
    assert err.splitlines() == [f"topkeval: warning: from a library (UserWarning from {Path(__file__).stem})"]
    assert warnings.filters == before


FORMAT_COMMANDS = [(["evaluate", "{log}", *BASE, "--score", "old", "-m", "recall@2"], FORMATS + ("trec",)),
                   (["compare", "{log}", *BASE, "--baseline", "old", "--score", "new", "--resamples", "200"], FORMATS),
                   (["diff", "{log}", *BASE, "--baseline", "old", "--score", "new"], FORMATS),
                   (["diff", "{log}", *BASE, "--baseline", "old", "--score", "new", "--show", "1"], FORMATS),
                   (["demo", "--queries", "30"], FORMATS)]


@pytest.mark.parametrize("argv,fmt", [(argv, fmt) for argv, formats in FORMAT_COMMANDS for fmt in formats])
def test_a_full_standard_output_is_one_error_line(log_file, argv, fmt):
    argv = [a.replace("{log}", str(log_file)) for a in argv] + ["--format", fmt]
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "topkeval", *argv], stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=120, env=_env(PYTHONPATH=_src()))
    assert proc.returncode == 2, proc.stderr
    # one line, and no "Exception ignored" from the interpreter's final flush
    assert proc.stderr.splitlines() == ["topkeval: error: cannot write to standard output: No space left on device "
                                        "(errno 28). Free some space, or send the output elsewhere."]


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["metrics"], ["conventions"]])
def test_a_full_standard_output_fails_the_listings_too(argv):
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "topkeval", *argv], stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=120, env=_env(PYTHONPATH=_src()))
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("topkeval: error: cannot write to standard output")


def test_a_closed_standard_output_is_one_error_line():
    shell = f"{shlex.quote(sys.executable)} -m topkeval demo --queries 30 >&-"
    proc = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=120,
                          env=_env(PYTHONPATH=_src()))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["topkeval: error: cannot write to standard output: standard output is "
                                        "closed (errno 9). Send the output elsewhere."]


def test_a_closed_pipe_is_not_an_error():
    shell = f"{shlex.quote(sys.executable)} -m topkeval demo --queries 300 | head -1; exit ${{PIPESTATUS[0]}}"
    proc = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=120,
                          env=_env(PYTHONPATH=_src()))
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith("Example log:") and len(proc.stdout.splitlines()) == 1


@pytest.mark.parametrize("argv,flag", [
    (["evaluate", ""], "FILE"),
    (["evaluate", "{log}", "--qrels", ""], "--qrels"),
    (["evaluate", "--qrels", "{log}", "--run", ""], "--run"),
    (["compare", "", "--baseline", "old"], "FILE"),
    (["report", "{log}", *BASE, "--score", "old", "-o", ""], "-o/--output"),
    (["demo", "--queries", "30", "--report", ""], "--report"),
    (["demo", "--queries", "30", "--report", "", "--force"], "--report"),
])
def test_an_empty_path_is_an_error(log_file, capsys, argv, flag):
    code, out, err = run([a.replace("{log}", str(log_file)) for a in argv], capsys)
    assert code == 2 and out == ""
    assert err.splitlines() == [f"topkeval: error: {flag} is empty (''): give the path of a file"]


def test_report_refuses_devices_links_and_folders_before_evaluating(log_file, tmp_path, capsys, monkeypatch):
    import stat

    import topkeval.api

    def never(*args, **kwargs):
        raise AssertionError("the output path is checked before the evaluation")

    monkeypatch.setattr(topkeval.api, "evaluate", never)
    other = tmp_path / "other.html"
    other.write_text("keep")
    (tmp_path / "link.html").symlink_to(other)
    os.mkfifo(tmp_path / "fifo")
    cases = {"/dev/null": "a character device", tmp_path / "fifo": "a named pipe (fifo)",
             tmp_path / "link.html": "a symbolic link", tmp_path: "a directory",
             other / "r.html": "is a file, not a folder", tmp_path / "no" / "r.html": "does not exist",
             tmp_path / ("x" * 300 + ".html"): "the name is too long", "/proc/r.html": "no file can be created"}
    for target, words in cases.items():
        for argv in (["report", log_file, *BASE, "--score", "old", "-o", target, "--force"],
                     ["demo", "--queries", "30", "--report", target, "--force"]):
            code, out, err = run(argv, capsys)
            assert code == 2 and len(err.splitlines()) == 1 and words in err, err
            assert err.startswith(f"topkeval: error: Cannot write '{target}': ")
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode) and (tmp_path / "link.html").is_symlink()
    assert other.read_text() == "keep"
    other.write_text("mine")
    code, out, err = run(["report", log_file, *BASE, "--score", "old", "-o", other], capsys)
    assert code == 2 and "already exists; pass --force to replace it" in err and other.read_text() == "mine"


def test_any_os_error_is_one_line(log_file, capsys, monkeypatch):
    import errno

    import topkeval.api

    def unreadable(*args, **kwargs):
        raise OSError(errno.EIO, os.strerror(errno.EIO), "/data/log.parquet")

    monkeypatch.setattr(topkeval.api, "evaluate", unreadable)
    code, out, err = run(["evaluate", log_file, *BASE, "--score", "old"], capsys)
    assert code == 2 and out == ""
    assert err.splitlines() == ["topkeval: error: Input/output error: '/data/log.parquet'. Check the path and its "
                                "permissions."]


# ----------------------------------------------------------------------------------------------
# issue 26: a stacked top-N table (one row per model, user and item) with --model


def _stacked(seed: int = 3) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Three models' top 3 to 6 of 12 users (lists of different lengths: not a truncated log), the
    relevance of each row, and the users' true interactions (some never recommended)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    truth = pd.DataFrame([(f"u{u:02d}", f"i{i:02d}") for u in range(12) for i in rng.choice(30, 4, replace=False)],
                         columns=["user", "item"]).assign(relevance=1)
    relevant = set(zip(truth["user"], truth["item"]))
    rows = []
    for model in ("als", "pop", "ease"):
        for u in range(12):
            user = f"u{u:02d}"
            picks = rng.choice(30, int(rng.integers(3, 7)), replace=False)
            # half of each list drawn from the user's truth, so that the models differ and score
            picks[: len(picks) // 2] = [int(i[1:]) for i in truth.loc[truth["user"] == user, "item"]][: len(picks) // 2]
            for rank, i in enumerate(dict.fromkeys(int(p) for p in picks)):
                rows.append((model, user, f"i{i:02d}", float(10 - rank) + rng.random(),
                             int((user, f"i{i:02d}") in relevant)))
    recs = pd.DataFrame(rows, columns=["model", "user", "item", "score", "relevance"])
    return recs.sample(frac=1.0, random_state=seed).reset_index(drop=True), truth


@pytest.fixture(params=["csv", "parquet"])
def stacked_files(tmp_path, request):
    recs, truth = _stacked()
    paths = tmp_path / f"recs.{request.param}", tmp_path / f"truth.{request.param}"
    for frame, path in zip((recs, truth), paths):
        frame.to_csv(path, index=False) if request.param == "csv" else frame.to_parquet(path)
    return paths


STACKED = ["--query", "user", "--item", "item", "--score", "score", "--model", "model", "-m", "recall@5",
           "-m", "ndcg@5", "-m", "P@3"]


@pytest.mark.parametrize("qrels", [True, False])
def test_model_evaluates_a_stacked_table_as_python_does(stacked_files, capsys, qrels):
    import topkeval as tk

    recs, truth = stacked_files
    extra = ["--qrels", truth] if qrels else []
    code, out, err = run(["evaluate", recs, *STACKED, *extra, "--format", "json"], capsys)
    assert code == 0 and err == "", err
    res = tk.evaluate(recs, ["recall@5", "ndcg@5", "P@3"], query="user", item="item", model="model",
                      qrels=truth if qrels else None)
    payload = json.loads(out)
    order = list(dict.fromkeys(_stacked()[0]["model"]))  # in order of first appearance
    assert list(payload["summary"]) == res.models == order and sorted(order) == ["als", "ease", "pop"]
    for model in res.models:
        for metric in res.metrics:
            assert payload["summary"][model][metric] == pytest.approx(res.summary.loc[model, metric], rel=1e-12)
    assert payload["info"]["evaluated_per_model"] == res.info["evaluated_per_model"]
    # per query, as CSV: the same rows and values
    code, out, err = run(["evaluate", recs, *STACKED, *extra, "--format", "csv", "--per-query"], capsys)
    assert code == 0, err
    printed = pd.read_csv(__import__("io").StringIO(out), dtype={"user": str})
    want = res.per_query
    assert printed[["model", "user"]].values.tolist() == want[["model", "user"]].values.tolist()
    for metric in res.metrics:
        assert printed[metric].to_numpy() == pytest.approx(want[metric].to_numpy(), rel=1e-12)
    # the numbers themselves: with --qrels each model against every true interaction, without it each
    # model's rows alone (R: the relevant rows of its own list)
    frame, judged = _stacked()
    for model in res.models:
        mine = frame[frame["model"] == model]
        alone = tk.evaluate(mine, ["recall@5"], query="user", item="item", score="score",
                            qrels=truth if qrels else None)
        assert res.summary.loc[model, "recall@5"] == pytest.approx(alone.summary.iloc[0, 0], rel=1e-12)
    if qrels:  # some true interactions were never recommended: recall is lower against them
        assert (res.summary["recall@5"] < tk.evaluate(recs, ["recall@5"], query="user", item="item",
                                                      model="model").summary["recall@5"]).any()


def test_model_in_compare_report_and_diff(stacked_files, tmp_path, capsys):
    import topkeval as tk

    recs, truth = stacked_files
    base = [recs, "--qrels", truth, *STACKED]
    res = tk.evaluate(recs, ["recall@5", "ndcg@5", "P@3"], query="user", item="item", model="model", qrels=truth)
    code, out, err = run(["compare", *base, "--baseline", "pop", "--format", "json", "--resamples", "500"], capsys)
    assert code == 0, err
    rows = json.loads(out)["comparison"]
    want = res.compare(baseline="pop", n_resamples=500)
    assert [[r["model"], r["metric"]] for r in rows] == want[["model", "metric"]].values.tolist()
    assert [r["delta"] for r in rows] == pytest.approx(want["delta"].tolist(), rel=1e-12)
    assert [r["p_value"] for r in rows] == pytest.approx(want["p_value"].tolist(), rel=1e-12)
    code, out, err = run(["compare", *base, "--all", "--format", "json"], capsys)
    assert code == 0 and len(json.loads(out)["pairs"]) == 3 * 3, err  # 3 pairs x 3 metrics
    code, out, err = run(["diff", *base, "--baseline", "pop", "--other", "als", "--format", "csv", "--worst", "50"],
                         capsys)
    assert code == 0, err
    printed = pd.read_csv(__import__("io").StringIO(out), dtype={"user": str})
    every = res.diff("pop", "als", "recall@5")
    worse = every[every["delta"] < 0]
    assert printed["user"].tolist() == worse["user"].tolist()
    assert printed["delta"].to_numpy() == pytest.approx(worse["delta"].to_numpy())
    code, out, err = run(["diff", *base, "--baseline", "pop", "--show", "u03", "--other", "ease", "--format", "csv"],
                         capsys)
    assert code == 0 and "pop item" in out.splitlines()[0] and "ease item" in out.splitlines()[0], err
    target = tmp_path / "stacked.html"
    code, out, err = run(["report", *base, "--baseline", "ease", "-o", target, "--resamples", "200"], capsys)
    assert code == 0 and "Comparison with ease" in target.read_text(encoding="utf-8"), err


@pytest.mark.parametrize("extra,pattern", [
    (["evaluate", "--model", "modle"], r"Column 'modle' \(--model\) not found .*Did you mean 'model'\? Available: "
                                       r"'model', 'user', 'item', 'score', 'relevance'"),
    (["evaluate", "--model", "model", "--score", "score", "--score", "relevance"], "exactly one score column"),
    (["compare", "--model", "model", "--baseline", "popp"], "--baseline 'popp' is not one of the models of the "
                                                            "--model column 'model' .*Did you mean 'pop'"),
    (["diff", "--model", "model", "--baseline", "pop", "--other", "alss"], "--other 'alss' is not one of the "
                                                                           "models .*Did you mean 'als'"),
    (["diff", "--model", "model", "--baseline", "pop"], "name the other one with --other"),
    (["diff", "--baseline", "score", "--other", "pop"], "--other names a model of the --model column"),
    (["evaluate", "--model", ""], r"--model is empty \(''\): give a column name"),
    (["evaluate", "--model", "model", "--chunk-rows", "5"], "--chunk-rows .*read whole"),
    (["evaluate", "--model", "model", "--position", "score"], "--position and --propensity .*not supported"),
])
def test_model_errors_are_one_line_naming_the_flag(stacked_files, capsys, extra, pattern):
    recs, _ = stacked_files
    command, *rest = extra
    code, out, err = run([command, recs, "--query", "user", "--item", "item", *rest], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert __import__("re").search(pattern, err), err


def test_model_is_refused_with_trec_runs(trec_files, capsys):
    code, out, err = run(["evaluate", "--qrels", trec_files / "qrels.txt", "--run", trec_files / "a.run",
                          "--model", "run"], capsys)
    assert code == 2 and "with --run each run file is a model" in err


def _counts(line: str, what: str) -> dict:
    """``{model: count}`` from a notes line's ``what: a 24, b 20`` part."""
    import re

    part = re.search(re.escape(what) + r"[^:]*: ([^;_]*)", line)
    return {} if part is None else {m: int(c.replace(",", "")) for m, c in
                                     (x.rsplit(" ", 1) for x in part.group(1).split(", "))}


def test_the_counts_of_a_stacked_table_add_up_per_model(tmp_path, capsys):
    """'801 of 943 queries evaluated; 313 skipped' mixed two models' counts (the most any evaluated,
    the most any skipped). Where the models' counts differ, each model's evaluated, skipped and
    without-a-row counts are said, and they add up to the queries; where they agree, one count."""
    import numpy as np

    rng = np.random.default_rng(4)
    rows = []
    for model, share in (("a", 0.5), ("b", 0.2), ("c", 0.35)):
        for q in range(40):
            if model == "b" and q % 8 == 0:
                continue  # b has no row for 5 queries
            rows += [(model, q, i, int(rng.random() < share), rng.random()) for i in range(int(rng.integers(3, 7)))]
    frame = pd.DataFrame(rows, columns=["model", "query", "item", "relevance", "score"])
    path = tmp_path / "stacked.csv"
    frame.to_csv(path, index=False)
    code, out, err = run(["evaluate", path, "--item", "item", "--model", "model", "-m", "recall@2", "--format",
                          "markdown"], capsys)
    assert code == 0, err
    line = next(x for x in out.splitlines() if "queries evaluated" in x)
    evaluated, skipped = _counts(line, "queries evaluated (of 40)"), _counts(line, "without a relevant item")
    absent = _counts(line, "without a row of the model")
    want = frame.groupby(["model", "query"])["relevance"].sum().gt(0).groupby("model")
    assert evaluated == want.sum().to_dict() and skipped == (~want.obj).groupby("model").sum().to_dict()
    assert absent == {"b": 5}
    for model in "abc":
        assert evaluated[model] + skipped[model] + absent.get(model, 0) == 40
    # the same counts in the report's table, and in the Results' first line
    import topkeval as tk

    res = tk.evaluate(path, ["recall@2"], item="item", model="model")
    assert "queries evaluated (of 40): a " in repr(res).splitlines()[0]
    # info (and JSON): each model's three counts, and a top-level pair of one model (the most evaluated)
    code, out, err = run(["evaluate", path, "--item", "item", "--model", "model", "-m", "recall@2", "--format",
                          "json"], capsys)
    for info in (res.info, json.loads(out)["info"]):
        assert info["evaluated_per_model"] == evaluated and info["skipped_empty_per_model"] == skipped
        assert info["without_rows_per_model"] == {"a": 0, "b": 5, "c": 0}
        top = max(evaluated, key=evaluated.get)
        assert info["counts_of_model"] == top and info["queries"] == 40
        assert (info["evaluated"], info["skipped_empty"]) == (evaluated[top], skipped[top])
        assert info["evaluated"] + info["skipped_empty"] + info["without_rows_per_model"][top] == 40
    report = tmp_path / "r.html"
    res.report(report, n_resamples=100)
    html = report.read_text(encoding="utf-8")
    assert "without a row of the model: <span class=\"id\">b</span>" in html
    # one model, or models that agree: one count
    code, out, err = run(["evaluate", path, "--item", "item", "--score", "score", "-m", "recall@2", "--format",
                          "markdown"], capsys)
    assert code == 2  # several rows per (query, item): a stacked table read as one is refused
    one = frame[frame["model"] == "a"].drop(columns="model")
    one.to_csv(path, index=False)
    code, out, err = run(["evaluate", path, "--item", "item", "-m", "recall@2", "--format", "markdown"], capsys)
    n = int(one.groupby("query")["relevance"].sum().gt(0).sum())
    assert code == 0 and f"{n} of 40 queries evaluated; {40 - n} without a relevant item skipped" in out, out


@pytest.fixture
def click_files(tmp_path):
    """A small click log, curve files good and bad, and a folder of parquet files of two schemas."""
    pd.DataFrame({"query": [1, 1, 1, 2, 2], "item": list("abcab"), "relevance": [1, 0, 1, 0, 1],
                  "score": [0.3, 0.2, 0.1, 0.5, 0.4], "position": [1, 2, 3, 1, 2]}).to_csv(tmp_path / "clicks.csv",
                                                                                        index=False)
    (tmp_path / "good.csv").write_text("position,propensity\n1,1\n2,0.5\n3,0.3\n")
    (tmp_path / "empty.csv").write_text("position,propensity\n")
    (tmp_path / "blank.csv").write_text("")
    (tmp_path / "text.csv").write_text("position,propensity\n1,1\n2,abc\n3,0.3\n")
    (tmp_path / "zero.csv").write_text("position,propensity\n1,1\n2,0\n")
    (tmp_path / "mixed").mkdir()
    pd.DataFrame({"query": [1, 1], "item": ["a", "b"], "position": [1, 2], "click": [1, 0]}).to_parquet(
        tmp_path / "mixed" / "a.parquet")
    pd.DataFrame({"query": ["x", "y"], "item": ["a", "b"], "position": [1, 2], "click": [1, 0]}).to_parquet(
        tmp_path / "mixed" / "b.parquet")
    return tmp_path


@pytest.mark.parametrize("curve,pattern", [
    ("absent.csv", r"--propensity '.*absent.csv': no such file \(a curve file"),
    ("folder.csv", r"--propensity '.*folder.csv': a folder, not a file"),
    ("empty.csv", r"--propensity '.*empty.csv' has no rows"),
    ("blank.csv", r"--propensity '.*blank.csv' must have the columns position and propensity"),
    ("text.csv", r"--propensity '.*text.csv': its propensities must be numbers above 0 .*position 2 has 'abc'"),
    ("zero.csv", r"--propensity '.*zero.csv': its propensities must be numbers above 0 .*position 2 has 0"),
])
def test_propensity_files_are_read_or_refused_in_one_line(click_files, capsys, curve, pattern):
    """A missing curve file was read as a column name, an empty one said 'got dict', one with text
    propensities 'clicks at positions without a propensity': each is said for what it is."""
    import re

    (click_files / "folder.csv").mkdir(exist_ok=True)
    code, out, err = run(["evaluate", click_files / "clicks.csv", "--item", "item", "--position", "position",
                          "--propensity", click_files / curve, "-m", "recall@2"], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert re.search(pattern, err), err


def test_a_good_curve_file_and_a_column_named_like_a_file(click_files, capsys):
    import topkeval as tk

    code, out, err = run(["evaluate", click_files / "clicks.csv", "--item", "item", "--position", "position",
                          "--propensity", click_files / "good.csv", "-m", "precision@2", "--format", "json"], capsys)
    assert code == 0, err
    want = tk.evaluate(str(click_files / "clicks.csv"), ["precision@2"], item="item", position="position",
                       propensity={1: 1.0, 2: 0.5, 3: 0.3})
    assert json.loads(out)["summary"]["score"]["precision@2"] == want.summary.iloc[0, 0]
    frame = pd.read_csv(click_files / "clicks.csv").assign(**{"p.csv": [1.0, 0.5, 0.3, 1.0, 0.5]})
    frame.to_csv(click_files / "named.csv", index=False)  # a column whose name ends in .csv: the column
    code, out, err = run(["evaluate", click_files / "named.csv", "--item", "item", "--position", "position",
                          "--propensity", "p.csv", "-m", "precision@2", "--format", "json"], capsys)
    assert code == 0, err
    assert json.loads(out)["summary"]["score"]["precision@2"] == want.summary.iloc[0, 0]


def test_a_folder_of_parquet_files_of_two_schemas_is_said_in_one_line(click_files, capsys):
    """topkeval bias DIR passed pyarrow's 'Failed to parse string' through."""
    code, out, err = run(["bias", click_files / "mixed"], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "its parquet files do not share one schema: column 'query' is int64 in 'a.parquet' and" in err, err


@pytest.mark.parametrize("argv,pattern", [
    (["evaluate", "{log}", "--show", "1"], r"--show is an option of topkeval report and topkeval diff, not of "
                                           r"topkeval evaluate"),
    (["evaluate", "{log}", "--worst", "3"], r"--worst is an option of topkeval report and topkeval diff, not of "
                                            r"topkeval evaluate"),
    (["evaluate", "{log}", "--scroe", "x"], r"Did you mean '--score'\?"),
    (["compare", "{log}", "--score", "old", "--per-query"], r"--per-query is an option of topkeval evaluate"),
    (["evaluate", "{log}", "--ci", "1.5"], r"--ci must be a confidence level between 0 and 1, such as 0.95 .*got 1.5"),
    (["evaluate", "{log}", "--ci", "0"], r"--ci must be a confidence level between 0 and 1"),
])
def test_flags_of_another_command_and_bad_levels_are_said_for_what_they_are(log_file, capsys, argv, pattern):
    """'evaluate --show 1' answered 'Did you mean --show?'; '--ci 1.5' named a --confidence option that
    evaluate does not have."""
    import re

    code, out, err = run([str(log_file) if a == "{log}" else a for a in argv] + ["--query", "q", "--relevance", "rel"],
                         capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert re.search(pattern, err) and "--confidence" not in err and "Did you mean '--show'" not in err, err


def test_a_metric_list_splits_at_each_name(log_file, capsys):
    """-m map,11pt_avg failed while -m 11pt_avg,map worked: the same metrics either way."""
    base = ["evaluate", log_file, "--query", "q", "--relevance", "rel", "--score", "old", "--item", "item", "--ties",
            "item_desc", "--format", "json"]
    outs = []
    for names in ("map,11pt_avg", "11pt_avg,map"):
        code, out, err = run(base + ["-m", names], capsys)
        assert code == 0, err
        outs.append(json.loads(out)["summary"]["old"])
    assert outs[0] == outs[1] and set(outs[0]) == {"map", "11pt_avg"}


@pytest.fixture
def recs(tmp_path):
    """Two models' top 8 of 40 items for 30 users (ids as text, some like '007'), a catalogue of 60
    items, a history, item vectors, popularity and category columns."""
    import numpy as np

    rng = np.random.default_rng(0)
    rows = []
    for q in range(30):
        for i in rng.choice(40, 8, replace=False):
            rows.append((f"u{q}", f"{i:03d}", int(rng.random() < 0.3), rng.random(), rng.random()))
    log = pd.DataFrame(rows, columns=["user", "item", "relevance", "a", "b"])
    log["pop"] = log["item"].map(lambda i: (int(i) + 1) / 41)
    log["cat"] = log["item"].map(lambda i: f"c{int(i) % 4}")
    log.to_csv(tmp_path / "recs.csv", index=False)
    pd.DataFrame({"item": [f"{i:03d}" for i in range(60)]}).to_csv(tmp_path / "catalog.csv", index=False)
    history = pd.DataFrame({"user": ["u0", "u0", "u1", "u2", "u2"], "item": ["001", "002", "003", "001", "007"]})
    history.to_csv(tmp_path / "history.csv", index=False)
    features = pd.DataFrame({"item": [f"{i:03d}" for i in range(40)], "f1": rng.random(40), "f2": rng.random(40)})
    features.to_parquet(tmp_path / "features.parquet")
    return tmp_path, log, history, features


BEYOND = ["--query", "user", "--item", "item", "--score", "a", "--score", "b"]


def test_beyond_accuracy_metrics_on_the_command_line_equal_python(recs, capsys):
    """-m coverage@5 pointed to a Python method: the command line computes every beyond-accuracy
    metric, with --catalog, --history, --popularity, --features, --categories read from files or the
    log's columns (ids as evaluate reads them: '007' is text), the numbers those of Python's."""
    import topkeval as tk

    root, log, history, features = recs
    code, out, err = run(["evaluate", root / "recs.csv", *BEYOND, "-m", "recall@5,coverage@5,novelty@5,gini@5,"
                          "diversity@5,category_diversity@5,serendipity@5", "--catalog", root / "catalog.csv",
                          "--history", root / "history.csv", "--features", root / "features.parquet", "--categories",
                          "cat", "--format", "json"], capsys)
    assert code == 0, err
    payload = json.loads(out)
    frame = pd.read_csv(root / "recs.csv", dtype={"user": str, "item": str})
    inputs = dict(catalog=[f"{i:03d}" for i in range(60)], history=history,
                  features=features.set_index("item"), categories=dict(zip(frame["item"], frame["cat"])))
    with __import__("warnings").catch_warnings():
        __import__("warnings").simplefilter("ignore", tk.TopkevalWarning)  # top 8 lists: said on stderr above
        res = tk.evaluate(frame, ["recall@5", "novelty@5", "diversity@5", "category_diversity@5", "serendipity@5"],
                          query="user", item="item", score=["a", "b"], **inputs)
    catalog = res.beyond_accuracy(metrics=["coverage@5", "gini@5"], **inputs)
    for model in ("a", "b"):
        got = payload["summary"][model]
        assert list(got) == ["recall@5", "coverage@5", "novelty@5", "gini@5", "diversity@5", "category_diversity@5",
                             "serendipity@5"]
        for metric in res.metrics:
            assert got[metric] == res.summary.loc[model, metric], metric
        for metric in ("coverage@5", "gini@5"):
            assert got[metric] == catalog.loc[model, metric], metric
    assert payload["info"]["metrics"] == list(got) and "beyond_defaults" not in payload["info"]
    # a column of the log as popularity; comma-separated columns as features; a catalogue's size
    code, out, err = run(["evaluate", root / "recs.csv", *BEYOND, "-m", "popularity@5,coverage@5", "--popularity",
                          "pop", "--catalog", "60", "--format", "json"], capsys)
    assert code == 0, err
    pop = dict(zip(frame["item"], frame["pop"]))
    want = tk.evaluate(frame, ["popularity@5"], query="user", item="item", score=["a", "b"], popularity=pop)
    got = json.loads(out)["summary"]
    assert [got[m]["popularity@5"] for m in "ab"] == want.summary["popularity@5"].tolist()
    assert [got[m]["coverage@5"] for m in "ab"] == want.beyond_accuracy(metrics=["coverage@5"], catalog=60)[
        "coverage@5"].tolist()


def test_beyond_accuracy_defaults_are_said_and_refusals_are_one_line(recs, capsys):
    root, log, history, _ = recs
    code, out, err = run(["evaluate", root / "recs.csv", *BEYOND, "-m", "coverage@5,novelty@5"], capsys)
    assert code == 0, err
    assert ("beyond accuracy: the catalogue is the 40 distinct items of the table (--catalog gives the real one); an "
            "item's popularity is its share of the 28 queries") in " ".join(out.split()), out
    # ids not the log's ('001' written as 1, users as numbers): refused, not every item counted as never seen
    history.assign(item=history["item"].astype(int)).to_csv(root / "history_int.csv", index=False)
    history.assign(user=[0, 0, 1, 2, 2]).to_csv(root / "history_users.csv", index=False)
    pd.DataFrame({"item": range(40), "popularity": 0.5}).to_csv(root / "popularity_int.csv", index=False)
    for argv, pattern in [
        (["-m", "novelty@5", "--history", root / "history_int.csv"],
         r"none of the 40 items of the log is in --history \(its 4 distinct ids\)\. The log's ids look like "
         r"'\d{3}', .* those of --history like '1', '2', '3', \.\.\.: ids match as written \('007' is not '7'\)\. "
         r"Give --history the log's ids\.$"),
        (["-m", "novelty(variant=replay)@5", "--history", root / "history_users.csv"],
         r"none of the 30 queries of the log is in --history \(its 3 distinct ids\)"),
        (["-m", "novelty@5", "--popularity", root / "popularity_int.csv"],
         r"have no popularity.*; 0 of the \d+ match\. The log's ids look like '\d{3}', .* those of --popularity like "
         r"'0', '1', '2', \.\.\.: ids match as written"),
        (["-m", "recall@5", "--catalog", "60"], r"--catalog is read by the beyond-accuracy metrics"),
        (["-m", "coverage@5", "--catalog", root / "missing.csv"], r"--catalog '.*missing.csv': no such file"),
        (["-m", "coverage@5", "--catalog", "5"], r"--catalog 5, but the models show \d+ distinct items"),
        (["-m", "coverage@5", "--catalog", "0"], r"^topkeval: error: --catalog '0': the catalogue's number of items "
                                                 r"must be at least 1; for a catalogue of item ids \(an item whose id "
                                                 r"is 0 among them\), give a file that lists them\.$"),  # not "[0]"
        (["-m", "diversity@5", "--features", "f9"], r"--features 'f9': 'f9' is not a column of the log, nor a file"),
        (["-m", "novelty@5", "--popularity", "a"], r"item '\d+' two values"),  # a score column: not one per item
        (["-m", "coverage@5", "--by", "cat"], r"coverage@5 describes each model's lists all together"),
        (["-m", "recall@5", "--baseline", "a"], r"--baseline names the model that unexpectedness@k compares"),
        (["-m", "unexpectedness@5"], r"pass --baseline"),
    ]:
        code, out, err = run(["evaluate", root / "recs.csv", *BEYOND, *argv], capsys)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, (argv, err)
        assert __import__("re").search(pattern, err), (argv, err)
    code, out, err = run(["compare", root / "recs.csv", *BEYOND, "--baseline", "a", "-m", "coverage@5"], capsys)
    assert code == 2 and "no per-query value to compare" in err
    # a stacked table: no default (the models' own rows), the flags named
    stacked = pd.concat([log.assign(model="a", score=log["a"]), log.assign(model="b", score=log["b"])])
    stacked.to_csv(root / "stacked.csv", index=False)
    code, out, err = run(["evaluate", root / "stacked.csv", "--query", "user", "--item", "item", "--model", "model",
                          "-m", "coverage@5"], capsys)
    assert code == 2 and "Pass --catalog" in err, err
    code, out, err = run(["evaluate", root / "stacked.csv", "--query", "user", "--item", "item", "--model", "model",
                          "-m", "coverage@5,novelty@5", "--catalog", root / "catalog.csv", "--history",
                          root / "history.csv", "--format", "csv"], capsys)
    assert code == 0 and out.splitlines()[0] == "model,coverage@5,novelty@5", err


def test_item_inputs_read_from_files_and_columns(tmp_path):
    """topkeval.inputs.items: ids as text from CSV, one value per item from the log's columns, a file
    listing an item twice refused."""
    import topkeval as tk
    from topkeval.inputs import items

    (tmp_path / "log.csv").write_text("query,item,p,f1,f2\n1,007,0.5,1,0\n1,7,0.25,0,1\n2,007,0.5,1,0\n2,8,0.1,1,1\n")
    assert items.read_item_values("p", item="item", data=str(tmp_path / "log.csv"), flag="--popularity",
                                  preferred="popularity").to_dict() == {"007": 0.5, "7": 0.25, "8": 0.1}
    vectors = items.read_item_values("f1,f2", item="item", data=str(tmp_path / "log.csv"), flag="--features",
                                     preferred="", vector=True)
    assert vectors.loc["007"].tolist() == [1, 0] and list(vectors.index) == ["007", "7", "8"]
    (tmp_path / "bad.csv").write_text("query,item,p\n1,007,0.5\n2,007,0.4\n")
    with pytest.raises(tk.DataError, match=r"gives item '007' two values \(0.5 and 0.4\)"):
        items.read_item_values("p", item="item", data=str(tmp_path / "bad.csv"), flag="--popularity",
                               preferred="popularity")
    (tmp_path / "pop.csv").write_text("item,share\n007,0.5\n007,0.4\n")
    with pytest.raises(tk.DataError, match="lists item '007' more than once"):
        items.read_item_values(str(tmp_path / "pop.csv"), item="item", flag="--popularity", preferred="popularity")
    (tmp_path / "cat.csv").write_text("id\n007\n7\n")
    assert items.read_catalog(str(tmp_path / "cat.csv"), item="item") == ["007", "7"]
    assert items.read_catalog("1_682", item="item") == 1682
    (tmp_path / "two.csv").write_text("a,b\n1,2\n")
    with pytest.raises(tk.ColumnError, match="needs the item column 'item'"):
        items.read_catalog(str(tmp_path / "two.csv"), item="item")
    history = items.read_history(str(tmp_path / "log.csv"), query="query", item="item")
    assert history.to_dict("list") == {"query": ["1", "1", "2", "2"], "item": ["007", "7", "007", "8"]}


def test_ci_refusals_name_the_flags_given(tmp_path, capsys):
    """evaluate --ci --interval t with --weight: the refusal names --interval (summary_ci calls it method=);
    --ci with --by is refused (the intervals are of the overall means: the segments would be left out)."""
    rng = np.random.default_rng(0)
    n = 200
    pd.DataFrame({"query": np.repeat(np.arange(20), 10), "item": np.tile(np.arange(10), 20),
                  "relevance": rng.integers(0, 2, n), "m1": rng.random(n), "m2": rng.random(n),
                  "w": np.repeat(rng.random(20) + 0.5, 10), "seg": np.repeat(rng.integers(0, 2, 20), 10)}
                 ).to_csv(tmp_path / "log.csv", index=False)
    base = ["evaluate", str(tmp_path / "log.csv"), "--score", "m1", "--score", "m2", "--item", "item", "-m", "recall@3",
            "--ci"]
    code, out, err = run(base + ["--interval", "t", "--weight", "w"], capsys)
    assert code == 2 and err.count("\n") == 1 and "--interval t has no weighted form" in err
    assert "use --interval bootstrap" in err and "--method" not in err
    code, out, err = run(base + ["--by", "seg"], capsys)
    assert code == 2 and err.count("\n") == 1 and "would leave out the segments of --by" in err


@pytest.mark.parametrize("queries", [3, 40])
def test_compare_on_few_queries_says_its_numbers_are_rough(tmp_path, capsys, queries):
    """Fewer than 20 paired queries: a note says the tests and intervals hold their level only roughly, and
    (permutation test) the smallest p-value n queries allow; none on more queries."""
    rng = np.random.default_rng(3)
    n = queries * 10
    path = tmp_path / "log.csv"
    pd.DataFrame({"query": np.repeat(np.arange(queries), 10), "item": np.tile(np.arange(10), queries),
                  "relevance": rng.integers(0, 2, n), "a": rng.random(n), "b": rng.random(n)}).iloc[:-1].to_csv(path)
    code = main(["compare", str(path), "--item", "item", "--score", "a", "--score", "b", "--baseline", "a", "-m",
                 "ndcg@5", "--test", "permutation"])
    out, err = capsys.readouterr()
    assert code == 0, err
    note = "only 3 paired queries: tests and intervals on fewer than 20 hold their level only roughly"
    assert (note in out) == (queries == 3)
    assert ("test of 3 queries cannot give a p-value below 0.25" in out) == (queries == 3)
