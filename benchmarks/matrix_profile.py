"""Where evaluate_matrix spends its time on one large matrix (cProfile, top entries).

    python benchmarks/matrix_profile.py --users 100000 --items 50000 --device cuda
"""

from __future__ import annotations

import os

os.environ.setdefault("TOPKEVAL_JIT", "1")  # warm-ups are small: load the compiled kernels there

import argparse
import cProfile
import pstats


def main() -> None:
    import torch

    import topkeval as tk

    p = argparse.ArgumentParser()
    p.add_argument("--users", type=int, default=20_000)
    p.add_argument("--items", type=int, default=50_000)
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    gen = torch.Generator().manual_seed(0)
    scores = torch.rand(args.users, args.items, generator=gen).to(args.device)
    n_rel = torch.randint(1, 30, (args.users,), generator=gen)
    users = torch.repeat_interleave(torch.arange(args.users), n_rel)
    edges = torch.stack([users, torch.randint(0, args.items, (len(users),), generator=gen)]).numpy()
    metrics = [f"{m}@{k}" for m in ("precision", "recall") for k in (10, 20, 50)] + ["r_precision"]
    tk.evaluate_matrix(scores[:100], edges[:, edges[0] < 100], metrics=metrics)  # compile / warm
    prof = cProfile.Profile()
    prof.enable()
    tk.evaluate_matrix(scores, edges, metrics=metrics)
    if args.device == "cuda":
        torch.cuda.synchronize()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
