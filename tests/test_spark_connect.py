"""Spark Connect (``SparkSession.builder.remote(...)``, how shared and serverless clusters are reached):
the numbers of the local engine, as on classic Spark.

A Connect client has no SparkContext, no RDD and no JVM; ``remote("local[2]")`` starts a local
server inside the process, where no classic session may exist before it, and sets the process up
for Connect. So the Spark tests (tests/test_spark.py: random logs under every convention against
the local engine, judgments apart, compare / diff / report, segments and weights, the errors, no
warning) run again in a fresh interpreter whose ``spark`` fixture is a Connect session
(TOPKEVAL_SPARK_CONNECT=1, tests/conftest.py). The server takes 20 to 50 s to start on a 2-core
machine and the run 2 to 5 minutes: a slow test.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CONNECT_MODULES

TESTS = Path(__file__).resolve().parent

pytestmark = pytest.mark.slow


def test_the_spark_tests_pass_on_spark_connect():
    pytest.importorskip("pyspark", reason="pyspark is a test extra (the Spark backend)")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java on this machine (Spark needs Java 17)")
    for module in CONNECT_MODULES:
        pytest.importorskip(module, reason="the Spark Connect client needs pip install 'pyspark[connect]'")
    import topkeval

    # the driver and the server's Python workers import this topkeval (an absolute path: the
    # workers run in a folder of their own)
    paths = [str(Path(topkeval.__file__).resolve().parents[1]), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    env = os.environ | {"TOPKEVAL_SPARK_CONNECT": "1", "PYSPARK_PYTHON": sys.executable,
                        "TOPKEVAL_SPARK_EXAMPLES": os.environ.get("TOPKEVAL_SPARK_EXAMPLES", "4"),
                        "PYTHONPATH": os.pathsep.join(str(Path(p).resolve()) for p in paths if p)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", "-W", "error", "-rfEs",
                           str(TESTS / "test_spark.py")], cwd=TESTS.parent, env=env, capture_output=True, text=True,
                          timeout=1200)
    tail = proc.stdout[-6000:] + proc.stderr[-2000:]
    assert proc.returncode == 0, tail
    summary = proc.stdout.strip().splitlines()[-1]
    passed = re.search(r"(\d+) passed", summary)
    # every test that uses the session ran (the others are deselected), none skipped
    assert passed and int(passed.group(1)) >= 10 and "skipped" not in summary, tail
