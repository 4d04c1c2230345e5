import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).parent))

# Every test runs the numba-compiled kernels, the ones large logs use (small inputs would run them
# interpreted otherwise: see topkeval.kernels.jit). test_jit.py checks the interpreted ones apart.
os.environ.setdefault("TOPKEVAL_JIT", "1")

settings.register_profile(
    "ci", max_examples=int(os.environ.get("TOPKEVAL_HYPOTHESIS_EXAMPLES", "300")), deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
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
