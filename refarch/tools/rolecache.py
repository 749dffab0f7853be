"""Reuse of role-scenario results: a scenario that passed on this machine in
the last :data:`MAX_AGE_S` seconds, with the same inputs, is not run again;
it is reported as ``reused from run <roles-...> (key <key>, <age>)``, never
silently.

The key (:func:`scenario_key`) is a sha256 over the content of every file
the scenario's verdict depends on besides the suite's own Python code: its
own folder and the suite's Molecule resources, the roles it applies (its own
and, in site.yml's order, those before it: ``prepare`` applies them), the
playbook and Ansible settings, the pins (``descriptors/versions.yml``), the
local profile, the Terraform modules, the node image's and wheelhouse's
inputs (so the image hashes follow), the packaging, the checks Molecule's
verify runs (:data:`VERIFY_TESTS`; the VM scenario's, :data:`VM_TESTS`).
The descriptor files are read where Molecule reads them
(``$REFARCH_DESCRIPTORS``, :data:`refarch.paths.DESCRIPTORS`), and the key
holds the versions of the tools that run the scenario
(:func:`tool_versions`: molecule, ansible-core, podman, Terraform, QEMU).
The suite's code is keyed by what the scenario really ran: every
process of it (the runner, the CLI that create/destroy call, Terraform's
callbacks, the verify's pytest) writes the ``refarch`` modules it loaded
(``REFARCH_LOADED_MODULES``, see ``refarch/__init__.py``), and the record
keeps each one's sha256 (:func:`module_hashes`, with the data files it
reads: the templates with refarch.report.html).  A record is honoured only
while every one of those modules is unchanged: a change to a module no
process of the scenario loaded (the fault cases, the release gate and
comparison, the report) reruns nothing, a change to one it loaded reruns
it.  A module can only start being loaded when one that is loaded changes
(its import), so the recorded set cannot miss one.  A run whose processes
wrote no list, or a list without the CLI and the pytest plugin that every
scenario loads (:data:`ALWAYS_LOADED`), leaves no record.

Records are honoured only on the machine that wrote them (``/etc/machine-id``
and host name) and only while younger than a day: another machine, or the
same one much later (new Debian packages from the mirror), runs the
scenario.  ``REFARCH_ROLES_REUSE=0`` (or ``refarch roles --no-reuse``)
turns reuse off.  Only passed scenarios are recorded.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from pathlib import Path

from ..paths import DESCRIPTORS, ROOT, cache_dir

#: A record older than this (seconds) is not honoured (24 h).
MAX_AGE_S = 24 * 3600
#: site.yml's role order (prepare applies the roles before a scenario's own).
ROLE_ORDER = ["common", "ca_certificates", "ssh_hardening", "time_sync", "gpu", "cluster_ssh", "shared_storage",
              "openmpi", "horovod"]
#: Paths (relative to the checkout) every scenario's verdict depends on.
COMMON_INPUTS = ["descriptors/ansible/site.yml", "descriptors/ansible/ansible.cfg",
                 "descriptors/ansible/molecule/resources", "descriptors/versions.yml",
                 "descriptors/profiles/local.yml", "descriptors/terraform", "descriptors/wheelhouse",
                 "conftest.py", "pyproject.toml", "tox.ini"]
#: Data files a module reads, hashed with it (:func:`module_hashes`): the
#: package's templates are read only through refarch.report.html (its Jinja2
#: environment; refarch.report.mrnote asks it), so they count where a scenario's
#: processes loaded report, and a change to the HTML report reruns no
#: scenario that never rendered one.
MODULE_DATA = {"report.html": "refarch/report/templates"}
#: The checks Molecule's verify runs on the local platform (resources/verify.yml).
VERIFY_TESTS = ["tests/integration/__init__.py", "tests/integration/test_nodes.py",
                "tests/integration/test_cluster.py", "tests/integration/test_gpu.py"]
#: The checks the VM scenario's verify runs (REFARCH_MOLECULE_PYTEST).
VM_TESTS = ["tests/vm"]
#: Modules every scenario's processes load (the CLI of create/destroy, the
#: root conftest's plugin in verify): a list without them is incomplete.
ALWAYS_LOADED = ("cli", "pytest.fixtures")
#: The environment variable naming the file the processes append to.
LOADED_ENV = "REFARCH_LOADED_MODULES"


def machine_id() -> str:
    """``<host name>/<machine id>`` of this machine (``/etc/machine-id``,
    or the boot id where there is none)."""
    for path in ("/etc/machine-id", "/proc/sys/kernel/random/boot_id"):
        try:
            return f"{socket.gethostname()}/{Path(path).read_text(encoding='ascii').strip()}"
        except OSError:
            continue
    return socket.gethostname()


def _descriptors(root: Path, descriptors: Path | None) -> Path:
    """The descriptor tree Molecule reads: ``descriptors``, else
    :data:`DESCRIPTORS` for the checkout itself, else ``root/descriptors``."""
    return descriptors or (DESCRIPTORS if root == ROOT else root / "descriptors")


def scenario_inputs(name: str, root: Path = ROOT, descriptors: Path | None = None) -> list[Path]:
    """The files and folders scenario ``name``'s verdict depends on besides
    the suite's Python modules (module docstring); a scenario that is not a
    role (nfs, on virtual machines) depends on every role and on the VM
    checks (:data:`VM_TESTS`).  Paths under ``descriptors/`` are taken from
    the descriptor tree Molecule reads (:func:`_descriptors`)."""
    tree = _descriptors(root, descriptors)
    roles = ROLE_ORDER[:ROLE_ORDER.index(name) + 1] if name in ROLE_ORDER else ROLE_ORDER
    paths = [f"descriptors/ansible/molecule/{name}", *(f"descriptors/ansible/roles/{r}" for r in roles),
             *COMMON_INPUTS, *VERIFY_TESTS, *([] if name in ROLE_ORDER else VM_TESTS)]
    return [tree / p.removeprefix("descriptors/") if p.startswith("descriptors/") else root / p for p in paths]


def tool_versions() -> dict[str, str]:
    """The versions of the tools a scenario runs: molecule and ansible-core
    (the distributions of this Python environment, where the runner starts
    Molecule), podman, Terraform and QEMU (their version lines, asked once
    per process); ``"absent"`` for one that is not there."""
    from importlib import metadata

    from .hostcmds import version_line

    out = {}
    for dist in ("molecule", "ansible-core"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "absent"
    return {**out, "podman": version_line(("podman", "--version")), "terraform": version_line(("terraform", "version")),
            "qemu": version_line(("qemu-system-x86_64", "--version"))}


def scenario_key(name: str, root: Path = ROOT, descriptors: Path | None = None,
                 tools: dict[str, str] | None = None) -> str:
    """sha256 (hex) over the tools' versions (``tools``, default
    :func:`tool_versions`) and the relative path and bytes of every file of
    :func:`scenario_inputs` (``__pycache__`` and ``*.pyc`` left out), in
    sorted order; a missing input counts as its name alone.  A descriptor
    file's path is ``descriptors/...`` wherever its tree lies."""
    tree = _descriptors(root, descriptors)

    def label(path: Path) -> str:
        if path.is_relative_to(tree):
            return "descriptors/" + path.relative_to(tree).as_posix()
        return path.relative_to(root).as_posix()

    digest = hashlib.sha256(name.encode())
    digest.update(json.dumps(tools if tools is not None else tool_versions(), sort_keys=True).encode())
    files: list[Path] = []
    for path in scenario_inputs(name, root, tree):
        if path.is_dir():
            files += [p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                      and p.suffix != ".pyc"]
        elif path.is_file():
            files.append(path)
        else:
            digest.update(f"missing:{label(path)}".encode())
    for path in sorted(files, key=label):
        digest.update(label(path).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _record_path(name: str, key: str) -> Path:
    return cache_dir() / "roles" / f"{name}-{key[:16]}.json"


def enabled() -> bool:
    """False when ``REFARCH_ROLES_REUSE=0``."""
    return os.environ.get("REFARCH_ROLES_REUSE", "1") != "0"


def module_path(name: str, root: Path = ROOT) -> Path:
    """The file of module ``refarch.<name>`` (``name`` dotted below the
    package, as :data:`LOADED_ENV`'s file lists it): ``refarch/a/b.py``, or
    a sub-package's ``refarch/a/__init__.py``."""
    path = root / "refarch" / Path(*name.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_name(path.name + ".py")


def module_name(rel: str) -> str:
    """The inverse of :func:`module_path`: ``refarch/clouds/local.py`` ->
    ``clouds.local``; ``refarch/clouds/__init__.py`` -> ``clouds``."""
    parts = list(Path(rel).with_suffix("").parts[1:])
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def module_hashes(names, root: Path = ROOT) -> dict[str, str]:
    """``{"refarch/<path>.py": sha256 hex}`` of the package's modules
    ``names`` (an iterable of dotted module names as :data:`LOADED_ENV`'s
    file lists them), each over the module and the data files it reads
    (:data:`MODULE_DATA`, in sorted order); a module without a file counts
    as ``"missing"``."""
    hashes = {}
    for name in sorted(set(names)):
        path = module_path(name, root)
        rel = str(path.relative_to(root))
        if not path.is_file():
            hashes[rel] = "missing"
            continue
        digest = hashlib.sha256(path.read_bytes())
        files = []
        if name in MODULE_DATA and (root / MODULE_DATA[name]).is_dir():
            files = sorted(p for p in (root / MODULE_DATA[name]).rglob("*") if p.is_file())
        for extra in files:
            digest.update(b"\0" + str(extra.relative_to(root)).encode() + b"\0" + extra.read_bytes())
        hashes[rel] = digest.hexdigest()
    return hashes


def loaded_modules(path: Path) -> set[str]:
    """The module names the scenario's processes wrote to ``path`` (empty
    when none did)."""
    try:
        return {line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()}
    except OSError:
        return set()


def record_modules(listed: set[str], runner: set[str], root: Path = ROOT) -> dict[str, str]:
    """:func:`module_hashes` of the modules the scenario's processes
    ``listed`` and those the ``runner`` process loaded.

    Raises:
        ValueError: ``listed`` lacks one of :data:`ALWAYS_LOADED` (a process
            did not write its list: a record would be unsound).
    """
    missing = [m for m in ALWAYS_LOADED if m not in listed]
    if missing:
        raise ValueError(f"the scenario's processes did not list {', '.join(missing)}: no reuse record")
    return module_hashes(listed | runner, root)


def check(name: str, key: str, now: float | None = None, root: Path = ROOT) -> tuple[dict | None, str]:
    """``(record, "")`` when a pass of scenario ``name`` with ``key`` on this
    machine, younger than :data:`MAX_AGE_S`, ran only modules that are
    unchanged; else ``(None, why)``, ``why`` empty when there is no record
    at all.  The record holds ``run`` (the roles run folder's name),
    ``key``, ``machine``, ``passed_at`` (epoch seconds), ``seconds`` (how
    long it ran), ``log`` and ``modules`` (:func:`module_hashes`)."""
    if not enabled():
        return None, ""
    try:
        record = json.loads(_record_path(name, key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, ""
    now = time.time() if now is None else now
    if record.get("key") != key:
        return None, ""
    if record.get("machine") != machine_id():
        return None, f"its pass in run {record.get('run')} was on another machine"
    if not 0 <= now - float(record.get("passed_at", 0)) <= MAX_AGE_S:
        return None, f"its pass in run {record.get('run')} is older than {MAX_AGE_S // 3600} h"
    recorded = record.get("modules") or {}
    if not recorded:
        return None, f"its pass in run {record.get('run')} recorded no modules"
    current = module_hashes([module_name(rel) for rel in recorded], root)
    changed = sorted(rel + (f" (or {MODULE_DATA[module_name(rel)]}/)" if module_name(rel) in MODULE_DATA else "")
                     for rel, digest in recorded.items() if current.get(rel) != digest)
    if changed:
        return None, f"{', '.join(changed)} changed since its pass in run {record.get('run')}"
    return record, ""


def lookup(name: str, key: str, now: float | None = None, root: Path = ROOT) -> dict | None:
    """The record :func:`check` honours, else None."""
    return check(name, key, now, root)[0]


def remember(name: str, key: str, run: str, seconds: float, log: str, modules: dict[str, str]) -> Path:
    """Record that scenario ``name`` passed with ``key`` in roles run ``run``,
    having loaded ``modules`` (:func:`module_hashes`).

    Raises:
        ValueError: ``modules`` lacks one of :data:`ALWAYS_LOADED` (the
            processes' list is incomplete: a record would be unsound).
    """
    listed = {module_name(rel) for rel in modules}
    missing = [m for m in ALWAYS_LOADED if m not in listed]
    if missing:
        raise ValueError(f"the scenario's processes did not list {', '.join(missing)}: no reuse record")
    path = _record_path(name, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"scenario": name, "key": key, "machine": machine_id(), "run": run, "passed_at": time.time(),
              "seconds": seconds, "log": log, "modules": modules}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2), encoding="utf-8")
    tmp.replace(path)
    return path


def describe(record: dict, now: float | None = None) -> str:
    """``reused from run roles-... (key 1a2b3c4d5e6f, passed 3.2 h ago in 138 s)``."""
    age_h = ((time.time() if now is None else now) - float(record["passed_at"])) / 3600
    return (f"reused from run {record['run']} (key {record['key'][:12]}, passed {age_h:.1f} h ago "
            f"in {record['seconds']:.0f} s)")
