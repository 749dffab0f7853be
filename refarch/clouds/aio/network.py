"""The host's side of a guests-mode all-in-one's external network: the
veth pair that joins the host to it, and the proof that a packet for a
floating IP leaves by that pair and never by the host's default route
(refarch/clouds/aio)."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

from ... import proc
from ...errors import RefarchError


def join_external(container: str, run_id: str, external: str, log: Path) -> tuple[str, str]:
    """Join the host to the external network: a veth pair whose host end
    holds the external subnet's second address and whose other end becomes
    ``ext0`` in ``container``.  Returns (host end, host address)."""
    net = ipaddress.ip_network(external)
    host_address = str(net.network_address + 2)
    link = f"rfx{run_id[-6:]}"
    pid = proc.run(["podman", "inspect", "-f", "{{.State.Pid}}", container], timeout_s=30).stdout.strip()
    proc.run(["ip", "link", "add", link, "type", "veth", "peer", "name", f"{link}c"], timeout_s=30, log=log)
    proc.run(["ip", "link", "set", f"{link}c", "netns", pid], timeout_s=30, log=log)
    proc.run(["nsenter", "-t", pid, "-n", "ip", "link", "set", f"{link}c", "name", "ext0"], timeout_s=30, log=log)
    proc.run(["nsenter", "-t", pid, "-n", "ip", "link", "set", "ext0", "up"], timeout_s=30, log=log)
    proc.run(["ip", "address", "add", f"{host_address}/{net.prefixlen}", "dev", link], timeout_s=30, log=log)
    proc.run(["ip", "link", "set", link, "up"], timeout_s=30, log=log)
    return link, host_address


def check_route(aio, address: str) -> None:
    """Prove that a packet from the host to ``address`` (a floating IP)
    leaves by the all-in-one's veth, never by the host's default route.

    ``aio``: a :class:`~refarch.clouds.aio.AllInOne` in guests mode.

    Raises:
        RefarchError: naming the device the kernel would use instead.
    """
    if aio.host_link is None:
        raise RefarchError(f"all-in-one {aio.run_id} runs fake servers: no route to {address} to check")
    route = json.loads(proc.run(["ip", "-j", "route", "get", address], timeout_s=10).stdout)[0]
    if route.get("dev") != aio.host_link or "gateway" in route:
        raise RefarchError(f"a packet to {address} would leave by {route.get('dev')}"
                           f"{' via ' + route['gateway'] if 'gateway' in route else ''}, not by the all-in-one's "
                           f"external link {aio.host_link}: refusing to send it")
