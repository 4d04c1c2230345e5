"""topkeval side by side with its peers on the same log, in one run; prints medians, ratios, memory.

    python benchmarks/run.py --rows 1000000 10000000

Workload (issue 3): 2 models; recall, precision, F1, specificity at 5, 10, 20 and R-precision,
from an in-memory pandas table to the means. Each tool runs in its own subprocess so that its
peak memory can be measured: the table is loaded from a parquet file written once per size, the
resident memory after loading is the baseline, and "extra MB" is the peak minus that baseline.

The log: queries of 20 to 200 candidates (about 110 on average), about 5% relevant (every query
has at least one), distinct random scores (no ties, so every tool's conventions agree and the
means can be checked against each other). ``--shuffled`` rows are in random order.
Peers that are not installed are reported as such; pandas groupby-apply runs only up to 1M rows.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
CUTOFFS = (5, 10, 20)
MODELS = ("model_a", "model_b")
TOOLS = ("floor", "topkeval", "topkeval_items", "topkeval_file", "read_file", "polars", "duckdb", "pytrec_eval", "ranx",
         "pandas_apply")
IDS = os.environ.get("TOPKEVAL_BENCH_IDS", "int")  # "str": query and item ids as text (Arrow strings)


LIST_LENGTH = int(os.environ.get("TOPKEVAL_BENCH_LIST_LENGTH", "0"))  # 0: 20 to 200 candidates per query


def make_log(rows: int, seed: int = 0):
    import pandas as pd

    rng = np.random.default_rng(seed)
    if LIST_LENGTH:
        sizes = np.full(rows // LIST_LENGTH + 1, LIST_LENGTH)
    else:
        sizes = rng.integers(20, 201, int(rows / 110) + 1)
    sizes = sizes[: np.searchsorted(np.cumsum(sizes), rows) + 1]
    n = int(sizes.sum())
    query = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
    rel = (rng.random(n) < 0.05).astype(np.int8)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rel[starts + rng.integers(0, sizes)] = 1  # every query has a relevant item
    item = np.concatenate([rng.permutation(s) for s in sizes]).astype(np.int64)
    frame = pd.DataFrame({"query": query, "item": item, "relevance": rel})
    for m in MODELS:
        frame[m] = rng.random(n) + 0.5 * rel  # a model that is better than chance
    return frame


def data_path(rows: int) -> Path:
    DATA.mkdir(exist_ok=True)
    path = DATA / f"log_{rows}{'_len' + str(LIST_LENGTH) if LIST_LENGTH else ''}{'_str' if IDS == 'str' else ''}.parquet"
    if not path.exists():
        frame = make_log(rows)
        if IDS == "str":  # what logs hold: query and item ids as text
            frame["query"] = ("q" + frame["query"].astype(str)).astype("string[pyarrow]")
            frame["item"] = ("i" + frame["item"].astype(str)).astype("string[pyarrow]")
        frame.to_parquet(path)
    return path


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _reset_peak() -> None:
    """Reset the kernel's peak-RSS mark (VmHWM), so the peak measured is the run's own."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _peak_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---- each tool: frame -> {metric: mean} for model_a (and the work for model_b as well)


def run_floor(frame):
    total = 0.0
    for c in ("query", "relevance", *MODELS):
        total += float(frame[c].to_numpy().sum())
    return {"sum": total}


METRICS = [f"{m}@{k}" for m in ("recall", "precision", "f1", "specificity") for k in CUTOFFS] + ["r_precision"]


def run_topkeval(frame):
    """The bare call: no item ids."""
    import topkeval as tk

    res = tk.evaluate(frame, metrics=METRICS, query="query", relevance="relevance", score=list(MODELS))
    return res.summary.loc["model_a"].to_dict()


def run_topkeval_items(frame):
    """The call users make: item ids given (the duplicate check, item tie rules, diff)."""
    import topkeval as tk

    res = tk.evaluate(frame, metrics=METRICS, query="query", relevance="relevance", score=list(MODELS), item="item")
    return res.summary.loc["model_a"].to_dict()


def run_topkeval_file(path):
    """From the parquet file to the means, item ids included."""
    import topkeval as tk

    res = tk.evaluate(path, metrics=METRICS, query="query", relevance="relevance", score=list(MODELS), item="item")
    return res.summary.loc["model_a"].to_dict()


def run_read_file(path):
    """Reading the five columns of the parquet file, nothing else (the floor of the file call)."""
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=["query", "item", "relevance", *MODELS])
    return {"rows": float(table.num_rows)}


def run_polars(frame):
    import polars as pl

    df = pl.from_pandas(frame[["query", "item", "relevance", *MODELS]])  # the same ids as topkeval gets
    out = {}
    for m in MODELS:
        ranked = (df.lazy().sort(["query", m], descending=[False, True])
                  .with_columns(rank=pl.int_range(1, pl.len() + 1).over("query"),
                                R=pl.col("relevance").sum().over("query")))
        agg = ranked.group_by("query").agg(
            [((pl.col("rank") <= k) & (pl.col("relevance") > 0)).sum().alias(f"h{k}") for k in CUTOFFS]
            + [((pl.col("rank") <= pl.col("R")) & (pl.col("relevance") > 0)).sum().alias("hR"),
               pl.col("R").first(), pl.len().alias("n")])
        means = agg.select(
            [(pl.col(f"h{k}") / pl.col("R")).mean().alias(f"recall@{k}") for k in CUTOFFS]
            + [(pl.col(f"h{k}") / k).mean().alias(f"precision@{k}") for k in CUTOFFS]
            + [(2 * pl.col(f"h{k}") / (k + pl.col("R"))).mean().alias(f"f1@{k}") for k in CUTOFFS]
            + [((pl.col("n") - pl.col("R") - (pl.min_horizontal(pl.col("n"), k) - pl.col(f"h{k}")))
                / (pl.col("n") - pl.col("R"))).mean().alias(f"specificity@{k}") for k in CUTOFFS]
            + [(pl.col("hR") / pl.col("R")).mean().alias("r_precision")]).collect()
        if m == "model_a":
            out = means.row(0, named=True)
    return out


def run_duckdb(frame):
    import duckdb

    con = duckdb.connect()
    con.register("log", frame)
    out = {}
    for m in MODELS:
        row = con.execute(f"""
            WITH r AS (SELECT query, relevance,
                         row_number() OVER (PARTITION BY query ORDER BY {m} DESC) AS rk,
                         sum(relevance) OVER (PARTITION BY query) AS R
                       FROM log),
                 q AS (SELECT query, any_value(R) AS R,
                         {", ".join(f"sum(CASE WHEN rk <= {k} THEN relevance ELSE 0 END) AS h{k}" for k in CUTOFFS)},
                         sum(CASE WHEN rk <= R THEN relevance ELSE 0 END) AS hR
                       FROM r GROUP BY query)
            SELECT {", ".join(f"avg(h{k} / R), avg(h{k} / {k})" for k in CUTOFFS)}, avg(hR / R) FROM q
        """).fetchone()
        if m == "model_a":
            names = [n for k in CUTOFFS for n in (f"recall@{k}", f"precision@{k}")] + ["r_precision"]
            out = dict(zip(names, map(float, row)))
    return out


def run_pytrec_eval(frame):
    import pytrec_eval

    q = frame["query"].astype(str).to_numpy()
    d = frame["item"].astype(str).to_numpy()
    rel = frame["relevance"].to_numpy()
    qrels = {}
    for qq, dd, rr in zip(q, d, rel):
        qrels.setdefault(qq, {})[dd] = int(rr)
    measures = {"P." + ",".join(map(str, CUTOFFS)), "recall." + ",".join(map(str, CUTOFFS)), "Rprec"}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, measures)
    out = {}
    for m in MODELS:
        run = {}
        for qq, dd, s in zip(q, d, frame[m].to_numpy()):
            run.setdefault(qq, {})[dd] = float(s)
        res = evaluator.evaluate(run)
        if m == "model_a":
            vals = list(res.values())
            out = {f"{n}@{k}": statistics.fmean(v[f"{t}_{k}"] for v in vals)
                   for k in CUTOFFS for n, t in (("precision", "P"), ("recall", "recall"))}
            out["r_precision"] = statistics.fmean(v["Rprec"] for v in vals)
    return out


def run_ranx(frame):
    import warnings

    from ranx import Qrels, Run, evaluate

    warnings.filterwarnings("ignore")
    f = frame.assign(query=frame["query"].astype(str).astype(object), item=frame["item"].astype(str).astype(object),
                     relevance=frame["relevance"].astype(np.int64))
    qrels = Qrels.from_df(f[f["relevance"] > 0], q_id_col="query", doc_id_col="item", score_col="relevance")
    metrics = [f"{m}@{k}" for m in ("precision", "recall", "f1") for k in CUTOFFS] + ["r-precision"]
    out = {}
    for m in MODELS:
        run = Run.from_df(f, q_id_col="query", doc_id_col="item", score_col=m)
        res = evaluate(qrels, run, metrics)
        if m == "model_a":
            out = {k.replace("r-precision", "r_precision"): float(v) for k, v in res.items()}
    return out


def run_pandas_apply(frame):
    def per_query(d, m):
        d = d.sort_values(m, ascending=False)
        rel = d["relevance"].to_numpy()
        R = rel.sum()
        return [rel[:k].sum() / R for k in CUTOFFS] + [rel[:k].sum() / k for k in CUTOFFS] + [rel[:R].sum() / R]

    out = {}
    for m in MODELS:
        vals = np.array(frame.groupby("query").apply(lambda d, m=m: per_query(d, m), include_groups=False).tolist())
        if m == "model_a":
            names = [f"recall@{k}" for k in CUTOFFS] + [f"precision@{k}" for k in CUTOFFS] + ["r_precision"]
            out = dict(zip(names, vals.mean(axis=0)))
    return out


def worker(tool: str, rows: int, shuffled: bool, repeat: int) -> dict:
    import pandas as pd

    frame = pd.read_parquet(data_path(rows))
    if shuffled:
        frame = frame.sample(frac=1.0, random_state=1).reset_index(drop=True)
    fn = globals()[f"run_{tool}"]
    if tool in ("topkeval_file", "read_file"):  # these read the file themselves: time the whole read
        if shuffled:
            return {"seconds": float("nan"), "runs": 0, "extra_mb": 0.0, "table_mb": 1.0, "result": {}}
        path = data_path(rows)
        frame, fn = path, (lambda p, f=fn: f(p))
    times, result = [], None
    os.environ["TOPKEVAL_JIT"] = "1"  # the warm-up is small, but it must load topkeval's compiled kernels
    # imports, compilation and caches outside the timing and the memory
    fn(frame if isinstance(frame, Path) else frame.iloc[:2000].copy())
    base = _rss_mb()
    _reset_peak()
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn(frame)
        times.append(time.perf_counter() - t)
        if times[-1] > 20:
            break
    peak = _peak_mb()
    table_mb = (frame.memory_usage(deep=True).sum() if not isinstance(frame, Path) else frame.stat().st_size) / 2**20
    return {"seconds": statistics.median(times), "runs": len(times), "extra_mb": max(0.0, peak - base),
            "table_mb": table_mb, "result": result}


def available(tool: str) -> bool:
    module = {"polars": "polars", "duckdb": "duckdb", "pytrec_eval": "pytrec_eval", "ranx": "ranx"}.get(tool)
    if module is None:
        return True
    import importlib.util

    return importlib.util.find_spec(module) is not None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=float, nargs="+", default=[1e6])
    p.add_argument("--tools", default=",".join(TOOLS))
    p.add_argument("--shuffled", action="store_true", help="also run topkeval, polars, duckdb on shuffled rows")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--json", help="also write the results to this file")
    p.add_argument("--list-length", type=int, default=0, help="every query this many candidates (long lists)")
    p.add_argument("--ids", choices=["int", "str"], default="int", help="query and item ids as integers or as text")
    args = p.parse_args()
    os.environ["TOPKEVAL_BENCH_IDS"] = args.ids  # the workers read it
    global IDS
    IDS = args.ids
    if args.list_length:
        os.environ["TOPKEVAL_BENCH_LIST_LENGTH"] = str(args.list_length)  # the workers read it
        global LIST_LENGTH
        LIST_LENGTH = args.list_length
    if args.worker:
        tool, rows, shuffled = args.worker.split(":")
        print(json.dumps(worker(tool, int(rows), shuffled == "1", args.repeat)))
        return

    from rich.console import Console
    from rich.table import Table

    console = Console(width=150)
    report = []
    for rows in map(int, args.rows):
        data_path(rows)
        runs = [(t, False) for t in args.tools.split(",")]
        if args.shuffled:
            runs += [(t, True) for t in ("topkeval", "topkeval_items", "polars", "duckdb") if t in args.tools]
        results = {}
        for tool, shuffled in runs:
            label = tool + (" (shuffled)" if shuffled else "")
            if not available(tool):
                results[label] = {"skipped": "not installed"}
                continue
            if tool == "pandas_apply" and rows > 1_000_000:
                results[label] = {"skipped": "only run up to 1M rows"}
                continue
            proc = subprocess.run([sys.executable, __file__, "--worker", f"{tool}:{rows}:{int(shuffled)}",
                                   "--repeat", str(args.repeat)], capture_output=True, text=True)
            if proc.returncode != 0:
                results[label] = {"skipped": "failed: " + proc.stderr.strip().splitlines()[-1][:80]}
                continue
            results[label] = json.loads(proc.stdout.strip().splitlines()[-1])
            console.print(f"{rows:,} rows  {label:22s} {results[label]['seconds']:.3f} s", highlight=False)
        ref = results.get("topkeval", {})
        shape = f"{LIST_LENGTH:,} candidates per query" if LIST_LENGTH else "20-200 candidates per query"
        table = Table(title=f"{rows:,} rows ({shape}), {IDS} ids, 2 models, recall/precision/F1/specificity @5,10,20 + "
                            "R-precision")
        for col in ("tool", "median s", "tool / topkeval", "extra MB", "extra / table", "agrees"):
            table.add_column(col, justify="left" if col in ("tool", "agrees") else "right")
        for label, r in results.items():
            if "skipped" in r:
                table.add_row(label, "-", "-", "-", "-", r["skipped"])
                continue
            ratio = r["seconds"] / ref["seconds"] if ref.get("seconds") else float("nan")
            agree = "-"
            if label not in ("floor", "topkeval", "read_file") and ref.get("result"):
                common = [k for k in r["result"] if k in ref["result"]]
                worst = max(abs(r["result"][k] - ref["result"][k]) for k in common) if common else float("nan")
                agree = f"yes ({len(common)} means, max diff {worst:.1e})" if worst < 1e-9 else f"NO (max diff {worst:.2e})"
            table.add_row(label, f"{r['seconds']:.3f}", f"{ratio:.1f}x", f"{r['extra_mb']:.0f}",
                          f"{r['extra_mb'] / r['table_mb']:.2f}", agree)
        console.print(table)
        report.append({"rows": rows, "results": results})
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=float))


if __name__ == "__main__":
    main()
