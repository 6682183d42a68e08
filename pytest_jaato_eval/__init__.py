"""pytest-jaato-eval: jaato agent-benchmark tasks as pytest items."""
