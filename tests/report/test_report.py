"""The HTML report seen as a person sees it: rendered in headless Chromium
(Debian's chromium), with a screenshot kept beside the report; the page
logs nothing to the console and the scaling plot shows the measured points
and the ideal line.  Uses the newest run under runs/ that has results
(the main job's, in ci/test.sh), else a recorded 3-node run's results."""

import json
import shutil
from pathlib import Path

import pytest

from refarch.paths import runs_dir
from refarch.report import html as report
from refarch.report.browser import chromium, console_messages
from refarch.tools import hostcmds

RECORDED = Path(__file__).parents[1] / "unit" / "data" / "report" / "results.json"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    hostcmds.preflight(["report"])  # chromium: one line naming the package when missing
    runs = sorted(runs_dir().glob("*/results.json"), key=lambda p: p.stat().st_mtime) if runs_dir().is_dir() else []
    with_scaling = [p for p in runs if '"scaling"' in p.read_text(encoding="utf-8")]
    if with_scaling:
        results = with_scaling[-1]
    else:
        results = tmp_path_factory.mktemp("run") / "results.json"
        shutil.copy(RECORDED, results)
    return report.render(results)


def test_the_report_renders_without_console_messages_and_is_kept_as_a_screenshot(rendered):
    shot = rendered.with_name("report.png")
    r = chromium("--window-size=1280,2400", f"--screenshot={shot}", rendered.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    console = console_messages(r.stderr)
    assert not console, f"{rendered}: the page logged to the console: {console}"
    assert shot.is_file() and shot.stat().st_size > 10_000, f"no screenshot at {shot}"


def test_the_plot_shows_measured_points_and_the_ideal_line(rendered):
    r = chromium("--dump-dom", rendered.as_uri())
    dom = r.stdout
    assert 'id="scaling-plot"' in dom, "the scaling plot is not in the page"
    results = json.loads(rendered.with_name("results.json").read_text(encoding="utf-8"))
    for batch in {row["batch_size"] for row in results["smoke"]["scaling"]}:
        points = sum(1 for row in results["smoke"]["scaling"] if row["batch_size"] == batch)
        start = dom.find(f'<g id="measured-b{batch}">')
        assert start >= 0, f"no measured series for batch {batch} in the plot"
        series = dom[start:dom.find('<g id="', start + 10)]
        assert series.count("<use ") == points, f"batch {batch}: {series.count('<use ')} markers, {points} measured"
        assert f'<g id="ideal-b{batch}">' in dom, f"no ideal (linear) line for batch {batch} in the plot"
        assert f'<g id="interval-b{batch}">' in dom, f"no error bars (95 % intervals) for batch {batch} in the plot"
    assert "measured, batch" in dom and "ideal (linear)" in dom, "the legend does not name both lines"
    for section in ("nodes", "checks", "properties", "phases"):
        assert f'id="{section}"' in dom, f"the report has no {section} table"
