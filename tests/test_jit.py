"""The kernels give the same numbers interpreted (small inputs, no numba import) and compiled.

Each mode runs in its own process (a process switches to compiled kernels for good), on logs with
heavy ties, graded relevance, both kernel paths (few and many relevant candidates per query), every
tie rule, a score threshold, shuffled rows, rank-aware metrics and the items gained / lost of diff().
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

SCRIPT = r"""
import json, sys
import numpy as np
import topkeval as tk
from topkeval import conventions, engine
from topkeval.backends.cpu import CpuBackend
from topkeval.metrics import names
from topkeval.inputs.grouped import build_log

rng = np.random.default_rng(7)
out = {}
metrics = ["recall@5", "precision@10", "f1@3", "specificity@5", "r_precision", "hit_rate@3", "rr", "ap@10",
           "ndcg@5", "ndcg(gain=exp)", "num_rel_ret"]
for case, share in (("few", 0.1), ("many", 0.6)):
    n = 2500
    frame = {"query": rng.integers(0, 30, n), "item": np.arange(n),
             "relevance": rng.integers(1, 4, n) * (rng.random(n) < share),
             "a": rng.integers(0, 5, n) / 4.0, "b": rng.random(n)}
    for ties in ("expected", "optimistic", "pessimistic", "first", "item_desc", "item_asc"):
        for thr in (None, 0.3):
            res = tk.evaluate(frame, metrics=metrics, score=["a", "b"], item="item", ties=ties, score_threshold=thr)
            out[f"{case}-{ties}-{thr}"] = res.per_query[metrics].to_numpy().tolist()
        diff = res.diff("a", "b", "recall@5")  # the inclusion kernel: items gained and lost
        out[f"{case}-{ties}-diff"] = [[float(q), d, sorted(map(int, g)), sorted(map(int, lo))]
                                      for q, d, g, lo in zip(diff["query"], diff["delta"], diff["gained"], diff["lost"])]
    # both kernel paths forced on the same log
    mets = names.parse_metrics(metrics)
    log = build_log(frame["query"], frame["relevance"], {"a": frame["a"]}, frame["item"],
                    names=dict(query="query", relevance="relevance", item="item"))
    for path in (1, 2):
        plan = engine.make_plan(mets, conventions.resolve(None, owner="t"))
        batch = engine.evaluate_log(log, plan, backend=CpuBackend(path))
        res = engine.build_results([batch], plan)
        out[f"{case}-path{path}"] = res.per_query[metrics].to_numpy().tolist()
print(json.dumps({"numba_imported": "numba" in sys.modules, "values": out}))
"""


def _run(mode: str) -> dict:
    env = {**os.environ, "TOPKEVAL_JIT": mode}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, check=True)
    return json.loads(proc.stdout)


def test_interpreted_kernels_equal_compiled_kernels():
    interpreted, compiled = _run("0"), _run("1")
    assert not interpreted["numba_imported"] and compiled["numba_imported"]
    assert interpreted["values"].keys() == compiled["values"].keys()
    for key, values in compiled["values"].items():
        if key.endswith("-diff"):
            assert interpreted["values"][key] == values, key
            continue
        np.testing.assert_allclose(np.array(interpreted["values"][key], dtype=float), np.array(values, dtype=float),
                                   rtol=0, atol=1e-12, err_msg=key)


NUMPY_SCRIPT = r"""
import json, sys
import numpy as np
import topkeval as tk
from topkeval.kernels import vectorised

used = []
stats = vectorised.stats
vectorised.stats = lambda *a: used.append(1) or stats(*a)
rng = np.random.default_rng(11)
out = {}
metrics = ["recall@5", "precision@10", "f1@3", "specificity@5", "r_precision", "hit_rate@3", "hit_rate@40",
           "num_rel_ret", "num_ret", "recall@1000"]
for case, share in (("few", 0.1), ("many", 0.6), ("rare", 0.01)):
    n = 6000
    frame = {"query": np.sort(rng.integers(0, 70, n)), "item": np.char.add("i", rng.permutation(n).astype(str)),
             "relevance": rng.integers(1, 4, n) * (rng.random(n) < share),
             "a": rng.integers(0, 5, n) / 4.0, "b": rng.random(n), "c": np.zeros(n), "d": -rng.integers(0, 2, n) * 0.0}
    frame["relevance"][::97] = 1
    for thr in (None, 0.3, 0.0):
        for empty in ("skip", "keep"):
            res = tk.evaluate(frame, metrics=metrics, score=["a", "b", "c", "d"], item="item", score_threshold=thr,
                              empty_queries=empty)
            out[f"{case}-{thr}-{empty}"] = res.per_query[metrics].to_numpy().tolist()
            out[f"{case}-{thr}-{empty}-ties"] = int(sum(res.info.get("tied_at_cutoff", {}).values()) or 0)
try:
    tk.evaluate({"query": [1, 1, 2], "item": ["x", "x", "x"], "relevance": [1, 0, 1], "score": [0.1, 0.2, 0.3]},
                item="item")
except tk.DataError as exc:
    out["duplicate"] = str(exc)
print(json.dumps({"numba_imported": "numba" in sys.modules, "numpy_stats": len(used), "values": out}))
"""


def test_numpy_versions_equal_compiled_kernels_to_the_last_bit():
    """Before the kernels are compiled, the usual evaluation runs numpy versions of its kernels
    (kernels/vectorised.py): the same numbers to the last bit (heavy ties, a score threshold, signed
    zeros, queries without relevant items, R-precision, hits), without loading numba."""
    runs = {}
    for mode in ("numpy", "1"):
        env = {**os.environ, "TOPKEVAL_JIT": mode}
        proc = subprocess.run([sys.executable, "-W", "error", "-c", NUMPY_SCRIPT], capture_output=True, text=True,
                              env=env, check=True)
        runs[mode] = json.loads(proc.stdout)
    assert not runs["numpy"]["numba_imported"] and runs["numpy"]["numpy_stats"] >= 36
    assert runs["1"]["numba_imported"] and runs["1"]["numpy_stats"] == 0
    assert runs["numpy"]["values"] == runs["1"]["values"]  # exactly: every float to its last bit
    assert "twice" in runs["numpy"]["values"]["duplicate"]


def test_numpy_versions_of_the_small_kernels():
    """Each numpy version against its compiled kernel (the test process compiles), on edge cases."""
    import pyarrow as pa

    from topkeval.kernels import cpu, grouping, vectorised

    rng = np.random.default_rng(5)
    for n in (0, 1, 2, 3, 50, 4000):
        values = rng.integers(0, 3, n)
        want = [0] + [i for i in range(1, n) if values[i] != values[i - 1]] if n else []  # by hand
        assert grouping.run_starts(values).tolist() == want
        for lo, hi in ((0, n), (0, n // 2), (n // 3, n), (n // 2, n // 2)):
            part = [i for i in want if lo <= i < hi]
            assert vectorised.run_starts_range(values, lo, hi).tolist() == part, (n, lo, hi)
            assert grouping._run_starts_range(values, lo, hi).tolist() == part, (n, lo, hi)
        for stop in (0, 1, 2, 5, 10_000):
            assert vectorised.count_runs(values, stop) == grouping.count_runs(values, stop), (n, stop)
        offsets = np.unique(np.concatenate([[0, n], rng.integers(0, n + 1, 5)])).astype(np.int64)
        flags = rng.random(n) < 0.3
        assert vectorised.per_group(offsets, flags).tolist() == grouping.count_per_group(offsets, flags).tolist()
        keys = rng.integers(0, 40, n)
        assert vectorised.duplicates(offsets, keys) == grouping.count_duplicates(offsets, keys)
        text = pa.array([f"k{k}" for k in keys], pa.string())
        assert vectorised.text_duplicates(offsets, text) == grouping.count_text_duplicates(offsets, text)
        floats = rng.random(n)
        floats[rng.random(n) < 0.05] = np.inf
        floats[rng.random(n) < 0.05] = np.nan
        assert vectorised.nonfinite(floats) == grouping.count_nonfinite(floats)
    # the statistics: every output field, against the compiled kernel
    n = 20_000
    offsets = np.unique(np.concatenate([[0, n], rng.integers(0, n, 300)])).astype(np.int64)
    scores = rng.integers(0, 6, n) / 5.0
    rel = rng.random(n) < 0.2
    R = grouping.count_per_group(offsets, rel) + rng.integers(0, 3, len(offsets) - 1)
    cols = cpu.Columns(offsets, scores, rel, rel, np.zeros(0), np.zeros(0, np.int64), R, np.zeros((0, n)))
    for thr in (-np.inf, 0.4):
        prm = cpu.Params(np.array([1, 3, 10, 50, 10 ** 6]), thr, cpu.TIE_EXPECTED, True, False, np.zeros((0, 1)),
                         np.zeros((0, 1)), cpu.PATH_AUTO)
        assert cpu.vectorisable(cols, prm)
        want, got = cpu.compute(cols, prm), vectorised.stats(cols, prm, cpu._outputs(len(offsets) - 1, prm, 0))
        for name in want._fields:
            assert np.array_equal(getattr(want, name), getattr(got, name)), name


def test_small_inputs_do_not_load_the_compiler():
    env = {k: v for k, v in os.environ.items() if k != "TOPKEVAL_JIT"}
    code = ("import sys, numpy as np, topkeval as tk; rng = np.random.default_rng(0); "
            "tk.evaluate({'query': np.repeat(np.arange(50), 20)[rng.permutation(1000)], "
            "'relevance': rng.integers(0, 2, 1000), 'score': rng.random(1000)}); print('numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "False"


def test_many_small_calls_end_up_compiled():
    env = {k: v for k, v in os.environ.items() if k != "TOPKEVAL_JIT"}
    code = ("import sys, numpy as np, topkeval as tk; from topkeval.kernels import jit; jit.BUDGET = 20_000; "
            "jit.VECTOR_BUDGET = 20_000; "
            "rng = np.random.default_rng(0); log = {'query': np.repeat(np.arange(50), 20), "
            "'relevance': rng.integers(0, 2, 1000), 'score': rng.random(1000)}; "
            "first = tk.evaluate(log).summary; before = 'numba' in sys.modules; "
            "[tk.evaluate(log) for _ in range(10)]; last = tk.evaluate(log).summary; "
            "print(before, jit.is_compiled(), bool((first == last).all().all()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "False True True"


INTERPRETED_EDGES = r"""
import numpy as np
import topkeval as tk

out = {}
log = {"query": [1, 1, 2, 2, 3, 3, 3], "relevance": [1, 0, 0, 1, 1, 0, 0]}
ok = tk.evaluate(log | {"score": np.array([0.5, 0.25, 0.75, 1e30, 0.1, 0.2, 0.3], np.float32)}, ["recall@1"])
out["float32"] = ok.summary.iloc[0, 0]
for bad in (np.inf, -np.inf, np.nan):
    try:
        tk.evaluate(log | {"score": np.array([0.5, bad, 0.75, 1.0, 0.1, 0.2, 0.3], np.float32)}, ["recall@1"])
        out[str(bad)] = "accepted"
    except tk.DataError as exc:
        out[str(bad)] = str(exc).split(" (")[0]
near = np.float32(0.7)  # below 0.7: float32 rounds 0.7 down
m = tk.evaluate_matrix(np.array([[near, 0.9]], np.float32), np.array([[1, 0]]), metrics=["recall@2", "num_ret"],
                       score_threshold=0.7)
out["threshold"] = m.summary.iloc[0].tolist()
S = np.array([[0.1, -np.inf, 0.9], [np.inf, 0.2, 0.8]], np.float32)  # the non-finite cells are excluded
m = tk.evaluate_matrix(S, np.array([[0, 0, 1], [0, 1, 0]]), metrics=["recall@1"],
                       exclude=np.array([[0, 1, 0], [1, 0, 0]]))
out["excluded"] = m.per_query["recall@1"].tolist()
try:
    tk.evaluate_matrix(np.array([[0.1, np.inf]], np.float32), np.array([[1, 0]]), metrics=["recall@1"])
    out["matrix inf"] = "accepted"
except tk.DataError:
    out["matrix inf"] = "refused"
print(repr(out))
"""


def test_interpreted_kernels_raise_no_numpy_warning_on_float32():
    """Interpreted (small inputs), numpy computes in float32 where numba computes in float64: a
    float64 bound overflowed in the cast (a RuntimeWarning) and let float32 infinities through, inf -
    inf warned, and a threshold was compared in float32. Under -W error, nothing may warn."""
    env = {**os.environ, "TOPKEVAL_JIT": "0"}
    proc = subprocess.run([sys.executable, "-W", "error", "-c", INTERPRETED_EDGES], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = eval(proc.stdout)
    assert out["float32"] == 2 / 3  # the top candidate is relevant in queries 1 (0.5) and 2 (1e30), not in 3
    assert out["inf"] == out["-inf"] == "Column 'score' has 1 non-finite scores"
    assert out["nan"] == "Column 'score' has 1 non-finite scores"
    assert out["threshold"] == [0.0, 1.0]  # float32(0.7) < 0.7: not a candidate; 0.9 is, and not relevant
    assert out["excluded"] == [1.0, 0.0] and out["matrix inf"] == "refused"  # tops: item 2 (relevant), item 2


def test_interpreted_matrix_kernels_compare_float32_scores_with_the_threshold_in_float64():
    """A float32 score matrix with score_threshold: the threshold is compared in float64 (as in the
    long format) by the interpreted kernels too, which small inputs run by default. float32(0.7) is
    below 0.7 and float32(0.3) above 0.3; numpy alone would compare a float32 with a Python float in
    float32. Both paths: the selection of each row's top (recall@2) and the rows counted in place (ap)."""
    code = ("import json, numpy as np, topkeval as tk\n"
            "out = {}\n"
            "for thr in (0.7, 0.3):\n"
            "    s = np.array([[np.float32(thr), 0.9, 0.05]], dtype=np.float32)\n"
            "    for m in ('recall@2', 'ap'):\n"
            "        r = tk.evaluate_matrix(s, np.array([[1, 0, 0]]), metrics=[m, 'num_ret', 'num_rel_ret'],\n"
            "                               score_threshold=thr)\n"
            "        out[f'{thr} {m}'] = r.summary.iloc[0].tolist()\n"
            "print(json.dumps(out))")
    for mode in ("0", "1"):
        env = {**os.environ, "TOPKEVAL_JIT": mode}
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        got = json.loads(proc.stdout)
        # 0.7: the relevant cell is below the threshold (one candidate left, none relevant)
        assert got["0.7 recall@2"] == [0.0, 1.0, 0.0] and got["0.7 ap"] == [0.0, 1.0, 0.0], (mode, got)
        # 0.3: it is kept, second of two candidates: recall@2 = 1, AP = 1/2
        assert got["0.3 recall@2"] == [1.0, 2.0, 1.0] and got["0.3 ap"] == [0.5, 2.0, 1.0], (mode, got)


def test_first_calls_of_other_compiled_kernels_give_the_compiling_notice(monkeypatch, caplog):
    """The resampling kernels compile on first use outside :class:`Kernel`: a first call that takes
    long and compiles says so (once per process); a kernel already compiled, or a first call that
    takes long without compiling (a load from numba's cache on a busy machine), says nothing."""
    import logging
    import threading
    import time

    from numba import njit

    from topkeval.kernels import jit

    monkeypatch.setattr(jit, "NOTICE_AFTER", 0.01)
    monkeypatch.setattr(jit, "_noticed", threading.Event())
    fresh = njit(lambda x: x + 1)
    done = njit(lambda x: x + 2)
    done(1)
    with caplog.at_level(logging.WARNING, logger="topkeval"):
        with jit.first_calls(done):
            time.sleep(0.2)
        assert not caplog.records
        with jit.first_calls(fresh):  # slow, but nothing compiled
            time.sleep(0.2)
        assert not caplog.records
        with jit.first_calls(fresh):
            fresh(1)
            time.sleep(0.2)
        assert [r.getMessage() for r in caplog.records] == [
            "topkeval: compiling its kernels for this machine (each the first time it is used after installation: "
            "seconds, more on a busy machine; cached for every later run)..."]
        again = njit(lambda x: x + 3)
        with jit.first_calls(again):  # once per process
            again(1)
            time.sleep(0.2)
        assert len(caplog.records) == 1


@pytest.mark.slow
def test_the_command_line_says_it_compiles_only_when_it_compiles(tmp_path):
    """The notice was printed whenever loading the kernels took more than a second, though every one
    loaded from numba's cache (a busy machine: stderr not empty, tests failing). Run twice with a cold
    cache of its own and the notice due at once (NOTICE_AFTER = 0): the first run, which compiles,
    says so; the second, which loads every kernel from the cache, says nothing at all."""
    log = tmp_path / "log.csv"
    log.write_text("query,relevance,score\n1,1,0.3\n1,0,0.2\n1,1,0.1\n2,0,0.5\n2,1,0.4\n")
    code = ("import sys; import topkeval.kernels.jit as jit; jit.NOTICE_AFTER = 0.0; "
            "from topkeval.cli import main; sys.exit(main(sys.argv[1:]))")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "TOPKEVAL_JIT": "1"}
    runs = [subprocess.run([sys.executable, "-c", code, "evaluate", str(log), "-m", "recall@2", "--format", "csv"],
                           capture_output=True, text=True, env=env, timeout=900) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs
    assert runs[0].stdout == runs[1].stdout == "model,recall@2\nscore,0.75\n"
    assert runs[0].stderr.startswith("topkeval: compiling its kernels"), runs[0].stderr
    assert runs[1].stderr == ""
