"""The host-command table (ci/host-commands.tsv) is complete: every literal
command name the suite passes to a subprocess call is listed, with its
package; the preflight names the command and the package of what is missing."""

import ast
from pathlib import Path

import pytest

from refarch.errors import PreflightError
from refarch.paths import ROOT
from refarch.tools import hostcmds, hosttrace

DATA = Path(__file__).parent / "data"

#: Callables that start a host process, and the position of the argument
#: that holds the command (a list whose first item is the command name).
_RUNNERS = {"run": 0, "Popen": 0, "call": 0, "check_call": 0, "check_output": 0}
#: Helpers whose positional argument at this index is itself a host command
#: (e.g. FaultContext.netns(node, "nft", ...) runs nft through nsenter).
_COMMAND_ARG = {"netns": 1}


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def literal_commands(tree: ast.AST) -> list[tuple[str, int]]:
    """(command, line) of every literal command name in a subprocess call of ``tree``."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _name(node.func)
        if name in _RUNNERS and len(node.args) > _RUNNERS[name]:
            arg = node.args[_RUNNERS[name]]
            if isinstance(arg, (ast.List, ast.Tuple)) and arg.elts:
                first = arg.elts[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    found.append((first.value, node.lineno))
        if name in _COMMAND_ARG and len(node.args) > _COMMAND_ARG[name]:
            arg = node.args[_COMMAND_ARG[name]]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found.append((arg.value, node.lineno))
    return found


def uncovered(table: list[hostcmds.HostCommand]) -> list[str]:
    """``path:line: command`` for every literal command the code calls that ``table`` lacks."""
    listed = {row.command for row in table}
    out = []
    for path in sorted([*ROOT.joinpath("refarch").rglob("*.py"), *ROOT.joinpath("tests").rglob("*.py")]):
        for command, line in literal_commands(ast.parse(path.read_text(encoding="utf-8"))):
            if command not in listed:
                out.append(f"{path.relative_to(ROOT)}:{line}: {command}")
    return out


def test_every_called_command_is_in_the_table():
    missing = uncovered(hostcmds.load_table())
    assert not missing, "host commands missing from ci/host-commands.tsv: " + ", ".join(missing)


def test_a_command_removed_from_the_table_is_named():
    table = [row for row in hostcmds.load_table() if row.command != "nft"]
    missing = uncovered(table)
    assert missing and all(m.endswith(": nft") for m in missing), missing
    assert any(m.startswith("refarch/faults/injections.py:") for m in missing)


def test_the_scanner_sees_the_forms_the_code_uses():
    code = ("proc.run(['podman', 'ps'])\nsubprocess.Popen(('tar', '-c'))\nc.netns(node, 'nft', 'x')\n"
            "subprocess.run([sys.executable, '-m', 'pytest'])\n")
    assert [c for c, _ in literal_commands(ast.parse(code))] == ["podman", "tar", "nft"]


def test_every_row_has_a_package_and_known_stages():
    stages = {"bootstrap", "local", "faults", "lint", "report", "pipeline", "vm", "record"}
    for row in hostcmds.load_table():
        assert row.package, row
        assert set(row.stages) <= stages, f"{row.command}: unknown stage in {row.stages}"


def test_preflight_names_command_and_package():
    present = {"podman", "terraform"}
    with pytest.raises(PreflightError) as err:
        hostcmds.preflight(["local", "faults"], which=lambda c: c if c in present else None)
    text = str(err.value)
    assert "\n" not in text
    assert "nft (apt-get install nftables)" in text
    assert "nsenter (apt-get install util-linux)" in text
    assert "podman" not in text


def test_preflight_checks_only_the_stages_asked_for():
    hostcmds.preflight(["faults"], which=lambda c: c if c in {"podman", "nft", "nsenter", "tc", "ip"} else None)


def test_bootstrap_reads_the_table():
    script = Path(ROOT / "ci" / "bootstrap.sh").read_text(encoding="utf-8")
    assert "ci/host-commands.tsv" in script


def test_a_stage_that_fails_on_a_fresh_machine_is_named_with_the_missing_command():
    """What tests/fresh reads back from the bare root: the pipeline stage
    failed because gitlab-ci-local's shell executor found no rsync."""
    output = ("bootstrap: done\ntox 4.32.0 from /work/checkout/.venv\nstage pipeline: FAILED\n"
              "tests/pipeline/test_pipeline.py ..........F\n"
              "E       AssertionError: job lint: did not run; gitlab-ci-local: bash: line 1: rsync: command not found\n"
              "  pipeline: FAIL code 1 (140.2 seconds)\nstage report: passed\n")
    assert hostcmds.stage_failures(output) == [
        "stage pipeline failed on a fresh machine after ci/bootstrap.sh: AssertionError: job lint: did not run; "
        "gitlab-ci-local: bash: line 1: rsync: command not found"]
    assert hostcmds.stage_failures("stage pipeline: passed\nstage report: passed\n") == []
    # Without a root-cause line: the failed test's summary, not tox's closing line.
    failed_test = ("stage pipeline: FAILED\nE       AssertionError: job unit: FAIL\n"
                   "FAILED tests/pipeline/test_pipeline.py::test_jobs - AssertionError: job unit: FAIL\n"
                   "  evaluation failed :( (141.55 seconds)\n")
    assert hostcmds.stage_failures(failed_test) == [
        "stage pipeline failed on a fresh machine after ci/bootstrap.sh: FAILED "
        "tests/pipeline/test_pipeline.py::test_jobs - AssertionError: job unit: FAIL"]


def test_a_unit_test_that_fails_inside_the_pipeline_stage_is_named():
    """Recorded from tests/fresh: the pipeline stage's unit job failed on one
    unit test; the message names that test and its assertion, not the
    pipeline stage's own test (CI said only "FAILED
    tests/pipeline/test_pipeline.py::test_lint_policy_and_unit_jobs...")."""
    output = (DATA / "pipeline" / "fresh-unit-job-failed.txt").read_text(encoding="utf-8")
    [failure] = hostcmds.stage_failures(output)
    assert failure.startswith("stage pipeline failed on a fresh machine after ci/bootstrap.sh: "
                              "FAILED tests/unit/test_localcloud.py::test_preflight_names_every_missing_tool - assert")


#: Recorded traces (refarch.tools.hosttrace): what the tools the suite drives
#: started on the host, with the package of each program.
TRACES = sorted(p.stem for p in hosttrace.TRACES.glob("*.tsv"))


@pytest.mark.parametrize("trace", TRACES)
def test_what_the_driven_tools_run_is_installed_by_the_bootstrap(trace):
    programs = hosttrace.load(trace)
    assert programs, f"trace {trace} recorded no program"
    missing = hosttrace.unprovided(programs, hostcmds.load_table(), hosttrace.minbase_packages())
    assert not missing, f"trace {trace}: programs whose package ci/bootstrap.sh would not install: {missing}"


def test_a_tools_program_missing_from_the_table_is_named():
    """gitlab-ci-local's shell executor runs rsync: without its row the
    pipeline trace fails, naming the program and its package."""
    table = [row for row in hostcmds.load_table() if row.command != "rsync"]
    missing = hosttrace.unprovided(hosttrace.load("pipeline"), table, hosttrace.minbase_packages())
    assert missing == ["/usr/bin/rsync (package rsync)"]


def test_the_trace_parser_keeps_host_programs_once_and_none_of_a_containers():
    trace = ('100 execve("/usr/bin/bash", ["bash", "-c", "x"], 0x7ffd /* 20 vars */) = 0\n'
             '100 clone(child_stack=NULL, flags=CLONE_CHILD_SETTID|SIGCHLD) = 101\n'
             '101 execve("/usr/bin/rsync", ["rsync", "-a"], 0x7ffd /* 20 vars */) = 0\n'
             '100 vfork() = 102\n'
             '102 execve("/usr/local/sbin/git", ["git"], 0x7ffd /* 20 vars */) = -1 ENOENT (No such file)\n'
             '102 execve("/usr/bin/git", ["git"], 0x7ffd /* 20 vars */) = 0\n'
             '100 clone(child_stack=NULL, flags=SIGCHLD) = 103\n'
             '103 execve("/work/x/.tox/lint/bin/ruff", ["ruff"], 0x7ffd /* 20 vars */) = 0\n'
             '100 clone3({flags=CLONE_VM, exit_signal=SIGCHLD} <unfinished ...>\n'
             '100 <... clone3 resumed> => {parent_tid=[0]}, 88) = 104\n'
             '104 execve("/usr/bin/rsync", ["rsync"], 0x7ffd /* 20 vars */) = 0\n'
             '100 clone(child_stack=NULL, flags=SIGCHLD) = 105\n'
             '105 execve("/usr/bin/runc", ["runc", "create"] <unfinished ...>\n'
             '105 <... execve resumed>) = 0\n'
             '105 clone(child_stack=0x7ffe, flags=CLONE_PARENT|SIGCHLD) = 106\n'
             '106 execve("/sbin/init", ["/sbin/init"], 0x7ffd /* 5 vars */) = 0\n'
             '106 clone(child_stack=NULL, flags=SIGCHLD) = 25\n'
             '20574 execve("/usr/sbin/sshd", ["sshd"], 0x7ffd /* 5 vars */) = 0\n')
    # init ran below runc, and sshd in the container's PID namespace (its
    # creation returned the namespace's pid 25): the node image's programs.
    assert hosttrace.executed(trace) == ["/usr/bin/bash", "/usr/bin/rsync", "/usr/bin/git", "/usr/bin/runc"]
