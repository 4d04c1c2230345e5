import os
import sys
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
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent: it exists beside the development checkout and in CI only")
    return SHARED
