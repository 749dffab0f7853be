"""Role scenarios: every Ansible role tested on its own with Molecule.

The scenarios live in ``descriptors/ansible/molecule/<scenario>/`` (one per
role, named after it). Their create, destroy and verify playbooks are the
suite's own (``molecule/resources``): the nodes are made by ``refarch up
--no-configure`` on the local cloud, verify runs the suite's checks of the
role. :func:`run_scenarios` runs ``molecule test -s NAME`` for each, one at a
time, with the output in ``runs/roles-<time>/<scenario>.log``; Ctrl-C or
SIGTERM runs ``molecule destroy`` of the scenario that was running, so its
nodes do not outlive the run. A scenario the host cannot run (the gpu role
without an NVIDIA GPU) is reported as skipped with the reason.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import lifecycle, proc, progress
from ..errors import CommandError, PhaseTimeout, RefarchError
from ..owner import OWNER_ENV
from ..paths import ANSIBLE_DIR, runs_dir
from . import rolecache

MOLECULE_DIR = ANSIBLE_DIR / "molecule"
#: Seconds one scenario may take (create, prepare, converge twice, verify, destroy).
SCENARIO_TIMEOUT_S = 1800


def scenarios() -> list[str]:
    """Scenario names (folders with a molecule.yml), in site.yml's role order
    where they are roles, the others after them."""
    order = [*rolecache.ROLE_ORDER, "nfs"]
    names = [p.parent.name for p in MOLECULE_DIR.glob("*/molecule.yml")]
    return sorted(names, key=lambda n: (order.index(n) if n in order else len(order), n))


def molecule() -> str:
    """The ``molecule`` command of this Python environment (tox -e molecule
    installs it; it is a Python package, not a host command).

    Raises:
        RefarchError: not installed here.
    """
    path = Path(sys.executable).with_name("molecule")
    if not path.exists():
        raise RefarchError("molecule is not installed in this environment: run `ci/tox -e molecule`")
    return str(path)


def nvidia_gpus() -> int:
    """GPUs ``nvidia-smi -L`` lists on this host (0 without the command: it
    comes with NVIDIA's driver on GPU hosts, and its absence only means the
    gpu scenario is skipped, so it is not a host command of the table)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def platform(name: str) -> str:
    """``local`` or ``vm``: where scenario ``name`` makes its nodes
    (REFARCH_MOLECULE_PLATFORM in its molecule.yml)."""
    import yaml

    config = yaml.safe_load((MOLECULE_DIR / name / "molecule.yml").read_text(encoding="utf-8"))
    return config.get("provisioner", {}).get("env", {}).get("REFARCH_MOLECULE_PLATFORM", "local")


def skip_reason(name: str) -> str | None:
    """Why this host cannot run scenario ``name``, or None."""
    if name == "gpu" and nvidia_gpus() == 0:
        return "needs a host with an NVIDIA GPU (nvidia-smi lists none here)"
    return None


@dataclass
class Outcome:
    """One scenario's result: ``status`` is passed, failed or skipped."""

    scenario: str
    status: str
    seconds: float
    detail: str = ""
    log: str = ""
    #: sha256 of the scenario's inputs (refarch.tools.rolecache.scenario_key).
    key: str = ""
    #: The roles run whose pass was reused instead of running (empty: it ran).
    reused_from: str = ""


def molecule_env(loaded: Path | None = None) -> dict[str, str]:
    """PATH with this Python environment's bin first: Molecule runs
    ansible-playbook and ansible-config from there (also when the runner
    is started as ``.tox/molecule/bin/python -m refarch roles``); this
    runner as the owner of the nodes the scenarios make (owner.OWNER_ENV);
    and, with ``loaded``, the file the scenario's processes list the suite's
    modules they load in (rolecache.LOADED_ENV)."""
    import os

    env = {"PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
           OWNER_ENV: str(os.getpid())}
    if loaded is not None:
        # A CI environment's own list (refarch.ci.reuse) gets the scenario's modules too.
        env[rolecache.LOADED_ENV] = os.pathsep.join(filter(None, [str(loaded), os.environ.get(rolecache.LOADED_ENV)]))
    return env


def _runner_modules() -> set[str]:
    """The package's modules this runner process has loaded (they decide how
    a scenario is run, so they key its record too)."""
    return {name.partition(".")[2] for name in list(sys.modules) if name.startswith("refarch.")}


def _destroy(name: str, log: Path) -> None:
    print(f"refarch: roles: destroying scenario {name}", file=sys.stderr, flush=True)
    proc.run([molecule(), "destroy", "-s", name], cwd=ANSIBLE_DIR, timeout_s=600, log=log, check=False,
             env=molecule_env())


def run_scenario(name: str, out: Path) -> Outcome:
    """``molecule test -s name`` (destroy on failure is Molecule's own;
    on Ctrl-C/SIGTERM :func:`_destroy` runs)."""
    reason = skip_reason(name)
    if reason:
        return Outcome(name, "skipped", 0.0, reason)
    key = rolecache.scenario_key(name)
    record, why = rolecache.check(name, key)
    if record:
        return Outcome(name, "passed", 0.0, rolecache.describe(record), record.get("log", ""), key, record["run"])
    if why:
        print(f"refarch: roles: {name} runs again: {why}", file=sys.stderr, flush=True)
    log = out / f"{name}.log"
    loaded = out / f"{name}.modules"
    loaded.unlink(missing_ok=True)
    start = time.monotonic()
    failed: dict[str, str] = {}
    with lifecycle.guarded(lambda: _destroy(name, log), keep=lambda: not lifecycle.INTERRUPTED):
        with progress.heartbeat(f"role scenario {name}", log=log):
            try:
                proc.run([molecule(), "test", "-s", name], cwd=ANSIBLE_DIR, timeout_s=SCENARIO_TIMEOUT_S, log=log,
                         stream=True, env=molecule_env(loaded))
            except (CommandError, PhaseTimeout) as exc:
                failed["why"] = str(exc).splitlines()[0]
    seconds = round(time.monotonic() - start, 1)
    if failed:
        return Outcome(name, "failed", seconds, failure_line(log.read_text(encoding="utf-8", errors="replace"))
                       or failed["why"], str(log), key)
    try:
        modules = rolecache.record_modules(rolecache.loaded_modules(loaded), _runner_modules())
        rolecache.remember(name, key, out.name, seconds, str(log), modules)
    except ValueError as exc:
        print(f"refarch: roles: {name}: {exc}", file=sys.stderr, flush=True)
    return Outcome(name, "passed", seconds, log=str(log), key=key)


def failure_line(output: str) -> str:
    """The line that says why a Molecule run failed: a failed assertion's
    message, a task's ``fatal:`` line, or Molecule's own error."""
    keys = ("checks of the role failed", "fatal: [", "Idempotence test failed", "CRITICAL", "ERROR ")
    for key in keys:
        lines = [line.strip() for line in output.splitlines() if key in line]
        if lines:
            return lines[-1][:500]
    return ""


def write_junit(outcomes: list[Outcome], path: Path) -> Path:
    """JUnit XML with one test case per scenario (for GitLab's test report)."""
    suite = ET.Element("testsuite", name="roles", tests=str(len(outcomes)),
                       failures=str(sum(o.status == "failed" for o in outcomes)),
                       skipped=str(sum(o.status == "skipped" for o in outcomes)))
    for o in outcomes:
        case = ET.SubElement(suite, "testcase", classname="molecule", name=o.scenario, time=str(o.seconds))
        if o.reused_from:  # said in the report, never silent
            props = ET.SubElement(case, "properties")
            ET.SubElement(props, "property", name="reused_from", value=o.reused_from)
            ET.SubElement(props, "property", name="key", value=o.key)
            ET.SubElement(case, "system-out").text = o.detail
        if o.status == "failed":
            ET.SubElement(case, "failure", message=o.detail).text = f"log: {o.log}"
        elif o.status == "skipped":
            ET.SubElement(case, "skipped", message=o.detail)
    ET.ElementTree(suite).write(path, encoding="utf-8", xml_declaration=True)
    return path


def run_scenarios(names: list[str] | None = None,
                  vm_preflight: Callable[[], None] | None = None) -> tuple[list[Outcome], Path]:
    """Run the named scenarios (default: all), one after another; returns
    their outcomes and the folder with the logs, results.json and junit.xml.
    ``vm_preflight`` checks the host for the VM platform (the CLI's calls
    :func:`refarch.clouds.vm.preflight`: the clouds drive the tools, not
    the other way): called once, before anything runs, when a VM scenario
    is among ``names``.

    Raises:
        RefarchError: an unknown scenario name (before anything runs), or
            molecule is not installed.
        PreflightError: a VM scenario is asked for and the host lacks what
            the VM platform needs (before anything runs).
    """
    known = scenarios()
    names = names or known
    unknown = [n for n in names if n not in known]
    if unknown:
        raise RefarchError(f"unknown scenario {', '.join(unknown)}: the scenarios are {', '.join(known)}")
    molecule()
    if vm_preflight is not None and any(platform(n) == "vm" for n in names):
        vm_preflight()  # QEMU, mkfs.ext4, cloud-localds, /dev/net/tun: one line before anything is made
    out = runs_dir() / time.strftime("roles-%Y%m%d-%H%M%S")
    out.mkdir(parents=True)
    outcomes = []
    for name in names:
        outcome = run_scenario(name, out)
        outcomes.append(outcome)
        print(f"refarch: roles: {name}: {outcome.status} ({outcome.seconds:.0f} s)"
              + (f": {outcome.detail}" if outcome.detail else ""), flush=True)
    (out / "results.json").write_text(json.dumps([o.__dict__ for o in outcomes], indent=2), encoding="utf-8")
    write_junit(outcomes, out / "junit.xml")
    return outcomes, out
