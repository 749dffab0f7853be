"""What the tools the suite drives run on the host, from a trace.

The host-command table (``ci/host-commands.tsv``) lists what the suite's own
code calls; the tools it drives (gitlab-ci-local, Molecule, Ansible,
ansible-lint, checkov, npm, tox) call host programs of their own, which no
reading of the suite's code finds (gitlab-ci-local's shell executor runs
``rsync``).  :func:`record` runs a command under ``strace -f -e
trace=execve`` and keeps every program it started outside the checkout's own
environments, with the Debian package that provides it and, when that
package is neither in the table nor in a bare Debian root, the table package
that depends on it.  The recordings live in ``tests/unit/data/traces/`` and
``tests/unit/test_hostcmds.py`` checks them against the table: a program a
tool runs whose package the bootstrap would not install fails, naming the
tool, the program and the package.

Re-record after a tool's version changes: ``python -m refarch.tools.hosttrace NAME
-- COMMAND...`` (needs strace; run as root on a machine the bootstrap set up).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..paths import ROOT
from . import hostcmds

TRACES = ROOT / "tests" / "unit" / "data" / "traces"
#: The packages of a bare Debian root (debootstrap --variant=minbase), as
#: ``dpkg-query -W`` lists them in the fresh-machine image.
MINBASE = TRACES / "minbase-packages.txt"
#: Programs under these folders belong to the checkout's own environments
#: (virtualenvs, npm packages, build folders), not to the host.
_OWN = (".venv/", ".tox/", "node_modules/", ".gitlab-ci-local/", "/tmp/", "/.cache/")
def _own_python() -> tuple[str, ...]:
    """Where this machine's own Python lives when it is not Debian's (pyenv
    or asdf: ``<root>/versions/<version>``): the table's python3 row stands
    for it.  Debian's Python (base prefix /usr) adds nothing."""
    roots = [str(Path.home() / ".pyenv")]
    base = Path(sys.base_prefix)
    if base.parent.name == "versions":
        roots.append(str(base.parent.parent))
    return tuple(roots)


_PYTHON = _own_python()
#: Programs a tool only probes for and does without: a bare Debian root has
#: none of them and every stage passes there (tests/fresh).  Name -> who probes.
PROBED = {"docker": "gitlab-ci-local and tool-version probes look for a container engine",
          "rustc": "a Python build backend looks for a Rust compiler while installing packages",
          "lsb_release": "Python's distro module reads the distribution's name with it when present"}


@dataclass(frozen=True)
class Program:
    """A host program a traced tool started: its ``path``, the Debian
    ``package`` that provides it ("" when none does) and ``via``, the table
    package whose dependencies bring it ("" when not needed)."""

    path: str
    package: str
    via: str = ""


_EXEC_START = re.compile(r'^(\d+)\s+execve\("([^"]+)",')
_EXEC_DONE = re.compile(r'^(\d+)\s+(?:execve\(.*|<\.\.\. execve resumed>.*)\)\s*=\s*0\s*$')
_FORK = re.compile(r'^(\d+)\s+(?:(?:clone3?|v?fork)\(.*|<\.\.\. (?:clone3?|v?fork) resumed>.*)\)\s*=\s*(\d+)')
#: Processes whose descendants run inside a container (the node's own
#: systemd, sshd, Python): what they start is the node image's, not the host's.
_CONTAINER_PARENTS = ("conmon", "runc")


def executed(trace: str) -> list[str]:
    """Paths of the programs a ``strace -f -e trace=execve,clone,clone3,fork,vfork``
    output started successfully on the host, each once, in order of first
    start: without the checkout's own environments, this machine's Python,
    and anything started below a container runtime (:data:`_CONTAINER_PARENTS`)."""
    parent: dict[str, str] = {}
    program: dict[str, str] = {}
    pending: dict[str, str] = {}
    seen: dict[str, None] = {}

    root = ""

    def in_container(pid: str) -> bool:
        # Inside a container's PID namespace clone() returns the namespace's
        # pid, so a traced process whose creation the trace never showed
        # runs in a container; the container's first process is below runc.
        if pid != root and pid not in parent:
            return True
        pid = parent.get(pid, "")
        while pid:
            if Path(program.get(pid, "")).name in _CONTAINER_PARENTS:
                return True
            pid = parent.get(pid, "")
        return False

    for line in trace.splitlines():
        fork = _FORK.match(line)
        if fork:
            parent[fork.group(2)] = fork.group(1)
            continue
        start = _EXEC_START.match(line)
        if start:
            pending[start.group(1)] = start.group(2)
            root = root or start.group(1)
        done = _EXEC_DONE.match(line)
        if not done or done.group(1) not in pending:
            continue
        pid, path = done.group(1), pending.pop(done.group(1))
        if in_container(pid):
            continue
        program[pid] = path
        if (path.startswith("/") and not any(own in path for own in _OWN)
                and not path.startswith((str(ROOT), *_PYTHON))):
            seen.setdefault(path, None)
    return list(seen)


def load(name: str, folder: Path = TRACES) -> list[Program]:
    """The recorded programs of trace ``name`` (``<folder>/<name>.tsv``)."""
    rows = []
    for line in (folder / f"{name}.tsv").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            path, package, via = (line.split("\t") + ["", ""])[:3]
            rows.append(Program(path, package, via))
    return rows


def minbase_packages(path: Path = MINBASE) -> set[str]:
    """The package names of the bare Debian root (:data:`MINBASE`)."""
    return {line.strip() for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")}


def unprovided(programs: list[Program], table: list[hostcmds.HostCommand], minbase: set[str]) -> list[str]:
    """``PATH (package PKG)`` for every program whose package the bootstrap
    would not install: not a package of ``table``, not in the bare root
    (``minbase``), and not brought by a table package's dependencies
    (``via``); a program no package provides must be a table command."""
    packages = {row.package for row in table}
    commands = {row.command for row in table}
    out = []
    for p in programs:
        if Path(p.path).name in PROBED:
            continue
        if not p.package:
            if Path(p.path).name not in commands:
                out.append(f"{p.path} (no Debian package: not in the table)")
        elif p.package not in packages and p.package not in minbase and p.via not in packages:
            out.append(f"{p.path} (package {p.package}" + (f", via {p.via}" if p.via else "") + ")")
    return out


def _package_of(path: str) -> str:
    # Debian 12 merged /bin into /usr/bin, but dpkg knows each file by the
    # path its package ships (/bin/bash, /usr/bin/git): try both.
    merged = re.sub(r"^/usr/(s?bin)/", r"/\1/", path) if path.startswith("/usr/") else "/usr" + path
    for candidate in (path, merged, str(Path(path).resolve())):
        r = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True, check=False)
        # "dash: /bin/sh" after "diversion by dash from: /bin/sh" lines.
        owners = [line.split(":")[0].strip() for line in r.stdout.splitlines()
                  if ":" in line and not line.startswith("diversion ")]
        if r.returncode == 0 and owners:
            return owners[0]
    return ""


def _closure(package: str) -> set[str]:
    # Not --installed: it drops virtual packages (podman's container network
    # stack is <container-network-stack>, provided by containernetworking-plugins).
    r = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
                        "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances", package],
                       capture_output=True, text=True, check=False)
    return {line.strip() for line in r.stdout.splitlines() if line and not line.startswith((" ", "<"))}


def record(name: str, command: list[str], folder: Path = TRACES) -> Path:
    """Run ``command`` under strace and write ``<folder>/<name>.tsv``.

    Raises:
        subprocess.CalledProcessError: the traced command failed.
    """
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        subprocess.run(["strace", "-f", "-qq", "-e", "trace=execve,clone,clone3,fork,vfork", "-e", "signal=none",
                        "-o", out.name, *command],
                       check=True, cwd=ROOT)
        paths = executed(Path(out.name).read_text(encoding="utf-8", errors="replace"))
    return write(name, " ".join(command), paths, folder)


def write(name: str, command: str, paths: list[str], folder: Path = TRACES) -> Path:
    """``<folder>/<name>.tsv``: each of ``paths`` with its Debian package
    and, where needed, the table package whose dependencies bring it."""
    table = hostcmds.load_table()
    minbase = minbase_packages()
    closures = {row.package: _closure(row.package) for row in table if row.package != "-"}
    lines = [f"# {name}: host programs started by `{command}` (refarch.tools.hosttrace)",
             "# path\tDebian package\ttable package whose dependencies bring it"]
    for path in paths:
        package = _package_of(path)
        via = ""
        if package and package not in closures and package not in minbase:
            via = next((p for p, deps in closures.items() if package in deps), "")
        lines.append(f"{path}\t{package}\t{via}")
    target = folder / f"{name}.tsv"
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) < 3 or args[1] != "--":
        sys.exit("usage: python -m refarch.tools.hosttrace NAME -- COMMAND...")
    print(record(args[0], args[2:]))
