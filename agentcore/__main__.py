"""``python -m agentcore``: the ``agentcore`` command (see :mod:`agentcore.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
