"""Bad input is one line and exit 2, before any run directory or resource."""

import json

import pytest

from refarch import cli
from refarch.tools import hostcmds


@pytest.fixture(autouse=True)
def isolated_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("REFARCH_RUNS_DIR", str(tmp_path / "runs"))
    return tmp_path / "runs"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["up", "--profile", "nope"], "unknown profile 'nope'"),
        (["up", "--set", "nodes.count=0"], "nodes.count: Input should be greater than or equal to 1"),
        (["up", "--set", "network.subnet_pool=10.1.2.0/33"], "malformed subnet"),
        (["destroy", "hvd-root-zzzzzz"], "no run directory for run id hvd-root-zzzzzz"),
        (["configure", "BAD_ID"], "malformed run id"),
    ],
)
def test_bad_input_is_one_line_and_creates_nothing(argv, message, capsys, isolated_runs):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not isolated_runs.exists() or not any(isolated_runs.iterdir())


def test_missing_tool_is_rejected_before_anything_is_made(capsys, isolated_runs, monkeypatch):
    monkeypatch.setattr(hostcmds.shutil, "which", lambda tool: None if tool == "debootstrap" else f"/usr/bin/{tool}")
    assert cli.main(["up"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("refarch: error: missing host commands: debootstrap (apt-get install debootstrap); "
                   "ci/bootstrap.sh installs them")
    assert not isolated_runs.exists() or not any(isolated_runs.iterdir())


def test_openstack_without_a_cloud_is_one_line_and_creates_nothing(tmp_path, monkeypatch, capsys, isolated_runs):
    empty = tmp_path / "clouds.yaml"
    empty.write_text("clouds: {}\n")
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(empty))
    assert cli.main(["up", "--profile", "openstack-v100"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("refarch: error: clouds.yaml: Cloud refarch-ci was not found")
    assert len(err.splitlines()) == 1
    assert not isolated_runs.exists() or not any(isolated_runs.iterdir())


# The main job's arguments, checked before anything runs -------------------------
def test_main_job_help_is_the_suites_usage(capsys):
    from refarch.cli import main

    assert main(["check-args", "--help"]) == 3
    out = capsys.readouterr().out
    assert out.startswith("usage: ci/main-job.sh") and "local" in out and "--set KEY=VALUE" in out


@pytest.mark.parametrize("args, message", [
    (["--set", "nodes.cuont=3"], "nodes.cuont: Extra inputs are not permitted; did you mean nodes.count?"),
    (["--set", "nodes.flavor.memroy_mb=1"], "did you mean nodes.flavor.memory_mb?"),
    (["--set", "properties.scaling.efficency.reference.lower=1"],
     "the profile has no property scaling.efficency; did you mean properties.scaling.efficiency?"),
    (["--profile", "nope"], "unknown profile 'nope'; available: local"),
])
def test_bad_main_job_arguments_exit_2_with_one_line(args, message, capsys):
    from refarch.cli import main

    assert main(["check-args", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("ci/main-job.sh: error: ") and message in err


def test_good_main_job_arguments_pass(capsys):
    from refarch.cli import main

    assert main(["check-args", "--keep", "--set", "nodes.count=3", "-k", "sshd"]) == 0


def test_list_has_a_header_start_outcome_and_overrides(tmp_path, monkeypatch, capsys):
    import json

    from refarch.clouds import local as localcloud

    monkeypatch.setenv("REFARCH_RUNS_DIR", str(tmp_path))
    monkeypatch.setattr(localcloud, "all_run_ids", lambda: {"hvd-a-kept01"})
    for run_id, meta, counts in (
            ("hvd-a-main01", {"destroyed": True, "started_at": 1796000000}, {"passed": 44}),
            ("hvd-a-kept01", {"kept": True, "started_at": 1796000600, "overrides": {"nodes.count": 3}}, None),
            ("hvd-a-fault1", {"destroyed": True, "started_at": 1796000300}, {"passed": 3, "failed": 1})):
        (tmp_path / run_id).mkdir()
        (tmp_path / run_id / "run.json").write_text(json.dumps({"profile": "local", **meta}))
        if counts:
            (tmp_path / run_id / "results.json").write_text(json.dumps({"check_counts": counts}))
    assert cli.main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["RUN", "ID", "STARTED"]
    assert [line.split()[0] for line in lines[1:]] == ["hvd-a-main01", "hvd-a-fault1", "hvd-a-kept01"]
    assert "passed 44" in lines[1] and "FAILED 1" in lines[2]
    assert "kept" in lines[3] and lines[3].endswith("nodes.count=3")


def test_unfinished_runs_are_those_deployed_never_destroyed_and_orphaned(tmp_path, monkeypatch):
    from refarch.owner import Owner

    monkeypatch.setenv("REFARCH_RUNS_DIR", str(tmp_path))
    alive = Owner.current(tmp_path).labels()
    dead = {**alive, "refarch.owner_start": alive["refarch.owner_start"].split(":")[0] + ":1"}
    for run_id, meta, deployed in (("hvd-t-cancel", {"owner": dead}, True),
                                   ("hvd-t-done", {"owner": dead, "destroyed": True}, True),
                                   ("hvd-t-kept", {"owner": dead, "kept": True}, True),
                                   ("hvd-t-running", {"owner": alive}, True),
                                   ("hvd-t-never", {"owner": dead}, False)):
        (tmp_path / run_id).mkdir()
        (tmp_path / run_id / "run.json").write_text(json.dumps(meta))
        if deployed:
            (tmp_path / run_id / "terraform").mkdir()
    assert cli.runs.unfinished_runs() == ["hvd-t-cancel"]


def test_each_command_module_adds_its_own_commands():
    """The parser is built by the command modules: every command a module
    adds is handled by a function of that module (one module per command
    group, as Molecule's)."""

    import argparse

    from refarch.cli import builds, release, runs

    for module in (runs, builds, release):
        sub = argparse.ArgumentParser().add_subparsers()
        module.add_parsers(sub)
        assert sub.choices, module.__name__
        for name, parser in sub.choices.items():
            func = parser.get_default("func")
            handlers = [func] if func else [
                p.get_default("func") for p in parser._subparsers._group_actions[0].choices.values()]
            assert all(h.__module__ == module.__name__ for h in handlers), (module.__name__, name)
