"""MLflow: an evaluation's means, intervals, per-query table and report in an MLflow run
(:meth:`Results.log_mlflow <topkeval.results.Results.log_mlflow>`; the ``mlflow`` extra).

Names. Each mean is the metric ``<prefix><model>/<metric>``, the metric as labelled in
:attr:`Results.summary` (as requested: ``P@10`` stays ``P@10``). MLflow takes ASCII letters,
digits, ``_ - . /``, spaces (and ``:`` but not on Windows) in a name, so in the model and the
metric ``@`` is written ``_at_`` and any run of other characters ``_`` (dropped where it begins or
ends a name): ``recall@10`` -> ``recall_at_10``, ``fbeta(beta=0.5)@20`` -> ``fbeta_beta_0.5_at_20``,
model ``team/v2`` -> ``team_v2``. Two means that would take one name are refused, not merged. An
interval adds ``<prefix><model>/<metric>_ci_low`` and ``_ci_high``.

Artifacts, under ``artifact_path`` (default ``topkeval``): ``per_query.parquet`` (Results.to_arrow's
table), ``report.html`` (:meth:`Results.report`), ``info.json`` (:attr:`Results.info`). They are
written by :mod:`topkeval.files` into a private temporary folder, which MLflow copies into the run's
artifact store, then removed.

The run. ``run_id`` given: that run (it stays as it is: active or not, never ended here). Else the
active run (``mlflow.start_run()`` of the caller; left active). Else a new run in the current
experiment, started and ended here (status FINISHED; FAILED when logging fails). Everything is
computed before anything is logged: an error in the report leaves the run untouched.
"""

from __future__ import annotations

import json
import re
import time

from ..errors import ParameterError, optional_module
from ..files import scratch_folder, write_parquet, write_text

#: MLflow's limit on a metric name, and on the metrics of one log_batch call
MAX_NAME = 250
BATCH = 1000
_OTHER = re.compile(r"[^A-Za-z0-9_.\- ]+")
_EDGES = re.compile(r"^[^A-Za-z0-9_.\- ]+|[^A-Za-z0-9_.\- ]+$")


def name_part(text) -> str:
    """A model or metric name as a part of an MLflow metric name (see the module docstring).

    >>> name_part("recall@10"), name_part("fbeta(beta=0.5)@20"), name_part("team/v2"), name_part("..")
    ('recall_at_10', 'fbeta_beta_0.5_at_20', 'team_v2', '_')
    """
    out = "_at_".join(_OTHER.sub("_", _EDGES.sub("", piece)) for piece in str(text).split("@"))
    return out if out.strip(".") else "_"  # '', '.' and '..' are no name in a path


def metric_names(results, prefix: str, ci: bool) -> dict[tuple[str, str, str], str]:
    """``(model, metric label, what) -> MLflow name`` (what: ``mean``, ``ci_low``, ``ci_high``)."""
    names: dict[tuple[str, str, str], str] = {}
    taken: dict[str, tuple[str, str]] = {}
    for model in results.models:
        for metric in results.metrics:
            base = f"{prefix}{name_part(model)}/{name_part(metric)}"
            if base in taken:
                other = taken[base]
                raise ParameterError(f"model {model!r}, metric {metric!r} and model {other[0]!r}, metric "
                                     f"{other[1]!r} would both be logged to MLflow as {base!r} (MLflow names take "
                                     "letters, digits, '_', '-', '.', ' ' and '/' only): rename a model or request "
                                     "the metric by another name.")
            taken[base] = (model, metric)
            if len(base) + (len("_ci_high") if ci else 0) > MAX_NAME:
                raise ParameterError(f"the MLflow name {base[:60]!r}... would be longer than MLflow's {MAX_NAME} "
                                     "characters: shorten the prefix or the model's name.")
            names[(model, metric, "mean")] = base
            if ci:
                names[(model, metric, "ci_low")] = base + "_ci_low"
                names[(model, metric, "ci_high")] = base + "_ci_high"
    if len(set(names.values())) < len(names):  # a metric labelled like another's interval ('x_ci_low')
        raise ParameterError("two of the values to log would take one MLflow name (a metric's name ends like an "
                             "interval's, '_ci_low' or '_ci_high'): request the metric by another name, or drop ci=.")
    return names


def log_results(results, run_id=None, *, prefix: str = "", per_query: bool = True, report: bool = True,
                ci: float | None = None, baseline: str | None = None, n_resamples: int = 10_000,
                seed: int | None = 0, step: int = 0, artifact_path: str = "topkeval") -> str:
    """Log ``results`` to an MLflow run (:meth:`Results.log_mlflow`); return the run's id."""
    mlflow = optional_module("mlflow", "mlflow", "log_mlflow")
    from mlflow.entities import Metric
    from mlflow.exceptions import MlflowException

    if baseline is not None and baseline not in results.models:
        from ..errors import did_you_mean

        raise ParameterError(f"baseline {baseline!r} is not a model of these results "
                             f"({', '.join(results.models)}).{did_you_mean(baseline, results.models)}")
    if per_query:
        results.evaluation.require_rows("log_mlflow(per_query=True)")
    client = _client(mlflow, MlflowException)  # a store MLflow cannot open: said before any work
    # everything computed first: an error here leaves the run as it was
    names = metric_names(results, prefix, ci is not None)
    summary = results.summary
    values = {(m, metric, "mean"): float(summary.loc[m, metric]) for m in results.models for metric in results.metrics}
    if ci is not None:
        table = results.summary_ci(confidence=ci, n_resamples=n_resamples, seed=seed)
        if results.by:  # the overall rows only: the summary's intervals
            table = table[(table[results.by] == "(all)").all(axis=1)]
        for row in table.itertuples(index=False):
            values[(row.model, row.metric, "ci_low")] = float(row.ci_low)
            values[(row.model, row.metric, "ci_high")] = float(row.ci_high)
    now = int(time.time() * 1000)
    metrics = [Metric(names[key], value, now, step) for key, value in values.items()]
    if run_id is not None:
        _check_run(client, run_id, MlflowException)
    with scratch_folder() as folder:
        if per_query:
            write_parquet(folder / "per_query.parquet", results.to_arrow("per_query"), owner="log_mlflow")
        if report:
            results.report(folder / "report.html", baseline=baseline, confidence=0.95 if ci is None else ci,
                           n_resamples=n_resamples, seed=seed)
        from ..outputs.text import json_ready

        write_text(folder / "info.json", json.dumps(json_ready(results.info), indent=2, allow_nan=False),
                   owner="log_mlflow")

        def log(into: str) -> None:
            for start in range(0, len(metrics), BATCH):
                client.log_batch(into, metrics=metrics[start:start + BATCH])
            client.log_artifacts(into, str(folder), artifact_path=artifact_path or None)

        try:
            if run_id is not None:
                log(run_id)
                return str(run_id)
            active = mlflow.active_run()
            if active is not None:
                log(active.info.run_id)
                return str(active.info.run_id)
            with mlflow.start_run() as run:  # ended when the block ends (FAILED if logging raises)
                log(run.info.run_id)
            return str(run.info.run_id)
        except MlflowException as exc:  # the tracking store's own refusal, in one line with where it came from
            from ..errors import TopkevalError

            raise TopkevalError(f"MLflow refused to log into the tracking store {mlflow.get_tracking_uri()!r}: "
                                f"{' '.join(str(exc).split())[:300]}. Check the tracking URI (mlflow.set_tracking_uri) "
                                "and that its experiment exists.") from None


def _client(mlflow, error: type[BaseException]):
    """An MlflowClient of the current tracking store, or a ParameterError that says how to name one.

    MLflow 3 refuses its file store unless MLFLOW_ALLOW_FILE_STORE is set, and its default store,
    ``sqlite:///mlflow.db``, needs SQLAlchemy, which mlflow-skinny (the ``mlflow`` extra) lacks: with
    no tracking URI set, the extra alone cannot log anywhere."""
    try:
        return mlflow.MlflowClient()
    except error as exc:
        raise ParameterError(
            f"MLflow cannot open its tracking store {mlflow.get_tracking_uri()!r} "
            f"({' '.join(str(exc).split()).split('. ')[0][:300]}). Point MLflow at a store it can open before log_mlflow: "
            "a tracking server (mlflow.set_tracking_uri('http://host:5000') or the MLFLOW_TRACKING_URI "
            "variable), or a local folder (mlflow.set_tracking_uri('file:./mlruns') with the variable "
            "MLFLOW_ALLOW_FILE_STORE=true); the sqlite store needs the full mlflow package (pip install mlflow)."
        ) from None


def _check_run(client, run_id: str, error: type[BaseException]) -> None:
    """The run exists in the tracking store and is not deleted."""
    import mlflow

    try:
        run = client.get_run(run_id)
    except error as exc:
        raise ParameterError(f"run_id {run_id!r} names no run of the MLflow tracking store "
                             f"{mlflow.get_tracking_uri()!r} ({' '.join(str(exc).split())[:200]}): give the id of an "
                             "existing run, or leave run_id out to log into the active run (or a new one).") from None
    if run.info.lifecycle_stage == "deleted":
        raise ParameterError(f"run_id {run_id!r} names a deleted MLflow run: restore it, or give another run.")

