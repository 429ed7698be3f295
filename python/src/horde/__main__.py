"""`python -m horde compare A B [C …]`: the package's command line (`--help` for each)."""

from __future__ import annotations

import os
import sys
from typing import List, Optional

from .comparison import main as compare_main

COMMANDS = {"compare": compare_main}


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in COMMANDS:
        print(f"usage: python -m horde {{{','.join(COMMANDS)}}} ... (--help for each)", file=sys.stderr)
        return 0 if args and args[0] in ("-h", "--help") else 2
    try:
        return COMMANDS[args[0]](args[1:])
    except BrokenPipeError:
        # a reader that closed its end (`| head`) is not an error: end quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
