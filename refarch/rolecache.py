"""Reuse of role-scenario results: a scenario that passed on this machine in
the last :data:`MAX_AGE_S` seconds, with the same inputs, is not run again;
it is reported as ``reused from run <roles-...> (key <key>, <age>)``, never
silently.

The key (:func:`scenario_key`) is a sha256 over the content of every file
the scenario's verdict depends on: its own folder and the suite's Molecule
resources, the roles it applies (its own and, in site.yml's order, those
before it: ``prepare`` applies them), the playbook and Ansible settings, the
pins (``descriptors/versions.yml``), the local profile, the Terraform
modules, the node image's and wheelhouse's inputs (so the image hashes
follow), the packaging, the checks Molecule's verify runs
(:data:`VERIFY_TESTS`, ``tests/vm``) and the suite's code those and the
scenario runner load: the ``refarch`` modules in the import closure
(:func:`suite_modules`) of the runner, the CLI that create/destroy call,
the root conftest's plugins and the checks.  A change to any of them is a
new key; a change to a module none of them imports (the fault cases, the
release gate, the report) is not.

Records are honoured only on the machine that wrote them (``/etc/machine-id``
and host name) and only while younger than a day: another machine, or the
same one much later (new Debian packages from the mirror), runs the
scenario.  ``REFARCH_ROLES_REUSE=0`` (or ``refarch roles --no-reuse``)
turns reuse off.  Only passed scenarios are recorded.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import socket
import time
from pathlib import Path

from .paths import ROOT, cache_dir

#: A record older than this (seconds) is not honoured (24 h).
MAX_AGE_S = 24 * 3600
#: site.yml's role order (prepare applies the roles before a scenario's own).
ROLE_ORDER = ["common", "ca_certificates", "ssh_hardening", "time_sync", "gpu", "cluster_ssh", "shared_storage",
              "openmpi", "horovod"]
#: Paths (relative to the checkout) every scenario's verdict depends on.
COMMON_INPUTS = ["descriptors/ansible/site.yml", "descriptors/ansible/ansible.cfg",
                 "descriptors/ansible/molecule/resources", "descriptors/versions.yml",
                 "descriptors/profiles/local.yml", "descriptors/terraform", "descriptors/wheelhouse",
                 "tests/vm", "conftest.py", "pyproject.toml", "tox.ini"]
#: The checks Molecule's verify runs on the local platform (resources/verify.yml).
VERIFY_TESTS = ["tests/integration/__init__.py", "tests/integration/test_nodes.py",
                "tests/integration/test_cluster.py"]
#: Modules a scenario's run loads by name rather than by import: the runner
#: (refarch roles), the CLI that resources/create.yml and destroy.yml call
#: (python -m refarch) and the root conftest's pytest plugins.
ENTRY_MODULES = ["roles", "cli", "__main__", "__init__"]


def _refarch_imports(path: Path, known: set[str]) -> set[str]:
    """The ``refarch`` modules (names of :data:`known`) that the Python file
    ``path`` imports anywhere in its body, relative or absolute."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom):
            parts = (node.module or "").split(".")
            if node.level == 1 or parts[0] == "refarch":
                sub = parts[0] if node.level == 1 else (parts[1] if len(parts) > 1 else "")
                found |= {sub} if sub else {alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("refarch.")}
    return found & known


def suite_modules(root: Path = ROOT) -> list[Path]:
    """The ``refarch/*.py`` files a role scenario's run can load: the import
    closure (static, every ``import`` in a module's body, functions
    included) of :data:`ENTRY_MODULES`, the root conftest's
    ``pytest_plugins`` and the refarch imports of :data:`VERIFY_TESTS` and
    ``tests/vm``; sorted paths."""
    package = root / "refarch"
    known = {p.stem for p in package.glob("*.py")}
    todo = [m for m in ENTRY_MODULES if m in known]
    conftest = root / "conftest.py"
    if conftest.is_file():
        todo += [m for m in re.findall(r"refarch\.(\w+)", conftest.read_text(encoding="utf-8")) if m in known]
    for test in [*(root / t for t in VERIFY_TESTS), *sorted((root / "tests/vm").glob("*.py"))]:
        if test.is_file():
            todo += sorted(_refarch_imports(test, known))
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += sorted(_refarch_imports(package / f"{name}.py", known) - seen)
    return sorted(package / f"{m}.py" for m in seen)


def machine_id() -> str:
    """``<host name>/<machine id>`` of this machine (``/etc/machine-id``,
    or the boot id where there is none)."""
    for path in ("/etc/machine-id", "/proc/sys/kernel/random/boot_id"):
        try:
            return f"{socket.gethostname()}/{Path(path).read_text(encoding='ascii').strip()}"
        except OSError:
            continue
    return socket.gethostname()


def scenario_inputs(name: str, root: Path = ROOT) -> list[Path]:
    """The files and folders scenario ``name``'s verdict depends on (module
    docstring); a scenario that is not a role (cloud-init, nfs) depends on
    every role."""
    roles = ROLE_ORDER[:ROLE_ORDER.index(name) + 1] if name in ROLE_ORDER else ROLE_ORDER
    paths = [f"descriptors/ansible/molecule/{name}", *(f"descriptors/ansible/roles/{r}" for r in roles),
             *COMMON_INPUTS, *VERIFY_TESTS]
    return [root / p for p in paths] + suite_modules(root)


def scenario_key(name: str, root: Path = ROOT) -> str:
    """sha256 (hex) over the relative path and bytes of every file of
    :func:`scenario_inputs` (``__pycache__`` and ``*.pyc`` left out), in
    sorted order; a missing input counts as its name alone."""
    digest = hashlib.sha256(name.encode())
    files: list[Path] = []
    for path in scenario_inputs(name, root):
        if path.is_dir():
            files += [p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                      and p.suffix != ".pyc"]
        elif path.is_file():
            files.append(path)
        else:
            digest.update(f"missing:{path.relative_to(root)}".encode())
    for path in sorted(files):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _record_path(name: str, key: str) -> Path:
    return cache_dir() / "roles" / f"{name}-{key[:16]}.json"


def enabled() -> bool:
    """False when ``REFARCH_ROLES_REUSE=0``."""
    return os.environ.get("REFARCH_ROLES_REUSE", "1") != "0"


def lookup(name: str, key: str, now: float | None = None) -> dict | None:
    """The record of a pass of scenario ``name`` with ``key`` on this machine
    younger than :data:`MAX_AGE_S`, else None.  The record holds ``run``
    (the roles run folder's name), ``key``, ``machine``, ``passed_at``
    (epoch seconds), ``seconds`` (how long it ran) and ``log``."""
    if not enabled():
        return None
    try:
        record = json.loads(_record_path(name, key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    now = time.time() if now is None else now
    if record.get("key") != key or record.get("machine") != machine_id():
        return None
    if not 0 <= now - float(record.get("passed_at", 0)) <= MAX_AGE_S:
        return None
    return record


def remember(name: str, key: str, run: str, seconds: float, log: str) -> Path:
    """Record that scenario ``name`` passed with ``key`` in roles run ``run``."""
    path = _record_path(name, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"scenario": name, "key": key, "machine": machine_id(), "run": run, "passed_at": time.time(),
              "seconds": seconds, "log": log}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2), encoding="utf-8")
    tmp.replace(path)
    return path


def describe(record: dict, now: float | None = None) -> str:
    """``reused from run roles-... (key 1a2b3c4d5e6f, passed 3.2 h ago in 138 s)``."""
    age_h = ((time.time() if now is None else now) - float(record["passed_at"])) / 3600
    return (f"reused from run {record['run']} (key {record['key'][:12]}, passed {age_h:.1f} h ago "
            f"in {record['seconds']:.0f} s)")
