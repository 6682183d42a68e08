"""The whole suite: unit/ (pure logic, no daemon) and e2e/ (a real jaato daemon)."""
import os

pytest_plugins = ["pytester"]

# Every daemon the suite starts (its own, and the plugin's private ones in the runs it makes)
# keeps one warm runner instead of jaato's default two: the suite's arms are sequential per
# daemon, and booting the unused second runner was a large share of the suite's CPU.
os.environ.setdefault("JAATO_RUNNER_POOL_SIZE", "1")
