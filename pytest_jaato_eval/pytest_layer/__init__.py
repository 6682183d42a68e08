"""The pytest layer: collection, fixtures, outcomes, the store writer and the run's
process-level state. The only part of the package that imports pytest (besides the
hook table in plugin.py and the task authors' fixtures in testing/)."""
