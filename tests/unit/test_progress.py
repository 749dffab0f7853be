"""Progress lines: a long phase is announced with the previous run's
duration and its log, then repeated until it ends (no silence longer than
the interval in a CI log)."""

import io
import json
import math
import re
import time

from refarch import lifecycle, progress


def test_a_long_phase_prints_a_line_per_interval(monkeypatch, tmp_path):
    lines = []
    monkeypatch.setattr(lifecycle, "NOTIFY", lines.append)
    with progress.heartbeat("wheel of run r", estimate_s=271, log=tmp_path / "wheel.log", every_s=0.1):
        time.sleep(0.35)
    assert lines[0] == f"refarch: wheel of run r: started (previous run: 271 s; log {tmp_path / 'wheel.log'})"
    assert 2 <= len(lines) - 1 <= 4
    assert all("s so far (previous run: 271 s" in line for line in lines[1:])


def test_the_estimate_is_the_most_recent_other_run(tmp_path):
    for run_id, started, seconds in (("old", 100, 500.0), ("new", 200, 93.0), ("me", 300, 1.0)):
        (tmp_path / run_id).mkdir()
        (tmp_path / run_id / "run.json").write_text(json.dumps({"started_at": started, "phases": {"image": seconds}}))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "run.json").write_text(json.dumps({"started_at": 400, "phases": {"deploy": 3}}))
    assert progress.previous_duration(tmp_path, "image", exclude="me") == 93.0
    assert progress.previous_duration(tmp_path, "smoke") is None


class _FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_on_a_terminal_a_bar_replaces_the_repeated_lines(monkeypatch, tmp_path):
    lines, tty = [], _FakeTerminal()
    monkeypatch.setattr(lifecycle, "NOTIFY", lines.append)
    started = time.monotonic()
    with progress.heartbeat("image of run r", estimate_s=93, log=tmp_path / "image.log", every_s=0.1, tty=tty):
        with progress.heartbeat("wheel of run r", estimate_s=271, every_s=0.1, tty=tty):
            time.sleep(1.2)
            # The display redraws twice a second on its own thread; on a busy
            # machine its last redraw before the rows go can fall before 1 s
            # (seen in ci/test.sh's fresh lane): draw once more, at 1.2 s.
            progress._ACTIVE[-1].refresh()
    elapsed = time.monotonic() - started
    drawn = tty.getvalue()
    assert "image of run r" in drawn and "wheel of run r" in drawn  # one display, a row per phase
    assert "previous run: 93 s" in drawn and "0:00:01" in drawn  # estimate and elapsed time
    assert lines[0] == f"refarch: image of run r: started (log {tmp_path / 'image.log'})"
    assert [line.split(":")[1] for line in lines] == [" image of run r", " wheel of run r", " wheel of run r", " image of run r"]
    # The seconds the phase took as measured, not a wall-clock bound: on a
    # busy machine (ci/test.sh's fresh lane) the rows' teardown took the
    # 1.2 s past 1.5 and the line said 2 s.
    done = re.match(r"refarch: image of run r: done in (\d+) s", lines[-1])
    assert done and 1 <= int(done.group(1)) <= math.ceil(elapsed), (lines[-1], elapsed)
    assert not progress._ACTIVE


def test_ci_and_plain_get_lines_not_a_bar(monkeypatch):
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("CI", "true")
    assert progress.terminal() is None
    monkeypatch.delenv("CI")
    monkeypatch.setenv("REFARCH_PROGRESS", "plain")
    assert progress.terminal() is None
