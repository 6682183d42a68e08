"""The whole suite: unit/ (pure logic, no daemon) and e2e/ (a real jaato daemon)."""
pytest_plugins = ["pytester"]
