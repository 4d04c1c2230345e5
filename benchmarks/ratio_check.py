"""A speed check for CI: the call users make must stay within 3x of the bare call.

    python benchmarks/ratio_check.py            # exits 1 when a ratio is above --limit

On a log of 200,000 rows (queries of 20 to 200 candidates, 2 models, the metrics of
``benchmarks/run.py``), in one process, each call timed alternately, the best of ``--repeat``:

* bare: integer query ids, no item ids;
* item ids: integer query and item ids, ``item=`` given (the duplicate check);
* string ids: query and item ids as text (pandas' Arrow-backed strings), ``item=`` given;
* categorical ids: the same as pandas categoricals.

Ratios of times, not absolute times: the CI machine is shared and its speed varies, the ratio of
two calls timed side by side much less.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--limit", type=float, default=3.0)
    args = p.parse_args()

    import os

    os.environ.setdefault("TOPKEVAL_JIT", "1")
    import topkeval as tk
    from run import METRICS, MODELS, make_log

    frame = make_log(args.rows)
    text = frame.assign(query=("q" + frame["query"].astype(str)).astype("string[pyarrow]"),
                        item=("i" + frame["item"].astype(str)).astype("string[pyarrow]"))
    categorical = text.astype({"query": "category", "item": "category"})
    calls = {
        "bare": lambda: tk.evaluate(frame, METRICS, score=list(MODELS)),
        "item ids": lambda: tk.evaluate(frame, METRICS, score=list(MODELS), item="item"),
        "string ids": lambda: tk.evaluate(text, METRICS, score=list(MODELS), item="item"),
        "categorical ids": lambda: tk.evaluate(categorical, METRICS, score=list(MODELS), item="item"),
    }
    best = {name: float("inf") for name in calls}
    for call in calls.values():  # compile and warm up
        call()
    for _ in range(args.repeat):
        for name, call in calls.items():
            t = time.perf_counter()
            call()
            best[name] = min(best[name], time.perf_counter() - t)
    failed = False
    for name, seconds in best.items():
        ratio = seconds / best["bare"]
        flag = "" if ratio <= args.limit else f"  ABOVE {args.limit}x"
        failed |= ratio > args.limit
        print(f"{name:16s} {seconds * 1000:8.1f} ms  {ratio:5.2f}x the bare call{flag}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
