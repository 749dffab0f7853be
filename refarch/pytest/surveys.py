"""The exposure survey as a fixture the exposure properties read
(refarch.properties.exposure): an admin and an outside probe scan every
node of a local cluster (refarch.clouds.exposure)."""

from __future__ import annotations

import pytest

from ..clouds import exposure
from ..clouds import local as localcloud
from .workloads import timed


@pytest.fixture(scope="module")
def exposure_scans(cluster, results) -> dict:
    """{probe kind: ScanResult} from the admin and the outside probe (local
    cloud, refarch.clouds.exposure.survey); each result also carries ``dropped``
    (packets the run's network policy dropped during that probe's scan),
    ``reached`` and ``arrived`` per node (its packets at the node's edge,
    and inside it) and the listening ports its packets reached."""
    contract = cluster.contract
    if contract.cloud != "local":
        pytest.skip(f"not run: the exposure probes are built for the local cloud, not {contract.cloud}")
    probe_subnet = cluster.rundir.read_meta().get("probe_subnet")
    table = contract.network_policy.get("table")
    if not probe_subnet or not table:
        # A local cluster without them cannot be surveyed: a defect of its
        # deployment (or of a suite too old for it), never a skip.
        missing = " and ".join(what for what, have in (("a probe subnet (run.json)", probe_subnet),
                                                        ("a network policy table (contract)", table)) if not have)
        pytest.fail(f"run {cluster.run_id} has no {missing}: the exposure survey cannot run; deploy it again "
                    "with this suite")
    probes = exposure.plan_probes(cluster.run_id, localcloud.probe_ranges(probe_subnet))
    nodes = {n.address: n.name for n in contract.nodes}
    exposure.remove_probes(cluster.run_id)  # what an interrupted scan of this run left
    with timed(results, "properties"):
        try:
            for probe in probes:
                exposure.create_probe(probe)
            scans = exposure.survey(cluster.run_id, probes, nodes,
                                    {name: f"{cluster.run_id}-{name}" for name in nodes.values()}, table)
        finally:
            exposure.remove_probes(cluster.run_id)
    results.exposure.update({kind: r.as_dict() for kind, r in scans.items()})
    return scans
