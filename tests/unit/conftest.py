"""Unit tests never touch this machine's shared state (subnet reservations)."""

import pytest


@pytest.fixture(autouse=True)
def _private_machine_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("REFARCH_MACHINE_DIR", str(tmp_path / "machine"))
