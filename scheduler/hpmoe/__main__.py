"""`python -m hpmoe ...`: the same CLI as the `hpmoe` command (for machines where the package is on PYTHONPATH
but not pip-installed, e.g. the lent GPU machines)."""
from .cli import main

raise SystemExit(main())
