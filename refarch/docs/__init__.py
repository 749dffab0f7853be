"""The documentation site's generated pages (``docs/``, built by MkDocs).

Each reference page is rendered from the code it describes, so it cannot
drift: :data:`PAGES` maps a page's path under ``docs/`` to the function that
renders it; ``python -m refarch.docs --write`` rewrites every page, and a
unit test (``tests/unit/test_docs.py``) fails naming the page while one
differs from what the code renders.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..paths import ROOT
from . import reference

#: Where the site's pages live.
DOCS = ROOT / "docs"


def pages() -> dict[str, Callable[[], str]]:
    """{page path under ``docs/``: the function that renders its markdown}.
    The timings page comes from :mod:`.timings` (its history file)."""
    from . import timings

    return {
        "reference/checks.md": reference.checks_page,
        "reference/properties.md": reference.properties_page,
        "reference/faults.md": reference.faults_page,
        "reference/host-commands.md": reference.host_commands_page,
        "reference/profile.md": reference.profile_page,
        "reference/cli.md": reference.cli_page,
        "reference/timings.md": timings.current_page,
    }


def stale(docs: Path = DOCS) -> list[str]:
    """The generated pages whose file differs from what the code renders
    (missing ones included), as paths under ``docs/``."""
    return [rel for rel, render in pages().items()
            if not (docs / rel).is_file() or (docs / rel).read_text(encoding="utf-8") != render()]


def write(docs: Path = DOCS) -> list[str]:
    """Rewrite every generated page that differs, and the timings' plots
    (:func:`.timings.plots`); the rewritten page paths."""
    from . import timings

    timings.plots(timings.load(), docs / "reference" / "img")
    out = []
    for rel, render in pages().items():
        text, path = render(), docs / rel
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            out.append(rel)
    return out
