"""The playbook is idempotent: a second run changes nothing."""

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.run_phase("idempotence")]


def test_playbook_idempotent(cluster):
    """Re-running descriptors/ansible/site.yml reports changed=0 on every node."""
    result = cluster.configure(log_name="ansible-idempotence.log", phase="idempotence")
    changed = {h: n for h, n in result.changed.items() if n}
    assert not changed, f"second playbook run changed tasks on {changed}: {result.changed_tasks()}"
