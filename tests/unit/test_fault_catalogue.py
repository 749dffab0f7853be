"""The fault catalogue (refarch.faults.catalogue): every case names the field
report it stands for, and README.md's table of the cases is the one the
catalogue generates."""

from __future__ import annotations

import re

import pytest

from refarch.faults import readme as catalogue
from refarch.faults.catalogue import FAULTS, by_id
from refarch.faults.readme import ELSEWHERE, readme_table
from refarch.paths import ROOT

FIX = "python -m refarch.faults.readme --write-readme"


def test_readme_table_is_the_catalogues():
    block = catalogue.readme_block((ROOT / "README.md").read_text(encoding="utf-8"))
    assert block is not None, (f"README.md lacks the {catalogue.TABLE_START} ... {catalogue.TABLE_END} markers "
                               "in its section '## Fault cases'")
    assert block == readme_table(), f"README.md's table of the fault cases is not the catalogue's: run `{FIX}`"


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
    with pytest.raises(KeyError):
        by_id("F99")


def test_the_table_has_a_row_per_case_with_every_message():
    rows = readme_table().splitlines()[2:]
    assert [row.split(" | ", 1)[0].removeprefix("| ") for row in rows] == [f.id for f in FAULTS] + [
        r.id for r in ELSEWHERE]
    f18 = next(row for row in rows if row.startswith("| F18 |"))
    assert f18.count("<br>") == len(by_id("F18").more_messages)
    assert "`node1 -> node2 \\(\\S+\\): packets above 1400 bytes vanish" in f18
    horovod = next(row for row in rows if row.startswith("| horovod-broken |"))
    assert "failed\\|Horovod lacks" in horovod  # a regex's | escaped in the cell


def test_write_readme_rewrites_only_the_table(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text(f"before\n{catalogue.TABLE_START}\n| stale |\n{catalogue.TABLE_END}\nafter\n", encoding="utf-8")
    assert catalogue.main(["--write-readme", "--readme", str(readme)]) == 0
    text = readme.read_text(encoding="utf-8")
    assert text == f"before\n{catalogue.TABLE_START}\n{readme_table()}\n{catalogue.TABLE_END}\nafter\n"
    assert catalogue.main(["--write-readme", "--readme", str(readme)]) == 0
    assert "already current" in capsys.readouterr().out
    readme.write_text("no markers\n", encoding="utf-8")
    with pytest.raises(ValueError, match="fault-table:start"):
        catalogue.main(["--write-readme", "--readme", str(readme)])
