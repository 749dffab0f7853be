"""What a release needs of the suite's CI: every environment of both tiers
passed on the release tree's exact key.

``refarch ci record VERSION`` writes ``validation/<version>/environments.json``
from this machine's records (:mod:`.reuse`): for each environment its pass
whose ``tree_key`` (inputs and modules, :class:`refarch.ci.reuse.Key`) is
the checkout's now, with the tools and machine it ran on, or ``pending``
with the reason.  The release gate (:func:`problems`) makes each
environment's tree key again from the checkout and refuses the release for
every environment that is missing, pending or whose key differs.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..paths import ROOT
from . import reuse
from .environments import Definitions

#: The file beside a version's validation records.
FILE = "environments.json"


def tree_key(env, modules: dict, root: Path = ROOT) -> reuse.Key:
    """``env``'s key over the checkout at ``root`` and the ``modules`` of a
    record (tools and machine left empty: the tree's part only)."""
    return reuse.current_key(env, modules, root, tools={})


def build(defs: Definitions, root: Path = ROOT, where: Path | None = None) -> dict:
    """``{"environments": {name: entry}}``: for each environment, the newest
    record on this machine whose tree key is the checkout's now, when it is
    a whole pass (its record), else ``{"verdict": "pending", "why": ...}``."""
    out = {}
    for env in defs.environments:
        records = reuse.history(env.name, where)
        passes = [r for r in records if r["verdict"] == "passed"]
        found, newest = None, None
        for record in reversed(records):  # the newest run on this tree decides
            if tree_key(env, record.get("modules") or {}, root).tree_key == record.get("tree_key"):
                newest = record
                found = record if record["verdict"] == "passed" and record.get("reusable", True) else None
                break
        if found:
            out[env.name] = {k: v for k, v in found.items() if k not in ("junit",)}
        else:
            why = (f"its newest run on this tree, in {newest.get('run')}, {newest['verdict']}"
                   + (" without a complete key" if newest["verdict"] == "passed" else "") if newest else
                   "never passed on this machine" if not passes else
                   f"its passes here were on other trees (newest: {reuse.describe_pass(passes[-1])})")
            out[env.name] = {"environment": env.name, "tier": env.tier, "verdict": "pending", "why": why}
    return {"what": "the suite's CI environments on this tree: each one's pass (key, inputs, modules, tools, "
                    "machine, commit, seconds) or pending (refarch ci record)", "environments": out}


def write(version: str, defs: Definitions, validation: Path, root: Path = ROOT) -> tuple[Path, list[str]]:
    """Write :func:`build` to ``validation/<version>/environments.json``;
    returns the path and the names of the pending environments."""
    data = build(defs, root)
    path = validation / version / FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return path, [n for n, e in data["environments"].items() if e.get("verdict") != "passed"]


def problems(version: str, defs: Definitions, validation: Path, root: Path = ROOT) -> list[str]:
    """One line per environment that keeps ``version`` from release: no
    ``environments.json``, an environment missing from it, pending or
    failed, or passed on another tree key than the checkout's now (naming
    the inputs and modules that differ)."""
    path = validation / version / FILE
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
        found = found.get("environments") if isinstance(found, dict) else None
        if not isinstance(found, dict):
            return [f"{path}: no environments in it (`refarch ci record {version}` writes it)"]
    except OSError:
        return [f"no {path}: the CI environments of this tree are not recorded (ci/test.sh --all, then "
                f"`refarch ci record {version}`)"]
    except ValueError as exc:
        return [f"{path}: not JSON ({exc})"]
    out = []
    for env in defs.environments:
        entry = found.get(env.name)
        if entry is None:
            out.append(f"environment {env.name} ({env.tier} tier): not in {path}")
            continue
        if not isinstance(entry, dict) or entry.get("verdict") != "passed" or entry.get("reusable") is False:
            entry = entry if isinstance(entry, dict) else {}
            why = entry.get("why", "") if entry.get("reusable") is not False else "its record's key is incomplete"
            out.append(f"environment {env.name} ({env.tier} tier) is {entry.get('verdict')}: {why}")
            continue
        now = tree_key(env, entry.get("modules") or {}, root)
        if now.tree_key != entry.get("tree_key"):
            diff = reuse.differences(entry, now)  # tools left out: the tree's part only
            out.append(f"environment {env.name} passed on tree {entry.get('commit')} with tree key "
                       f"{str(entry.get('tree_key'))[:12]}; this tree's is {now.tree_key[:12]} "
                       f"({', '.join(diff) or 'its definition changed'}): run it again")
    return out
