"""``python -m phasec``: the ``phasec`` command."""

import sys

from .cli import main

sys.exit(main())
