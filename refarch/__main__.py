"""``python -m refarch``: see :mod:`refarch.cli`."""

import sys

from .cli import main

sys.exit(main())
