"""OpenStack target: connection preflight, quota preflight, resource
baseline and leak check, and the janitor; the throwaway project is
:mod:`refarch.clouds.openstack_project`, the node operations of the
availability properties :mod:`refarch.clouds.openstack_nodes`.

Everything goes through openstacksdk (clouds.yaml / ``OS_CLOUD``).  The
functions take a ``Connection`` (or anything with the same ``compute``,
``network``, ``block_storage`` and ``identity`` proxies), so the tests drive
them with ``openstack.test.fakes`` proxies.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import PreflightError

#: Resource kinds the baseline, the leak check and the janitor cover, in the
#: order they must be deleted (dependents first).
KINDS = ("servers", "floating_ips", "routers", "ports", "subnets", "networks",
         "security_groups", "volumes", "keypairs")


def has_block_storage(conn) -> bool:
    """Whether the cloud's catalog has Cinder (an all-in-one without it, or a
    connection stand-in without ``has_service``: taken as having it)."""
    has = getattr(conn, "has_service", None)
    return True if has is None else bool(has("block-storage"))


def _listers(conn) -> dict[str, Callable[[], Iterable[Any]]]:
    listers = {
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
    if not has_block_storage(conn):
        del listers["volumes"]
    return listers


# Connection ---------------------------------------------------------------------
def connect(cloud: str, config_file: str | None = None, project_id: str | None = None):
    """An authenticated openstacksdk Connection for clouds.yaml entry
    ``cloud``: from ``config_file`` when given (the process's environment is
    left as it is: other entries stay reachable), else from where
    openstacksdk looks (``OS_CLIENT_CONFIG_FILE``, ~/.config/openstack);
    scoped to ``project_id`` instead of the entry's project when given.

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
    try:
        from openstack import config as os_config
        from openstack import connection

        if config_file:
            # Only this file: openstacksdk would read OS_CLIENT_CONFIG_FILE first.
            entries = (yaml.safe_load(Path(config_file).read_text(encoding="utf-8")) or {}).get("clouds") or {}
            if cloud not in entries:
                raise PreflightError(f"clouds.yaml: cloud {cloud} is not in {config_file}")
            conn = openstack.connect(load_yaml_config=False, load_envvars=False, **entries[cloud])
            conn.authorize()
            return conn
        region = os_config.OpenStackConfig().get_one(cloud=cloud)
        if project_id:
            # The entry's user, scoped to another project.
            auth = {k: v for k, v in region.auth.items() if not k.startswith("project_")}
            conn = openstack.connect(load_yaml_config=False, load_envvars=False,
                                     auth_type=region.config.get("auth_type") or "password",
                                     auth={**auth, "project_id": project_id}, region_name=region.region_name,
                                     interface=region.config.get("interface") or "public")
        else:
            conn = connection.Connection(config=region)
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
        # No volume where the share lives on the first node's disk (size 0).
        return cls(instances=node_count, cores=node_count * vcpus, ram_mb=node_count * ram_mb,
                   volumes=1 if volume_gb > 0 else 0, gigabytes=volume_gb, ports=node_count + 2,
                   security_groups=2)


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
    if not has_block_storage(conn):
        return quotas
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
    """What the janitor selected (in deletion order), deleted and failed on,
    and what it waited for: ``waits`` holds one line per wait, e.g. the
    servers' asynchronous deletes or a 409 while a resource was still in use
    (``"networks hvd-x-net (id): 409 Conflict ... (retried 3 times, 4.1 s)"``)."""

    selected: list[tuple[str, str]] = field(default_factory=list)
    deleted: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str, str]] = field(default_factory=list)
    waits: list[str] = field(default_factory=list)


def _in_use(exc: Exception) -> bool:
    """A refusal that passes once a dependent is gone: Neutron's and Nova's
    409 Conflict ("in use", "one or more ports"), openstacksdk's
    ConflictException."""
    try:
        from openstack import exceptions as sdk_exc
    except ImportError:  # pragma: no cover - openstacksdk is a dependency
        return False
    return isinstance(exc, sdk_exc.ConflictException)


def _wait_servers_gone(conn, servers: list, wait_s: float, report: JanitorReport) -> None:
    """Nova deletes servers asynchronously: wait until each is gone (its
    ports, and with them the network and security group, are in use till
    then); a server still there after ``wait_s`` seconds is reported."""
    start = time.monotonic()
    for res in servers:
        try:
            conn.compute.wait_for_delete(res, interval=1, wait=max(1, int(wait_s - (time.monotonic() - start))))
        except Exception as exc:  # noqa: BLE001 - any API error is reported
            report.failed.append(("servers", _describe(res), f"still there after the delete: {str(exc).splitlines()[0]}"))
    if servers:
        report.waits.append(f"servers: {len(servers)} asynchronous deletes took {time.monotonic() - start:.1f} s")


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
            now: dt.datetime | None = None, retries: int = 1, wait_s: float = 300) -> JanitorReport:
    """Delete run-scoped resources whose name, tag or metadata starts with
    ``prefix`` and that are older than ``older_than``, in dependency order
    (:data:`KINDS`).  A resource without a creation time is taken as old
    (keypairs on older APIs).  With ``dry_run`` (the default) nothing is
    deleted.  A failed delete is retried ``retries`` times, then reported;
    one refused because a dependent still holds it (409, :func:`_in_use`)
    is retried every 2 s until ``wait_s`` seconds have passed.  After the
    servers' deletes it waits for Nova to finish them (``wait_for_delete``).

    Port deletion skips ports owned by servers and router interfaces (they
    go with their owner).  The same filtering, with openstacksdk's own
    dependency graph, is :func:`cleanup_project` for a whole throwaway project.
    """
    now = now or dt.datetime.now(dt.timezone.utc)
    report = JanitorReport()
    listers, deleters = _listers(conn), _deleters(conn)
    deadline = time.monotonic() + wait_s
    for kind in KINDS:
        if kind not in listers:
            continue
        deleted_servers = []
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
            if _delete(kind, res, deleters[kind], retries, deadline, report) and kind == "servers":
                deleted_servers.append(res)
        _wait_servers_gone(conn, deleted_servers, max(1.0, deadline - time.monotonic()), report)
    return report


def _delete(kind: str, res, deleter: Callable[[Any], None], retries: int, deadline: float,
            report: JanitorReport) -> bool:
    """One resource's delete with the janitor's retries; True when it went."""
    attempt, conflicts, first, start = 0, 0, "", time.monotonic()
    while True:
        try:
            deleter(res)
        except Exception as exc:  # noqa: BLE001 - any API error is reported
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if _in_use(exc) and time.monotonic() < deadline:
                conflicts += 1
                first = first or text
                time.sleep(2)
                continue
            if attempt < retries and not _in_use(exc):
                attempt += 1
                continue
            report.failed.append((kind, _describe(res), text))
            return False
        if conflicts:
            report.waits.append(f"{kind} {_describe(res)}: {first} (retried {conflicts} times, "
                                f"{time.monotonic() - start:.1f} s)")
        report.deleted.append((kind, _describe(res)))
        return True
