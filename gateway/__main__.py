"""``python -m gateway`` is ``clefgate``."""

import sys

from gateway.cli import main

sys.exit(main())
