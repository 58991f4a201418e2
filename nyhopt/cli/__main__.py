"""``python -m nyhopt.cli``: the ``nyhopt`` command line."""
import sys

from ._main import main

sys.exit(main())
