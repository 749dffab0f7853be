"""Commit messages in the usual form: a subject of at most
:data:`MAX_SUBJECT` characters, then a blank line, then the body.  Checked
for every commit made after the rule began (``tox -e docs``,
tests/docs/test_site.py); older commits are history and are left alone.
The limit is git's own convention (git-commit(1): "a single short (less
than 50 character) line", wrapped at 72 by most tools)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ..errors import RefarchError

#: The longest subject allowed, in characters.
MAX_SUBJECT = 72

#: When the rule began: the committer time (seconds since the epoch) of the
#: last commit made before it (e6726dd).  A time, not a commit range, so a
#: shallow clone that lacks that commit is checked the same.
RULE_SINCE_S = 1796573656


def problems(repo: Path, since_s: int = RULE_SINCE_S) -> list[str]:
    """One line per commit of ``repo``'s HEAD history committed after
    ``since_s`` whose subject is longer than :data:`MAX_SUBJECT` or whose
    second line is not blank (short hash, what is wrong, the subject's start).

    Raises:
        RefarchError: ``repo`` is not a git checkout (git's own message).
    """
    r = subprocess.run(["git", "-C", str(repo), "log", "--format=%H%x1f%ct%x1f%B%x1e", "HEAD"],
                       capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise RefarchError(f"git log in {repo}: {r.stderr.strip()}")
    out = []
    for record in filter(str.strip, r.stdout.split("\x1e")):
        sha, committed_s, message = record.strip("\n").split("\x1f", 2)
        if int(committed_s) <= since_s:
            continue
        lines = message.strip("\n").split("\n")
        if len(lines[0]) > MAX_SUBJECT:
            out.append(f"{sha[:12]}: subject of {len(lines[0])} characters (at most {MAX_SUBJECT}): {lines[0][:60]}...")
        elif len(lines) > 1 and lines[1].strip():
            out.append(f"{sha[:12]}: no blank line after the subject: {lines[0]}")
    return out
