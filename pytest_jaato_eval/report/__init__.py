"""Reports for people (P4): the per-arm fields, the self-contained HTML/PDF document
(Jinja2 templates in templates/, rendered by html.py from tables.py's rows) and the
pass-rate-against-cost chart; pytest_layer/pytest_html.py adds them to pytest-html.

Everything renders from store records, so a live run, a store on disk and a store
written by jaato-eval 0.3.4 all go through the same code.
"""
