"""What of the host one all-in-one holds, by ownership rather than by a
before/after diff: on a shared machine other runs add and remove links,
namespaces and processes at the same time, and a diff would blame them on
this one (or miss this one's in their noise).

Owned by an all-in-one, while it runs:

- ``links``: its podman network's bridge, the host end of its container's
  veth, and in guests mode the host's end of the pair to its external
  network (:attr:`AllInOne.host_link`);
- ``netns``: its container's network namespace (podman's sandbox key);
- ``qemu``: the pids of the guests' QEMU processes, found by the
  container's id in their cgroup.

The Linux bridge agent's bridges and taps, the router's namespaces and
every service's listening socket live inside the container's network
namespace, so they go with it.  The exposure probes' namespaces belong to
the runs on it (:mod:`.probes`), whose own leak checks cover them.
"""

from __future__ import annotations

import json
from pathlib import Path

from ... import proc
from ..exposure import host_netns


def _read(path: Path) -> str:
    """A /proc or /sys file's text ("" once it is gone)."""
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


def _link_by_index(index: str) -> str:
    """The host's link whose ifindex is ``index`` ("" when none)."""
    for link in Path("/sys/class/net").iterdir():
        if _read(link / "ifindex") == index:
            return link.name
    return ""


def held(aio) -> dict[str, set[str]]:
    """What of the host ``aio`` (an :class:`~refarch.clouds.aio.AllInOne`)
    holds now: ``{"links": names, "netns": names, "qemu": pids}``.  Read
    while it runs; a part that cannot be read (the container already gone)
    is left out, not guessed.

    Raises:
        CommandError: podman fails for another reason than a missing container.
    """
    out: dict[str, set[str]] = {"links": set(), "netns": set(), "qemu": set()}
    network = proc.run(["podman", "network", "inspect", f"{aio.run_id}-net"], timeout_s=30, check=False)
    if network.returncode == 0:
        out["links"] |= {n["network_interface"] for n in json.loads(network.stdout) if n.get("network_interface")}
    if aio.host_link:
        out["links"].add(aio.host_link)
    inspect = proc.run(["podman", "inspect", "--format", "{{.Id}} {{.NetworkSettings.SandboxKey}}", aio.container],
                       timeout_s=30, check=False)
    if inspect.returncode == 0 and inspect.stdout.split():
        container_id, *sandbox = inspect.stdout.split()
        out["netns"] |= {Path(key).name for key in sandbox if key}
        iflink = proc.run(["podman", "exec", aio.container, "cat", "/sys/class/net/eth0/iflink"], timeout_s=30,
                          check=False).stdout.strip()
        veth = _link_by_index(iflink) if iflink else ""
        out["links"] |= {veth} if veth else set()
        out["qemu"] |= qemu_pids(container_id)
    return out


def qemu_pids(container_id: str = "") -> set[str]:
    """The pids of the host's QEMU processes (from /proc: no command to
    install), only those in the cgroup of container ``container_id`` when
    given."""
    return {pid_dir.name for pid_dir in Path("/proc").glob("[0-9]*")
            if _read(pid_dir / "comm").startswith("qemu-system") and container_id in _read(pid_dir / "cgroup")}


def left(footprint: dict[str, set[str]]) -> dict[str, list[str]]:
    """Which of ``footprint`` (:func:`held`, read while it ran) the host
    still has: links, named namespaces and live processes; empty lists
    dropped."""
    links = {p.name for p in Path("/sys/class/net").iterdir()}
    netns = set(host_netns())
    alive = {pid for pid in footprint.get("qemu", set()) if _read(Path("/proc") / pid / "comm").startswith("qemu")}
    found = {"links": sorted(footprint.get("links", set()) & links),
             "netns": sorted(footprint.get("netns", set()) & netns),
             "qemu": sorted(alive)}
    return {kind: items for kind, items in found.items() if items}
