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


def collect(profile: str, items: list[Item], ini_s: str = "1800", option_s=None) -> list[Item]:
    state = SimpleNamespace(existing=None, profile=load_profile(profile))
    config = SimpleNamespace(stash={STATE: state}, getoption=lambda name, default=None: option_s,
                             getini=lambda name: ini_s)
    options.pytest_collection_modifyitems(config, items)
    return items


def test_a_run_phase_item_outlasts_the_limits_of_the_jobs_it_runs(monkeypatch):
    monkeypatch.delenv("PYTEST_TIMEOUT", raising=False)
    smoke, props, idem, check, other, pinned = collect("openstack-aio-guests", [
        Item("smoke"), Item("properties"), Item("idempotence"), Item(check=True), Item(), Item("smoke", timeout=5)])
    profile = load_profile("openstack-aio-guests")
    t = profile.timeouts_s
    # np=1 and np=2 at one batch size: two jobs at most in one item's setup.
    assert len(profile.scaling_points()) == 2
    assert smoke.limit_s() == 2 * t.smoke + options.JOB_ITEM_SLACK_S
    assert idem.limit_s() == t.configure + options.JOB_ITEM_SLACK_S
    assert check.limit_s() == t.check
    assert props.limit_s() is None and other.limit_s() is None and pinned.limit_s() == 5


def test_the_session_limit_stays_where_it_is_longer_or_unlimited(monkeypatch):
    monkeypatch.delenv("PYTEST_TIMEOUT", raising=False)
    [longer] = collect("openstack-aio-guests", [Item("smoke")], ini_s="100000")
    [unlimited] = collect("openstack-aio-guests", [Item("smoke")], option_s=0.0)
    assert longer.limit_s() is None and unlimited.limit_s() is None


def test_the_session_limit_is_found_as_pytest_timeout_finds_it(monkeypatch):
    monkeypatch.setenv("PYTEST_TIMEOUT", "100000")
    [from_env] = collect("openstack-aio-guests", [Item("smoke")], ini_s="1800")
    [from_option] = collect("openstack-aio-guests", [Item("smoke")], ini_s="1800", option_s=60.0)
    assert from_env.limit_s() is None and from_option.limit_s() > 60
