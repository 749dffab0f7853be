"""The availability workloads, as session fixtures the availability
properties share: a node restarted (``restart_run``) here, and an elastic
Horovod job that loses a node and gets it back (``elastic_runs``, in
:mod:`refarch.pytest.elastic`).  Each event is proven before anything is
measured (:func:`prove_down`: the node really went down, the cloud says so).
"""

from __future__ import annotations

import shlex
import time

import pytest

from .. import childrun
from ..judge import causes
from .workloads import timed


# Availability: nodes stopped and started by the cloud driver ----------------------
def node_clock(host) -> float:
    """The node's clock now, in seconds since the epoch."""
    return float(host.check_output("date +%s.%N"))


def wait_until(what: str, predicate, timeout_s: float, interval_s: float = 1.0, on_timeout=None):
    """Poll ``predicate()`` until it returns a truthy value (returned) or
    ``timeout_s`` seconds pass; then pytest.fail naming ``what`` (plus
    ``on_timeout()``, e.g. the root cause from a log)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            extra = on_timeout() if on_timeout else ""
            pytest.fail(f"{what}: not within {timeout_s:.0f} s{extra}")
        time.sleep(interval_s)


def node_healthy(cluster, name: str, mount_point: str) -> bool:
    """The node answers SSH on a new connection, its share is usable (listed
    within 10 s) and chrony is synchronised: what a restarted node needs
    before it can train again."""
    from .. import proc

    check = (f"timeout 10 ls -A {shlex.quote(mount_point)} >/dev/null && "
             "chronyc -n tracking | grep -q 'Leap status *: Normal'")
    r = proc.ssh_fresh(cluster.rundir.ssh_dir / "config", name, check, connect_timeout_s=3, timeout_s=30)
    return r.returncode == 0


def _answers_ssh(cluster, hosts, name: str) -> tuple[bool, str]:
    """Whether a TCP connection to node ``name``'s SSH port from a surviving
    node (from this host on a one-node cluster) is answered within 5 s, and
    who asked."""
    import socket

    address = cluster.contract.node(name).address
    peers = [n for n in cluster.contract.node_names if n != name]
    if peers:
        r = hosts[peers[0]].run(f"timeout 5 bash -c 'exec 3<>/dev/tcp/{address}/22' 2>/dev/null")
        return r.rc == 0, peers[0]
    try:
        socket.create_connection((address, 22), timeout=5).close()
        return True, "this host"
    except OSError:
        return False, "this host"


def still_up(cluster, hosts, name: str) -> str:
    """Empty when node ``name`` is down: the cloud reports it stopped and a
    TCP connection to its SSH port from a surviving node (from this host on
    a one-node cluster) is refused or times out (5 s).  Otherwise what says
    it is still up, e.g. "still answers SSH from node1 (cloud state
    running)"."""
    return failure_missing(cluster, hosts, name, "stop")


def failure_missing(cluster, hosts, name: str, mode: str) -> str:
    """Empty when failure ``mode`` of node ``name`` is in effect: no answer on
    SSH from a surviving node, and the cloud says stopped (``stop``,
    ``kill``) or running (``partition``: the node runs on, cut off).
    Otherwise what says it is not, e.g. "still answers SSH from node1 (cloud
    state running)"."""
    state = cluster.driver.node_state(cluster.context, name)
    answers, peer = _answers_ssh(cluster, hosts, name)
    if answers:
        return f"still answers SSH from {peer} (cloud state {state})"
    if mode == "partition" and state != "running":
        return f"is {state} in the cloud: a partitioned node must run on, cut off"
    if mode != "partition" and state != "stopped":
        return f"is {state} in the cloud although SSH from {peer} gets no answer"
    return ""


#: What each failure mode's call is named in messages.
_FAILURE_CALL = {"stop": "stop_node", "kill": "the power-off", "partition": "the partition"}


def prove_down(cluster, hosts, name: str, timeout_s: float = 30, mode: str = "stop") -> float:
    """Wait until failure ``mode`` of node ``name`` is in effect
    (:func:`failure_missing`; for ``stop``, the node is down), at most
    ``timeout_s`` seconds after the cloud's call returned; returns the
    seconds it took.  A property that times a failure is measured only after
    this proof.

    Raises:
        pytest.fail: "<node> still answers SSH from node1 (cloud state
            running) 30 s after stop_node returned" (a stop the cloud accepted
            but did not carry out).
    """
    start = time.monotonic()
    while True:
        why = failure_missing(cluster, hosts, name, mode)
        if not why:
            return time.monotonic() - start
        if time.monotonic() - start > timeout_s:
            what = "the node was never down" if mode != "partition" else "the node was never cut off"
            pytest.fail(f"{name} {why} {timeout_s:.0f} s after {_FAILURE_CALL[mode]} returned: {what}, "
                        "so nothing was measured")
        time.sleep(1)


@pytest.fixture(scope="session")
def restart_run(cluster, hosts, profile, results, run_state) -> dict:
    """The last node is stopped by the cloud driver, proven down
    (:func:`prove_down`: the cloud says stopped, a peer gets no answer on
    SSH) and started again; ``healthy_s`` is the seconds from the start
    until SSH, the share and the clock are healthy; then its node checks
    (and the cluster checks) run again in a child pytest, without Ansible:
    ``failed`` lists any that fail, ``checks_passed`` counts the passed
    ones (none passed proves nothing)."""
    names = cluster.contract.node_names
    name, a = names[-1], profile.availability
    mount = cluster.contract.shared_storage["mount_point"]
    with timed(results, "availability"):
        cluster.driver.stop_node(cluster.context, name)
        try:
            down_s = prove_down(cluster, hosts, name)
        except BaseException:
            cluster.driver.start_node(cluster.context, name)  # never leave a node down for the next checks
            raise
        start = time.monotonic()
        try:
            cluster.driver.start_node(cluster.context, name)
            wait_until(f"{name} healthy after its restart (SSH, {mount} usable, chrony synchronised)",
                       lambda: node_healthy(cluster, name, mount), a.restart_timeout_s)
        except BaseException:
            cluster.driver.start_node(cluster.context, name)  # never leave a node down for the next checks
            raise
        healthy_s = time.monotonic() - start
        run_state.reachability.pop(name, None)
        causes.forget_paths(cluster.run_id)
        junit = cluster.rundir.logs / f"restart-{name}-checks-{int(time.time())}.xml"
        others = [n for n in names if n != name]
        outcomes = childrun.run_checks(cluster.run_id, f"not ({' or '.join(others)})" if others else "", junit,
                                       tests=("tests/integration/test_nodes.py", "tests/integration/test_cluster.py"))
    failed = {t: m.strip().splitlines()[0][:300] for t, (o, m) in outcomes.items() if o == "failed"}
    passed = sum(1 for o, _ in outcomes.values() if o == "passed")
    run = {"node": name, "down_after_stop_s": round(down_s, 1), "healthy_s": round(healthy_s, 1),
           "checks_run": len(outcomes), "checks_passed": passed, "failed": failed, "junit": str(junit)}
    results.availability["restart"] = run
    return run
