"""The whole suite: unit/ (pure logic, no daemon) and e2e/ (a real jaato daemon)."""
import os

pytest_plugins = ["pytester"]

# Every daemon the suite starts (its own, and the plugin's private ones in the runs it makes)
# keeps one warm runner instead of jaato's default two: the suite's arms are sequential per
# daemon, and booting the unused second runner was a large share of the suite's CPU.
os.environ.setdefault("JAATO_RUNNER_POOL_SIZE", "1")


def pytest_collection_modifyitems(items):
    # The longest tests first (stable otherwise): under -n they start at once instead of
    # last, where one of them alone would keep the run going with the other cores idle.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
