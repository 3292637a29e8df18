"""The command line of the benchmarks whose sizes are positional: ``--help`` and clear errors."""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional, Sequence, Tuple


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def int_args(doc: Optional[str], params: Sequence[Tuple[str, int]], argv: Optional[List[str]] = None) -> List[int]:
    """The values of the optional positional integers ``params`` (name, default), in order.

    ``--help`` prints ``doc`` (the script's docstring) and exits 0; a value that is not a whole
    number >= 1, or one argument too many, exits 2 with a usage line naming it.
    """
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, default in params:
        parser.add_argument(name, nargs="?", type=_positive, default=default, help=f"(default {default})")
    namespace = parser.parse_args(sys.argv[1:] if argv is None else argv)
    return [getattr(namespace, name) for name, _ in params]
