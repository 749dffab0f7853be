"""A real OpenStack on this machine: the all-in-one the suite starts itself.

Two modes share one image.  ``fake``: Nova's fake driver, for the fast API
tests (servers go ACTIVE without a guest).  ``guests``: real guests, see
below the fake mode's description.

Debian's OpenStack (Zed: keystone, glance with the file store, placement,
nova api/conductor/scheduler/compute with Nova's fake driver, neutron-server
with ML2 and routers; MariaDB, RabbitMQ, memcached; one worker each) in one
podman container with systemd as PID 1, as the local cloud's nodes are.  No
Cinder: this machine has no device-mapper for its LVM backend.  Port binding
comes from the suite's mechanism driver ``refarch_bind_all``
(``ml2/refarch_aio_ml2.py``): fake servers have no tap devices for an agent.

The image is built by ``build.sh`` (debootstrap, Debian's packages, the
databases migrated at build time; about 6 min cold on 2 cores) and tagged
with a hash of this folder's files and the Debian suite, so a warm machine
builds nothing.  Each start is a run of its own (run id ``aio-...``): the
container and its podman network carry the run id and owner labels of the
local cloud (:mod:`refarch.owner`), its subnet is reserved
machine-wide, and :func:`stop` (or ``refarch sweep --stale`` once the owner
is gone) removes exactly those.  The APIs listen on the container's own
address on that network; nothing listens on the host.

In ``guests`` mode the container is privileged (libvirt, taps, bridges and
the routers' namespaces, all inside the container's own network namespace),
nova-compute runs libvirt with QEMU's TCG, Neutron's Linux bridge agent
enforces security groups with iptables and its L3 agent routes, SNATs and
maps floating IPs.  The start reserves a /23: its low half is the podman
network, its high half the external network.  A veth pair joins the host to
that external network: its host end holds :attr:`AllInOne.host_address`
(the admin's vantage point: the profile's ``admin_cidr`` becomes that /32),
its other end is ``ext0`` in the container, the Linux bridge agent's
physnet1.  The external subnet's gateway is held by nobody: a guest's
packet for anywhere else goes nowhere (:mod:`refarch.clouds.aio.network`).
Guests boot the suite's image (:mod:`refarch.clouds.aio.guestimage`).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from ... import proc
from ...errors import CloudGone, RefarchError
from ...owner import LABEL_RUN_ID, Owner
from ...paths import cache_dir, cache_lock, load_versions, write_private
from ...profile import Profile
from ...run import RunDir, new_run_id
from ...tools.debootstrap import image_exists
from .. import local as localcloud
from .network import join_external
from .resources import clouds_entry, make_resources

HERE = Path(__file__).resolve().parent
IMAGE_REPO = "localhost/refarch-openstack-aio"
#: Subnets of the all-in-one's podman networks (one /24 per start).
SUBNET_POOL = "10.215.0.0/16"
#: clouds.yaml entries written for a start: the cloud's admin and the
#: project user the profile's Terraform runs as.
ADMIN_CLOUD = "aio-admin"
#: Seconds a start may take until every API answers (measured: about 60 s
#: warm on 2 cores).
READY_TIMEOUT_S = 600
#: The modes a start takes (see the module's docstring).
MODES = ("fake", "guests")
#: The external network's subnet in fake mode (TEST-NET-3: nothing routes it).
FAKE_EXTERNAL_CIDR = "203.0.113.0/24"
#: libvirt's CPU model of the guests: AVX and AVX2 for TensorFlow's wheels,
#: emulated by QEMU 7.2's TCG.
GUEST_CPU_MODEL = "Haswell-noTSX"


def image_inputs(versions: dict | None = None) -> dict:
    """The build inputs (JSON-able): the suite and every file of this folder
    but the package's own Python modules (``*.py`` at its top: the code that
    drives the all-in-one is not in the image)."""
    versions = versions or load_versions()
    files = {str(p.relative_to(HERE)): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in sorted(HERE.rglob("*")) if p.is_file() and p.suffix not in (".pyc",)
             and not (p.parent == HERE and p.suffix == ".py") and "__pycache__" not in p.parts}
    return {"suite": versions["debian_suite"], "files": files}


def image_tag(versions: dict | None = None) -> str:
    """``localhost/refarch-openstack-aio:<12 hex chars of the inputs' sha256>``."""
    digest = hashlib.sha256(repr(sorted(image_inputs(versions).items())).encode()).hexdigest()
    return f"{IMAGE_REPO}:{digest[:12]}"


def ensure_image(log: Path, timeout_s: float = 1800) -> str:
    """Build the all-in-one's image unless podman holds it; return its tag.

    Raises:
        CommandError: the build failed (its output is in ``log``).
        PhaseTimeout: it ran past ``timeout_s`` seconds.
    """
    tag = image_tag()
    with cache_lock("aio-image"):
        if not image_exists(tag):
            work = Path(tempfile.mkdtemp(prefix="aio-image-", dir=cache_dir()))
            try:
                proc.run(["bash", str(HERE / "build.sh"), str(work / "rootfs"), tag,
                          load_versions()["debian_suite"]], timeout_s=timeout_s, log=log, stream=True)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    return tag


@dataclass(frozen=True)
class AllInOne:
    """A started all-in-one.

    Attributes:
        run_id: its run id (``aio-<user>-<6 chars>``), on its container and network.
        rundir: its run directory (logs, clouds.yaml).
        container: the podman container's name.
        address: the APIs' address (keystone at ``http://<address>:5000/v3``).
        clouds_yaml: entries :data:`ADMIN_CLOUD` and the profile's ``openstack.cloud``.
        ready_s: seconds from ``podman run`` until every API answered.
        mode: ``fake`` or ``guests``.
        external_cidr: the external network's subnet (floating IPs).
        host_address: guests mode: the host's address on the external
            network (the admin's vantage point); None in fake mode.
        host_link: guests mode: the host's end of the veth pair to it.
    """

    run_id: str
    rundir: RunDir
    container: str
    address: str
    clouds_yaml: Path
    ready_s: float
    mode: str = "fake"
    external_cidr: str = FAKE_EXTERNAL_CIDR
    host_address: str | None = None
    host_link: str | None = None

    def overrides(self) -> dict:
        """Profile overrides a run on this all-in-one needs: in guests mode
        SSH is admitted from :attr:`host_address` and the admin exposure
        probe only (:func:`refarch.clouds.aio.probes.admin_cidr`)."""
        from .probes import admin_cidr

        return {"openstack.admin_cidr": admin_cidr(self.external_cidr)} if self.host_address else {}


def start(profile: Profile, mode: str = "fake", log_name: str = "aio.log") -> AllInOne:
    """Start an all-in-one in ``mode`` for ``profile`` (its ``openstack``
    section names the image, flavor, external network, project user and
    clouds.yaml entry to make) and wait until it serves them.  In guests
    mode the guest image is built first unless cached (with the node image
    and the wheelhouse it installs).  A failure removes what was made.

    Raises:
        RefarchError: the profile is not an OpenStack one, or an unknown mode.
        CommandError, PhaseTimeout: the image build or a start step failed.
    """
    if profile.openstack is None:
        raise RefarchError(f"profile {profile.name}: no openstack section to start an all-in-one for")
    if mode not in MODES:
        raise RefarchError(f"all-in-one mode {mode!r}: expected one of {', '.join(MODES)}")
    rundir = RunDir.create(new_run_id("aio"))
    log = rundir.logs / log_name
    tag = ensure_image(log)
    guest = _guest_image(log) if mode == "guests" else None
    owner = Owner.current(rundir.path)
    labels = [a for k, v in {LABEL_RUN_ID: rundir.run_id, **owner.labels()}.items() for a in ("--label", f"{k}={v}")]
    name = f"{rundir.run_id}-openstack"
    try:
        block = localcloud.reserve_subnet(SUBNET_POOL, 24 if mode == "fake" else 23, rundir.run_id, owner)
        subnet, external = (block, FAKE_EXTERNAL_CIDR) if mode == "fake" else localcloud.split_block(block)
        proc.run(["podman", "network", "create", "--subnet", subnet, *labels, f"{rundir.run_id}-net"],
                 timeout_s=60, log=log)
        started = time.monotonic()
        extra = ["--privileged"] if mode == "guests" else []
        proc.run(["podman", "run", "-d", "--name", name, "--hostname", "aio", "--network", f"{rundir.run_id}-net",
                  "--runtime", "runc", "--systemd=always", "--ulimit", "nofile=16384:16384",
                  "--ulimit", "nproc=4096:8192", "--stop-timeout", "30", *extra, *labels, tag],
                 timeout_s=120, log=log)
        address = proc.run(["podman", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                            name], timeout_s=30).stdout.strip()
        host_address = host_link = None
        if mode == "guests":
            host_link, host_address = join_external(name, rundir.run_id, external, log)
        admin_pw, service_pw, user_pw = (secrets.token_urlsafe(18) for _ in range(3))
        proc.run(["podman", "exec", name, "/usr/local/sbin/aio-firstboot", address, admin_pw, service_pw, mode,
                  GUEST_CPU_MODEL], timeout_s=READY_TIMEOUT_S, log=log, stream=True)
        clouds_yaml = write_private(rundir.path / "clouds.yaml", yaml.safe_dump({"clouds": {
            ADMIN_CLOUD: clouds_entry(address, "admin", admin_pw, "admin"),
            profile.openstack.cloud: clouds_entry(address, profile.openstack.ci_user or "demo", user_pw, "demo"),
        }}))
        from ..openstack import connect

        make_resources(connect(ADMIN_CLOUD, str(clouds_yaml)), profile, user_pw, external, guest)
        aio = AllInOne(rundir.run_id, rundir, name, address, clouds_yaml, round(time.monotonic() - started, 1),
                       mode, external, host_address, host_link)
        rundir.update_meta(cloud="openstack-aio", image=tag, address=address, ready_s=aio.ready_s, kept=False,
                           mode=mode, external_cidr=external, host_address=host_address, host_link=host_link)
        return aio
    except BaseException:
        stop_run(rundir, log)
        raise


def _guest_image(log: Path):
    """The guest image (and the node image and wheelhouse it is made from)."""
    from .. import image, wheelhouse
    from .guestimage import ensure_guest_image

    node_image = image.ensure_image(log)
    return ensure_guest_image(wheelhouse.ensure_wheelhouse(node_image, log, 1800), log)


def load(rundir: RunDir) -> AllInOne:
    """The all-in-one started in ``rundir`` (from its ``run.json``)."""
    meta = rundir.read_meta()
    return AllInOne(rundir.run_id, rundir, f"{rundir.run_id}-openstack", meta["address"],
                    rundir.path / "clouds.yaml", meta.get("ready_s", 0.0), meta.get("mode", "fake"),
                    meta.get("external_cidr", FAKE_EXTERNAL_CIDR), meta.get("host_address"), meta.get("host_link"))


def running() -> list[AllInOne]:
    """Every all-in-one of this checkout's runs folder whose container runs,
    newest first."""
    from ...paths import runs_dir

    names = set(proc.run(["podman", "ps", "--format", "{{.Names}}", "--filter", f"label={LABEL_RUN_ID}"],
                         timeout_s=30).stdout.split())
    found = []
    for meta in sorted(runs_dir().glob("aio-*/run.json"), key=lambda p: p.stat().st_mtime, reverse=True):
        rundir = RunDir.at(meta.parent)
        if f"{rundir.run_id}-openstack" in names and not rundir.read_meta().get("destroyed"):
            found.append(load(rundir))
    return found


def use(profile: Profile, mode: str) -> tuple[AllInOne, bool]:
    """The all-in-one named by ``$REFARCH_AIO_RUN_ID`` (a parent process
    started it), else a kept one in ``mode`` (``refarch aio up``), else a
    new one that the caller owns and stops.  Returns (it, owned).  Reuse is
    said on stderr with the all-in-one's run id.

    Raises:
        RefarchError: ``$REFARCH_AIO_RUN_ID`` names none running in ``mode``.
        as :func:`start`.
    """
    import sys

    named = os.environ.get(ENV_RUN_ID)
    if named:
        match = [a for a in running() if a.run_id == named and a.mode == mode]
        if not match:
            raise RefarchError(f"${ENV_RUN_ID}={named}: no running all-in-one in {mode} mode (refarch aio list)")
        print(f"refarch: using the all-in-one {named} ({mode}, {match[0].address}) named by ${ENV_RUN_ID}",
              file=sys.stderr)
        _serve(match[0])
        return match[0], False
    for aio in running():
        if aio.mode == mode and aio.rundir.read_meta().get("kept"):
            print(f"refarch: using the kept all-in-one {aio.run_id} ({mode}, {aio.address}); "
                  f"`refarch aio down {aio.run_id}` stops it", file=sys.stderr)
            _serve(aio)
            return aio, False
    aio = start(profile, mode)
    _serve(aio)
    return aio, True


#: The environment variable naming the all-in-one this process uses.
ENV_RUN_ID = "REFARCH_AIO_RUN_ID"


def _serve(aio: AllInOne) -> None:
    """Point openstacksdk, Terraform's provider and :func:`current` of this
    process at ``aio``."""
    os.environ["OS_CLIENT_CONFIG_FILE"] = str(aio.clouds_yaml)
    os.environ[ENV_RUN_ID] = aio.run_id


def current() -> AllInOne:
    """The all-in-one this process uses (:func:`use`).

    Raises:
        RefarchError: none was chosen.
    """
    from ...paths import runs_dir

    run_id = os.environ.get(ENV_RUN_ID)
    if not run_id:
        raise RefarchError(f"no all-in-one chosen for this process (${ENV_RUN_ID} is unset)")
    return load(RunDir.at(runs_dir() / run_id))


def serve_profile(name: str, overrides: dict) -> tuple[dict, Profile, AllInOne | None, bool]:
    """Load profile ``name`` with ``overrides``; when the suite's
    all-in-one serves it (``openstack.all_in_one``), choose one with
    :func:`use` and add what it asks (guests mode: ``admin_cidr``).
    Returns (overrides, profile, the all-in-one or None, owned).

    Raises:
        ProfileError: bad profile or overrides.
        as :func:`use`.
    """
    from ...profile import load_profile

    profile = load_profile(name, overrides)
    settings = profile.openstack
    if settings is None or settings.all_in_one is None:
        return overrides, profile, None, False
    aio, owned = use(profile, settings.all_in_one)
    extra = {k: v for k, v in aio.overrides().items() if overrides.get(k) != v}
    if extra:
        overrides = {**overrides, **extra}
        profile = load_profile(name, overrides)
    return overrides, profile, aio, owned


def serve_run(meta: dict) -> None:
    """Point this process at the all-in-one a run was deployed on (its
    ``run.json`` ``all_in_one``): the run's servers, networks and volumes
    live on that one only, whichever this process chose before.

    Raises:
        CloudGone: that all-in-one was stopped (its ``run.json`` says
            destroyed, or its container no longer runs).
    """
    run_id = meta.get("all_in_one")
    if not run_id:
        return
    match = next((a for a in running() if a.run_id == run_id), None)
    if match is None:
        raise CloudGone(f"run {meta.get('run_id', '?')} was deployed on the all-in-one {run_id}, which was "
                        "stopped: its servers, networks and volumes went with it")
    _serve(match)


def stop(aio: AllInOne) -> dict[str, list[str]]:
    """Remove the all-in-one's container and network and release its subnet;
    returns what was removed."""
    return stop_run(aio.rundir, aio.rundir.logs / "aio.log")


def stop_run(rundir: RunDir, log: Path) -> dict[str, list[str]]:
    """:func:`stop` by run directory (also after a failed start)."""
    removed = localcloud.sweep(rundir.run_id, log)
    localcloud.release_subnet(rundir.run_id)
    rundir.update_meta(kept=False, destroyed=True)
    return removed
