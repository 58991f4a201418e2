"""``python -m nyhopt``: the ``nyhopt`` command (``python -m nyhopt info``, ``... tune``...)."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
