"""The exposure survey as a fixture the exposure properties read
(refarch.properties.exposure): the cloud driver scans every node from an
admin and an outside probe (``CloudDriver.survey_exposure``)."""

from __future__ import annotations

import pytest

from ..errors import NotSupported, RefarchError
from .workloads import timed


@pytest.fixture(scope="module")
def exposure_scans(cluster, results) -> dict:
    """{probe kind: ScanResult} from the driver's survey; skipped where the
    cloud has no exposure probes, a failure (never a skip) where a cluster
    that should have them cannot be surveyed."""
    with timed(results, "properties"):
        try:
            scans = cluster.driver.survey_exposure(cluster.context)
        except NotSupported as exc:
            pytest.skip(f"not run: {exc}")
        except RefarchError as exc:
            pytest.fail(str(exc), pytrace=False)
    results.exposure.update({kind: r.as_dict() for kind, r in scans.items()})
    return scans
