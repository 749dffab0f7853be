"""A check that needs a host tool skips outside CI and fails in CI, naming
the tool and its package (refarch.pytest.tools), run by pytest itself."""

import os
import subprocess
import sys

import pytest

from refarch.paths import ROOT


@pytest.mark.parametrize("ci", ["", "true"])
def test_a_missing_tool_skips_outside_ci_and_fails_in_ci(tmp_path, ci):
    (tmp_path / "test_needs.py").write_text(
        "from refarch.pytest.tools import needs_tool\n\n\n"
        "@needs_tool('refarch-no-such-tool', 'the-package (its installer)')\n"
        "def test_needs_it():\n    pass\n\n\n"
        "@needs_tool('sh', 'dash')\ndef test_has_it():\n    pass\n")
    env = {k: v for k, v in os.environ.items() if k != "CI"} | ({"CI": ci} if ci else {})
    env["PYTHONPATH"] = str(ROOT)
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "refarch.pytest.tools", "-p", "no:cacheprovider",
                        "-rfs", "-q", str(tmp_path / "test_needs.py")], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    line = "refarch-no-such-tool is missing: install the-package (its installer)"
    if ci:
        assert r.returncode == 1 and "1 passed, 1 error" in r.stdout, r.stdout
        assert f"{line} (CI is set: a missing tool fails, it never skips)" in r.stdout
    else:
        assert r.returncode == 0 and "1 passed, 1 skipped" in r.stdout, r.stdout
        assert line in r.stdout
