"""The plugin's options and the run they select (pytest_configure builds the
session's :class:`~refarch.pytest.state.RunState`), the existing-hosts
inventory, and the node parametrization of the checks.

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
import socket
from pathlib import Path

import pytest
import yaml

from .. import lifecycle
from ..cluster import Cluster, preflight
from ..contract import Contract
from ..errors import RefarchError
from ..judge.results import Results
from ..overrides import parse_overrides
from ..paths import runs_dir
from ..profile import Profile, load_profile
from ..run import RunDir, new_run_id, validate_run_id
from .reporting import InterruptReporter, Recorder
from .state import _CONFIG, STATE, RunState, say


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
        config.pluginmanager.register(Recorder(state.results), "refarch-recorder")
        if not getattr(config.option, "xmlpath", None):
            config.option.xmlpath = str(RunDir.at(runs_dir() / run_id).junit_file)
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
            overrides, profile = _all_in_one(config, name, overrides, profile)
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
    config.pluginmanager.register(Recorder(state.results), "refarch-recorder")
    config.pluginmanager.register(InterruptReporter(state), "refarch-interrupts")
    _CONFIG[:] = [config]
    lifecycle.NOTIFY = lambda line: say(config, line)
    if not getattr(config.option, "xmlpath", None):
        config.option.xmlpath = str(RunDir.at(runs_dir() / run_id).junit_file)


def _all_in_one(config, name: str, overrides: dict, profile: Profile) -> tuple[dict, Profile]:
    """For a profile served by the suite's all-in-one: the one chosen by
    :func:`refarch.clouds.aio.serve_profile`, stopped when pytest ends if
    this session started it."""
    if profile.openstack is None or profile.openstack.all_in_one is None:
        return overrides, profile
    from ..clouds import aio

    # An attached run (--run-id) finds its own all-in-one through its
    # run.json (the driver's serve_run); only a new run chooses or starts one.
    overrides, profile, started, owned = aio.serve_profile(name, overrides)
    if owned:
        config.add_cleanup(lambda: aio.stop(started))
    return overrides, profile


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


#: Seconds a run phase's item may take past the limit of the job it runs
#: (the job's stop and the collection of its logs).
JOB_ITEM_SLACK_S = 600


def _session_timeout_s(config) -> float:
    """pytest-timeout's limit for every item, found as it finds it:
    ``--timeout``, else ``$PYTEST_TIMEOUT``, else the ini's ``timeout``;
    0 when none or unlimited."""
    for value in (config.getoption("timeout", None), os.environ.get("PYTEST_TIMEOUT"), config.getini("timeout")):
        if value is not None and value != "":
            try:
                return max(0.0, float(value))
            except (TypeError, ValueError):
                return 0.0
    return 0.0


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
        # A smoke item's setup runs horovodrun jobs (each limited to
        # timeouts_s.smoke, at most one per scaling point), the idempotence
        # item the playbook (timeouts_s.configure); their own stops name
        # what ran past them, so pytest-timeout is the last resort behind
        # them, never before.
        t = state.profile.timeouts_s
        job_s = {"smoke": t.smoke * len(state.profile.scaling_points()), "idempotence": t.configure}
        session_s = _session_timeout_s(config)
        for item in items:
            phase = item.get_closest_marker("run_phase")
            if "check_phase" in item.keywords:
                item.add_marker(pytest.mark.timeout(t.check, func_only=True))
            elif (session_s and phase and phase.args and phase.args[0] in job_s
                  and item.get_closest_marker("timeout") is None):
                limit_s = job_s[phase.args[0]] + JOB_ITEM_SLACK_S
                if limit_s > session_s:
                    item.add_marker(pytest.mark.timeout(limit_s))
        return
    skip = pytest.mark.skip(reason="no cluster: give --profile NAME or --run-id ID")
    for item in items:
        if "integration" in item.keywords:
            item.add_marker(skip)


