"""``python -m refarch.docs``: which generated pages are stale (exit 1 when
any), or ``--write``: rewrite them."""

from __future__ import annotations

import argparse
import sys

from . import DOCS, stale, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m refarch.docs",
                                     description="The documentation's reference pages, rendered from the code.")
    parser.add_argument("--write", action="store_true", help="rewrite every page that differs from the code")
    args = parser.parse_args(argv)
    if args.write:
        written = write()
        print(f"{DOCS}: {', '.join(written) if written else 'every generated page already current'}")
        return 0
    found = stale()
    for rel in found:
        print(f"docs/{rel}: differs from the code; run `python -m refarch.docs --write`")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
