"""Checks that need a host tool (:func:`needs_tool`).  Outside CI a missing
tool skips the check with a line naming the tool and the package that gives
it; in CI (``$CI`` set, as GitLab sets it and ``ci/test.sh`` exports it) it
fails the check with that line: there a missing tool is a defect of the
set-up, never a reason to skip.
"""

from __future__ import annotations

import os
import shutil

import pytest

#: The marker :func:`needs_tool` puts on a test or module.
MARK = "needs_tool"


def needs_tool(tool: str, package: str, present: bool | None = None) -> pytest.MarkDecorator:
    """A mark for checks that need ``tool`` (a command, or a thing the
    caller tests for and passes as ``present``; default: ``tool`` is on
    PATH), given by ``package`` (a Debian package, a tox environment, ...)."""
    return pytest.mark.needs_tool(tool=tool, package=package,
                                  present=shutil.which(tool) is not None if present is None else present)


def missing_line(tool: str, package: str) -> str:
    """The one line a missing tool gives."""
    return f"{tool} is missing: install {package}"


def pytest_configure(config):
    config.addinivalue_line("markers", f"{MARK}(tool, package, present): the check needs a host tool; "
                                       "missing, it skips outside CI and fails in CI")


def pytest_runtest_setup(item):
    for mark in item.iter_markers(MARK):
        if mark.kwargs["present"]:
            continue
        line = missing_line(mark.kwargs["tool"], mark.kwargs["package"])
        if os.environ.get("CI"):
            pytest.fail(f"{line} (CI is set: a missing tool fails, it never skips)", pytrace=False)
        pytest.skip(line)
