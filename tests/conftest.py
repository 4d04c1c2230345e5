import os
import shutil
import sys
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings

sys.path.insert(0, str(Path(__file__).parent))

# Every test runs the numba-compiled kernels, the ones large logs use (small inputs would run them
# interpreted otherwise: see topkeval.kernels.jit). test_jit.py checks the interpreted ones apart.
os.environ.setdefault("TOPKEVAL_JIT", "1")

# TOPKEVAL_HYPOTHESIS_DERANDOMIZE=1 (the mutation check, tests/mutation/run.py): the same examples on
# every run, no example database, so a mutation is killed or survives the same way each time; and no
# shrinking (a mutant's failure needs no minimal example)
_DERANDOMIZE = os.environ.get("TOPKEVAL_HYPOTHESIS_DERANDOMIZE") == "1"
settings.register_profile(
    "ci", max_examples=int(os.environ.get("TOPKEVAL_HYPOTHESIS_EXAMPLES", "300")), deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    **(dict(derandomize=True, database=None, phases=[Phase.explicit, Phase.generate]) if _DERANDOMIZE else {}),
)
settings.load_profile("ci")

SHARED = Path(__file__).resolve().parents[2] / "shared"
if os.environ.get("TOPKEVAL_SHARED"):
    SHARED = Path(os.environ["TOPKEVAL_SHARED"])


@pytest.fixture
def shared_dir():
    """The ../shared folder beside the checkout; tests that need it skip cleanly without it."""
    if not SHARED.is_dir():  # the message names no path of this machine
        pytest.skip("the shared test data folder is absent (a 'shared' folder beside the checkout, or "
                    "TOPKEVAL_SHARED; development machines and CI only)")
    return SHARED


#: TOPKEVAL_SPARK_CONNECT=1: the ``spark`` fixture is a Spark Connect session (``remote("local[2]")``),
#: and only the tests that use it run (tests/test_spark_connect.py runs test_spark.py this way)
SPARK_CONNECT = os.environ.get("TOPKEVAL_SPARK_CONNECT") == "1"
#: what the Spark Connect client imports besides pyspark (``pip install "pyspark[connect]"``)
CONNECT_MODULES = ("grpc", "grpc_status", "google.rpc", "zstandard")


@pytest.fixture(scope="session")
def spark():
    """One local Spark session (local[2]) for the whole test run (test_spark.py, test_backends.py); skips
    cleanly, with the reason, without pyspark or without Java. A Spark Connect session under
    TOPKEVAL_SPARK_CONNECT=1."""
    pytest.importorskip("pyspark", reason="pyspark is a test extra (the Spark backend)")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java on this machine (Spark needs Java 17)")
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable  # the executors need this Python (it has topkeval)
    if SPARK_CONNECT:
        session = _connect_session()
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            session = (SparkSession.builder.master("local[2]").appName("topkeval-tests")
                       .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "3")
                       .config("spark.driver.memory", "2g").config("spark.ui.showConsoleProgress", "false")
                       .getOrCreate())
        session.sparkContext.setLogLevel("FATAL")
    yield session
    session.stop()


def _connect_session():
    """A Spark Connect session on a local server (``remote("local[2]")``, as shared and serverless
    clusters are reached): the client has no SparkContext, no RDD and no JVM. The server runs in this
    process, so no classic session may exist before it (hence a process of its own)."""
    for module in CONNECT_MODULES:
        pytest.importorskip(module, reason="the Spark Connect client needs pip install 'pyspark[connect]'")
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    # the server runs the Python workers in a folder of its own (artifact isolation): a relative
    # PYTHONPATH (PYTHONPATH=src) would leave them the installed topkeval, not this checkout's
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if paths:
        os.environ["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in paths)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # Spark's own number of shuffle partitions (200), which topkeval lets adaptive execution coalesce
        session = (SparkSession.builder.remote("local[2]").config("spark.ui.enabled", "false")
                   .config("spark.driver.memory", "2g").config("spark.ui.showConsoleProgress", "false")
                   .getOrCreate())
    assert type(session).__module__.startswith("pyspark.sql.connect."), type(session)
    SparkContext._active_spark_context.setLogLevel("FATAL")  # the server's, in this process
    return session


# Warnings are errors (pyproject.toml: filterwarnings = ["error", ...]): a warning on ordinary input is
# a defect. The TopkevalWarnings below say something about the shape of the data, and the small and
# generated logs of these test files have that shape by design (every query with the same number of
# candidates, no relevant item at all, ...). They are ignored in these files only, by message; any
# other warning, and these in any other file (test_cli, test_outputs, test_hostile, a new file...),
# fails the test. A test about one of them asserts it with pytest.warns, which sees it all the same.
SHAPE_WARNINGS = {
    "truncated": r"Every query has exactly \d+ candidates?\.",  # a log of each query's top N only?
    "nothing relevant": r"No item is relevant",  # no grade reaches the threshold
    "no judgment": r"No retrieved item has a judgment",  # judgments apart share no item with the run
    "held-out excluded": r"\d+ held-out relevant \(user, item\) pairs are also in exclude",  # random matrices
    "skewed": r"The estimates from clicks are too skewed",  # click logs of a few queries: intervals of a few clicks
}
EXPECTED_SHAPE_WARNINGS = {
    "test_accumulator.py": ["truncated", "held-out excluded"],  # random relevance and exclusion matrices
    "test_matrix.py": ["held-out excluded"],
    "test_lightning.py": ["held-out excluded"],  # random relevance and exclusion matrices
    "test_beyond.py": ["truncated", "nothing relevant"],  # generated logs
    "test_compare.py": ["truncated"],  # a fixture log with lists of one length
    "test_grouping.py": ["truncated"],
    "test_invariance.py": ["truncated", "nothing relevant"],  # generated logs
    "test_presets.py": ["truncated"],  # the peers' own test cases: lists of one length
    "test_reference.py": ["truncated", "nothing relevant", "no judgment"],  # generated logs and judgments
    "test_report.py": ["truncated", "nothing relevant"],
    "test_seeds.py": ["truncated"],  # the seed logs of past bugs, kept as they were
    "test_segments.py": ["truncated", "nothing relevant"],
    "test_spark.py": ["truncated", "nothing relevant"],  # generated logs, as test_reference
    "test_unbiased.py": ["truncated", "skewed"],
    "test_many.py": ["truncated"],  # generated logs of one list length  # the truth of simulated click logs: pages of one length
    "test_numbers.py": ["truncated"],  # small logs whose numbers are worked out by hand
    "test_frames.py": ["truncated"],  # small logs of three candidates a query: the tables, not the numbers
    "test_mlflow.py": ["truncated"],  # the same
    # the review's small logs (one query, queries of one length) and matrices (a relevant cell excluded)
    "test_review_hostile.py": ["truncated", "nothing relevant", "held-out excluded"],
    "test_errors.py::test_error_table": ["truncated"],
    "test_trec.py::test_depth_on_a_wide_log_keeps_r_of_the_whole_list": ["truncated"],
    "test_compare.py::test_detectable_delta_stays_a_number_where_values_may_leave_0_1": ["skewed"],  # 6 queries
}


def pytest_collection_modifyitems(config, items):
    if SPARK_CONNECT:  # only what runs on the Spark session: the rest would test nothing new
        other = [item for item in items if "spark" not in getattr(item, "fixturenames", ())]
        if other:
            config.hook.pytest_deselected(items=other)
            items[:] = [item for item in items if item not in other]
    for item in items:
        name = item.path.name
        for key in (name, f"{name}::{getattr(item, 'originalname', item.name)}"):
            for warning in EXPECTED_SHAPE_WARNINGS.get(key, ()):
                item.add_marker(pytest.mark.filterwarnings(
                    f"ignore:{SHAPE_WARNINGS[warning]}:topkeval.errors.TopkevalWarning"))
