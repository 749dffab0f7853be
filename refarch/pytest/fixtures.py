"""The plugin's fixtures: the deployed, configured cluster of the session
(torn down after it, also on failure, Ctrl-C and SIGTERM, unless kept), its
profile and results, and testinfra hosts per node."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import testinfra

from .. import lifecycle
from ..cluster import Cluster
from ..errors import RefarchError, TeardownError
from ..judge.results import Results
from ..lifecycle import guarded
from ..profile import Profile
from .hosts import fresh_host, probe_ssh
from .nodelogs import collect_node_logs
from .reporting import report_teardown_check
from .state import STATE, RunState, say


@pytest.fixture(scope="session")
def run_state(request) -> RunState:
    state = request.config.stash.get(STATE, None)
    if state is None:
        pytest.skip("no cluster: give --profile NAME or --run-id ID")
    return state


@pytest.fixture(scope="session")
def cluster(run_state: RunState, record_testsuite_property, request):
    """The deployed, configured cluster (a :class:`refarch.cluster.Cluster`).

    A new cluster is deployed and configured here and torn down after the
    session (also on failure, Ctrl-C and SIGTERM) unless --keep.
    """
    record_testsuite_property("run_id", run_state.run_id)
    record_testsuite_property("profile", run_state.profile_name)
    state = run_state
    if state.existing is not None:
        # What the checks ask of a cluster: its contract, and the profile's
        # extra CA certificates as this machine has them (as Cluster.ca_files).
        yield SimpleNamespace(contract=state.existing, rundir=None, ca_files=state.profile.ca_files)
        return
    config = request.config

    def teardown():
        if state.cluster is None:
            return
        got = lifecycle.INTERRUPTED
        why = f"{got['signal']} during {got['phase']}" if got else "end of the session"
        say(config, f"refarch: tearing down run {state.run_id} ({why})")
        try:
            state.results.teardown = state.cluster.destroy()
        except TeardownError as exc:
            # Nothing is left, but Terraform could not destroy what it made:
            # the run fails on its own check, refarch::teardown.
            state.results.teardown = state.cluster.rundir.read_meta().get("teardown")
            report_teardown_check(config, state.run_id, str(exc))
            say(config, f"refarch: teardown of run {state.run_id} FAILED: {exc}")
            return
        except RefarchError as exc:
            report_teardown_check(config, state.run_id, str(exc))
            say(config, f"refarch: teardown of run {state.run_id} FAILED: {exc}")
            raise
        report_teardown_check(config, state.run_id, "")
        say(config, f"refarch: teardown of run {state.run_id} done: nothing left "
                    f"({state.cluster.phases().get('teardown', 0):.0f} s)")

    def teardown_with_logs():
        collect_node_logs(config, state)
        teardown()

    with guarded(teardown_with_logs, keep=lambda: state.keep):
        if state.attached:
            state.cluster = Cluster.attach(state.run_id, loaded=state.profile)
            if state.cluster.contract is None:
                raise RefarchError(f"run {state.run_id} has no deployed cluster")
        else:
            state.cluster = Cluster.create(state.profile_name, state.overrides, run_id=state.run_id,
                                           loaded=state.profile)
            state.cluster.rundir.update_meta(kept=state.keep)
            state.cluster.prepare()
            state.cluster.deploy()
        if state.configure:
            state.cluster.configure()
        state.results.nodes = [{"name": n.name, "address": n.address, "roles": list(n.roles)}
                               for n in state.cluster.contract.nodes]
        yield state.cluster


@pytest.fixture(scope="session")
def profile(run_state: RunState) -> Profile:
    """The run's validated profile (every expectation comes from here)."""
    return run_state.profile


@pytest.fixture(scope="session")
def results(run_state: RunState) -> Results:
    """The run's results, written to ``results.json`` at the end."""
    return run_state.results


@pytest.fixture(scope="session")
def hosts(cluster, run_state: RunState) -> dict:
    """{node name: testinfra host} over SSH (strict host key checking), or
    this machine itself with --existing-hosts local."""
    if run_state.existing is not None:
        for node in cluster.contract.nodes:
            if node.name not in run_state.hosts:
                spec = "local://" if node.address == "127.0.0.1" else f"ssh://{cluster.contract.ssh_user}@{node.address}"
                # The inventory's key and known_hosts (strict), else ssh's own defaults.
                known = cluster.contract.ssh_known_hosts_file
                extra = f"-o StrictHostKeyChecking=yes -o UserKnownHostsFile={known}" if known else None
                run_state.hosts[node.name] = testinfra.get_host(
                    spec, ssh_identity_file=cluster.contract.ssh_private_key_file or None, ssh_extra_args=extra)
        return run_state.hosts
    config = cluster.rundir.ssh_dir / "config"
    if not config.exists():
        cluster.contract.write_ssh_config(config)
    for name in cluster.contract.node_names:
        if name not in run_state.hosts:
            run_state.hosts[name] = testinfra.get_host(f"ssh://{name}", ssh_config=str(config))
    return run_state.hosts


@pytest.fixture
def node(hosts, node_name, cluster, run_state):
    """The testinfra host of the parametrized node; the check is reported
    as not run (skipped) when the node cannot be reached."""
    if node_name not in hosts:
        pytest.fail(f"node {node_name} is not in the cluster contract ({sorted(hosts)})")
    why = probe_ssh(cluster, run_state, node_name)
    if why:
        pytest.skip(f"not run: {why} (see test_node_reachable)")
    return hosts[node_name]


@pytest.fixture
def fresh_node(node, node_name, cluster, run_state):
    """Like ``node``, but on a new SSH connection per command (checks of
    sshd: what the daemon does now, not what an old connection still gets)."""
    if run_state.existing is not None:
        return node
    return fresh_host(cluster, node_name)


@pytest.fixture
def reachable_hosts(hosts, cluster, run_state):
    """Cluster checks need every node: reported as not run while one is unreachable."""
    down = [w for w in (probe_ssh(cluster, run_state, n) for n in hosts) if w]
    if down:
        pytest.skip("not run: " + "; ".join(down) + " (see test_node_reachable)")
    return hosts

