"""ir_measures' default pipeline vs the topkeval provider (``ir_measures.topkeval``), same call, same inputs.

    python benchmarks/ir_measures_bench.py                       # 1M-line run, frames, one round
    python benchmarks/ir_measures_bench.py --lines 1e6 --inputs frame tuples --rounds 3

Writes (once, under benchmarks/data) a run of ``lines`` lines (queries of 1,000 documents, docnos
as text, scores rounded to 6 decimals, so that some documents of a query tie) and judgments of
about 1 document in 10 (grades 0, 1, 2; plus a relevant document no run retrieved), as parquet.
Then, each tool in a process of its own, times ``calc_aggregate(measures, qrels, run)``:

* ``ir_measures``: ``ir_measures.calc_aggregate``, the default pipeline (pytrec_eval for P, R,
  AP, nDCG and R-precision; msmarco for RR@10; judged for Judged@10);
* ``topkeval``: ``ir_measures.topkeval.calc_aggregate`` after ``import topkeval.integrations.ir_measures``.

Two measure sets: ``trec`` (P@10, R@100, AP, nDCG@10, Rprec: pytrec_eval's alone) and ``mixed``
(those and RR@10, Judged@10: three providers of the default pipeline). Inputs as users hand them:
``frame`` (pandas frames with ir_measures' columns: query_id, doc_id, score / relevance) and
``tuples`` (lists of ir_measures' ScoredDoc and Qrel, as ``read_trec_run`` gives them). The frames
are read from parquet before the clock starts. Each process first evaluates a tiny run (imports
done, topkeval's kernels loaded), then times one call on the large run ("warm"). The aggregates of
the two tools are compared: they agree to 1e-12 (the provider follows pytrec_eval's conventions,
ties included).

``--first-call`` also times the whole process of a first call: Python started, ir_measures (and
topkeval) imported, the frames read, one ``calc_aggregate`` on the large run, with numba's cache as
it is and with an empty one (``NUMBA_CACHE_DIR`` a new folder: what the first run after installing
topkeval waits; topkeval evaluates logs this size with numpy kernels, so nothing compiles).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / "data"
DOCS = 1000
SETS = {"trec": "[P@10, R@100, AP, nDCG@10, Rprec]",
        "mixed": "[P@10, R@100, AP, nDCG@10, Rprec, RR@10, Judged@10]"}


def files(lines: int) -> tuple[Path, Path]:
    """The run and the judgments as parquet (query_id, doc_id, score / relevance), written once."""
    import pandas as pd

    DATA.mkdir(exist_ok=True)
    run_path, qrels_path = DATA / f"irm_{lines}.run.parquet", DATA / f"irm_{lines}.qrels.parquet"
    if run_path.exists() and qrels_path.exists():
        return run_path, qrels_path
    rng = np.random.default_rng(0)
    queries = lines // DOCS
    q = np.repeat(np.arange(queries), DOCS)
    docs = np.concatenate([rng.choice(DOCS * 20, DOCS, replace=False) for _ in range(queries)])
    scores = np.round(rng.random(len(q)), 6)  # 6 decimals: ties among a query's 1,000 documents
    run = pd.DataFrame({"query_id": q.astype(str), "doc_id": np.char.add("D", docs.astype(str)), "score": scores})
    judged = rng.random(len(q)) < 0.1
    grades = rng.choice([0, 0, 1, 2], judged.sum())
    qrels = pd.DataFrame({"query_id": run["query_id"][judged], "doc_id": run["doc_id"][judged], "relevance": grades})
    extra = pd.DataFrame({"query_id": np.arange(queries).astype(str), "doc_id": "unretrieved", "relevance": 1})
    pd.concat([qrels, extra]).reset_index(drop=True).to_parquet(qrels_path)
    run.to_parquet(run_path)
    return run_path, qrels_path


#: one process: the inputs read, a warm-up on a tiny run, then one timed call (argv: tool, set, input, run, qrels)
WORKER = r"""
import json, sys, time
t0 = time.perf_counter()
import pandas as pd
import ir_measures
from ir_measures import *
tool, which, form, run_path, qrels_path = sys.argv[1:6]
if tool == "topkeval":
    import topkeval.integrations.ir_measures
evaluator = ir_measures.topkeval if tool == "topkeval" else ir_measures
t_import = time.perf_counter() - t0
measures = eval(which)
run, qrels = pd.read_parquet(run_path), pd.read_parquet(qrels_path)
if form == "tuples":
    run = [ir_measures.ScoredDoc(*r) for r in run.itertuples(index=False)]
    qrels = [ir_measures.Qrel(*r) for r in qrels.itertuples(index=False)]
t = time.perf_counter()
means = evaluator.calc_aggregate(measures, qrels, run)
first = time.perf_counter() - t
print(json.dumps({"seconds": first, "import": t_import, "means": {str(m): float(v) for m, v in means.items()}}))
"""


def one(tool: str, which: str, form: str, run: Path, qrels: Path, env=None) -> dict:
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", WORKER, tool, SETS[which], form, str(run), str(qrels)],
                         capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    if out.returncode:
        raise SystemExit(f"{tool} failed: {out.stderr.strip().splitlines()[-1]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["process"] = wall
    return result


def warm(tool: str, which: str, form: str, run: Path, qrels: Path) -> dict:
    """Two calls on the large run in one process: the first (topkeval loads its compiled kernels from
    numba's cache, about 2 s; the second is the steady state)."""
    code = WORKER.replace("print(json.dumps({", "t = time.perf_counter()\nevaluator.calc_aggregate(measures, qrels, run)\n"
                                                "again = time.perf_counter() - t\nprint(json.dumps({'again': again, ")
    out = subprocess.run([sys.executable, "-c", code, tool, SETS[which], form, str(run), str(qrels)],
                         capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{tool} failed: {out.stderr.strip().splitlines()[-1]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lines", type=float, default=1e6)
    p.add_argument("--sets", nargs="+", default=["trec", "mixed"], choices=list(SETS))
    p.add_argument("--inputs", nargs="+", default=["frame"], choices=["frame", "tuples"])
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--first-call", action="store_true", help="also time a first call's whole process")
    args = p.parse_args()
    run, qrels = files(int(args.lines))
    os.environ.setdefault("PYTHONPATH", str(ROOT / "src"))
    print(f"{int(args.lines):,} lines, {int(args.lines) // DOCS:,} queries; seconds of calc_aggregate, the first "
          "call of a process and the next")
    print(f"{'measures':8s} {'input':7s} {'call':6s} {'ir_measures':>12s} {'topkeval':>10s} {'ratio':>7s}")
    for which in args.sets:
        for form in args.inputs:
            times: dict[tuple[str, str], list[float]] = {}
            means = {}
            for _ in range(args.rounds):
                for tool in ("ir_measures", "topkeval"):
                    out = warm(tool, which, form, run, qrels)
                    times.setdefault((tool, "first"), []).append(out["seconds"])
                    times.setdefault((tool, "next"), []).append(out["again"])
                    means[tool] = out["means"]
            worst = max(abs(means["topkeval"][m] - means["ir_measures"][m]) for m in means["ir_measures"])
            for call in ("first", "next"):
                a, b = np.median(times[("ir_measures", call)]), np.median(times[("topkeval", call)])
                print(f"{which:8s} {form:7s} {call:6s} {a:12.2f} {b:10.2f} {a / b:6.1f}x", flush=True)
            print(f"{'':23s}(the means of the two differ by at most {worst:.1e})")
    if args.first_call:
        print("\nfirst call, whole process (Python started, imports, the frames read, one calc_aggregate)")
        print(f"{'':28s} {'process':>8s} {'imports':>8s} {'the call':>9s}")
        with tempfile.TemporaryDirectory(prefix="topkeval-numba-") as empty:
            for label, env in (("numba cache as it is", None),
                               ("empty numba cache", {**os.environ, "NUMBA_CACHE_DIR": empty})):
                for tool in ("ir_measures", "topkeval"):
                    out = one(tool, "mixed", "frame", run, qrels, env=env)
                    print(f"{tool + ', ' + label:28s} {out['process']:8.2f} {out['import']:8.2f} {out['seconds']:9.2f}",
                          flush=True)


if __name__ == "__main__":
    main()
