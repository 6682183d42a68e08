"""`python -m pytest_jaato_eval report|compare|validate|merge ...`: see commands.py."""
from .results.commands import main

raise SystemExit(main())
