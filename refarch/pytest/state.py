"""The session's state: what the plugin knows before and after deploying
(:class:`RunState`, kept in the config's stash under :data:`STATE`), and
:func:`say`, the plugin's voice in the job's log."""

from __future__ import annotations

import sys
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ..cluster import Cluster
from ..contract import Contract
from ..judge.results import Results
from ..profile import Profile

STATE = pytest.StashKey["RunState"]()


@dataclass
class RunState:
    """What the session knows before and after deploying."""

    run_id: str
    profile_name: str
    overrides: dict
    profile: Profile
    attached: bool
    keep: bool
    configure: bool
    results: Results
    cluster: Cluster | None = None
    hosts: dict = field(default_factory=dict)
    node_names: list[str] = field(default_factory=list)
    #: Contract of existing hosts (--existing-hosts): nothing is deployed.
    existing: Contract | None = None
    #: Node name -> why it cannot be reached over SSH (None: reachable).
    reachability: dict = field(default_factory=dict)
    #: The run's report.html once written.
    report: Path | None = None



def say(config, line: str) -> None:
    """Print ``line`` to the job's log at once, even while pytest captures
    output (fixture teardown, an interrupted session)."""
    capman = config.pluginmanager.getplugin("capturemanager")
    ctx = capman.global_and_fixture_disabled() if capman else nullcontext()
    with ctx:
        try:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            # The reader is gone (plain tox killed by SIGTERM closes the
            # pipe): the line is lost, but the teardown it announces must run.
            pass



#: The session's config (for hooks that are not given it).
_CONFIG: list = []
