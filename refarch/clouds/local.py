"""The embedded local cloud: subnet allocation, run-scoped resources, sweep
and leak check for podman "machines".

Every container, network and volume a run creates carries the label
``refarch.run_id=<run id>``; that label is what the sweep and the leak check
look for, so a create that failed half-way (a tainted Terraform resource
whose destroy provisioner never runs) is still cleaned up.
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import re
from collections.abc import Callable
from pathlib import Path

from .. import proc
from ..errors import PreflightError, RefarchError
from ..owner import LABEL_RUN_ID, LABEL_RUNDIR, Owner, machine_dir, stale_verdict
from ..run import RunDir
from ..tools import hostcmds
from . import arrivals, exposure

LABEL = LABEL_RUN_ID


def preflight_tools(which=None, stages: tuple[str, ...] = ("local",)) -> None:
    """Check the host commands of ``stages`` (see ``ci/host-commands.tsv``)
    and the devices the local cloud needs, before anything is created.

    Raises:
        PreflightError: one line naming every missing command and its package.
    """
    hostcmds.preflight(stages, which=which)
    if not Path("/dev/fuse").exists():
        raise PreflightError("/dev/fuse is missing: the sshfs shared storage needs FUSE on the host")


def _podman_json(*args: str) -> list:
    out = proc.run(["podman", *args, "--format", "json"], timeout_s=60).stdout.strip()
    return json.loads(out) if out else []


def used_subnets() -> list[ipaddress.IPv4Network]:
    """IPv4 subnets taken by podman networks, host routes and host addresses."""
    nets: list[ipaddress.IPv4Network] = []
    for net in _podman_json("network", "ls"):
        for sub in net.get("subnets") or []:
            nets.append(ipaddress.ip_network(sub["subnet"], strict=False))
    routes = json.loads(proc.run(["ip", "-j", "route", "show", "table", "all"], timeout_s=30).stdout or "[]")
    for route in routes:
        dst = route.get("dst", "")
        if dst and dst != "default" and ":" not in dst:
            nets.append(ipaddress.ip_network(dst, strict=False))
    return [n for n in nets if n.version == 4]


def _reservations() -> Path:
    path = machine_dir() / "subnets"
    path.mkdir(exist_ok=True)
    return path


def reserved_subnets() -> list[ipaddress.IPv4Network]:
    """Subnets reserved by runs whose owner process is still alive (their
    podman network may not exist yet)."""
    nets = []
    for path in _reservations().glob("*.json"):
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        owner = Owner.from_labels(entry.get("owner", {}))
        if owner is not None and owner.alive():
            nets.append(ipaddress.ip_network(entry["subnet"]))
    return nets


def reserve_subnet(pool: str, prefix: int, run_id: str, owner: Owner,
                   used: Callable[[], list[ipaddress.IPv4Network]] | None = None) -> str:
    """Pick a free ``/prefix`` of ``pool`` for ``run_id`` and reserve it
    machine-wide until the run is destroyed, so that two runs deploying at
    the same time from any checkouts never pick the same subnet.

    Raises:
        RefarchError: the pool is exhausted.
    """
    lock = machine_dir() / "subnets.lock"
    with open(lock, "w", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        taken = (used or used_subnets)() + reserved_subnets()
        subnet = pick_subnet(pool, prefix, taken)
        entry = {"subnet": subnet, "run_id": run_id, "owner": owner.labels()}
        (_reservations() / f"{run_id}.json").write_text(json.dumps(entry), encoding="utf-8")
    return subnet


def release_subnet(run_id: str) -> None:
    """Drop ``run_id``'s subnet reservation (its network is gone)."""
    (_reservations() / f"{run_id}.json").unlink(missing_ok=True)


def pick_subnet(pool: str, prefix: int, used: list[ipaddress.IPv4Network]) -> str:
    """The first ``/prefix`` subnet of ``pool`` that overlaps none of ``used``.

    Raises:
        RefarchError: the pool is exhausted.
    """
    for candidate in ipaddress.ip_network(pool).subnets(new_prefix=prefix):
        if not any(candidate.overlaps(u) for u in used):
            return str(candidate)
    raise RefarchError(f"no free /{prefix} left in subnet pool {pool}")


def split_block(block: str) -> tuple[str, str]:
    """A run's reserved block (``/prefix-1``) -> (cluster subnet, probe
    subnet), its two halves."""
    low, high = ipaddress.ip_network(block).subnets(prefixlen_diff=1)
    return str(low), str(high)


def probe_ranges(probe_subnet: str) -> dict[str, str]:
    """The probe subnet's halves: ``admin`` (inside the run's admin range)
    and ``outside`` (neither admin nor cluster)."""
    admin, outside = ipaddress.ip_network(probe_subnet).subnets(prefixlen_diff=1)
    return {"admin": str(admin), "outside": str(outside)}


def _is_of_run(name: str, labels: dict | None, run_id: str) -> bool:
    """A resource belongs to ``run_id`` by its label, or by its name, as the
    OpenStack janitor matches names: every name a run gives is
    ``<run id>-<word>`` (``-node1``, ``-net``) with no further hyphen, so the
    run ``hvd-a-b`` never claims ``hvd-a-b-c-node1`` of run ``hvd-a-b-c``.
    A resource whose label was lost still counts."""
    if (labels or {}).get(LABEL) == run_id:
        return True
    return re.fullmatch(re.escape(run_id) + r"-[a-z0-9_.]+", name) is not None


def run_resources(run_id: str) -> dict[str, list[str]]:
    """Names of the containers, networks and volumes of ``run_id``: labelled
    with it, or named with its prefix."""
    containers = [c["Names"][0] for c in _podman_json("ps", "-a")
                  if _is_of_run(c["Names"][0], c.get("Labels"), run_id)]
    networks = [n["name"] for n in _podman_json("network", "ls") if _is_of_run(n["name"], n.get("labels"), run_id)]
    volumes = [v["Name"] for v in _podman_json("volume", "ls") if _is_of_run(v["Name"], v.get("Labels"), run_id)]
    return {"containers": containers, "networks": networks, "volumes": volumes,
            "nft_tables": _policy_tables(run_id), "netns": exposure.run_netns(run_id)}


def policy_table(run_id: str) -> str:
    """The nftables table (family inet) of ``run_id``'s network policy
    (descriptors/terraform/local: ``refarch_<run id with _ for ->``)."""
    return "refarch_" + run_id.replace("-", "_")


def _policy_tables(run_id: str) -> list[str]:
    """The run's nftables tables on this host: its network policy and the
    exposure probes' per-destination counters (refarch.clouds.arrivals.edge_table)."""
    out = proc.run(["nft", "list", "tables"], timeout_s=30, check=False).stdout
    present = {line.strip() for line in out.splitlines()}
    names = (policy_table(run_id), arrivals.edge_table(policy_table(run_id)))
    return [name for name in names if f"table inet {name}" in present]


def run_labels() -> dict[str, dict[str, str]]:
    """Run id -> the labels found on its containers, networks and volumes
    (merged; the owner labels are the same on each)."""
    runs: dict[str, dict[str, str]] = {}
    found = [(c.get("Labels") or {}) for c in _podman_json("ps", "-a", "--filter", f"label={LABEL}")]
    found += [(n.get("labels") or {}) for n in _podman_json("network", "ls", "--filter", f"label={LABEL}")]
    found += [(v.get("Labels") or {}) for v in _podman_json("volume", "ls", "--filter", f"label={LABEL}")]
    for labels in found:
        run_id = labels.get(LABEL)
        if run_id:
            runs.setdefault(run_id, {}).update(labels)
    return runs


def all_run_ids() -> set[str]:
    """Every run id found on a container, network or volume of this host."""
    return set(run_labels())


def stale_runs(include_kept: bool = False) -> dict[str, tuple[bool, str, dict[str, str]]]:
    """Every run on this host with its verdict: run id -> (stale, reason,
    labels).  Decided from the resources' owner labels only, so the answer is
    the same from every checkout (see :func:`refarch.owner.stale_verdict`)."""
    return {run_id: (*stale_verdict(labels, include_kept), labels)
            for run_id, labels in sorted(run_labels().items())}


def sweep_stale(include_kept: bool = False, dry_run: bool = False, out: Callable[[str], object] = print) -> list[str]:
    """Sweep every run whose owner process is gone (and that was not kept),
    whichever checkout made it; print one line per run.  Returns the run ids
    swept (or that would be, with ``dry_run``)."""
    swept = []
    for run_id, (stale, reason, labels) in stale_runs(include_kept).items():
        if not stale:
            out(f"leaving {run_id}: {reason}")
            continue
        remove_run(run_id, Path(labels[LABEL_RUNDIR]), reason, dry_run, out)
        swept.append(run_id)
    return swept


def remove_run(run_id: str, rundir: Path | None, reason: str = "", dry_run: bool = False,
               out: Callable[[str], object] = print) -> dict[str, list[str]]:
    """Remove a run outside Terraform (its owner is gone): its podman
    resources, its subnet reservation, and, given its run directory, its
    Terraform state (set aside) and run.json (marked destroyed).  Prints one
    line; returns what was found."""
    found = run_resources(run_id)
    out(f"{'would remove' if dry_run else 'removing'} {run_id}: {reason + ': ' if reason else ''}{json.dumps(found)}")
    if not dry_run:
        sweep(run_id, found=found)
        release_subnet(run_id)
        if rundir is not None:
            forget_state(rundir)
    return found


def forget_state(rundir: Path) -> None:
    """After a sweep outside Terraform: set the run's state aside (so that
    ``terraform state list`` is empty) and mark the run destroyed."""
    state = rundir / "terraform" / "terraform.tfstate"
    if state.exists():
        state.rename(state.with_suffix(".tfstate.swept"))
    if (rundir / "run.json").exists():
        RunDir(rundir.name, rundir).update_meta(kept=False, destroyed=True, swept=True)


def sweep(run_id: str, log: Path | None = None, found: dict[str, list[str]] | None = None) -> dict[str, list[str]]:
    """Remove everything of ``run_id`` (:func:`run_resources`, or ``found``
    when the caller listed it already); return what was removed.

    Containers go first (they hold the network), then networks and volumes.
    """
    found = found if found is not None else run_resources(run_id)
    for name in found["containers"]:
        proc.run(["podman", "rm", "-f", "--ignore", "-t", "5", name], timeout_s=120, log=log)
    for name in found["networks"]:
        proc.run(["podman", "network", "rm", "-f", name], timeout_s=60, log=log, check=False)
    for name in found["volumes"]:
        proc.run(["podman", "volume", "rm", "-f", name], timeout_s=60, log=log, check=False)
    for name in found.get("nft_tables", []):
        proc.run(["nft", "delete", "table", "inet", name], timeout_s=30, log=log, check=False)
    if found.get("netns"):
        exposure.remove_probes(run_id)
    return found


def host_leaks(subnet: str) -> dict[str, list[str]]:
    """Host-side leftovers of a removed run network with ``subnet``: a
    bridge that still carries an address of the subnet, and nftables rules
    (podman's NAT and firewall) that name it.  Only meaningful while the
    run's subnet reservation is held (no other run can use the subnet)."""
    net = ipaddress.ip_network(subnet)
    out: dict[str, list[str]] = {}
    links = json.loads(proc.run(["ip", "-j", "addr", "show"], timeout_s=30).stdout or "[]")
    bridges = [link["ifname"] for link in links
               if any(a.get("family") == "inet" and ipaddress.ip_address(a["local"]) in net
                      for a in link.get("addr_info", []))]
    if bridges:
        out["bridges"] = bridges
    ruleset = proc.run(["nft", "list", "ruleset"], timeout_s=30, check=False).stdout
    rules = [line.strip() for line in ruleset.splitlines() if str(net) in line]
    if rules:
        out["nftables"] = rules
    return out


def leaks(run_id: str, subnet: str | None = None) -> dict[str, list[str]]:
    """What is still left of ``run_id`` (empty when nothing leaked):
    containers, networks and volumes by label, and, given the run's subnet,
    its bridge and nftables rules (:func:`host_leaks`)."""
    found = {kind: names for kind, names in run_resources(run_id).items() if names}
    if subnet and "networks" not in found:
        found.update(host_leaks(subnet))
    return found


def leftovers(run_id: str, rundir: Path) -> dict[str, list[str]]:
    """Everything of a finished run that is still on this host: podman
    containers, networks and volumes by label, its bridge and nftables rules,
    the addresses in its Terraform state and its subnet reservation (empty
    when the run left nothing).  ``rundir`` is the run's directory."""
    meta_file = rundir / "run.json"
    meta = json.loads(meta_file.read_text(encoding="utf-8")) if meta_file.exists() else {}
    found = leaks(run_id, meta.get("subnet"))
    state = rundir / "terraform" / "terraform.tfstate"
    if state.exists():
        resources = json.loads(state.read_text(encoding="utf-8") or "{}").get("resources", [])
        names = [f"{r.get('type')}.{r.get('name')}" for r in resources if r.get("instances")]
        if names:
            found["terraform_state"] = names
    if (_reservations() / f"{run_id}.json").exists():
        found["subnet_reservation"] = [meta.get("subnet", "?")]
    return found


#: nftables table in a local node's network namespace that cuts it off
#: (failure mode ``partition``).
PARTITION_TABLE = "refarch_partition"


def partition_ruleset(table: str = PARTITION_TABLE) -> str:
    """nftables input for ``nft -f -`` in a node's namespace: drop every
    packet in and out except loopback's, before any other table (priority
    -400: ahead of conntrack, so established connections are cut too)."""
    return (f"table inet {table} {{}}\ndelete table inet {table}\n"
            f"table inet {table} {{\n"
            "  chain input { type filter hook input priority -400; policy accept; iifname \"lo\" accept; drop; }\n"
            "  chain output { type filter hook output priority -400; policy accept; oifname \"lo\" accept; drop; }\n"
            "}\n")
