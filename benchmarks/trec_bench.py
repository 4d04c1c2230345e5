"""TREC files end to end: a run file and a qrels file on disk to the means, topkeval vs pytrec_eval.

    python benchmarks/trec_bench.py --lines 1e6 1e7
    python benchmarks/trec_bench.py --lines 1e6 --decimals 6     # scores as real runs write them: ties

Writes (once) a run of ``lines`` lines (queries of 1,000 documents, docnos as text, distinct
scores) and qrels of about 1 judged document in 10 (a third of them relevant, some judged relevant
documents never retrieved), then times, each tool in its own process, from the two files to
P@10, recall@100, MAP, nDCG@10 and R-precision: topkeval's ``evaluate(run_path, qrels=qrels_path)``
(its own readers included) and pytrec_eval with the usual reading code (the files parsed into its
dicts line by line, as its README does: that parsing is part of what its users wait for). The means
are compared (they agree where the conventions do: no ties).

Each tool runs in processes of its own, ``--rounds`` times in turn (topkeval, pytrec_eval,
topkeval, ...: both see the same load of a shared machine), ``--repeat`` calls per process; the
seconds are the median of every call. topkeval's process first evaluates a small run (its
compiled kernels loaded from numba's cache, or compiled), outside the timing; pytrec_eval is a C
extension and needs no such warm-up.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
DOCS = 1000
MEASURES = {"P_10": "P@10", "recall_100": "recall@100", "map": "map", "ndcg_cut_10": "ndcg_cut_10",
            "Rprec": "Rprec"}


def files(lines: int, decimals: int | None = None) -> tuple[Path, Path]:
    """The run and qrels files of ``lines`` lines, written once; ``decimals``: the scores written with
    that many decimals (as Anserini, Terrier and most run writers do, which makes ties), else in full."""
    DATA.mkdir(exist_ok=True)
    tail = "" if decimals is None else f"_d{decimals}"
    run, qrels = DATA / f"trec_{lines}{tail}.run", DATA / f"trec_{lines}{tail}.qrels"
    if run.exists() and qrels.exists():
        return run, qrels
    rng = np.random.default_rng(0)
    queries = lines // DOCS
    with open(run, "w") as r, open(qrels, "w") as q:
        for start in range(0, queries, 1000):
            block = range(start, min(queries, start + 1000))
            docs = rng.permuted(np.tile(np.arange(DOCS * 50), (len(block), 1)), axis=1)[:, :DOCS]  # distinct
            scores = rng.random((len(block), DOCS))
            order = np.argsort(-scores, axis=1)
            run_lines, qrel_lines = [], []
            for b, qid in enumerate(block):
                for rank, j in enumerate(order[b]):
                    value = repr(float(scores[b, j])) if decimals is None else f"{scores[b, j]:.{decimals}f}"
                    run_lines.append(f"{qid} Q0 D{docs[b, j]} {rank + 1} {value} bench\n")
                judged = rng.choice(DOCS, DOCS // 10, replace=False)
                for j in judged:
                    qrel_lines.append(f"{qid} 0 D{docs[b, j]} {int(rng.random() < 0.3)}\n")
                qrel_lines.append(f"{qid} 0 unretrieved{qid} 1\n")
            r.writelines(run_lines)
            q.writelines(qrel_lines)
    return run, qrels


def run_topkeval(run: Path, qrels: Path) -> dict:
    import topkeval as tk

    res = tk.evaluate(run, qrels=qrels, metrics=list(MEASURES.values()), conventions="trec_eval")
    return {k: float(res.summary.iloc[0][v]) for k, v in MEASURES.items()}


def run_pytrec_eval(run: Path, qrels: Path) -> dict:
    import pytrec_eval

    qrel_dict: dict = {}
    with open(qrels) as f:
        for line in f:
            qid, _, doc, rel = line.split()
            qrel_dict.setdefault(qid, {})[doc] = int(rel)
    run_dict: dict = {}
    with open(run) as f:
        for line in f:
            qid, _, doc, _, score, _ = line.split()
            run_dict.setdefault(qid, {})[doc] = float(score)
    measures = {"P.10", "recall.100", "map", "ndcg_cut.10", "Rprec"}
    res = pytrec_eval.RelevanceEvaluator(qrel_dict, measures).evaluate(run_dict)
    return {k: statistics.fmean(v[k] for v in res.values()) for k in MEASURES}


def worker(tool: str, lines: int, repeat: int, decimals: int | None) -> dict:
    run, qrels = files(lines, decimals)
    fn = globals()[f"run_{tool}"]
    if tool == "topkeval":  # compile and load the kernels outside the timing
        import os

        os.environ["TOPKEVAL_JIT"] = "1"
        run_topkeval(*files(DOCS * 20))
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn(run, qrels)
        times.append(time.perf_counter() - t)
        if times[-1] > 20:
            break
    return {"seconds": statistics.median(times), "times": times, "result": result}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lines", type=float, nargs="+", default=[1e6])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--decimals", type=int, help="write the run's scores with this many decimals (ties), as real runs")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        tool, lines = args.worker.split(":")
        print(json.dumps(worker(tool, int(lines), args.repeat, args.decimals)))
        return
    for lines in map(int, args.lines):
        files(lines, args.decimals)
        files(DOCS * 20)
        out: dict = {}
        for _ in range(args.rounds):
            for tool in ("topkeval", "pytrec_eval"):
                extra = [] if args.decimals is None else ["--decimals", str(args.decimals)]
                proc = subprocess.run([sys.executable, __file__, "--worker", f"{tool}:{lines}", "--repeat",
                                       str(args.repeat), *extra], capture_output=True, text=True)
                if proc.returncode:
                    print(tool, "failed:", proc.stderr.strip().splitlines()[-1])
                    continue
                got = json.loads(proc.stdout.strip().splitlines()[-1])
                out.setdefault(tool, {"times": [], "result": got["result"]})["times"] += got["times"]
        for r in out.values():
            r["seconds"] = statistics.median(r["times"])
        ref = out.get("topkeval", {})
        for tool, r in out.items():
            diff = max(abs(r["result"][k] - ref["result"][k]) for k in MEASURES) if ref else float("nan")
            ratio = r["seconds"] / ref["seconds"] if ref else float("nan")
            print(f"{lines:>12,} lines  {tool:12s} {r['seconds']:8.3f} s (median of {len(r['times'])}, "
                  f"{min(r['times']):.3f} to {max(r['times']):.3f})  {ratio:6.1f}x topkeval  "
                  f"max diff of the means {diff:.1e}")


if __name__ == "__main__":
    main()
