"""OpenStack target: connection preflight, throwaway project lifecycle,
quota preflight, resource baseline and leak check, and the janitor; the
node operations of the availability properties are in
:mod:`refarch.clouds.openstack_nodes`.

Everything goes through openstacksdk (clouds.yaml / ``OS_CLOUD``).  The
functions take a ``Connection`` (or anything with the same ``compute``,
``network``, ``block_storage`` and ``identity`` proxies), so the tests drive
them with ``openstack.test.fakes`` proxies.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import PreflightError, RefarchError
from ..paths import write_private

#: Resource kinds the baseline, the leak check and the janitor cover, in the
#: order they must be deleted (dependents first).
KINDS = ("servers", "floating_ips", "routers", "ports", "subnets", "networks",
         "security_groups", "volumes", "keypairs")


def _listers(conn) -> dict[str, Callable[[], Iterable[Any]]]:
    return {
        "servers": lambda: conn.compute.servers(),
        "floating_ips": lambda: conn.network.ips(),
        "routers": lambda: conn.network.routers(),
        "ports": lambda: conn.network.ports(),
        "subnets": lambda: conn.network.subnets(),
        "networks": lambda: conn.network.networks(),
        "security_groups": lambda: conn.network.security_groups(),
        "volumes": lambda: conn.block_storage.volumes(),
        "keypairs": lambda: conn.compute.keypairs(),
    }


# Connection ---------------------------------------------------------------------
def connect(cloud: str, config_file: str | None = None):
    """An authenticated openstacksdk Connection for clouds.yaml entry ``cloud``.

    Raises:
        PreflightError: openstacksdk is missing, the entry is not in any
            clouds.yaml, credentials are missing or rejected, or the
            endpoint cannot be reached (one line each).
    """
    try:
        import openstack
        from keystoneauth1 import exceptions as ks_exc
        from openstack import exceptions as sdk_exc
        from openstack.config import exceptions as cfg_exc
    except ImportError:
        raise PreflightError("openstacksdk is not installed: pip install -e '.[openstack]'") from None
    if config_file:
        os.environ["OS_CLIENT_CONFIG_FILE"] = config_file
    try:
        conn = openstack.connect(cloud=cloud)
        conn.authorize()
    except cfg_exc.OpenStackConfigException as exc:
        raise PreflightError(f"clouds.yaml: {exc} (set OS_CLIENT_CONFIG_FILE or put it in ~/.config/openstack)") from None
    except ks_exc.MissingRequiredOptions as exc:
        raise PreflightError(f"cloud {cloud}: missing credentials: {', '.join(o.dest for o in exc.options)}") from None
    except ks_exc.Unauthorized:
        raise PreflightError(f"cloud {cloud}: the credentials were rejected (401)") from None
    except (ks_exc.ConnectFailure, ks_exc.ConnectTimeout, ks_exc.DiscoveryFailure) as exc:
        raise PreflightError(f"cloud {cloud}: endpoint unreachable: {str(exc).splitlines()[0]}") from None
    except sdk_exc.SDKException as exc:
        text = str(exc).splitlines()[0]
        if "Unable to establish connection" in text:
            raise PreflightError(f"cloud {cloud}: endpoint unreachable: {text[:200]}") from None
        raise PreflightError(f"cloud {cloud}: {text[:300]}") from None
    return conn


# Quotas -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Need:
    """What one deployment takes from the project's quotas (RAM in MiB,
    volume size in GiB)."""

    instances: int
    cores: int
    ram_mb: int
    floating_ips: int = 1
    volumes: int = 1
    gigabytes: int = 1000
    security_groups: int = 1
    networks: int = 1
    routers: int = 1
    ports: int = 0

    @classmethod
    def for_cluster(cls, node_count: int, vcpus: int, ram_mb: int, volume_gb: int) -> Need:
        # Security groups: the cluster's, and the one without rules that cuts
        # a node off in the availability measurement (failure mode partition).
        return cls(instances=node_count, cores=node_count * vcpus, ram_mb=node_count * ram_mb,
                   gigabytes=volume_gb, ports=node_count + 2, security_groups=2)


def _limit_used(value) -> tuple[int, int]:
    if isinstance(value, dict):  # network quota details: {limit, used, reserved}
        return int(value.get("limit", -1)), int(value.get("used", 0)) + int(value.get("reserved", 0))
    return int(value), 0


def collect_quotas(conn, project_id: str) -> dict[str, tuple[int, int]]:
    """{quota name: (limit, in use)}; a limit of -1 means unlimited."""
    compute = conn.compute.get_quota_set(project_id, usage=True)
    usage = getattr(compute, "usage", None) or {}
    quotas = {
        "instances": (int(compute.instances), int(usage.get("instances", 0))),
        "cores": (int(compute.cores), int(usage.get("cores", 0))),
        "ram_mb": (int(compute.ram), int(usage.get("ram", 0))),
    }
    net = conn.network.get_quota(project_id, details=True)
    for name, attr in (("floating_ips", "floating_ips"), ("security_groups", "security_groups"),
                       ("networks", "networks"), ("routers", "routers"), ("ports", "ports")):
        quotas[name] = _limit_used(getattr(net, attr))
    volume = conn.block_storage.get_quota_set(project_id, usage=True)
    vusage = getattr(volume, "usage", None) or {}
    quotas["volumes"] = (int(volume.volumes), int(vusage.get("volumes", 0)))
    quotas["gigabytes"] = (int(volume.gigabytes), int(vusage.get("gigabytes", 0)))
    return quotas


def quota_shortfalls(quotas: dict[str, tuple[int, int]], need: Need) -> list[str]:
    """Each quota that cannot hold ``need``: ``"cores: need 32, 8 of 40 free"``."""
    short = []
    for name, wanted in vars(need).items():
        if wanted <= 0 or name not in quotas:
            continue
        limit, used = quotas[name]
        if limit < 0:
            continue
        free = limit - used
        if wanted > free:
            short.append(f"{name}: need {wanted}, {max(free, 0)} of {limit} free")
    return short


def quota_preflight(conn, project_id: str, need: Need) -> None:
    """Raises PreflightError naming every quota that is short."""
    short = quota_shortfalls(collect_quotas(conn, project_id), need)
    if short:
        raise PreflightError("quota too small for this cluster: " + "; ".join(short))


# Baseline and leaks -------------------------------------------------------------
def _describe(res) -> str:
    name = getattr(res, "name", None) or getattr(res, "floating_ip_address", None) or ""
    return f"{name} ({res.id})" if name else str(res.id)


def baseline(conn) -> dict[str, list[str]]:
    """Ids of every resource of :data:`KINDS` in the project, before deploy."""
    return {kind: sorted(str(r.id) for r in lister()) for kind, lister in _listers(conn).items()}


def leaks(conn, before: dict[str, list[str]]) -> dict[str, list[str]]:
    """Resources that are new since ``before``: {kind: ["name (id)"]}."""
    found: dict[str, list[str]] = {}
    for kind, lister in _listers(conn).items():
        known = set(before.get(kind, []))
        new = [_describe(r) for r in lister() if str(r.id) not in known]
        if new:
            found[kind] = sorted(new)
    return found


# Janitor -----------------------------------------------------------------------------
def _created(res) -> dt.datetime | None:
    raw = getattr(res, "created_at", None)
    if not raw:
        return None
    try:
        return dt.datetime.fromisoformat(str(raw).replace("Z", "+00:00")).astimezone(dt.timezone.utc)
    except ValueError:
        return None


def _belongs(res, prefix: str) -> bool:
    name = getattr(res, "name", None) or getattr(res, "description", None) or ""
    tags = getattr(res, "tags", None) or []
    metadata = getattr(res, "metadata", None) or {}
    return (str(name).startswith(prefix) or any(str(t).startswith(f"refarch-run:{prefix}") for t in tags)
            or str(metadata.get("refarch_run_id", "")).startswith(prefix))


@dataclass
class JanitorReport:
    """What the janitor selected (in deletion order), deleted and failed on."""

    selected: list[tuple[str, str]] = field(default_factory=list)
    deleted: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str, str]] = field(default_factory=list)


def _deleters(conn) -> dict[str, Callable[[Any], None]]:
    def router(r):
        for port in conn.network.ports(device_id=r.id, device_owner="network:router_interface"):
            for ip in port.fixed_ips or []:
                conn.network.remove_interface_from_router(r, subnet_id=ip["subnet_id"])
        conn.network.delete_router(r, ignore_missing=True)

    return {
        "servers": lambda r: conn.compute.delete_server(r, ignore_missing=True),
        "floating_ips": lambda r: conn.network.delete_ip(r, ignore_missing=True),
        "routers": router,
        "ports": lambda r: conn.network.delete_port(r, ignore_missing=True),
        "subnets": lambda r: conn.network.delete_subnet(r, ignore_missing=True),
        "networks": lambda r: conn.network.delete_network(r, ignore_missing=True),
        "security_groups": lambda r: conn.network.delete_security_group(r, ignore_missing=True),
        "volumes": lambda r: conn.block_storage.delete_volume(r, ignore_missing=True),
        "keypairs": lambda r: conn.compute.delete_keypair(r, ignore_missing=True),
    }


def janitor(conn, prefix: str, older_than: dt.timedelta, dry_run: bool = True,
            now: dt.datetime | None = None, retries: int = 1) -> JanitorReport:
    """Delete run-scoped resources whose name, tag or metadata starts with
    ``prefix`` and that are older than ``older_than``, in dependency order
    (:data:`KINDS`).  A resource without a creation time is taken as old
    (keypairs on older APIs).  With ``dry_run`` (the default) nothing is
    deleted.  A failed delete is retried ``retries`` times, then reported.

    Port deletion skips ports owned by servers and router interfaces (they
    go with their owner).  The same filtering, with openstacksdk's own
    dependency graph, is :func:`cleanup_project` for a whole throwaway project.
    """
    now = now or dt.datetime.now(dt.timezone.utc)
    report = JanitorReport()
    listers, deleters = _listers(conn), _deleters(conn)
    for kind in KINDS:
        for res in listers[kind]():
            if not _belongs(res, prefix):
                continue
            if kind == "ports" and str(getattr(res, "device_owner", "") or "").startswith(("compute:", "network:router")):
                continue
            created = _created(res)
            if created is not None and now - created < older_than:
                continue
            report.selected.append((kind, _describe(res)))
            if dry_run:
                continue
            for attempt in range(retries + 1):
                try:
                    deleters[kind](res)
                    report.deleted.append((kind, _describe(res)))
                    break
                except Exception as exc:  # noqa: BLE001 - any API error is reported
                    if attempt == retries:
                        report.failed.append((kind, _describe(res), str(exc).splitlines()[0]))
    return report


def cleanup_project(conn, dry_run: bool = True, created_before: dt.datetime | None = None) -> list[str]:
    """openstacksdk's ``project_cleanup`` over the connection's project (used
    for a throwaway project before it is deleted); returns the resources it
    listed, as ``"Type name (id)"``."""
    import queue

    status: queue.Queue = queue.Queue()
    filters = {"created_at": created_before.strftime("%Y-%m-%dT%H:%M:%S")} if created_before else None
    conn.project_cleanup(dry_run=dry_run, status_queue=status, filters=filters, wait_timeout=600)
    listed = []
    while not status.empty():
        res = status.get_nowait()
        listed.append(f"{type(res).__name__} {_describe(res)}")
    return listed


# Throwaway project --------------------------------------------------------------
@dataclass
class ThrowawayProject:
    """A project made for one run: the CI user gets ``role`` on it and an
    application credential that Terraform uses (written as a clouds.yaml
    entry in the run directory, mode 0600)."""

    project_id: str
    name: str
    credential_id: str
    clouds_yaml: Path
    cloud_name: str

    @classmethod
    def create(cls, admin_conn, user_conn_factory: Callable[[str], Any], run_id: str, domain: str,
               ci_user: str, role: str, rundir: Path, auth_url: str, region: str | None = None) -> ThrowawayProject:
        """Create project ``run_id``, grant ``ci_user`` ``role`` on it, and make
        an application credential for it as that user.

        ``user_conn_factory(project_id)`` returns the CI user's connection
        scoped to the new project.

        Raises:
            RefarchError: the user or role is unknown.
        """
        ident = admin_conn.identity
        dom = ident.find_domain(domain, ignore_missing=False)
        project = ident.create_project(name=run_id, domain_id=dom.id,
                                       description=f"refarch throwaway project of run {run_id}",
                                       tags=["refarch", f"refarch-run:{run_id}"])
        user = ident.find_user(ci_user, domain_id=dom.id)
        role_obj = ident.find_role(role)
        if user is None or role_obj is None:
            ident.delete_project(project, ignore_missing=True)
            raise RefarchError(f"throwaway project: unknown {'user ' + ci_user if user is None else 'role ' + role}")
        ident.assign_project_role_to_user(project, user, role_obj)
        user_conn = user_conn_factory(project.id)
        cred = user_conn.identity.create_application_credential(
            user=user.id, name=f"{run_id}-terraform", description=f"Terraform of run {run_id}")
        cloud_name = f"refarch-{run_id}"
        entry = {"auth_type": "v3applicationcredential",
                 "auth": {"auth_url": auth_url, "application_credential_id": cred.id,
                          "application_credential_secret": cred.secret}}
        if region:
            entry["region_name"] = region
        clouds_yaml = rundir / "clouds.yaml"
        write_private(clouds_yaml, yaml.safe_dump({"clouds": {cloud_name: entry}}))
        return cls(project.id, run_id, cred.id, clouds_yaml, cloud_name)

    def delete(self, admin_conn, user_conn) -> list[str]:
        """Clean the project with ``project_cleanup``, delete the credential
        and the project; returns what the cleanup removed."""
        removed = cleanup_project(user_conn, dry_run=False)
        try:
            user_conn.identity.delete_application_credential(
                user_conn.current_user_id, self.credential_id, ignore_missing=True)
        finally:
            admin_conn.identity.delete_project(self.project_id, ignore_missing=True)
            self.clouds_yaml.unlink(missing_ok=True)
        return removed
