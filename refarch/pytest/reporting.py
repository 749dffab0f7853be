"""The plugin's reporting hooks: each test's run phase, the teardown and an
interrupt as checks of their own (``refarch::teardown``,
``refarch::interrupted``), every outcome recorded into the run's results,
results.json and report.html at the end, and the terminal summary."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from _pytest.reports import TestReport

from .. import lifecycle
from ..judge.results import Results
from ..lifecycle import in_phase
from ..run import RunDir
from .nodelogs import collect_node_logs
from .state import _CONFIG, STATE, RunState, say


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


class InterruptReporter:
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


class Recorder:
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
            path = Path(session.config.option.xmlpath).with_name(RunDir.RESULTS)
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
    written = state.results.write(state.cluster.rundir.results_file)
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
