"""The first evaluation after installation: how long a new user waits while the kernels compile.

    python benchmarks/first_call.py            # a fresh venv in a temporary folder, this checkout installed

Creates a fresh virtual environment, installs this checkout into it (``pip install .``: numba's
cache starts empty), then times in new processes:

1. ``first``: importing topkeval and evaluating a 200,000-row log (string query and item ids, the
   default metrics): the numpy versions of the kernels (kernels/vectorised.py), nothing compiles;
2. ``float32 + shuffled + ndcg``: then, in the same process, a float32 score column, shuffled
   rows and nDCG (kernels of other types and the grouping ones);
3. ``second process``: the first call again in a new process (the kernels load from the cache);
4. ``topkeval demo``: the command line, once the cache is warm;
5. ``first, 3M rows (compiles)``: in a new process with an empty numba cache of its own, the first
   call on 3,000,000 rows (more than ``jit.VECTOR_MAX``): the kernels compile (the wait of a first
   call on a large log), then ``3M rows again``, the same call in that process.

Reports seconds per step. The targets: a first call within 10 s on the 2-core machine (issue 10),
3 s (issue 24).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np, pandas as pd
t_pandas = time.perf_counter() - t0
import topkeval as tk
t_import = time.perf_counter() - t0 - t_pandas
rng = np.random.default_rng(0)
n = 3_000_000 if sys.argv[1] == "large" else 200_000
sizes = rng.integers(20, 61, n // 40 if n <= 200_000 else n // 30)  # at least n rows
q = np.repeat(np.arange(len(sizes)), sizes)[:n]
log = pd.DataFrame({"query": np.char.add("q", q.astype(str)), "item": np.char.add("i", rng.permutation(n).astype(str)),
                    "relevance": (rng.random(n) < 0.1).astype(int), "score": rng.random(n)})
t = time.perf_counter()
tk.evaluate(log, item="item")
first = time.perf_counter() - t
out = {"import pandas": t_pandas, "import topkeval": t_import, "first": first}
if sys.argv[1] == "large":
    out = {"first, 3M rows (compiles)": first}
    t = time.perf_counter()
    tk.evaluate(log, item="item")
    out["3M rows again"] = time.perf_counter() - t
if sys.argv[1] == "more":
    t = time.perf_counter()
    tk.evaluate(log.assign(score=log.score.astype("float32")).sample(frac=1, random_state=0), item="item",
                metrics=["ndcg@10", "recall@10", "ap"])
    out["float32 + shuffled + ndcg"] = time.perf_counter() - t
print(json.dumps(out))
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--venv", help="use (and keep) this folder for the virtual environment")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="topkeval-first-") as tmp:
        venv = Path(args.venv or Path(tmp) / "venv")
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        python = str(venv / "bin" / "python")
        subprocess.run([python, "-m", "pip", "install", "-q", str(ROOT)], check=True)
        print(f"fresh venv and pip install .: {time.perf_counter() - t:.0f} s", flush=True)
        env = {"PATH": str(venv / "bin"), "HOME": tmp, "TOPKEVAL_JIT": ""}  # no inherited NUMBA_CACHE_DIR
        results = {}
        run = subprocess.run([python, "-c", SCRIPT, "more"], capture_output=True, text=True, env=env, check=True)
        results["fresh install"] = json.loads(run.stdout.strip().splitlines()[-1])
        results["fresh install"]["stderr"] = run.stderr.strip()
        run = subprocess.run([python, "-c", SCRIPT, "once"], capture_output=True, text=True, env=env, check=True)
        results["second process"] = json.loads(run.stdout.strip().splitlines()[-1])
        t = time.perf_counter()
        subprocess.run([str(venv / "bin" / "topkeval"), "demo"], capture_output=True, env=env, check=True)
        demo = time.perf_counter() - t
        fresh = {**env, "NUMBA_CACHE_DIR": str(Path(tmp) / "empty-numba-cache")}  # compiles again, from nothing
        run = subprocess.run([python, "-c", SCRIPT, "large"], capture_output=True, text=True, env=fresh)
        if run.returncode:
            print("the 3M-row first call failed:", run.stderr.strip().splitlines()[-1])
        else:
            results["empty cache"] = json.loads(run.stdout.strip().splitlines()[-1])
    print(f"{'step':32s} seconds")
    for where, values in results.items():
        for step, seconds in values.items():
            if step != "stderr":
                print(f"{where + ': ' + step:32s} {seconds:7.2f}")
    print(f"{'topkeval demo (whole process)':32s} {demo:7.2f}")
    print("stderr of the first call:", results["fresh install"]["stderr"] or "(nothing)")


if __name__ == "__main__":
    main()
