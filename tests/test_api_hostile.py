"""The API-wide hostile-value test: every public parameter, hostile values, a result or a TopkevalError.

The public callables are found, not listed: the functions of ``topkeval.__all__`` and the public
methods of its classes (Results, the Spark results, MatrixEvaluator), and those of
``topkeval.integrations`` whose extra is installed (TopkMetrics). Each must go through the one
parameter layer (:func:`topkeval.params.validate_params`), and each has one valid call below
(``VALID``). Then, for every parameter of every signature, hypothesis replaces that one argument
of the valid call by hostile values (negative, zero, huge, NaN, None, empty, the wrong type, bools,
text, containers) and the call must return or raise a :class:`topkeval.TopkevalError`: never
another exception, never a hang. A new public parameter is covered without anyone listing it; a new
public callable fails ``test_every_public_callable_has_a_valid_call`` until it is given one.

Path parameters (declared ``FilePath``) get hostile paths that cannot write outside the test's
folder; every other parameter gets the general values.
"""

from __future__ import annotations

import inspect
import math
import os
import signal
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import topkeval as tk
from topkeval import params as P
from topkeval.evaluator import MatrixEvaluator
from topkeval.results import Results

pytestmark = pytest.mark.filterwarnings("ignore::topkeval.TopkevalWarning")

SECONDS = 60  # a call on these tiny inputs that takes longer hangs

# ---------------------------------------------------------------------------------------------
# the public callables, found from the package


#: classes whose objects topkeval builds and returns (users call their methods, not their constructors)
RETURNED = (Results, tk.PositionBias, tk.ItemPropensity)


def _public_methods(cls) -> dict[str, object]:
    out = {}
    for name, member in inspect.getmembers(cls):
        if name.startswith("_") and name != "__init__":
            continue
        if name == "__init__" and (member is object.__init__ or issubclass(cls, RETURNED)):
            continue
        if inspect.isfunction(member):
            out[f"{cls.__name__}.{name}"] = member
    return out


def public_callables() -> dict[str, object]:
    found = {}
    for name in tk.__all__:
        obj = getattr(tk, name)
        if inspect.isclass(obj):
            if issubclass(obj, BaseException) or name in ("Metric", "Conventions"):
                continue  # exceptions; value types built by parse_metric / checked in __post_init__
            found.update(_public_methods(obj))
        elif callable(obj):
            found[name] = obj
    return found


def integrations() -> dict[str, object]:
    """The public callables of ``topkeval.integrations`` whose extra is installed: the methods
    TopkMetrics and the ir_measures provider define (not those they inherit from torch or ir_measures)."""
    import topkeval.integrations.ir_measures as irm
    import topkeval.integrations.torchmetrics as tm

    found = {}
    # (module, class, whether users build it: TopkevalEvaluator is returned by provider.evaluator)
    for module, cls_name, built in ((tm, "TopkMetrics", True), (irm, "TopkevalProvider", True),
                                    (irm, "TopkevalEvaluator", False)):
        try:
            cls = getattr(module, cls_name)
        except tk.TopkevalError:  # the extra is not installed
            continue
        found.update({f"{cls_name}.{name}": member for name, member in vars(cls).items()
                      if inspect.isfunction(member) and ((name == "__init__" and built) or not name.startswith("_"))})
    return found


PUBLIC = public_callables() | integrations()


def test_every_public_callable_goes_through_the_parameter_layer():
    missing = [name for name, func in PUBLIC.items() if not P.is_validated(func)]
    assert not missing, f"not validated by topkeval.params.validate_params: {missing}"
    assert len(PUBLIC) >= 30  # the walk found the API (functions, Results' methods, MatrixEvaluator)


def test_the_layer_refuses_an_undeclared_parameter():
    with pytest.raises(TypeError, match="without a constraint"):
        @P.validate_params(k=P.Int())
        def f(k, digits=4):  # digits has no constraint
            return k


def test_conventions_objects_are_checked_whoever_builds_them():
    with pytest.raises(tk.ParameterError, match="'ties' parameter of Conventions"):
        tk.Conventions(ties="random")
    assert math.isnan(tk.Conventions(undefined="nan").undefined)


# ---------------------------------------------------------------------------------------------
# one valid call of each


LOG = pd.DataFrame({"query": [1, 1, 1, 2, 2, 2, 3, 3], "item": list("abcabdae"),
                    "relevance": [1, 0, 1, 0, 1, 0, 1, 0],
                    "old": [0.9, 0.5, 0.1, 0.8, 0.3, 0.3, 0.2, 0.7],
                    "new": [0.2, 0.5, 0.9, 0.1, 0.8, 0.3, 0.9, 0.1]})
RES = tk.evaluate(LOG, metrics=["recall@2", "precision@2", "ndcg@3"], score=["old", "new"], item="item")
CLICKS = LOG.assign(position=[1, 2, 3, 1, 2, 3, 1, 2])
IMPRESSIONS = pd.DataFrame({"query": [1, 1, 1, 1], "item": ["a", "b", "a", "b"], "position": [1, 2, 2, 1],
                            "click": [1, 0, 1, 1]})
SCORES = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.4]])
MANY = tk.evaluate(LOG.assign(third=[0.3, 0.2, 0.6, 0.5, 0.4, 0.1, 0.8, 0.2]), metrics=["recall@2", "precision@2"],
                   score=["old", "new", "third"], item="item")
CLICK_RES = tk.evaluate(CLICKS, metrics=["recall@2", "precision@2"], score=["old", "new"], item="item",
                        position="position")
TRUTH = np.array([[1, 0, 1], [1, 0, 0]])
OFF_POLICY_LOG = CLICKS.assign(click=LOG["relevance"], pscore=[0.5, 0.3, 0.2, 0.5, 0.3, 0.2, 0.5, 0.5])
#: a catalogue larger than the sample (evaluate_sampled draws fewer negatives than each user's pool)
WIDE = np.array([[0.9, 0.1, 0.5, 0.3, 0.7, 0.2, 0.6, 0.4], [0.2, 0.8, 0.4, 0.6, 0.1, 0.9, 0.3, 0.5]])
WIDE_TEST = np.array([[1, 0, 0, 0, 0, 0, 0, 0], [0, 0, 1, 0, 0, 1, 0, 0]])


@pytest.fixture(scope="module", autouse=True)
def _forget_defined_metrics():
    """define_metric's cases register a metric: gone after this module (other tests list the registry)."""
    yield
    from topkeval.metrics.define import forget_metric
    from topkeval.metrics.registry import DEFINED

    for name in list(DEFINED):
        forget_metric(name)


@pytest.fixture(scope="module", autouse=True)
def _mlflow_store(tmp_path_factory):
    """log_mlflow's calls go to a file store of their own (MLflow 3 refuses its file store unless
    MLFLOW_ALLOW_FILE_STORE is set; its sqlite store needs SQLAlchemy, which mlflow-skinny lacks)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
        patch.setenv("MLFLOW_TRACKING_URI", "file:" + str(tmp_path_factory.mktemp("mlflow") / "mlruns"))
        yield


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("api")
    run = root / "a.run"
    run.write_text("1 Q0 a 1 0.9 tag\n1 Q0 b 2 0.5 tag\n2 Q0 a 1 0.8 tag\n")
    qrels = root / "a.qrels"
    qrels.write_text("1 0 a 1\n2 0 b 1\n")
    return root, run, qrels


def _fresh(root: Path, suffix: str) -> str:
    """A new file name in the test's folder (each call writes a new file)."""
    _fresh.n = getattr(_fresh, "n", 0) + 1
    return str(root / f"out{_fresh.n}{suffix}")


def valid_calls(files) -> dict:
    """qualified name -> (callable, keyword arguments of one valid call)."""
    root, run, qrels = files
    ev = MatrixEvaluator(["recall@1"])
    fed = MatrixEvaluator(["recall@1"])
    fed.update(SCORES, TRUTH)
    single = dict(relevance=[1, 0, 1, 0], scores=[0.4, 0.3, 0.2, 0.1], k=2, items=None, conventions=None)
    return {
        "evaluate": (tk.evaluate, dict(data=CLICKS, metrics=["recall_micro@2"], query="query", relevance="relevance",
                                       score=["old", "new"], item="item", conventions=None, qrels=None, model=None,
                                       missing_queries="skip", depth=None, judged_only=False, chunk_rows=None,
                                       progress=None, keep_per_query=True, threads=None, ascending=False, by=None,
                                       weight=None, position="position", propensity={1: 1.0, 2: 0.5, 3: 0.25},
                                       clip=10.0)),
        "estimate_position_bias": (tk.estimate_position_bias, dict(
            impressions=IMPRESSIONS, query="query", item="item", position="position", click="click",
            impressions_column=None, method="harvest", form="free", max_position=None, confidence=0.9,
            n_resamples=5, seed=0)),
        "popularity_propensity": (tk.popularity_propensity, dict(interactions=LOG, item="item", gamma=1.0,
                                                                 recommendations=None, recommended_item=None,
                                                                 exclude_top=0.0)),
        "recall_at_k": (tk.recall_at_k, single),
        "precision_at_k": (tk.precision_at_k, single),
        "f1_at_k": (tk.f1_at_k, single),
        "fbeta_at_k": (tk.fbeta_at_k, {**single, "beta": 0.5}),
        "specificity_at_k": (tk.specificity_at_k, single),
        "r_precision": (tk.r_precision, {k: v for k, v in single.items() if k != "k"}),
        "evaluate_matrix": (tk.evaluate_matrix, dict(scores=SCORES, relevant=TRUTH, metrics=["recall@1"],
                                                     exclude=None, conventions=None, batch_size=None, threads=None)),
        "evaluate_sampled": (tk.evaluate_sampled, dict(scores=WIDE, test=WIDE_TEST, metrics=["recall@2"], n_negatives=3,
                                                       sampling="uniform", exclude=None, seed=0,
                                                       estimator=["sampled", "corrected", "full"], conventions=None,
                                                       batch_size=None, threads=None)),
        "parse_metric": (tk.parse_metric, dict(text="P@5")),
        "explain_metric": (tk.explain_metric, dict(name="MAP@10")),
        "define_metric": (tk.define_metric, dict(name="hostile_share", function=lambda c: c.h / c.listed,
                                                 cutoff="required", ranks=False, summary="s", formula="h / listed",
                                                 higher_is_better=True, bounded=True, needs_all_relevant=False,
                                                 undefined="never", replace=True)),
        "read_run": (tk.read_run, dict(path=run)),
        "read_qrels": (tk.read_qrels, dict(path=qrels)),
        "read_runs": (tk.read_runs, dict(paths=[run])),
        "write_run": (tk.write_run, dict(frame=LOG[["query", "item", "old"]], path=lambda: _fresh(root, ".run"),
                                         query="query", item="item", score="old", run_name=None, overwrite=False)),
        "off_policy": (tk.off_policy, dict(log=OFF_POLICY_LOG, metrics=["precision@2"], policy="new", query="query",
                                           item="item", position="position", click="click", pscore="pscore",
                                           estimator="iips", on_policy="logger", support=None, clip=10.0,
                                           min_clicks=0.0, min_ess=0.0, refuse=True, ties="expected", seed=0)),
        "PlackettLuce.__init__": (tk.PlackettLuce, dict(score="new", temperature=0.5, samples=None)),
        "MatrixEvaluator.__init__": (MatrixEvaluator, dict(metrics=["recall@1"], conventions=None, batch_size=None,
                                                           threads=None, sync_on_compute=True, process_group=None)),
        "MatrixEvaluator.update": (ev.update, dict(scores=SCORES, relevant=TRUTH, exclude=None, users=None,
                                                   model=None)),
        "MatrixEvaluator.compute": (fed.compute, {}),
        "MatrixEvaluator.reset": (ev.reset, {}),
        **_integration_calls(),
        **{f"{cls}.{name}": call for cls, res in (("Results", RES),)
           for name, call in _results_calls(res, root).items() if f"{cls}.{name}" in PUBLIC},
    }


def _integration_calls() -> dict:
    return _torchmetrics_calls() | _ir_measures_calls()


def _ir_measures_calls() -> dict:
    if "TopkevalProvider.supports" not in PUBLIC:
        return {}
    import ir_measures

    from topkeval.integrations.ir_measures import TopkevalProvider, provider

    qrels = [ir_measures.Qrel("1", "a", 1), ir_measures.Qrel("1", "b", 0)]
    run = [ir_measures.ScoredDoc("1", "a", 0.5), ir_measures.ScoredDoc("1", "b", 0.7)]
    evaluator = provider.evaluator([ir_measures.P @ 1], qrels)
    return {
        "TopkevalProvider.__init__": (TopkevalProvider, dict(ties=None)),
        "TopkevalProvider.supports": (provider.supports, dict(measure=ir_measures.P @ 1)),
        "TopkevalProvider.follows": (provider.follows, dict(measure=ir_measures.P @ 1)),
        "TopkevalEvaluator.iter_calc": (lambda run: list(evaluator.iter_calc(run)), dict(run=run)),
        "TopkevalEvaluator.calc_aggregate": (evaluator.calc_aggregate, dict(run=run)),
        "TopkevalEvaluator.calc": (evaluator.calc, dict(run=run)),
    }


def _torchmetrics_calls() -> dict:
    if "TopkMetrics.update" not in PUBLIC:
        return {}
    from topkeval.integrations.torchmetrics import TopkMetrics

    fed = TopkMetrics(["recall@1"])
    fed.update(SCORES, TRUTH)
    return {
        "TopkMetrics.__init__": (TopkMetrics, dict(metrics=["recall@1"], conventions=None, prefix="", batch_size=None,
                                                   threads=None, sync_on_compute=True, process_group=None)),
        "TopkMetrics.update": (TopkMetrics(["recall@1"]).update, dict(scores=SCORES, relevant=TRUTH, exclude=None)),
        "TopkMetrics.compute": (fed.compute, {}),
    }


def _results_calls(res, root) -> dict:
    compare = dict(test="permutation", correction="holm", confidence=0.95, n_resamples=100, seed=0)
    return {
        "compare": (res.compare, dict(baseline="old", metrics=None, missing="intersect", **compare)),
        "summary_ci": (res.summary_ci, dict(confidence=0.9, n_resamples=100, seed=0)),
        "diff": (res.diff, dict(baseline="old", model="new", metric="recall@2", items=True)),
        "side_by_side": (res.side_by_side, dict(query=1, k=3, baseline=None, model=None)),
        "curves": (res.curves, dict(metrics=None, ks=[1, 2])),
        "beyond_accuracy": (res.beyond_accuracy, dict(k=2, popularity=None, features=None, similarity=None,
                                                      catalog=None, metrics=["coverage@2", "novelty@2",
                                                                             "unexpectedness@2"],
                                                      categories=None, history=None, baseline="old")),
        "with_beyond": (res.with_beyond, dict(metrics=["novelty@2", "diversity@2", "category_diversity@2",
                                                       "unexpectedness@2", "serendipity(variant=recommenders)@2"],
                                              popularity=None, features={i: [1.0, j] for j, i in enumerate("abcde")},
                                              similarity=None, catalog=None, categories=dict(zip("abcde", "xxyyz")),
                                              history=pd.DataFrame({"query": [1, 2], "item": ["a", "e"]}),
                                              baseline="old")),
        "plot_curve": (res.plot_curve, dict(metric="recall", ks=[1, 2], ax=None)),
        "plot_deltas": (res.plot_deltas, dict(metric="recall@2", baseline="old", model="new", ax=None)),
        "report": (res.report, dict(path=lambda: _fresh(root, ".html"), baseline="old", model=None, metric=None,
                                    queries=[1], worst=2, k=3, images=None, title="t", curves=False, digits=3,
                                    overwrite=False, **compare)),
        "to_latex": (res.to_latex, dict(baseline=None, digits=3, **compare)),
        "to_markdown": (res.to_markdown, dict(digits=3)),
        "to_string": (res.to_string, dict(format="markdown", per_query=False, ci=None, digits=3)),
        "to_dict": (res.to_dict, dict(per_query=False)),
        "to_pandas": (res.to_pandas, dict(table="per_query")),
        "to_arrow": (res.to_arrow, dict(table="summary")),
        "to_polars": (res.to_polars, dict(table="per_query")),
        "anova": (MANY.anova, dict(metric="recall@2")),
        "compare_all": (MANY.compare_all, dict(metric=None, test="tukey", confidence=0.95, n_resamples=100, seed=0)),
        "queries_needed": (MANY.queries_needed, dict(metric="recall@2", delta=0.1, power=0.8, alpha=0.05,
                                                     test="paired_t")),
        "bounds": (CLICK_RES.bounds, dict(metrics=None)),
        "label": (res.label, dict(metric="R@2")),
        "log_mlflow": (res.log_mlflow, dict(run_id=None, prefix="val/", per_query=True, report=False, ci=None,
                                            baseline=None, n_resamples=100, seed=0, step=0, artifact_path="topkeval")),
    }


def test_every_public_callable_has_a_valid_call(files):
    calls = valid_calls(files)
    missing = sorted(set(PUBLIC) - set(calls))
    assert not missing, f"give these a valid call in tests/test_api_hostile.py VALID: {missing}"


def _signature_params(name: str) -> list[str]:
    func = PUBLIC[name]
    return [p.name for p in inspect.signature(func).parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


CASES = [(name, param) for name in sorted(PUBLIC) for param in _signature_params(name)]


def test_the_valid_calls_are_valid(files):
    import matplotlib

    matplotlib.use("Agg")
    for name, (func, kwargs) in valid_calls(files).items():
        assert func(**_resolved(kwargs)) is not NotImplemented, name


# ---------------------------------------------------------------------------------------------
# every returned object pickles and copies


def _round_trips(value) -> list:
    """``value`` pickled and read back (the default protocol and protocol 2), copied and deep-copied."""
    import copy
    import pickle

    return [pickle.loads(pickle.dumps(value)), pickle.loads(pickle.dumps(value, protocol=2)), copy.copy(value),
            copy.deepcopy(value)]


def _assert_same(a, b, where: str) -> None:
    """Two returned values hold the same numbers and text (a figure: the same kind of object)."""
    if isinstance(a, Results):
        assert isinstance(b, Results), where
        pd.testing.assert_frame_equal(a.summary, b.summary, check_exact=True, obj=where)
        pd.testing.assert_frame_equal(a.per_query, b.per_query, check_exact=True, obj=where)
        assert repr(a.info) == repr(b.info), where  # NaN-safe: the same text
        assert (a.query_name, a.by, a.weight, a.models, a.metrics) == (b.query_name, b.by, b.weight, b.models,
                                                                       b.metrics), where
    elif isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b, check_exact=True, obj=where)
    elif isinstance(a, (tk.PositionBias, tk.ItemPropensity)):
        assert repr(a) == repr(b), where
        for name in ("propensities", "table", "curve", "frame"):
            if isinstance(getattr(a, name, None), pd.DataFrame):
                pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True, obj=where)
    elif isinstance(a, (float, int, str, bytes, type(None), tk.Metric, dict, list, tuple)):
        assert repr(a) == repr(b), where
    else:  # a figure, an evaluator, an Arrow or polars table: of the same kind (and read back without error)
        assert type(a) is type(b), where


def test_every_returned_object_pickles_and_copies(files):
    """Users save results and send them to worker processes: whatever a public callable returns
    (Results of every front door, the frames of its methods, PositionBias, figures, evaluators...)
    pickles, copies and deep-copies, and reads back the same."""
    import matplotlib
    import matplotlib.pyplot as plt

    matplotlib.use("Agg")
    for name, (func, kwargs) in valid_calls(files).items():
        out = func(**_resolved(kwargs))
        for i, back in enumerate(_round_trips(out)):
            _assert_same(out, back, f"{name} (round trip {i})")
        plt.close("all")


@pytest.mark.parametrize("which", ["RES", "MANY", "CLICK_RES"])
def test_every_method_of_unpickled_results_answers_as_the_original(files, which):
    """Results read back from a pickle keep what their methods read (the rows, the re-evaluation at
    other metrics): each public method of Results, called as in VALID on the results read back,
    answers what it answers on the original (these tables keep everything: nothing is dropped; what
    cannot be pickled is tested in test_pickle.py). The copies answer too."""
    import copy
    import pickle

    import matplotlib
    import matplotlib.pyplot as plt

    matplotlib.use("Agg")
    original = globals()[which]
    root = files[0]
    answered = 0
    for back in (pickle.loads(pickle.dumps(original)), copy.copy(original), copy.deepcopy(original)):
        assert back is not original
        for name, (_, kwargs) in _results_calls(original, root).items():
            try:
                want = getattr(original, name)(**_resolved(kwargs))
            except tk.TopkevalError:
                continue  # not for these results (bounds without positions, diff of models they lack...)
            got = getattr(back, name)(**_resolved(kwargs))
            answered += 1
            if name not in ("report", "log_mlflow", "plot_curve", "plot_deltas"):  # a new path, a new run, a figure
                _assert_same(want, got, f"{which}.{name}")
            plt.close("all")
    assert answered >= 3 * 15
    info = copy.deepcopy(original).info  # a deep copy's counts are its own
    assert info == original.info


# ---------------------------------------------------------------------------------------------
# hostile values


class _Weird:
    def __repr__(self) -> str:
        return "<weird>"


GENERAL = [
    -1, 0, 1, 2, -(2**63), 2**63, 2**64 + 1, 10**12, 1.5, -0.0, math.nan, math.inf, -math.inf, 1e308, 5e-324,
    None, True, False, "", " ", "x", "0", "nan", "-1", "\x00", "é" * 300, b"x", [], [None], [math.nan], ["x"], [[1]],
    [1, "1"], (), {}, {"a": 1}, set(), _Weird(), np.int64(-1), np.float32("nan"), np.bool_(True), np.array([]),
    np.array([[1.0]]), pd.NA, pd.NaT, pd.Series([], dtype=float), pd.DataFrame(), range(0), range(3),
    lambda *a, **k: None, "recall@10", "query", "old", 1 + 2j,
]


def general():
    return st.one_of(st.sampled_from(GENERAL), st.integers(), st.floats(), st.text(max_size=5),
                     st.lists(st.integers(-3, 3), max_size=3))


def paths(root: Path):
    """Hostile paths that never reach outside ``root``."""
    values = ["", " ", "\x00", str(root / "a\x00b"), str(root), str(root / ("x" * 300)),
              str(root / "missing" / "x.html"), str(root / "a.run" / "x"), "/proc/1/x/y", "/dev/null", None, 0,
              -1, 1.5, b"/tmp/x", [str(root / "x")], Path(root), _Weird(), math.nan, True]
    return st.sampled_from(values)


def _is_path_param(func, param: str) -> bool:
    check = func.__validated__.get(param) if hasattr(func, "__validated__") else None
    options = getattr(check, "options", [check])
    return any(isinstance(o, (P.FilePath, P.Paths)) for o in options)


@contextmanager
def _deadline(seconds: int):
    def hang(signum, frame):
        raise TimeoutError(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _resolved(kwargs: dict) -> dict:
    return {k: (v() if callable(v) and getattr(v, "__name__", "") == "<lambda>" and k == "path" else v)
            for k, v in kwargs.items()}


@pytest.mark.parametrize("name,param", CASES, ids=[f"{n}-{p}" for n, p in CASES])
def test_hostile_values_give_a_result_or_a_topkeval_error(name, param, files):
    import matplotlib
    import matplotlib.pyplot as plt

    matplotlib.use("Agg")
    func, base = valid_calls(files)[name]
    root = files[0]
    strategy = paths(root) if _is_path_param(PUBLIC[name], param) else general()
    cwd = os.getcwd()

    # deterministic in CI (TOPKEVAL_HOSTILE_RANDOM=1 explores other draws; TOPKEVAL_HOSTILE_EXAMPLES more of them)
    @settings(max_examples=int(os.environ.get("TOPKEVAL_HOSTILE_EXAMPLES", "12")), deadline=None, database=None,
              derandomize=not os.environ.get("TOPKEVAL_HOSTILE_RANDOM"), suppress_health_check=list(HealthCheck))
    @given(value=strategy)
    def check(value):
        kwargs = _resolved(base)
        kwargs[param] = value
        os.chdir(root)  # a relative path written by a hostile value lands in the test's folder
        try:
            with _deadline(SECONDS):
                func(**kwargs)
        except tk.TopkevalError:
            pass
        finally:
            os.chdir(cwd)
            plt.close("all")

    check()
