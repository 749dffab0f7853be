"""The embedded local cloud: subnet allocation, run-scoped resources, sweep
and leak check for podman "machines".

Every container, network and volume a run creates carries the label
``refarch.run_id=<run id>``; that label is what the sweep and the leak check
look for, so a create that failed half-way (a tainted Terraform resource
whose destroy provisioner never runs) is still cleaned up.
"""

from __future__ import annotations

import ipaddress
import json
import shutil
from pathlib import Path

from . import proc
from .errors import PreflightError, RefarchError

LABEL = "refarch.run_id"
#: Commands the local cloud needs, with the Debian package that provides each.
REQUIRED_TOOLS = {
    "podman": "podman",
    "runc": "runc",
    "debootstrap": "debootstrap",
    "terraform": "terraform (HashiCorp's release, >= 1.4)",
    "ssh": "openssh-client",
    "ssh-keygen": "openssh-client",
    "flock": "util-linux",
}


def preflight_tools(which=None) -> None:
    """Check the local cloud's tools and devices before anything is created.

    Raises:
        PreflightError: one line naming every missing tool and its package.
    """
    which = which or shutil.which
    missing = [f"{tool} (package {pkg})" for tool, pkg in REQUIRED_TOOLS.items() if not which(tool)]
    if missing:
        raise PreflightError("missing tools for the local cloud: " + ", ".join(missing))
    if not Path("/dev/fuse").exists():
        raise PreflightError("/dev/fuse is missing: the sshfs shared storage needs FUSE on the host")


def _podman_json(*args: str) -> list:
    out = proc.run(["podman", *args, "--format", "json"], timeout=60).stdout.strip()
    return json.loads(out) if out else []


def used_subnets() -> list[ipaddress.IPv4Network]:
    """IPv4 subnets taken by podman networks, host routes and host addresses."""
    nets: list[ipaddress.IPv4Network] = []
    for net in _podman_json("network", "ls"):
        for sub in net.get("subnets") or []:
            nets.append(ipaddress.ip_network(sub["subnet"], strict=False))
    routes = json.loads(proc.run(["ip", "-j", "route", "show", "table", "all"], timeout=30).stdout or "[]")
    for route in routes:
        dst = route.get("dst", "")
        if dst and dst != "default" and ":" not in dst:
            nets.append(ipaddress.ip_network(dst, strict=False))
    return [n for n in nets if n.version == 4]


def pick_subnet(pool: str, prefix: int, used: list[ipaddress.IPv4Network]) -> str:
    """The first ``/prefix`` subnet of ``pool`` that overlaps none of ``used``.

    Raises:
        RefarchError: the pool is exhausted.
    """
    for candidate in ipaddress.ip_network(pool).subnets(new_prefix=prefix):
        if not any(candidate.overlaps(u) for u in used):
            return str(candidate)
    raise RefarchError(f"no free /{prefix} left in subnet pool {pool}")


def run_resources(run_id: str) -> dict[str, list[str]]:
    """Names of the containers, networks and volumes labelled with ``run_id``."""
    flt = f"label={LABEL}={run_id}"
    containers = [c["Names"][0] for c in _podman_json("ps", "-a", "--filter", flt)]
    networks = [n["name"] for n in _podman_json("network", "ls", "--filter", flt)]
    volumes = [v["Name"] for v in _podman_json("volume", "ls", "--filter", flt)]
    return {"containers": containers, "networks": networks, "volumes": volumes}


def all_run_ids() -> set[str]:
    """Every run id found on a container, network or volume of this host."""
    ids: set[str] = set()
    for c in _podman_json("ps", "-a", "--filter", f"label={LABEL}"):
        ids.add((c.get("Labels") or {}).get(LABEL, ""))
    for n in _podman_json("network", "ls", "--filter", f"label={LABEL}"):
        ids.add((n.get("labels") or {}).get(LABEL, ""))
    for v in _podman_json("volume", "ls", "--filter", f"label={LABEL}"):
        ids.add((v.get("Labels") or {}).get(LABEL, ""))
    ids.discard("")
    return ids


def sweep(run_id: str, log: Path | None = None) -> dict[str, list[str]]:
    """Remove everything labelled with ``run_id``; return what was removed.

    Containers go first (they hold the network), then networks and volumes.
    """
    found = run_resources(run_id)
    for name in found["containers"]:
        proc.run(["podman", "rm", "-f", "--ignore", "-t", "5", name], timeout=120, log=log)
    for name in found["networks"]:
        proc.run(["podman", "network", "rm", "-f", name], timeout=60, log=log, check=False)
    for name in found["volumes"]:
        proc.run(["podman", "volume", "rm", "-f", name], timeout=60, log=log, check=False)
    return found


def leaks(run_id: str) -> dict[str, list[str]]:
    """What is still left of ``run_id`` (empty lists when nothing leaked)."""
    return {kind: names for kind, names in run_resources(run_id).items() if names}
