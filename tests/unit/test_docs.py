"""The documentation's generated reference pages (refarch.docs): each page
under docs/ is what the code renders now, and a change to what a page is
made of (a check's docstring, a property's reference, a profile field's
description) makes that page differ, so a unit test names it until the
page is rewritten (``python -m refarch.docs --write``)."""

import re
import shutil

import pytest

from refarch import docs
from refarch.docs import reference
from refarch.faults.coverage import CHECK_FILES
from refarch.paths import ROOT

FIX = "python -m refarch.docs --write"


@pytest.mark.parametrize("page", sorted(docs.pages()))
def test_the_generated_page_is_what_the_code_renders(page):
    path = docs.DOCS / page
    assert path.is_file(), f"docs/{page} is missing: run `{FIX}`"
    assert path.read_text(encoding="utf-8") == docs.pages()[page](), f"docs/{page} differs from the code: run `{FIX}`"


def test_every_generated_page_is_in_the_site_nav():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert not [page for page in docs.pages() if page not in nav], "a generated page is not in mkdocs.yml's nav"


def test_a_changed_check_docstring_makes_the_checks_page_stale(tmp_path):
    for rel in CHECK_FILES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    nodes = tmp_path / "tests/integration/test_nodes.py"
    text = nodes.read_text(encoding="utf-8")
    nodes.write_text(text.replace('"""The effective sshd configuration', '"""The sshd configuration in effect', 1),
                     encoding="utf-8")
    page = reference.checks_page(tmp_path)
    assert "The sshd configuration in effect" in page
    assert page != (docs.DOCS / "reference/checks.md").read_text(encoding="utf-8")


def test_a_changed_property_reference_makes_the_properties_page_stale(monkeypatch):
    from refarch import profile

    original = profile.load_profile

    def looser(name, overrides=None):
        if name != "local":
            return original(name, overrides)
        return original(name, {"properties.scaling.efficiency.reference.lower": 0.123})

    monkeypatch.setattr(profile, "load_profile", looser)
    page = reference.properties_page()
    assert "lower 0.123" in page
    assert page != (docs.DOCS / "reference/properties.md").read_text(encoding="utf-8")


def test_a_changed_field_description_makes_the_profile_page_stale(monkeypatch):
    from refarch.profile import Nodes

    monkeypatch.setattr(Nodes.model_fields["count"], "description", "how many nodes, said otherwise")
    page = reference.profile_page()
    assert "how many nodes, said otherwise" in page
    assert page != (docs.DOCS / "reference/profile.md").read_text(encoding="utf-8")


def test_a_check_without_a_docstring_is_named(tmp_path):
    for rel in CHECK_FILES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("def test_silent():\n    pass\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"test_nodes.py::test_silent has no docstring"):
        reference.checks(tmp_path)


def test_the_stale_command_names_each_page_and_exits_non_zero(monkeypatch, tmp_path, capsys):
    from refarch.docs.__main__ import main

    monkeypatch.setattr(docs, "DOCS", tmp_path)
    monkeypatch.setattr("refarch.docs.__main__.stale", lambda: docs.stale(tmp_path))
    assert main([]) == 1
    out = capsys.readouterr().out
    assert "docs/reference/checks.md: differs from the code; run `python -m refarch.docs --write`" in out


def test_a_long_subject_or_a_missing_blank_line_is_named(tmp_path):
    import os
    import subprocess

    from refarch.docs import commits

    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], check=True)
    messages = ("Old history may be long " + "x" * 80, "Keep a short subject\n\nA body.",
                "Write a subject far longer than the seventy-two characters a subject may have", "Run on\ninto the body")
    for when_s, message in enumerate(messages, start=1_700_000_000):
        env = {**os.environ, "GIT_COMMITTER_DATE": f"@{when_s} +0000", "GIT_AUTHOR_DATE": f"@{when_s} +0000"}
        subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", message], check=True, env=env)
    found = commits.problems(tmp_path, since_s=1_700_000_000)  # the first commit is before the rule
    assert len(found) == 2, found
    assert "subject of 77 characters (at most 72): Write a subject far" in found[1]
    assert "no blank line after the subject: Run on" in found[0]
    with pytest.raises(Exception, match="git log in"):
        commits.problems(tmp_path / "not-a-repo")


def test_the_readme_stays_short_and_gives_the_two_commands():
    """The README is the way in, not the manual: at most 200 lines, the two
    commands, and links into the docs (the rest lives under docs/)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200, f"README.md has {len(text.splitlines())} lines (at most 200): move prose to docs/"
    assert "ci/main-job.sh" in text and "ci/test.sh" in text, "README.md does not give the two commands"
    missing = [link for link in re.findall(r"\]\((docs/[^)#]+)", text) if not (ROOT / link).is_file()]
    assert not missing, f"README.md links to pages that do not exist: {missing}"
