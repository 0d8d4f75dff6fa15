"""``python -m ioattn``: the same as the ``ioattn`` command."""

import sys

from .cli import main

sys.exit(main())
