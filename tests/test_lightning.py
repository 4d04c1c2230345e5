"""TopkMetrics (topkeval.integrations.torchmetrics) in torchmetrics and Lightning loops: the numbers of
evaluate_matrix on the same rows, whatever the batches, the processes and the conventions."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import topkeval as tk

torch = pytest.importorskip("torch", reason="torch is installed apart (.ci/run: the CPU wheel), with torchmetrics")
pytest.importorskip("torchmetrics", reason="torchmetrics is the [torchmetrics] extra (TopkMetrics)")

from topkeval.integrations.torchmetrics import TopkMetrics  # noqa: E402

METRICS = ["recall@3", "P@2", "ndcg@4", "r_precision", "map@5", "rr"]
CONVENTIONS = [
    {},
    {"ties": "pessimistic", "empty_queries": "keep", "undefined": 0.0},
    {"ties": "first", "empty_queries": "keep", "undefined": math.nan},
    {"ties": "optimistic", "threshold": 2},
    {"conventions": "trec_eval"},
]


def _data(seed: int, users: int = 23, items: int = 17):
    """Scores with ties, graded relevance (some users with none, some relevant items also excluded),
    training items excluded (one user with every item excluded)."""
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 6, (users, items)) / 4
    relevant = rng.choice([0, 0, 0, 1, 2], (users, items)) * (rng.random((users, 1)) > 0.2)
    exclude = rng.random((users, items)) < 0.15
    exclude[users // 2] = True
    return scores, relevant, exclude


def _expected(scores, relevant, exclude, conv):
    return tk.evaluate_matrix(scores, relevant, METRICS, exclude=exclude, **conv)


def _same(metric: TopkMetrics, expected: tk.Results, prefix: str = "") -> None:
    got = metric.compute()
    assert list(got) == [prefix + m for m in METRICS]
    want = expected.summary.loc["scores"]
    for name in METRICS:
        value = got[prefix + name]
        assert value.dtype == torch.float64 and value.dim() == 0
        if math.isnan(want[name]):
            assert math.isnan(float(value)), name
        else:
            assert float(value) == pytest.approx(float(want[name]), rel=1e-12, abs=1e-15), name
    # the users whose value enters each mean: exactly those of evaluate_matrix
    defined = expected.per_query[METRICS].notna().sum().to_numpy()
    assert metric.value_count.tolist() == defined.tolist()
    assert int(metric.evaluated) == expected.info["evaluated"]
    assert int(metric.users) == expected.info["matrix"]["users"]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**16), cuts=st.lists(st.integers(0, 23), max_size=6), conv=st.sampled_from(CONVENTIONS))
def test_any_split_into_batches_gives_the_numbers_of_evaluate_matrix(seed, cuts, conv):
    scores, relevant, exclude = _data(seed)
    expected = _expected(scores, relevant, exclude, conv)
    metric = TopkMetrics(METRICS, prefix="val/", **conv)
    bounds = [0, *sorted(cuts), len(scores)]  # empty batches included
    for a, b in zip(bounds, bounds[1:]):
        metric.update(torch.as_tensor(scores[a:b]), torch.as_tensor(relevant[a:b]), exclude=torch.as_tensor(exclude[a:b]))
    _same(metric, expected, "val/")
    metric.reset()  # a new epoch: nothing left of the last one
    assert int(metric.users) == 0 and not metric.value_count.any()
    # torchmetrics warns of a compute before any update; topkeval refuses it
    with pytest.warns(UserWarning, match="called before the ``update``"), \
            pytest.raises(tk.DataError, match="before any update"):
        metric.compute()


@pytest.mark.parametrize("conv", CONVENTIONS, ids=str)
def test_two_processes_merged_as_torchmetrics_does_give_the_whole_evaluation(conv):
    """What DDP does in compute: every state summed over the ranks (torchmetrics' merge_state adds a
    rank's states as its all-reduce does)."""
    scores, relevant, exclude = _data(7)
    ranks = [TopkMetrics(METRICS, **conv), TopkMetrics(METRICS, **conv)]
    for i in range(0, len(scores), 4):  # batches of 4 rows dealt to the ranks in turn
        ranks[(i // 4) % 2].update(scores[i:i + 4], relevant[i:i + 4], exclude[i:i + 4])
    ranks[0].merge_state(ranks[1])
    _same(ranks[0], _expected(scores, relevant, exclude, conv))


def test_forward_gives_the_batch_and_accumulates_the_epoch():
    """torchmetrics' forward (metric(scores, relevant)): the batch's own means, and the epoch's states
    kept as if update had been called."""
    scores, relevant, exclude = _data(3)
    metric = TopkMetrics(METRICS)
    first = metric(scores[:10], relevant[:10], exclude[:10])
    assert float(first["ndcg@4"]) == pytest.approx(
        float(_expected(scores[:10], relevant[:10], exclude[:10], {}).summary.loc["scores", "ndcg@4"]), rel=1e-12)
    metric(scores[10:], relevant[10:], exclude[10:])
    _same(metric, _expected(scores, relevant, exclude, {}))


@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="no CUDA device on this machine (the GPU path is checked where one is present)")
@pytest.mark.parametrize("conv", CONVENTIONS, ids=str)
def test_on_a_gpu_the_states_stay_there_and_give_the_numbers_of_evaluate_matrix(conv):
    """Updates with CUDA tensors (float32 and half precision scores: exact for these multiples of 1/4):
    the states live on the metric's device, and compute gives evaluate_matrix's numbers on the CPU."""
    scores, relevant, exclude = _data(5, users=61, items=43)
    for dtype in (torch.float32, torch.float16):
        metric = TopkMetrics(METRICS, **conv).to("cuda")
        for part in np.array_split(np.arange(len(scores)), 4):
            metric.update(torch.as_tensor(scores[part], dtype=dtype, device="cuda"),
                          torch.as_tensor(relevant[part], device="cuda"),
                          exclude=torch.as_tensor(exclude[part], device="cuda"))
        assert metric.value_count.device.type == "cuda"
        _same(metric, _expected(scores, relevant, exclude, conv))


def test_refusals_are_topkeval_errors():
    metric = TopkMetrics(["recall@2"])
    with pytest.raises(tk.ParameterError, match="'prefix' parameter of TopkMetrics"):
        TopkMetrics(["recall@2"], prefix=3)
    with pytest.raises(tk.ParameterError, match="unexpected keyword 'tie'.*ties"):
        TopkMetrics(["recall@2"], tie="expected")
    with pytest.raises(tk.UnknownMetricError):
        TopkMetrics(["recal@2"])
    metric.update(np.ones((2, 4)), np.eye(2, 4))
    with pytest.raises(tk.DataError, match="5 columns, but the first update had 4"):
        metric.update(np.ones((2, 5)), np.eye(2, 5))
    with pytest.raises(tk.DataError, match="NaN"):
        metric.update(np.full((2, 4), np.nan), np.eye(2, 4))
    with pytest.raises(tk.ParameterError, match="one model"):
        metric.update({"a": np.ones((2, 4))}, np.eye(2, 4))
    assert int(metric.users) == 2  # the refused updates counted nothing
    everything = TopkMetrics(["recall@2"])
    everything.update(np.ones((2, 4)), np.eye(2, 4), exclude=np.ones((2, 4), bool))
    with pytest.raises(tk.DataError, match="no user has a candidate"):
        everything.compute()
    with pytest.raises(tk.DataError, match="no user has a candidate"):
        tk.evaluate_matrix(np.ones((2, 4)), np.zeros((2, 4)), ["recall@2"], exclude=np.ones((2, 4), bool))


def test_without_the_extra_the_import_is_one_line_naming_it():
    code = ("import sys; sys.modules['torch'] = sys.modules['torchmetrics'] = None\n"  # as if not installed
            "try:\n    from topkeval.integrations.torchmetrics import TopkMetrics\n"
            "except Exception as exc:\n    print(type(exc).__name__, exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("TopkevalError topkeval.integrations.torchmetrics needs torch and torchmetrics")
    assert "pip install torchmetrics" in out and "'.[torchmetrics]'" in out and out.count("\n") == 1


# ---------------------------------------------------------------------------------------------
# in a Lightning Trainer


def _lightning_module(users: int, items: int, train, held_out):
    import lightning.pytorch as pl

    class Factors(pl.LightningModule):
        """A tiny matrix factorisation: user and item vectors, a score per (user, item)."""

        def __init__(self):
            super().__init__()
            gen = torch.Generator().manual_seed(0)
            self.user = torch.nn.Parameter(torch.randn(users, 4, generator=gen))
            self.item = torch.nn.Parameter(torch.randn(items, 4, generator=gen))
            self.topk = TopkMetrics(["recall@5", "ndcg@5", "r_precision"], ties="expected", prefix="val/")
            self.register_buffer("train_items", train)  # buffers: on the Trainer's device with the module
            self.register_buffer("held_out_items", held_out)
            self.seen: list[list] = []  # each epoch's validation scores, to evaluate them again

        def forward(self, rows):
            return self.user[rows] @ self.item.T

        def training_step(self, batch, batch_idx):
            (rows,) = batch
            return torch.nn.functional.binary_cross_entropy_with_logits(self(rows), self.train_items[rows].float())

        def on_validation_epoch_start(self):
            self.seen.append([])

        def validation_step(self, batch, batch_idx):
            (rows,) = batch
            scores = self(rows)
            self.topk.update(scores, self.held_out_items[rows], exclude=self.train_items[rows])
            self.seen[-1].append(scores.detach().cpu().clone())

        def on_validation_epoch_end(self):
            self.log_dict(self.topk.compute())
            self.topk.reset()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.5)

    return Factors()


# a tiny in-memory dataset: worker processes would only slow the test down (said where there are over 2 cores)
@pytest.mark.filterwarnings(r"ignore:The '(train|val)_dataloader' does not have many workers:UserWarning:lightning")
# Lightning 2.6's own use of a torch API that torch 2.13 deprecates (not ours to change)
@pytest.mark.filterwarnings(r"ignore:`isinstance\(treespec, LeafSpec\)` is deprecated:FutureWarning:lightning")
@pytest.mark.parametrize("accelerator", ["cpu", pytest.param("gpu", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device on this machine (the GPU path is checked where one is present)"))])
def test_a_lightning_trainer_logs_the_numbers_of_evaluate_matrix(tmp_path, accelerator):
    pl = pytest.importorskip("lightning.pytorch", reason="lightning is a test extra (the Trainer of this test)")
    from lightning.pytorch.loggers import CSVLogger
    from torch.utils.data import DataLoader, TensorDataset

    users, items = 45, 30
    gen = torch.Generator().manual_seed(1)
    train = torch.rand(users, items, generator=gen) < 0.2
    held_out = (torch.rand(users, items, generator=gen) < 0.1) & ~train
    model = _lightning_module(users, items, train, held_out)
    rows = TensorDataset(torch.arange(users))
    trainer = pl.Trainer(max_epochs=2, accelerator=accelerator, devices=1, logger=CSVLogger(tmp_path, name="run"),
                         enable_progress_bar=False, enable_checkpointing=False, enable_model_summary=False,
                         num_sanity_val_steps=0, log_every_n_steps=1, deterministic=True)
    trainer.fit(model, DataLoader(rows, batch_size=16, shuffle=True), DataLoader(rows, batch_size=16))
    logged = pd.read_csv(Path(trainer.logger.log_dir) / "metrics.csv").dropna(subset=["val/recall@5"])
    assert logged["epoch"].tolist() == [0, 1]
    for epoch, scores in zip(logged["epoch"], model.seen):
        want = tk.evaluate_matrix(torch.cat(scores), held_out, ["recall@5", "ndcg@5", "r_precision"],
                                  exclude=train, ties="expected").summary.loc["scores"]
        got = logged[logged["epoch"] == epoch].iloc[0]
        for name in ("recall@5", "ndcg@5", "r_precision"):
            assert got[f"val/{name}"] == pytest.approx(want[name], rel=1e-12), (epoch, name)
    assert len(model.seen) == 2 and not torch.equal(torch.cat(model.seen[0]), torch.cat(model.seen[1]))  # it trained


# ---------------------------------------------------------------------------------------------
# two real processes (torch.distributed, gloo)


RANK = """
import json, sys
import numpy as np, torch, torch.distributed as dist
sys.path.insert(0, {tests!r})
from test_lightning import METRICS, _data
from topkeval.integrations.torchmetrics import TopkMetrics

rank = int(sys.argv[1])
dist.init_process_group("gloo", init_method="file://" + {store!r}, rank=rank, world_size=2)
scores, relevant, exclude = _data(11)
metric = TopkMetrics(METRICS, ties="pessimistic")
mine = np.arange(len(scores))[rank::2]  # every other row, as a DistributedSampler deals them
for part in np.array_split(mine, 3):
    metric.update(torch.as_tensor(scores[part]), torch.as_tensor(relevant[part]), torch.as_tensor(exclude[part]))
out = {{name: float(value) for name, value in metric.compute().items()}}
out["value_count"] = metric.value_count.tolist()  # after compute, the rank's own states again
dist.destroy_process_group()
print(json.dumps(out))
"""


@pytest.mark.slow
def test_two_processes_under_torch_distributed_give_the_whole_evaluation(tmp_path):
    if not torch.distributed.is_available():
        pytest.skip("this torch has no torch.distributed")
    code = RANK.format(tests=str(Path(__file__).parent), store=str(tmp_path / "store"))
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(Path(tk.__file__).parents[1]),
                                                       os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(rank)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for rank in (0, 1)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outs]
    import json

    got = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    scores, relevant, exclude = _data(11)
    want = _expected(scores, relevant, exclude, {"ties": "pessimistic"})
    for name in METRICS:
        assert got[0][name] == got[1][name]  # every rank computes the same means
        assert got[0][name] == pytest.approx(float(want.summary.loc["scores", name]), rel=1e-12)
    counts = np.add(got[0]["value_count"], got[1]["value_count"])
    assert counts.tolist() == want.per_query[METRICS].notna().sum().tolist()
