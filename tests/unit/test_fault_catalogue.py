"""The fault catalogue (refarch.faults.catalogue): every case names the field
report it stands for, and the table of the cases has a row for each (the
docs page that carries it: tests/unit/test_docs.py)."""

from __future__ import annotations

import re

import pytest

from refarch.faults.catalogue import FAULTS, by_id
from refarch.faults.table import ELSEWHERE, ON_GUESTS, fault_table
from refarch.paths import ROOT


def test_every_case_names_its_field_report_and_messages():
    ids = [f.id for f in FAULTS]
    assert len(ids) == len(set(ids)), f"fault ids twice: {sorted(i for i in ids if ids.count(i) > 1)}"
    for fault in FAULTS:
        assert fault.report_kind and fault.title and fault.message, f"{fault.id}: field report, injection or message"
        assert by_id(fault.id) is fault
        assert not re.search(r"(?i)\bissue\s*\d|#\d|FAULTS\.md", fault.source + fault.report_kind), fault.id
    assert {f"F{n}" for n in (*range(1, 15), 18, 19, 20)} <= set(ids)
    # Every field report F1-F25 is proven: by a fault case or elsewhere.
    assert {f"F{n}" for n in range(1, 26)} == {i for i in ids if i.startswith("F")} | {r.id for r in ELSEWHERE}
    for report in ELSEWHERE:
        for path in report.proven_by.split(", "):
            assert (ROOT / path.split(" (")[0]).exists(), f"{report.id}: {path} does not exist"
    for case in ON_GUESTS:
        path, test = case.proven_by.split("::")
        assert f"def {test}(" in (ROOT / path).read_text(encoding="utf-8"), f"{case.id}: {case.proven_by} is gone"
    with pytest.raises(KeyError):
        by_id("F99")


def test_the_table_has_a_row_per_case_with_every_message():
    rows = fault_table().splitlines()[2:]
    assert [row.split(" | ", 1)[0].removeprefix("| ") for row in rows] == [f.id for f in FAULTS] + [
        r.id for r in ELSEWHERE] + [r.id for r in ON_GUESTS]
    f18 = next(row for row in rows if row.startswith("| F18 |"))
    assert f18.count("<br>") == len(by_id("F18").more_messages)
    assert "`node1 -> node2 \\(\\S+\\): packets above 1400 bytes vanish" in f18
    horovod = next(row for row in rows if row.startswith("| horovod-broken |"))
    assert "failed\\|Horovod lacks" in horovod  # a regex's | escaped in the cell
