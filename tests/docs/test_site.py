"""The documentation site as a reader gets it: built by MkDocs with
``--strict`` (a broken internal link, a missing page or a page left out of
the nav fails), its start page rendered in headless Chromium (Debian's
chromium) with a screenshot kept beside the site, and the commit messages
in the usual form.  Run with ``ci/tox -e docs``; the site lands in
``site/`` and the screenshot in ``site/start-page.png``."""

import subprocess
import sys

import pytest

from refarch import docs
from refarch.docs import commits
from refarch.paths import ROOT
from refarch.report.browser import chromium, console_messages
from refarch.tools import hostcmds

SITE = ROOT / "site"

#: What the start page must lead a new reader to: the four kinds of page.
START_PAGE_SECTIONS = ("Tutorials", "How-to guides", "Reference", "Explanation")


@pytest.fixture(scope="module")
def site():
    stale = docs.stale()
    assert not stale, f"generated pages differ from the code: {', '.join(stale)}; run `python -m refarch.docs --write`"
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--clean", "-f", str(ROOT / "mkdocs.yml"),
                        "-d", str(SITE)], capture_output=True, text=True, timeout=300, check=False, cwd=ROOT)
    assert r.returncode == 0, f"mkdocs build --strict failed:\n{r.stderr[-4000:]}"
    return SITE


def test_every_page_of_the_nav_is_built(site):
    import yaml

    def files(nav):
        for entry in nav:
            for value in entry.values() if isinstance(entry, dict) else [entry]:
                yield from files(value) if isinstance(value, list) else [value]

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    missing = [page for page in files(config["nav"]) if not (site / page.replace(".md", ".html")).is_file()]
    assert not missing, f"pages of the nav not built: {missing}"


def test_the_start_page_renders_without_console_messages_and_is_kept_as_a_screenshot(site):
    hostcmds.preflight(["report"])  # chromium: one line naming the package when missing
    shot = site / "start-page.png"
    r = chromium("--window-size=1280,1600", f"--screenshot={shot}", (site / "index.html").as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    console = console_messages(r.stderr)
    assert not console, f"{site / 'index.html'}: the page logged to the console: {console}"
    assert shot.is_file() and shot.stat().st_size > 10_000, f"no screenshot at {shot}"
    dom = chromium("--dump-dom", (site / "index.html").as_uri()).stdout
    for section in START_PAGE_SECTIONS:
        assert section in dom, f"the start page does not lead to {section}"
    assert "ci/main-job.sh" in dom and "ci/test.sh" in dom, "the start page does not give the two commands"


def test_commit_messages_have_a_short_subject_and_a_body_apart():
    bad = commits.problems(ROOT)
    assert not bad, "commit messages: " + "; ".join(bad)
