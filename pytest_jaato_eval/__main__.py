"""`python -m pytest_jaato_eval report|compare|validate|merge|show|review ...`: see cli.py."""
from .cli import main

raise SystemExit(main())
