"""The exposure scan misses nothing: N random TCP and UDP listeners, on random
nodes, admitted from anywhere by rules at the head of the run's network
policy, are every one found open by the outside probe (and by the admin
probe), with the probes' evidence; the time the survey took is recorded.

Runs on the shared cluster of ``tox -e faults`` (local cloud); the seed is
printed and can be given again with ``REFARCH_EXPOSURE_SEED``.
"""

import os
import random
import time

import pytest

from refarch import exposure, localcloud, proc

pytestmark = pytest.mark.integration

#: Listeners seeded per run: TCP and UDP, half each.
SEEDED = 20

#: One process per node holds the node's seeded sockets; UDP ones never
#: answer (nmap alone sees them as "open|filtered").
LISTENERS = ("import socket, sys, time\n"
             "held = []\n"
             "for spec in sys.argv[2:]:\n"
             "    proto, port = spec.split('/')\n"
             "    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM if proto == 'tcp' else socket.SOCK_DGRAM)\n"
             "    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
             "    s.bind(('0.0.0.0', int(port)))\n"
             "    if proto == 'tcp':\n"
             "        s.listen(8)\n"
             "    held.append(s)\n"
             "time.sleep(86400)\n")


def seeded_listeners(seed: int, nodes: list[str], count: int = SEEDED) -> dict[str, list[str]]:
    """{node: ["tcp/23456", "udp/34567"]}: ``count`` distinct ports in
    20000-59999 (TCP and UDP alternately) on nodes drawn with ``seed``."""
    rng = random.Random(seed)
    ports = rng.sample(range(20000, 60000), count)
    out: dict[str, list[str]] = {n: [] for n in nodes}
    for i, port in enumerate(ports):
        out[rng.choice(nodes)].append(f"{'tcp' if i % 2 == 0 else 'udp'}/{port}")
    return out


def test_seeded_listeners_are_all_found(cluster, results):
    contract = cluster.contract
    if contract.cloud != "local":
        pytest.skip(f"not run: the exposure probes are built for the local cloud, not {contract.cloud}")
    seed = int(os.environ.get("REFARCH_EXPOSURE_SEED") or time.time_ns() % 1_000_000)
    print(f"refarch: exposure seed {seed} (REFARCH_EXPOSURE_SEED={seed} repeats it)")
    names = {n.address: n.name for n in contract.nodes}
    seeded = seeded_listeners(seed, contract.node_names)
    table = contract.network_policy["table"]
    probes = exposure.plan_probes(cluster.run_id, localcloud.probe_ranges(cluster.rundir.read_meta()["probe_subnet"]))
    exposure.remove_probes(cluster.run_id)
    try:
        for node, specs in seeded.items():
            if specs:
                proc.run(["podman", "exec", "-d", f"{cluster.run_id}-{node}", "python3", "-c", LISTENERS,
                          "refarch-seeded", *specs], timeout=30)
        for spec in sorted({s for specs in seeded.values() for s in specs}):
            proto, port = spec.split("/")
            proc.run(["nft", "insert", "rule", "inet", table, "forward", proto, "dport", port, "accept",
                      "comment", '"refarch-seeded"'], timeout=30)
        time.sleep(1)  # the listeners bind
        for probe in probes:
            exposure.create_probe(probe)
        start = time.monotonic()
        scans = exposure.survey(cluster.run_id, probes, names,
                                {n: f"{cluster.run_id}-{n}" for n in names.values()}, table)
        seconds = time.monotonic() - start
    finally:
        exposure.remove_probes(cluster.run_id)
        listing = proc.run(["nft", "-a", "list", "chain", "inet", table, "forward"], timeout=30).stdout
        for line in listing.splitlines():
            if "refarch-seeded" in line and "# handle " in line:
                proc.run(["nft", "delete", "rule", "inet", table, "forward", "handle",
                          line.rsplit("# handle ", 1)[1].strip()], timeout=30)
        for node in seeded:
            proc.run(["podman", "exec", f"{cluster.run_id}-{node}", "pkill", "-f", "refarch-seeded"],
                     timeout=30, check=False)
    address_of = {name: address for address, name in names.items()}
    missed = {kind: [f"{node} {spec}" for node, specs in seeded.items() for spec in specs
                     if spec not in scan.open_ports.get(address_of[node], [])]
              for kind, scan in scans.items()}
    total = sum(len(specs) for specs in seeded.values())
    results.exposure["seeded"] = {"seed": seed, "listeners": seeded, "seconds": round(seconds, 1),
                                  "found": {k: total - len(v) for k, v in missed.items()}, "of": total,
                                  "udp_ports_sent": scans["outside"].udp_ports[:5]}
    print(f"refarch: exposure survey of {total} seeded listeners on {len(names)} nodes took {seconds:.1f} s")
    assert not any(missed.values()), f"seed {seed}: not found open: {missed}"
