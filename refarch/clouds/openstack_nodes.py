"""OpenStack node operations for the availability properties: a server
stopped and started, frozen as on a power cut and booted afresh, cut off
from the network by a security group without rules and healed.

Like :mod:`refarch.clouds.openstack`, every function takes a
``Connection`` (or anything with the same ``compute`` and ``network``
proxies), so the tests drive them with ``openstack.test.fakes`` proxies.
"""

from __future__ import annotations

import time

from ..errors import RefarchError


def set_power(conn, server_name: str, on: bool, timeout_s: int = 600) -> None:
    """Stop (``on=False``) or start a server by name and wait until it is
    SHUTOFF or ACTIVE (openstacksdk's compute proxy).

    Raises:
        RefarchError: no such server, or it did not reach the state within
            ``timeout_s`` seconds (the message names the server and state).
    """
    from openstack import exceptions

    want = "ACTIVE" if on else "SHUTOFF"
    server = _server(conn, server_name)
    try:
        (conn.compute.start_server if on else conn.compute.stop_server)(server)
    except exceptions.ConflictException as exc:
        # Nova refuses to stop a stopped server (409 "Cannot 'stop' instance
        # ... while it is in vm_state stopped"): already there is done.
        status = conn.compute.get_server(server).status
        if status != want:
            raise RefarchError(f"server {server_name} is {status}; Nova refused to make it {want}: "
                               f"{str(exc).splitlines()[0]}") from None
    _wait(conn, server, server_name, want, timeout_s)


def node_state(conn, server_name: str) -> str:
    """The server's power as the suite names it: "running" (ACTIVE),
    "stopped" (SHUTOFF, or PAUSED: frozen, nothing runs), "missing" (no
    such server) or Nova's status in lower case (error, build, ...)."""
    server = conn.compute.find_server(server_name, ignore_missing=True)
    if server is None:
        return "missing"
    server = conn.compute.get_server(server)
    return {"ACTIVE": "running", "SHUTOFF": "stopped", "PAUSED": "stopped"}.get(
        server.status, str(server.status).lower())


def _server(conn, server_name: str):
    server = conn.compute.find_server(server_name, ignore_missing=True)
    if server is None:
        raise RefarchError(f"no server {server_name} in the project")
    return server


def _wait(conn, server, server_name: str, want: str, timeout_s: int) -> None:
    from openstack import exceptions

    try:
        conn.compute.wait_for_server(server, status=want, failures=["ERROR"], interval=5, wait=timeout_s)
    except exceptions.SDKException as exc:
        raise RefarchError(f"server {server_name} did not become {want} within {timeout_s} s: {exc}") from None


def power_cut(conn, server_name: str, timeout_s: int = 600) -> None:
    """Failure mode ``kill``: the server stops at once, as on a power cut.
    Nova's stop shuts the guest down cleanly first (its connections are
    closed, which peers see at once); Nova offers users no immediate
    power-off, so the server is paused (the hypervisor freezes it: nothing
    in it runs, it sends nothing, no connection is closed, which is what its
    peers see of a power cut) and waits PAUSED.  :func:`power_restored`
    boots it again.

    Raises:
        RefarchError: no such server, or not PAUSED within ``timeout_s``.
    """
    server = _server(conn, server_name)
    conn.compute.pause_server(server)
    _wait(conn, server, server_name, "PAUSED", timeout_s)


def power_restored(conn, server_name: str, timeout_s: int = 600) -> None:
    """After :func:`power_cut`: unpause, then a hard reboot, so that the
    node boots afresh as after a power cut (nothing of the frozen processes
    goes on); waits ACTIVE.

    Raises:
        RefarchError: no such server, or not ACTIVE within ``timeout_s``.
    """
    server = _server(conn, server_name)
    conn.compute.unpause_server(server)
    _wait(conn, server, server_name, "ACTIVE", timeout_s)
    conn.compute.reboot_server(server, "HARD")
    # The status stays ACTIVE for a moment after the request, then
    # HARD_REBOOT: wait for the reboot itself to end (seen on a real Nova).
    _wait_rebooted(conn, server, server_name, timeout_s)


def _wait_rebooted(conn, server, server_name: str, timeout_s: int) -> None:
    """Until Nova reads the server back ACTIVE with no task left.

    Raises:
        RefarchError: ERROR, or still rebooting after ``timeout_s`` seconds.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = conn.compute.get_server(server)
        if now.status == "ACTIVE" and not getattr(now, "task_state", None):
            return
        if now.status == "ERROR":
            break
        time.sleep(2)
    raise RefarchError(f"server {server_name} did not finish its hard reboot within {timeout_s} s")


def isolation_group(run_id: str) -> str:
    """Name of the security group without rules that cuts a node off
    (failure mode ``partition``); swept with the run (its name starts with
    the run id)."""
    return f"{run_id}-partition"


def partition(conn, server_name: str, run_id: str) -> dict[str, list[str]]:
    """Failure mode ``partition``: every port of the server gets only a
    security group without rules (no ingress, and its default egress rules
    deleted), so nothing reaches the node or leaves it while it runs on.
    Returns {port id: security group ids before}, what :func:`heal` puts
    back.

    Raises:
        RefarchError: no such server, or it has no port.
    """
    server = _server(conn, server_name)
    ports = list(conn.network.ports(device_id=server.id))
    if not ports:
        raise RefarchError(f"server {server_name} has no port to cut off")
    name = isolation_group(run_id)
    group = conn.network.find_security_group(name, ignore_missing=True)
    if group is None:
        group = conn.network.create_security_group(name=name, description="refarch: failure mode partition")
    for rule in list(conn.network.security_group_rules(security_group_id=group.id)):
        conn.network.delete_security_group_rule(rule, ignore_missing=True)
    before = {}
    for p in ports:
        before[p.id] = list(p.security_group_ids or [])
        conn.network.update_port(p, security_groups=[group.id])
    return before


def heal(conn, before: dict[str, list[str]]) -> None:
    """Give each port the security groups :func:`partition` saved."""
    for port_id, groups in before.items():
        conn.network.update_port(port_id, security_groups=groups)


#: What cloud-init prints on the console when it is done (its final
#: module's message, ``Cloud-init v. <version> finished at ... Datasource
#: <name> ...``), and the datasource that means no keys reached the node.
CLOUD_INIT_FINISHED = "Cloud-init v. "
NO_DATASOURCE = "DataSourceNone"
#: Console lines that mean cloud-init failed (a module's traceback, a unit
#: that failed to start).
CLOUD_INIT_FAILED = ("Failed to start cloud-init", "Failed to start cloud-final", "Traceback (most recent call last)",
                     "cc_scripts_user.py[WARNING]", "Failed to run module")


def await_boot(conn, servers: dict[str, str], timeout_s: float, poll_s: float = 5,
               clock=time.monotonic, sleep=time.sleep, guest_os: bool = True) -> dict[str, float]:
    """Wait until every server's guest has booted: ACTIVE, and cloud-init
    has printed its final message on the console log, from a datasource
    other than DataSourceNone (``guest_os=False``: ACTIVE is enough).
    ``servers``: node name -> server name.  Returns the seconds each node
    took.

    A server in ERROR is named with Nova's fault (the scheduler's or the
    compute's reason) at once, before any SSH; a cloud-init failure is
    named with the console lines that show it.

    Raises:
        RefarchError: ``node <node>: ...`` with the cause.
    """
    start = clock()
    waiting = {name: None for name in servers}
    done: dict[str, float] = {}
    while True:
        for name in [n for n in waiting if n not in done]:
            server = conn.compute.get_server(_server(conn, servers[name]))
            if server.status == "ERROR":
                fault = server.fault or {}
                raise RefarchError(f"{name}: server in ERROR: {fault.get('message') or 'Nova recorded no fault'}"
                                   f"{' (code ' + str(fault['code']) + ')' if fault.get('code') else ''}")
            if server.status != "ACTIVE":
                continue
            if not guest_os:
                done[name] = round(clock() - start, 1)
                continue
            console = conn.compute.get_server_console_output(server).get("output") or ""
            lines = console.splitlines()
            failed = [line for line in lines if any(mark in line for mark in CLOUD_INIT_FAILED)]
            if failed:
                raise RefarchError(f"{name}: cloud-init failed (console log): " + " | ".join(failed[-3:]))
            # The kernel's console prefixes it ("[  130.63] cloud-init[535]: Cloud-init v. ...").
            finished = [line for line in lines if CLOUD_INIT_FINISHED in line and " finished at " in line]
            if finished:
                if NO_DATASOURCE in finished[-1]:
                    raise RefarchError(f"{name}: cloud-init found no datasource (DataSourceNone): no user data, "
                                       f"no keys: {finished[-1].strip()}")
                done[name] = round(clock() - start, 1)
            waiting[name] = lines[-1].strip() if lines else ""
        if len(done) == len(waiting):
            return done
        if clock() - start > timeout_s:
            late = [n for n in waiting if n not in done]
            raise RefarchError(f"{late[0]}: not booted within {timeout_s:.0f} s; its console's last line: "
                               f"{waiting[late[0]] or '(empty)'}")
        sleep(poll_s)


def server_faults(conn, run_id: str) -> list[str]:
    """The run's servers in ERROR, each as ``"node2: server in ERROR: <Nova's
    fault>"`` (the server name less the run id): what a failed apply
    means when Nova could not place or build a node."""
    out = []
    for server in conn.compute.servers():
        if not server.name.startswith(f"{run_id}-") or server.status != "ERROR":
            continue
        fault = conn.compute.get_server(server.id).fault or {}
        out.append(f"{server.name[len(run_id) + 1:]}: server in ERROR: "
                   f"{(fault.get('message') or '').strip() or 'Nova recorded no fault'}")
    return sorted(out)
