"""Non-functional properties: one test per property of the profile
(``test_property[scaling.efficiency]``), each measured on the cluster and
judged against the profile's reference.  What each property is, how it is
measured and judged: its group's module in refarch/properties/ (the
registry, refarch.properties); this file holds no logic."""

import pytest

from refarch import properties
from refarch.pytest.state import STATE

pytestmark = [pytest.mark.integration, pytest.mark.run_phase("properties")]


def pytest_generate_tests(metafunc):
    if "property_id" in metafunc.fixturenames:
        state = metafunc.config.stash.get(STATE, None)
        ids = list(state.profile.property_specs()) if state else ["no-profile"]
        metafunc.parametrize("property_id", ids, ids=ids)


def test_property(property_id, request, profile, results, run_state):
    """The property, measured on this cluster, is within the profile's
    reference (fails with figure, bound and source; warns in the band)."""
    properties.measure_and_judge(property_id, request, profile, results, run_state)
