"""pytest-timeout's limit of the main job's items (refarch.pytest.options):
an item that runs a job with a limit of its own gets more than that limit,
so that the job's own stop, which names it, comes first."""

from types import SimpleNamespace

import pytest

from refarch.profile import load_profile
from refarch.pytest import options
from refarch.pytest.state import STATE


class Item:
    def __init__(self, phase=None, check=False, timeout=None):
        self.keywords = {"integration": True, **({"check_phase": True} if check else {})}
        self.markers = [m for m in (pytest.mark.run_phase(phase).mark if phase else None,
                                    pytest.mark.timeout(timeout).mark if timeout else None) if m]

    def get_closest_marker(self, name):
        return next((m for m in reversed(self.markers) if m.name == name), None)

    def add_marker(self, marker):
        self.markers.append(marker.mark)

    def limit_s(self):
        marker = self.get_closest_marker("timeout")
        return marker.args[0] if marker else None


def collect(profile: str, items: list[Item], session_timeout_s: float = 1800) -> list[Item]:
    state = SimpleNamespace(existing=None, profile=load_profile(profile))
    config = SimpleNamespace(stash={STATE: state}, getoption=lambda name, default=None: None,
                             getini=lambda name: str(session_timeout_s))
    options.pytest_collection_modifyitems(config, items)
    return items


def test_a_training_item_outlasts_its_jobs_limit_where_the_jobs_are_long():
    smoke, props, idem, check, other, pinned = collect("openstack-aio-guests", [
        Item("smoke"), Item("properties"), Item("idempotence"), Item(check=True), Item(), Item("smoke", timeout=5)])
    t = load_profile("openstack-aio-guests").timeouts_s
    assert smoke.limit_s() == props.limit_s() == t.smoke + options.JOB_ITEM_SLACK_S > 1800
    assert idem.limit_s() == t.configure + options.JOB_ITEM_SLACK_S
    assert check.limit_s() == t.check and other.limit_s() is None and pinned.limit_s() == 5


def test_the_session_limit_stays_where_it_is_longer():
    [smoke] = collect("local", [Item("smoke")], session_timeout_s=1800)
    assert load_profile("local").timeouts_s.smoke + options.JOB_ITEM_SLACK_S <= 1800
    assert smoke.limit_s() is None
