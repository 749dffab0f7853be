"""Progress lines: a long phase is announced with the previous run's
duration and its log, then repeated until it ends (no silence longer than
the interval in a CI log)."""

import json
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
