"""The whole suite: unit/ (pure logic, no daemon) and e2e/ (a real jaato daemon)."""
import os

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = ["pytester"]

# Hypothesis's clocks (a per-example deadline, "input generation is slow") are timing
# assertions: beside other work they fail a correct test. Its checks of the data stay.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")

# The test extra's hypothesis registers a pytest plugin that a user's install does not have,
# and every pytest a test starts would load it: about 0.7 s of CPU a start, and the suite
# starts over a hundred (pytester's runs, the documented commands run as written).
DEV_ONLY_PLUGINS = "-p no:hypothesispytest"


@pytest.fixture(autouse=True)
def nested_pytest_without_dev_only_plugins(request, monkeypatch):
    """Every pytest a test starts leaves the dev-only plugins out, as a user's would; after
    pytester, which drops PYTEST_ADDOPTS when it is made."""
    if "pytester" in request.fixturenames:
        request.getfixturevalue("pytester")
    outer = os.environ.get("PYTEST_ADDOPTS", "")
    if DEV_ONLY_PLUGINS not in outer:
        monkeypatch.setenv("PYTEST_ADDOPTS", f"{outer} {DEV_ONLY_PLUGINS}".strip())


def pytest_collection_modifyitems(items):
    # The longest tests first (stable otherwise): under -n they start at once instead of
    # last, where one of them alone would keep the run going with the other cores idle.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
