"""The exposure scan misses nothing: N random TCP and UDP listeners, on random
nodes, admitted from anywhere by rules at the head of the run's network
policy, are every one found open by the outside probe (and by the admin
probe), with the probes' evidence; the time the survey took is recorded.

Runs on the shared cluster of ``tox -e faults`` (local cloud); the seed is
printed and can be given again with ``REFARCH_EXPOSURE_SEED``.
"""

import os
import random
import re
import time

import pytest

from refarch import proc
from refarch.clouds import exposure
from refarch.clouds import local as localcloud

pytestmark = pytest.mark.integration

#: Listeners seeded per run: TCP and UDP, half each.
SEEDED = 20

#: One process per node holds the node's seeded sockets; UDP ones never
#: answer (nmap alone sees them as "open|filtered").  A port that cannot be
#: bound is named on stderr (the node's /tmp/refarch-seeded.log) and the
#: others are still held, so the test can say which listener is missing.
LISTENERS = ("import socket, sys, time\n"
             "held = []\n"
             "for spec in sys.argv[2:]:\n"
             "    proto, port = spec.split('/')\n"
             "    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM if proto == 'tcp' else socket.SOCK_DGRAM)\n"
             "    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
             "    try:\n"
             "        s.bind(('0.0.0.0', int(port)))\n"
             "        if proto == 'tcp':\n"
             "            s.listen(8)\n"
             "    except OSError as exc:\n"
             "        print(f'{spec}: {exc}', file=sys.stderr, flush=True)\n"
             "        continue\n"
             "    held.append(s)\n"
             "print(f'holding {len(held)}', file=sys.stderr, flush=True)\n"
             "time.sleep(86400)\n")
LISTENER_LOG = "/tmp/refarch-seeded.log"
#: Seconds the seeded listeners get to bind on a busy machine.
BIND_WAIT_S = 20


def seeded_listeners(seed: int, nodes: list[str], count: int = SEEDED,
                     in_use: set[int] = frozenset()) -> dict[str, list[str]]:
    """{node: ["tcp/23456", "udp/34567"]}: ``count`` distinct ports in
    20000-59999 (TCP and UDP alternately) on nodes drawn with ``seed``,
    none of them a port some node's socket already holds (``in_use``: the
    kernel's ephemeral range overlaps 20000-59999, and a seeded listener
    that cannot bind would be "missed" by no fault of the probe)."""
    rng = random.Random(seed)
    ports = rng.sample(sorted(set(range(20000, 60000)) - set(in_use)), count)
    out: dict[str, list[str]] = {n: [] for n in nodes}
    for i, port in enumerate(ports):
        out[rng.choice(nodes)].append(f"{'tcp' if i % 2 == 0 else 'udp'}/{port}")
    return out


def ports_in_use(container: str) -> set[int]:
    """Local port numbers of every TCP and UDP socket in the container's
    network namespace, in any state (``ss -Htuan``)."""
    out = proc.in_netns(container, "ss", "-Htuan").stdout
    return {int(m) for m in re.findall(r"^\S+\s+\S+\s+\d+\s+\d+\s+\S*:(\d+)\s", out, flags=re.M)}


def wait_for_listeners(containers: dict[str, str], seeded: dict[str, list[str]], wait_s: float = BIND_WAIT_S) -> None:
    """Return once every seeded listener listens on its node (``ss -Htuln``
    in the node's namespace); before that the survey would measure nothing.

    Raises:
        pytest.fail.Exception: after ``wait_s`` seconds, naming each node's
            missing listeners and what its listener process said.
    """
    deadline = time.monotonic() + wait_s
    while True:
        missing = {node: sorted(set(specs) - set(exposure.parse_listeners(
                       proc.in_netns(containers[node], "ss", "-Htuln").stdout)))
                   for node, specs in seeded.items() if specs}
        missing = {node: specs for node, specs in missing.items() if specs}
        if not missing:
            return
        if time.monotonic() > deadline:
            said = {node: proc.run(["podman", "exec", containers[node], "cat", LISTENER_LOG], timeout_s=30,
                                   check=False).stdout.strip() or "(nothing)" for node in missing}
            pytest.fail("not measured: the seeded listeners did not all listen within "
                        f"{wait_s:.0f} s: " + "; ".join(f"{node}: {', '.join(specs)} not listening "
                                                          f"(its listener said: {said[node]})"
                                                          for node, specs in missing.items()), pytrace=False)
        time.sleep(0.5)


def test_seeded_listeners_are_all_found(cluster, results):
    contract = cluster.contract
    if contract.cloud != "local":
        pytest.skip(f"not run: the exposure probes are built for the local cloud, not {contract.cloud}")
    seed = int(os.environ.get("REFARCH_EXPOSURE_SEED") or time.time_ns() % 1_000_000)
    print(f"refarch: exposure seed {seed} (REFARCH_EXPOSURE_SEED={seed} repeats it)")
    names = {n.address: n.name for n in contract.nodes}
    containers = {n: f"{cluster.run_id}-{n}" for n in contract.node_names}
    in_use = set().union(*(ports_in_use(c) for c in containers.values()))
    seeded = seeded_listeners(seed, contract.node_names, in_use=in_use)
    table = contract.network_policy["table"]
    probes = exposure.plan_probes(cluster.run_id, localcloud.probe_ranges(cluster.rundir.read_meta()["probe_subnet"]))
    exposure.remove_probes(cluster.run_id)
    try:
        for node, specs in seeded.items():
            if specs:
                proc.run(["podman", "exec", "-d", containers[node], "sh", "-c",
                          f'exec python3 -c "$0" refarch-seeded "$@" 2>{LISTENER_LOG}', LISTENERS, *specs],
                         timeout_s=30)
        for spec in sorted({s for specs in seeded.values() for s in specs}):
            proto, port = spec.split("/")
            proc.run(["nft", "insert", "rule", "inet", table, "forward", proto, "dport", port, "accept",
                      "comment", '"refarch-seeded"'], timeout_s=30)
        wait_for_listeners(containers, seeded)
        for probe in probes:
            exposure.create_probe(probe)
        start = time.monotonic()
        scans = exposure.survey(cluster.run_id, probes, names, containers, table)
        seconds = time.monotonic() - start
    finally:
        exposure.remove_probes(cluster.run_id)
        listing = proc.run(["nft", "-a", "list", "chain", "inet", table, "forward"], timeout_s=30).stdout
        for line in listing.splitlines():
            if "refarch-seeded" in line and "# handle " in line:
                proc.run(["nft", "delete", "rule", "inet", table, "forward", "handle",
                          line.rsplit("# handle ", 1)[1].strip()], timeout_s=30)
        for node in seeded:
            proc.run(["podman", "exec", containers[node], "pkill", "-f", "refarch-seeded"],
                     timeout_s=30, check=False)
    address_of = {name: address for address, name in names.items()}
    missed = {kind: [f"{node} {spec}" for node, specs in seeded.items() for spec in specs
                     if spec not in scan.open_ports.get(address_of[node], [])]
              for kind, scan in scans.items()}
    total = sum(len(specs) for specs in seeded.values())
    results.exposure["seeded"] = {"seed": seed, "listeners": seeded, "seconds": round(seconds, 1),
                                  "found": {k: total - len(v) for k, v in missed.items()}, "of": total,
                                  "udp_ports_sent": scans["outside"].udp_ports[:5]}
    print(f"refarch: exposure survey of {total} seeded listeners on {len(names)} nodes took {seconds:.1f} s")
    evidence = "; ".join(f"{kind} -> {node}: {scan.reached.get(address_of[node], 0)} packets at its edge, "
                         f"{scan.arrived.get(address_of[node], 0)} arrived"
                         for kind, scan in scans.items() for node in seeded
                         if any(m.startswith(f"{node} ") for m in missed[kind]))
    assert not any(missed.values()), f"seed {seed}: not found open: {missed} ({evidence})"
