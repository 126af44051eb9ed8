"""``python -m phasec``: the ``phasec`` command."""

import sys

from phasec.cli import main

sys.exit(main())
