"""The toolset image: everything a user or a GitLab job needs to run the
suite's cluster-free stages (lint, policy, unit, gate) and to deploy the
architecture by hand, in one podman image.

It holds the Debian packages of the host commands those stages call (rows
of ``ci/host-commands.tsv``), the suite's locked Python dependencies
(``ci/toolset/requirements.txt``, checkov in a virtualenv of its own from
``ci/toolset/checkov.txt``), the Ansible collections the descriptors use (the
full ``ansible`` package bundles them), the host's checked ``terraform`` and
this checkout installed editable under ``/opt/refarch/src``.  The base is the
bare Debian root of :func:`refarch.tools.debootstrap.ensure_fresh_image`
(debootstrap, as the node image); ``ci/toolset/Containerfile`` adds the rest with
``podman build``, pip installing offline from wheels downloaded on the host
(``<cache>/toolset/wheels/<key>``), so no registry is needed.

The tag is ``localhost/refarch-toolset:<architecture version>-<12 hex>``, the
hex a sha256 of every input (:func:`toolset_inputs`): a changed pin, lock,
package, Terraform binary or suite file gives a new tag, and an existing tag
is not built again.  Regenerate the locks after changing pyproject.toml's
dependencies::

    uv pip compile pyproject.toml ci/toolset/build.in --extra lint --extra compare \\
        --python-version 3.11 --python-platform x86_64-manylinux_2_36 -o ci/toolset/requirements.txt
    uv pip compile ci/toolset/checkov.in \\
        --python-version 3.11 --python-platform x86_64-manylinux_2_36 -o ci/toolset/checkov.txt

:func:`stage_commands` reads tox.ini's commands of an environment so that a
job in the image runs exactly what ``tox -e ENV`` runs, with the image's
tools and without tox (``refarch toolset stage ENV``).
"""

from __future__ import annotations

import configparser
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .. import proc, version
from ..errors import RefarchError
from ..paths import ROOT, cache_dir, cache_lock
from . import hostcmds, providers
from .debootstrap import FRESH_REPO, IMAGE_FORMAT, ensure_fresh_image

TOOLSET_REPO = "localhost/refarch-toolset"
#: Bump when the way the image is assembled changes (part of the tag).
TOOLSET_FORMAT = 1
#: Relative to the checkout: the Containerfile and the lock files.
TOOLSET_DIR = Path("ci") / "toolset"
LOCKS = ("requirements.txt", "checkov.txt")
#: Stages of ci/host-commands.tsv whose packages the image holds.
STAGES = ("bootstrap", "lint")
#: Further commands of the table: Ansible reaching nodes by hand (ssh,
#: sftp, ansible.posix.synchronize's rsync), run key pairs, and nmap (the
#: unit stage parses recorded scans with python-nmap, which needs the binary).
COMMANDS = ("ssh", "ssh-keygen", "sftp", "rsync", "flock", "nmap")
#: Debian packages not behind a command of the table: virtualenvs
#: (ensurepip), TLS trust for PyPI and the OpenStack API.
EXTRA_PACKAGES = ("python3-venv", "ca-certificates")
#: Terraform versions the descriptors accept (their ``required_version``:
#: local >= 1.4, openstack >= 1.5, both < 2).
TERRAFORM_MIN, TERRAFORM_MAX = (1, 5, 0), (2, 0, 0)


def debian_packages(table: list[hostcmds.HostCommand] | None = None) -> list[str]:
    """The Debian packages of the image: those of the table's rows of
    :data:`STAGES` and :data:`COMMANDS` (rows marked ``-`` are not from
    Debian), plus :data:`EXTRA_PACKAGES`; sorted, no duplicates."""
    rows = table if table is not None else hostcmds.load_table()
    wanted = {row.package for row in rows if row.package != "-"
              and (set(STAGES) & set(row.stages) or row.command in COMMANDS)}
    return sorted(wanted | set(EXTRA_PACKAGES))


def terraform_binary() -> tuple[Path, str]:
    """The host's ``terraform`` (path, version), checked as the preflight
    checks it: on PATH, and within the descriptors' required range.

    Raises:
        RefarchError: terraform is missing, does not run, or its version is
            outside [:data:`TERRAFORM_MIN`, :data:`TERRAFORM_MAX`).
    """
    found = shutil.which("terraform")
    if not found:
        raise RefarchError("terraform is not on PATH: the toolset image copies the host's checked binary "
                           "(HashiCorp's release >= 1.5, < 2)")
    found_version = version.tool_versions()["terraform"]
    if found_version == "absent":
        raise RefarchError(f"{found}: `terraform version -json` failed; cannot check the binary")
    numbers = tuple(int(n) for n in re.findall(r"\d+", found_version)[:3])
    if not TERRAFORM_MIN <= numbers < TERRAFORM_MAX:
        raise RefarchError(f"{found} is Terraform {found_version}; the descriptors need >= 1.5, < 2")
    return Path(found).resolve(), found_version


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def source_files(root: Path = ROOT) -> list[str]:
    """The checkout's files the image carries (relative paths, sorted): what
    git lists (tracked, and untracked but not ignored) except run
    directories; outside git every file but ``__pycache__``, ``.git``,
    ``.tox``, ``.venv`` and ``runs``."""
    skip = ("runs", ".git", ".tox", ".venv", "__pycache__", "node_modules")
    try:
        listed = version.git("ls-files", "-co", "--exclude-standard", "-z", cwd=root, timeout_s=120).split("\0")
        names = {n for n in listed if n and (root / n).is_file()}
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        names = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    return sorted(n for n in names if not set(n.split("/")) & set(skip))


def snapshot_sources(root: Path = ROOT) -> dict[str, tuple[bytes, int]]:
    """The content and permission bits of every file of
    :func:`source_files` (relative path -> (bytes, mode), sorted by path),
    read once: the image's tag is hashed from, and its suite layer built
    from, this one reading, even while other runs in the same checkout
    write and remove files (a file listed by git that is gone when read is
    left out).  About 3 MB for this checkout."""
    out = {}
    for name in source_files(root):
        try:
            with open(root / name, "rb") as fh:
                out[name] = (fh.read(), os.fstat(fh.fileno()).st_mode & 0o777)
        except FileNotFoundError:
            continue
    return out


def toolset_inputs(root: Path = ROOT, terraform: tuple[str, str] | None = None,
                   sources: dict[str, tuple[bytes, int]] | None = None) -> dict:
    """What identifies an image (a JSON-able dict): the architecture
    version, the descriptors' pins (``descriptors/versions.yml``), the
    dependency pins of pyproject.toml, the lock files and Containerfile,
    the Debian packages, the base image, the Terraform binary (``terraform``:
    (version, sha256); default: the host's, checked) and a sha256 of every
    file of the suite the image carries (``sources``, as
    :func:`snapshot_sources` returns; default: read now).

    Raises:
        RefarchError: the version file, the pins or a lock file cannot be
            read; terraform as :func:`terraform_binary`.
    """
    if terraform is None:
        path, tf_version = terraform_binary()
        terraform = (tf_version, _sha256_file(path))
    try:
        read = {name: (root / name).read_text(encoding="utf-8") for name in
                ("descriptors/versions.yml", "pyproject.toml", *(str(TOOLSET_DIR / f) for f in
                                                                 (*LOCKS, "Containerfile")))}
    except OSError as exc:
        raise RefarchError(f"{exc.filename}: cannot read a toolset input ({exc.strerror})") from None
    suite = hashlib.sha256()
    for name, (data, _mode) in (sources if sources is not None else snapshot_sources(root)).items():
        suite.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return {
        "version": version.architecture_version(root / "descriptors" / "VERSION"),
        "versions": read["descriptors/versions.yml"],
        "dependencies": _dependency_pins(read["pyproject.toml"]),
        "locks": {f: read[str(TOOLSET_DIR / f)] for f in LOCKS},
        "containerfile": read[str(TOOLSET_DIR / "Containerfile")],
        "packages": debian_packages(hostcmds.load_table(root / "ci" / "host-commands.tsv")),
        "base": _base_tag(read["descriptors/versions.yml"]),
        "terraform": list(terraform),
        "suite": suite.hexdigest(),
        "format": TOOLSET_FORMAT,
    }


def _dependency_pins(pyproject: str) -> dict:
    """pyproject.toml's ``dependencies`` and ``optional-dependencies``
    (tomllib, Python >= 3.11; before that the whole file's text)."""
    try:
        import tomllib
    except ImportError:  # pragma: no cover - Python 3.10
        return {"pyproject": pyproject}
    project = tomllib.loads(pyproject).get("project", {})
    return {"dependencies": project.get("dependencies", []),
            "optional": project.get("optional-dependencies", {})}


def _base_tag(versions_yml: str) -> str:
    """The bare Debian image's tag (as
    :func:`refarch.tools.debootstrap.ensure_fresh_image` names it)."""
    suite = re.search(r"^debian_suite:\s*(\S+)", versions_yml, flags=re.M)
    return f"{FRESH_REPO}:{suite.group(1) if suite else 'bookworm'}-{IMAGE_FORMAT}"


def toolset_tag(inputs: dict | None = None) -> str:
    """``localhost/refarch-toolset:<architecture version>-<12 hex chars of
    the inputs' sha256>``.

    Raises:
        RefarchError: as :func:`toolset_inputs`.
    """
    inputs = inputs or toolset_inputs()
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()
    return f"{TOOLSET_REPO}:{inputs['version']}-{digest[:12]}"


def require_podman() -> None:
    """Raises RefarchError (one line) when podman is not on PATH."""
    if not shutil.which("podman"):
        raise RefarchError("podman is not on PATH: the toolset image is built with it "
                           "(apt-get install podman runc; ci/bootstrap.sh local installs both)")


def ensure_toolset(log: Path, force: bool = False, timeout_s: float = 2400) -> tuple[str, bool]:
    """Build the toolset image unless its tag exists (or ``force``: build
    again, podman's layer cache off); return (tag, whether it was built).

    Cold: about 6-10 minutes on 2 cores (the bare Debian root if missing,
    about 150 MB of wheels downloaded once, apt and pip in the build);
    warm: nothing; a change of the suite's files only: the last layer.
    ``timeout_s`` is in seconds, per step (wheel download, podman build).

    Raises:
        RefarchError: podman or terraform is missing or unfit (one line).
        CommandError: debootstrap, pip or podman build failed (output in ``log``).
        PhaseTimeout: a step ran past ``timeout_s``.
    """
    require_podman()
    sources = snapshot_sources()
    inputs = toolset_inputs(sources=sources)
    tag = toolset_tag(inputs)
    if not force and toolset_exists(tag):
        return tag, False
    with cache_lock("toolset"):
        if not force and toolset_exists(tag):  # built by a concurrent run meanwhile
            return tag, False
        base = ensure_fresh_image(log)
        wheels = ensure_wheels(log, timeout_s)
        work = Path(tempfile.mkdtemp(prefix="toolset-", dir=cache_dir()))
        try:
            _context(work, terraform_binary()[0], sources)
            proc.run(["podman", "build", *proc.PODMAN_OPTS, *(["--no-cache"] if force else []),
                      "--volume", f"{wheels}:/wheels:ro",
                      "--build-arg", f"BASE={base}", "--build-arg", f"PACKAGES={' '.join(inputs['packages'])}",
                      "--label", f"refarch.tools.toolset.version={inputs['version']}",
                      "--file", str(work / "Containerfile"), "--tag", tag, str(work)],
                     timeout_s=timeout_s, log=log, stream=True)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return tag, True


def toolset_exists(tag: str) -> bool:
    """True when podman's storage holds ``tag``."""
    return proc.run(["podman", "image", "exists", tag], timeout_s=60, check=False).returncode == 0


def _context(work: Path, terraform: Path, sources: dict[str, tuple[bytes, int]]) -> None:
    """The build context in ``work``: Containerfile, locks, terraform, the
    Terraform providers' mirror (``terraform-providers/``), and src/ written from ``sources`` (the snapshot the tag was hashed from,
    with its permission bits, so that scripts stay executable)."""
    for name in (*LOCKS, "Containerfile"):
        shutil.copy(ROOT / TOOLSET_DIR / name, work / name)
    shutil.copy(terraform, work / "terraform")
    # The pinned providers, as the host's mirror holds them (built if missing).
    shutil.copytree(providers.ensure_providers(), work / "terraform-providers")
    for name, (data, mode) in sources.items():
        target = work / "src" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(mode)


def wheels_key(root: Path = ROOT) -> str:
    """16 hex chars of the lock files' sha256: the wheel folder's name."""
    digest = hashlib.sha256()
    for name in LOCKS:
        digest.update((root / TOOLSET_DIR / name).read_bytes())
    return digest.hexdigest()[:16]


def ensure_wheels(log: Path, timeout_s: float = 1800) -> Path:
    """``<cache>/toolset/wheels/<key>``: a wheel of every line of each lock
    file (``pip wheel --no-deps``: downloaded, or built from an sdist), made
    once per lock content with this Python's pip and the host's pip
    settings (index, certificates); pip's own cache is ``<cache>/toolset/pip``.

    Raises:
        CommandError: pip failed (its output is in ``log``).
        PhaseTimeout: pip ran past ``timeout_s`` seconds.
    """
    final = cache_dir() / "toolset" / "wheels" / wheels_key()
    if (final / ".complete").is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="build-", dir=final.parent))
    try:
        for name in LOCKS:  # one pip each: the two locks pin shared libraries differently
            proc.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-r", str(ROOT / TOOLSET_DIR / name),
                      "-w", str(work)], timeout_s=timeout_s, log=log,
                     env={"PIP_CACHE_DIR": str(cache_dir() / "toolset" / "pip")})
        (work / ".complete").write_text("", encoding="utf-8")
        shutil.rmtree(final, ignore_errors=True)
        work.rename(final)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return final


def stage_commands(env: str, posargs: list[str] | None = None, tox_ini: Path | None = None,
                   root: Path = ROOT) -> tuple[list[list[str]], dict[str, str]]:
    """tox.ini's ``commands`` of ``[testenv:ENV]`` as argument lists, and
    the ``setenv`` of ``[testenv]`` and of ENV, with ``{posargs}``,
    ``{toxinidir}`` and ``{env:NAME:DEFAULT}`` substituted as tox does.

    Raises:
        RefarchError: tox.ini has no such environment or it has no commands.
    """
    tox_ini = tox_ini or root / "tox.ini"
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(tox_ini, encoding="utf-8")
    section = f"testenv:{env}"
    if not parser.has_section(section) or not parser.get(section, "commands", fallback="").strip():
        known = sorted(s.split(":", 1)[1] for s in parser.sections() if s.startswith("testenv:"))
        raise RefarchError(f"tox.ini has no environment {env!r} with commands (known: {', '.join(known)})")

    def subst(text: str) -> str:
        text = text.replace("{toxinidir}", str(root))
        return re.sub(r"\{env:([^:}]+)(?::([^}]*))?\}", lambda m: os.environ.get(m.group(1), m.group(2) or ""),
                      text)

    commands = []
    for line in parser.get(section, "commands").splitlines():
        if not line.strip():
            continue
        words = []
        for word in shlex.split(subst(line)):
            words += list(posargs or []) if word == "{posargs}" else [word]
        commands.append(words)
    setenv = {}
    for sec in ("testenv", section):
        for line in parser.get(sec, "setenv", fallback="").splitlines():
            if "=" in line:
                key, value = line.split("=", 1)
                setenv[key.strip()] = subst(value.strip())
    return commands, setenv


def run_stage(env: str, posargs: list[str] | None = None) -> int:
    """Run tox.ini's commands of ``env`` in the checkout with the tools on
    PATH (the toolset image's), one after another as tox does, stopping at
    the first that fails; returns its exit status (0: all passed).

    Raises:
        RefarchError: as :func:`stage_commands`, or a command is not on PATH.
    """
    commands, setenv = stage_commands(env, posargs)
    for words in commands:
        print(f"{env}: {shlex.join(words)}", flush=True)
        try:
            rc = subprocess.call(words, cwd=ROOT, env={**os.environ, **setenv})
        except FileNotFoundError:
            raise RefarchError(f"{env}: {words[0]} is not on PATH (run it in the toolset image)") from None
        if rc != 0:
            return rc
    return 0
