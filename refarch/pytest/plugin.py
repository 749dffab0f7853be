"""pytest plugin: the deployed cluster as session fixtures.

Options (group "refarch"):
  --profile NAME     deploy a new cluster from descriptors/profiles/NAME.yml
  --set KEY=VALUE    override a profile value (e.g. --set nodes.count=3)
  --run-id ID        use the kept cluster of run ID instead of deploying
  --keep             keep a new cluster after the session
  --configure        with --run-id: run the playbook before the checks
  --destroy          with --run-id: destroy the cluster after the session
  --long-properties  also measure the properties that stop and start nodes
  --existing-hosts X run only the node checks against existing hosts: "local"
                     (this machine) or an Ansible YAML inventory; needs --profile

Node checks take the ``node`` fixture, a pytest-testinfra host parametrized
over the cluster's node names (test ids ``test_x[node1]``).  Without
--profile or --run-id, tests marked ``integration`` are skipped.
"""

from __future__ import annotations

import getpass
import os
import re
import shlex
import socket
import sys
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest
import testinfra
import yaml
from _pytest.reports import TestReport

from .. import lifecycle, proc
from ..cluster import Cluster, preflight
from ..contract import Contract
from ..errors import RefarchError, TeardownError
from ..judge import checks
from ..judge.results import Results
from ..lifecycle import guarded, in_phase
from ..paths import runs_dir
from ..profile import Profile, load_profile, parse_overrides
from ..run import RunDir, new_run_id, validate_run_id

STATE = pytest.StashKey["RunState"]()


@dataclass
class RunState:
    """What the session knows before and after deploying."""

    run_id: str
    profile_name: str
    overrides: dict
    profile: Profile
    attached: bool
    keep: bool
    configure: bool
    results: Results
    cluster: Cluster | None = None
    hosts: dict = field(default_factory=dict)
    node_names: list[str] = field(default_factory=list)
    #: Contract of existing hosts (--existing-hosts): nothing is deployed.
    existing: Contract | None = None
    #: Node name -> why it cannot be reached over SSH (None: reachable).
    reachability: dict = field(default_factory=dict)
    #: The run's report.html once written.
    report: Path | None = None


def pytest_addoption(parser):
    group = parser.getgroup("refarch", "Horovod reference architecture")
    group.addoption("--profile", dest="refarch_profile", help="deploy a new cluster from this profile")
    group.addoption("--set", dest="refarch_set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a profile value, e.g. nodes.count=3")
    group.addoption("--run-id", dest="refarch_run_id", help="check the kept cluster of this run id")
    group.addoption("--keep", dest="refarch_keep", action="store_true", help="keep a new cluster")
    group.addoption("--configure", dest="refarch_configure", action="store_true",
                    help="with --run-id: run the playbook before the checks")
    group.addoption("--destroy", dest="refarch_destroy", action="store_true",
                    help="with --run-id: destroy the cluster after the session")
    group.addoption("--long-properties", dest="refarch_long", action="store_true",
                    help="also measure the properties that stop and start nodes (availability)")
    group.addoption("--existing-hosts", dest="refarch_existing",
                    help='node checks only, against "local" (this machine) or an Ansible YAML inventory')


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    config.addinivalue_line("markers", "integration: needs a deployed cluster (--profile or --run-id)")
    config.addinivalue_line("markers", "check_phase: a node or cluster check, limited by the profile's timeouts_s.check")
    config.addinivalue_line("markers", "run_phase(name): the run phase the test belongs to (smoke, idempotence)")
    name = config.getoption("refarch_profile")
    run_id = config.getoption("refarch_run_id")
    existing = config.getoption("refarch_existing")
    if not name and not run_id:
        if existing:
            raise pytest.UsageError("--existing-hosts needs --profile NAME for the expectations")
        return
    if existing:
        try:
            profile = load_profile(name, parse_overrides(config.getoption("refarch_set")))
            contract = existing_hosts_contract(existing, profile)
        except RefarchError as exc:
            raise pytest.UsageError(str(exc)) from None
        run_id = new_run_id("existing")
        state = RunState(run_id=run_id, profile_name=name, overrides={}, profile=profile, attached=True,
                         keep=True, configure=False, results=Results(run_id, name, "existing"),
                         existing=contract, node_names=contract.node_names)
        config.stash[STATE] = state
        config.pluginmanager.register(_Recorder(state.results), "refarch-recorder")
        if not getattr(config.option, "xmlpath", None):
            config.option.xmlpath = str(runs_dir() / run_id / "junit.xml")
        return
    try:
        overrides = parse_overrides(config.getoption("refarch_set"))
        if run_id:
            if name or overrides:
                raise RefarchError("--run-id uses the profile the run was deployed with; drop --profile/--set")
            meta = RunDir.open(validate_run_id(run_id)).read_meta()
            name, overrides = meta["profile"], meta.get("overrides", {})
            profile = load_profile(name, overrides)
        else:
            profile = load_profile(name, overrides)
            preflight(profile)
            run_id = new_run_id()
    except RefarchError as exc:
        raise pytest.UsageError(str(exc)) from None
    attached = bool(config.getoption("refarch_run_id"))
    state = RunState(
        run_id=run_id, profile_name=name, overrides=overrides, profile=profile, attached=attached,
        keep=(not config.getoption("refarch_destroy")) if attached else config.getoption("refarch_keep"),
        configure=config.getoption("refarch_configure") or not attached,
        results=Results(run_id, name, profile.cloud, overrides=dict(overrides)),
    )
    state.node_names = _node_names(state)
    config.stash[STATE] = state
    config.pluginmanager.register(_Recorder(state.results), "refarch-recorder")
    config.pluginmanager.register(_InterruptReporter(state), "refarch-interrupts")
    _CONFIG[:] = [config]
    lifecycle.NOTIFY = lambda line: say(config, line)
    if not getattr(config.option, "xmlpath", None):
        config.option.xmlpath = str(runs_dir() / run_id / "junit.xml")


def existing_hosts_contract(spec: str, profile: Profile) -> Contract:
    """A cluster contract for hosts that already exist: ``"local"`` (this
    machine, reached without SSH) or an Ansible YAML inventory whose
    ``cluster`` group (or all hosts) lists them with ``ansible_host``.

    Raises:
        RefarchError: the inventory is missing or lists no hosts.
    """
    storage = {"export": profile.shared_storage.export, "mount_point": profile.shared_storage.mount_point,
               "type": profile.shared_storage.type}
    if spec == "local":
        name = socket.gethostname()
        nodes = [{"name": name, "address": "127.0.0.1", "roles": ["worker"]}]
        user = getpass.getuser()
        key = known_hosts = ""
        cidr = "127.0.0.0/8"
    else:
        path = Path(spec)
        if not path.is_file():
            raise RefarchError(f"--existing-hosts: no inventory file {spec}")
        inv = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        top = inv.get("all", {})
        hosts = (top.get("children", {}).get("cluster", {}).get("hosts") or top.get("hosts") or {})
        if not hosts:
            raise RefarchError(f"--existing-hosts: {spec} lists no hosts (all.children.cluster.hosts or all.hosts)")
        nodes = [{"name": n, "address": (v or {}).get("ansible_host", n), "roles": ["worker"]} for n, v in hosts.items()]
        top_vars = top.get("vars") or {}
        user = top_vars.get("ansible_user", getpass.getuser())
        key = top_vars.get("ansible_ssh_private_key_file", "")
        m = re.search(r"UserKnownHostsFile=(\S+)", top_vars.get("ansible_ssh_common_args", ""))
        known_hosts = m.group(1) if m else ""
        cidr = "0.0.0.0/0"
    return Contract.from_outputs({
        "run_id": "existing-hosts", "cloud": "existing", "nodes": nodes,
        "cluster_network": {"cidr": cidr, "name": "existing"}, "ssh_user": user,
        "ssh_private_key_file": key, "ssh_known_hosts_file": known_hosts,
        "shared_storage": {"server": nodes[0]["name"], "server_address": nodes[0]["address"], **storage},
    })


def _node_names(state: RunState) -> list[str]:
    if state.attached:
        try:
            return Cluster.attach(state.run_id).contract.node_names
        except (RefarchError, AttributeError):
            pass
    return [f"node{i + 1}" for i in range(state.profile.nodes.count)]


def pytest_report_header(config):
    state = config.stash.get(STATE, None)
    if state:
        mode = "attached (kept cluster)" if state.attached else "new cluster"
        return [f"refarch: run {state.run_id}, profile {state.profile_name}, {mode}, nodes {state.node_names}"]
    return None


def pytest_generate_tests(metafunc):
    if "node_name" in metafunc.fixturenames:
        state = metafunc.config.stash.get(STATE, None)
        names = state.node_names if state else ["no-cluster"]
        metafunc.parametrize("node_name", names, ids=names, scope="session")


def pytest_collection_modifyitems(config, items):
    state = config.stash.get(STATE, None)
    if state and state.existing is not None:
        skip = pytest.mark.skip(reason="--existing-hosts: only node and cluster checks run")
        for item in items:
            if "integration" in item.keywords and "check_phase" not in item.keywords:
                item.add_marker(skip)
    if state:
        # The check phase's time limit applies to each check's own call
        # (not to the setup that deploys the cluster).
        for item in items:
            if "check_phase" in item.keywords:
                item.add_marker(pytest.mark.timeout(state.profile.timeouts_s.check, func_only=True))
        return
    skip = pytest.mark.skip(reason="no cluster: give --profile NAME or --run-id ID")
    for item in items:
        if "integration" in item.keywords:
            item.add_marker(skip)


# Fixtures ---------------------------------------------------------------------
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
            state.cluster = Cluster.attach(state.run_id)
            if state.cluster.contract is None:
                raise RefarchError(f"run {state.run_id} has no deployed cluster")
        else:
            state.cluster = Cluster.create(state.profile_name, state.overrides, run_id=state.run_id)
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


def probe_ssh(cluster, run_state: RunState, name: str) -> str | None:
    """Why ``name`` cannot be reached over SSH, or None when it can.

    Opens a fresh connection (no shared ControlMaster connection: one opened
    before a fault would still reach a node whose sshd has gone) within
    10 s; the answer is cached for the session.  Returns e.g.
    ``"node2 (10.213.0.11:22): connection refused"``.
    """
    cache = run_state.reachability
    if name in cache:
        return cache[name]
    why = None
    if run_state.existing is None:
        node = cluster.contract.node(name)
        config = cluster.rundir.ssh_dir / "config"
        r = proc.ssh_fresh(config, name, "true", connect_timeout_s=10, timeout=30, batch=True)
        if r.returncode != 0:
            text = (r.stderr or r.stdout or "").strip()
            reason = checks.root_cause(text) or f"ssh exit {r.returncode}"
            short = re.sub(r"^ssh: connect to host \S+ port \d+: ", "", reason).lower()
            why = f"{name} ({node.address}:22): {short}"
    cache[name] = why
    return why


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


def fresh_host(cluster, name: str):
    """A testinfra host for node ``name`` whose every command opens a new
    SSH connection (:data:`refarch.proc.FRESH_CONNECTION`); for checks of sshd itself."""
    config = cluster.rundir.ssh_dir / "config"
    return testinfra.get_host(f"ssh://{name}", ssh_config=str(config), ssh_extra_args=proc.FRESH_CONNECTION)


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


#: The Python of the virtualenv that holds Horovod (beside horovodrun), for
#: commands run with :func:`run_as`.
HOROVOD_PYTHON = "$(dirname $(command -v horovodrun))/python"


#: The exit status :func:`run_as` reports for a command that exited 255.
EXIT_255 = 254


def run_as(host, user: str, command: str, timeout_s: int = 60):
    """Run ``command`` on ``host`` as ``user`` (login environment) with a time
    limit in seconds; returns testinfra's CommandResult (rc 124 on timeout).

    A command that exits 255 (ssh's own failure: mpirun or ssh to a peer
    refused) comes back as :data:`EXIT_255` with its output: testinfra
    takes 255 over SSH for a failure of its own connection and raises a
    RuntimeError that dumps the whole CommandResult."""
    return host.run(f"sudo -n -u {user} -H timeout -k 5 {timeout_s} bash -lc {shlex.quote(command)}; "
                    f"rc=$?; [ $rc -ne 255 ] || rc={EXIT_255}; exit $rc")


# Node logs on failure ---------------------------------------------------------
def collect_node_logs(config, state: RunState) -> None:
    """When any test failed or errored, copy every node's logs to
    ``runs/<id>/nodes/<node>/`` (refarch.pytest.nodelogs) before teardown; never
    raises (a log that cannot be read must not hide the failure)."""
    counts = state.results.counts()
    cluster = state.cluster
    if not (counts.get("failed") or counts.get("error")) or cluster is None or state.existing is not None:
        return
    if cluster.contract is None or state.results.node_logs:
        return
    from . import nodelogs

    try:
        state.reachability.clear()  # judge reachability now, not as it was during the checks
        names = cluster.contract.node_names
        down = {n: w for n in names if (w := probe_ssh(cluster, state, n))}
        local = state.profile.cloud == "local"
        written = nodelogs.collect(cluster.rundir.path, names, down,
                                   container_of=(lambda n: f"{cluster.run_id}-{n}") if local else None)
        state.results.node_logs = {"dir": str(cluster.rundir.path / "nodes"), "nodes": written}
        say(config, f"refarch: node logs of the failed run in {cluster.rundir.path / 'nodes'}/")
    except Exception as exc:  # noqa: BLE001 - diagnosis must not break teardown
        say(config, f"refarch: node logs not collected: {exc}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed check's report names the folder its node's logs go to."""
    report = yield
    state = item.config.stash.get(STATE, None)
    if report.failed and state is not None and state.existing is None and hasattr(report.longrepr, "addsection"):
        params = getattr(getattr(item, "callspec", None), "params", {})
        folder = runs_dir() / state.run_id / "nodes"
        where = folder / params["node_name"] if "node_name" in params else folder
        report.longrepr.addsection("node logs", f"collected before teardown into {where}/")
    return report


# Reporting --------------------------------------------------------------------
def say(config, line: str) -> None:
    """Print ``line`` to the job's log at once, even while pytest captures
    output (fixture teardown, an interrupted session)."""
    capman = config.pluginmanager.getplugin("capturemanager")
    ctx = capman.global_and_fixture_disabled() if capman else nullcontext()
    with ctx:
        try:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            # The reader is gone (plain tox killed by SIGTERM closes the
            # pipe): the line is lost, but the teardown it announces must run.
            pass


def phase_of(item) -> str:
    """The run phase a test belongs to: ``check`` for node and cluster
    checks, the ``run_phase`` marker's name otherwise (``test`` by default)."""
    if item.get_closest_marker("check_phase"):
        return "check"
    marker = item.get_closest_marker("run_phase")
    return marker.args[0] if marker else "test"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    with in_phase(phase_of(item)):
        return (yield)


@pytest.hookimpl(tryfirst=True)
def pytest_keyboard_interrupt(excinfo):
    """Before pytest reports the interrupt: when the reader of the output is
    gone (plain tox killed by SIGTERM), every writer (the terminal report,
    the teardown's lines) goes to /dev/null, so that no BrokenPipeError
    stops the teardown that follows (lifecycle.outputs_lost)."""
    if not lifecycle.outputs_lost():
        return
    sink = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives until the process ends
    sys.stdout = sys.stderr = sys.__stdout__ = sys.__stderr__ = sink
    for fd in (1, 2):
        os.dup2(sink.fileno(), fd)
    reporter = _CONFIG[0].pluginmanager.getplugin("terminalreporter") if _CONFIG else None
    if reporter is not None:
        reporter._tw._file = sink  # noqa: SLF001 - pytest keeps its writer's stream here
    lifecycle.NOTIFY = lambda line: None


#: The session's config (for hooks that are not given it).
_CONFIG: list = []


def report_teardown_check(config, run_id: str, failure: str) -> None:
    """Report the teardown as a check of its own, ``refarch::teardown``, in
    the terminal, JUnit and results.json: passed when ``failure`` is empty,
    else failed with it as the message (``terraform destroy`` failed, or
    resources were left).  A failed report counts as a failed test, so the
    session exits non-zero."""
    location = ("refarch", None, "teardown")
    call = ("passed", None) if not failure else ("failed", f"teardown of run {run_id} failed: {failure}")
    for when, (outcome, longrepr) in (("setup", ("passed", None)), ("call", call), ("teardown", ("passed", None))):
        report = TestReport("refarch::teardown", location, {"teardown": 1}, outcome, longrepr, when)
        config.hook.pytest_runtest_logreport(report=report)


class _InterruptReporter:
    """An interrupted run says so in JUnit and the results: one error naming
    the signal and the phase (the test that was running gets no report of
    its own).  Runs before junitxml writes its file."""

    def __init__(self, state: RunState):
        self.state = state

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session, exitstatus):
        got = lifecycle.INTERRUPTED
        if not got:
            return
        state = self.state
        state.results.interrupted = dict(got)
        message = (f"run {state.run_id} interrupted by {got['signal']} during the {got['phase']} phase; "
                   "the cluster was torn down unless it was kept")
        location = ("refarch", None, "interrupted")
        for when, outcome, longrepr in (("setup", "failed", message), ("teardown", "passed", None)):
            report = TestReport("refarch::interrupted", location, {"interrupted": 1}, outcome, longrepr, when)
            session.config.hook.pytest_runtest_logreport(report=report)


class _Recorder:
    """Records every test's outcome into the run's results."""

    def __init__(self, results: Results):
        self.results = results

    def pytest_runtest_logreport(self, report):
        if report.when == "call" and "check_phase" in report.keywords:
            phases = self.results.test_phases_s
            phases["check"] = round(phases.get("check", 0) + report.duration, 1)
        if report.when != "call" and not (report.when == "setup" and report.outcome != "passed"):
            return
        message = ""
        if report.failed:
            crash = getattr(report.longrepr, "reprcrash", None)
            message = crash.message if crash else str(report.longrepr)
        elif report.skipped and isinstance(report.longrepr, tuple):
            message = report.longrepr[2]
        outcome = "error" if report.when == "setup" and report.failed else report.outcome
        self.results.add_check(report.nodeid, outcome, report.duration, message)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    state = session.config.stash.get(STATE, None)
    if state is None or state.cluster is None:
        if state is not None and state.existing is not None and state.results.checks:
            state.results.nodes = [{"name": n.name, "address": n.address} for n in state.existing.nodes]
            path = Path(session.config.option.xmlpath).with_name("results.json")
            state.results.write(path)
        return
    if state.attached:
        collect_node_logs(session.config, state)  # a kept cluster has no teardown to do it
    state.results.phases_s = {**state.cluster.phases(), **state.results.test_phases_s}
    if not state.attached:
        # run.json carries the same phases as results.json (check, smoke, ...
        # too); sessions attached to a kept cluster do not pile theirs up there.
        state.cluster.rundir.update_meta(phases=state.results.phases_s)
    if state.results.teardown is None:
        state.results.teardown = state.cluster.rundir.read_meta().get("teardown")
    written = state.results.write(state.cluster.rundir.path / "results.json")
    try:
        from ..report import html as report

        state.report = report.render(written)
    except Exception as exc:  # noqa: BLE001 - the results stand without their report
        say(session.config, f"refarch: report.html not written: {exc}")


def pytest_terminal_summary(terminalreporter, config):
    state = config.stash.get(STATE, None)
    if state is None or state.cluster is None:
        return
    terminalreporter.section("Horovod reference architecture")
    for line in state.results.summary_lines():
        terminalreporter.write_line(line)
    where = state.cluster.rundir.path
    terminalreporter.write_line(f"  results: {where / 'results.json'}  junit: {config.option.xmlpath}")
    if state.report:
        terminalreporter.write_line(f"  report:  {state.report}")
    if state.keep:
        terminalreporter.write_line(f"  kept: ci/refarch destroy {state.run_id}   (ssh -F {where}/ssh/config node1)")
