"""Peak memory of streaming a parquet log: 10M vs 100M rows (issue 3's bounded-memory target).

    python benchmarks/stream_bench.py --rows 10000000 100000000

Each file is written once, in pieces, to benchmarks/data/ (grouped by query, ~110 rows per query,
2 models). Each evaluation runs in its own process; the table prints wall time and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "data"
METRICS = [f"{m}@{k}" for m in ("recall", "precision", "f1", "specificity") for k in (5, 10, 20)] + ["r_precision"]


def write(rows: int) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    DATA.mkdir(exist_ok=True)
    path = DATA / f"stream_{rows}.parquet"
    if path.exists():
        return path
    rng = np.random.default_rng(0)
    writer, done, next_query = None, 0, 0
    while done < rows:
        sizes = rng.integers(20, 201, 10_000)
        n = int(sizes.sum())
        q = np.repeat(np.arange(next_query, next_query + len(sizes), dtype=np.int64), sizes)
        rel = (rng.random(n) < 0.05).astype(np.int8)
        table = pa.table({"query": q, "relevance": rel, "a": rng.random(n) + 0.5 * rel, "b": rng.random(n)})
        writer = writer or pq.ParquetWriter(path, table.schema)
        writer.write_table(table, row_group_size=1_000_000)
        done += n
        next_query += len(sizes)
    writer.close()
    return path


def worker(path: str) -> None:
    import topkeval as tk

    t = time.perf_counter()
    res = tk.evaluate(path, metrics=METRICS, score=["a", "b"], chunk_rows=2_000_000, keep_per_query=False)
    print(json.dumps({"seconds": time.perf_counter() - t, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "queries": res.info["queries"], "recall@10": float(res.summary.iloc[0]["recall@10"])}))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=float, nargs="+", default=[1e7, 1e8])
    p.add_argument("--worker")
    args = p.parse_args()
    if args.worker:
        worker(args.worker)
        return
    for rows in map(int, args.rows):
        path = write(rows)
        out = subprocess.run([sys.executable, __file__, "--worker", str(path)], capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{rows:>12,} rows  {r['queries']:>9,} queries  {r['seconds']:7.1f} s  peak RSS {r['peak_mb']:7.0f} MB")


if __name__ == "__main__":
    main()
