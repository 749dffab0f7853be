"""Node logs on failure: the one-connection script runs every command with
its own exit status and splits back into one file per command; a node
that cannot be reached says why."""

import subprocess

from refarch.pytest import nodelogs


def test_the_script_runs_each_command_and_splits_back(monkeypatch):
    monkeypatch.setattr(nodelogs, "COMMANDS", {"one": "echo first; echo line two", "bad": "echo oops >&2; exit 3",
                                               "slow": "sleep 5; echo never"})
    out = subprocess.run(["sh", "-c", nodelogs.script(timeout_s=1)], capture_output=True, text=True).stdout
    sections = nodelogs.split(out)
    assert sections["one"] == ("0", "first\nline two")
    assert sections["bad"] == ("3", "oops")
    assert sections["slow"][0] == "124"  # the time limit held


def test_an_unreachable_node_without_console_gets_the_reason(tmp_path):
    written = nodelogs.collect(tmp_path, ["node2"], {"node2": "node2 (10.213.0.11:22): connection refused"})
    assert written == {"node2": ["UNREACHABLE.txt"]}
    assert (tmp_path / "nodes" / "node2" / "UNREACHABLE.txt").read_text().startswith("node2 (10.213.0.11:22)")


def test_an_unreachable_node_is_read_through_the_drivers_console(tmp_path, monkeypatch):
    """The driver's console prefix (the local cloud's ``podman exec``) runs
    the script inside the node; here a plain shell stands in for it."""
    monkeypatch.setattr(nodelogs, "COMMANDS", {"one": "echo inside"})
    written = nodelogs.collect(tmp_path, ["node2"], {"node2": "connection refused"},
                               console_of=lambda node: ["env"])
    assert written["node2"][0] == "UNREACHABLE.txt" and len(written["node2"]) == 2
    assert "inside" in (tmp_path / "nodes" / "node2" / written["node2"][1]).read_text()
