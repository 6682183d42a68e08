"""The whole suite: unit/ (pure logic, no daemon) and e2e/ (a real jaato daemon)."""

pytest_plugins = ["pytester"]


def pytest_collection_modifyitems(items):
    # The longest tests first (stable otherwise): under -n they start at once instead of
    # last, where one of them alone would keep the run going with the other cores idle.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
