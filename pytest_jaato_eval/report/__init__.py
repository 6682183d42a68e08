"""Reports for people (P4): the per-arm fields, the self-contained HTML/PDF document,
the pass-rate-against-cost chart, the run pins, and the pytest-html columns.

Everything renders from store records (plain dicts), so a live run, a store on disk
and a store written by jaato-eval 0.3.4 all go through the same code.
"""
