"""A real OpenStack on this machine: the all-in-one the suite starts itself.

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
"""

from __future__ import annotations

import hashlib
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from ... import proc
from ...errors import RefarchError
from ...owner import LABEL_RUN_ID, Owner
from ...paths import cache_dir, cache_lock, load_versions, write_private
from ...profile import Profile
from ...run import RunDir, new_run_id
from ...tools.debootstrap import image_exists
from .. import local as localcloud

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


def image_inputs(versions: dict | None = None) -> dict:
    """The build inputs (JSON-able): the suite and every file of this folder
    but the Python module itself."""
    versions = versions or load_versions()
    files = {str(p.relative_to(HERE)): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in sorted(HERE.rglob("*")) if p.is_file() and p.suffix not in (".pyc",)
             and p.name != "__init__.py" and "__pycache__" not in p.parts}
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
    """

    run_id: str
    rundir: RunDir
    container: str
    address: str
    clouds_yaml: Path
    ready_s: float


def start(profile: Profile, log_name: str = "aio.log") -> AllInOne:
    """Start an all-in-one for ``profile`` (its ``openstack`` section names
    the image, flavor, external network, project user and clouds.yaml entry
    to make) and wait until it serves them.  A failure removes what was made.

    Raises:
        RefarchError: the profile is not an OpenStack one.
        CommandError, PhaseTimeout: the image build or a start step failed.
    """
    if profile.openstack is None:
        raise RefarchError(f"profile {profile.name}: no openstack section to start an all-in-one for")
    rundir = RunDir.create(new_run_id("aio"))
    log = rundir.logs / log_name
    tag = ensure_image(log)
    owner = Owner.current(rundir.path)
    labels = [a for k, v in {LABEL_RUN_ID: rundir.run_id, **owner.labels()}.items() for a in ("--label", f"{k}={v}")]
    name = f"{rundir.run_id}-openstack"
    try:
        subnet = localcloud.reserve_subnet(SUBNET_POOL, 24, rundir.run_id, owner)
        proc.run(["podman", "network", "create", "--subnet", subnet, *labels, f"{rundir.run_id}-net"],
                 timeout_s=60, log=log)
        started = time.monotonic()
        proc.run(["podman", "run", "-d", "--name", name, "--hostname", "aio", "--network", f"{rundir.run_id}-net",
                  "--runtime", "runc", "--systemd=always", "--ulimit", "nofile=16384:16384",
                  "--ulimit", "nproc=4096:8192", "--stop-timeout", "30", *labels, tag], timeout_s=120, log=log)
        address = proc.run(["podman", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                            name], timeout_s=30).stdout.strip()
        admin_pw, service_pw, user_pw = (secrets.token_urlsafe(18) for _ in range(3))
        proc.run(["podman", "exec", name, "/usr/local/sbin/aio-firstboot", address, admin_pw, service_pw],
                 timeout_s=READY_TIMEOUT_S, log=log, stream=True)
        clouds_yaml = write_private(rundir.path / "clouds.yaml", yaml.safe_dump({"clouds": {
            ADMIN_CLOUD: _entry(address, "admin", admin_pw, "admin"),
            profile.openstack.cloud: _entry(address, profile.openstack.ci_user or "demo", user_pw, "demo"),
        }}))
        _make_resources(profile, clouds_yaml, user_pw)
        aio = AllInOne(rundir.run_id, rundir, name, address, clouds_yaml, round(time.monotonic() - started, 1))
        rundir.update_meta(cloud="openstack-aio", image=tag, address=address, ready_s=aio.ready_s, kept=False)
        return aio
    except BaseException:
        stop_run(rundir, log)
        raise


def _entry(address: str, user: str, password: str, project: str) -> dict:
    return {"auth": {"auth_url": f"http://{address}:5000/v3", "username": user, "password": password,
                     "project_name": project, "user_domain_name": "Default", "project_domain_name": "Default"},
            "region_name": "RegionOne", "interface": "public", "identity_api_version": 3}


def _make_resources(profile: Profile, clouds_yaml: Path, user_password: str) -> None:
    """What the profile expects of the cloud: its flavor (the profile's node
    memory, 1 vCPU, 10 GB disk), an image, the external network with a
    floating-IP subnet (203.0.113.0/24, TEST-NET-3), and project ``demo``
    with the profile's user holding its role."""
    from ..openstack import connect

    s = profile.openstack
    conn = connect(ADMIN_CLOUD, str(clouds_yaml))
    conn.compute.create_flavor(name=s.flavor_name, vcpus=1, ram=profile.nodes.flavor.memory_mb, disk=10)
    conn.image.create_image(name=s.image_name, data=b"refarch all-in-one: no guest boots from these bytes\n",
                            disk_format="raw", container_format="bare", visibility="public")
    public = conn.network.create_network(name=s.external_network, is_router_external=True,
                                         provider_network_type="flat", provider_physical_network="physnet1")
    conn.network.create_subnet(name=f"{s.external_network}-subnet", network_id=public.id, ip_version=4,
                               cidr="203.0.113.0/24", gateway_ip="203.0.113.1", is_dhcp_enabled=False,
                               allocation_pools=[{"start": "203.0.113.10", "end": "203.0.113.250"}])
    project = conn.identity.create_project(name="demo", domain_id="default", description="the suite's project")
    user = conn.identity.create_user(name=s.ci_user or "demo", password=user_password, domain_id="default",
                                     default_project_id=project.id)
    conn.grant_role(conn.identity.find_role(s.role).id, user=user.id, project=project.id)


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
