"""``python -m refarch.ci`` (also ``refarch ci``): the suite's CI.

  run [--all | --only ENV ...] [--started EPOCH] [PYTEST ARGS]
                    the change tier, then the heavy tier within the budget
                    (what ci/test.sh runs after the bootstrap)
  plan              what a run would reuse, run and leave pending now, and why
  list              the environments, their tier, inputs and GitLab job
  gitlab [--write]  GitLab's rules:changes against the environments' inputs
  record VERSION    validation/VERSION/environments.json from this machine's records
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from ..errors import RefarchError


def _budget_s(defs) -> float:
    raw = os.environ.get("REFARCH_CI_BUDGET_S")
    if raw is None:
        return defs.budget_s
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise RefarchError(f"REFARCH_CI_BUDGET_S={raw!r}: give the budget in seconds, a number above 0")
    return value


def main(argv: list[str] | None = None) -> int:
    from . import environments, gitlab, release, reuse, runner, schedule

    parser = argparse.ArgumentParser(prog="python -m refarch.ci", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="the change tier, then the heavy tier within the budget")
    pick = run.add_mutually_exclusive_group()
    pick.add_argument("--all", action="store_true", help="every environment, whatever the records and budget")
    pick.add_argument("--only", action="append", default=[], metavar="ENV", help="only ENV (repeatable)")
    run.add_argument("--started", type=float, default=None,
                     help="when ci/test.sh started (epoch seconds): the budget counts from there")
    run.add_argument("--bootstrap-s", type=float, default=None, help="seconds ci/bootstrap.sh took (for the timings)")
    sub.add_parser("plan", help="what a run would reuse, run and leave pending now")
    sub.add_parser("list", help="the environments")
    gl = sub.add_parser("gitlab", help="check (or --write) .gitlab-ci.yml's rules:changes")
    gl.add_argument("--write", action="store_true")
    rec = sub.add_parser("record", help="validation/VERSION/environments.json from this machine's records")
    rec.add_argument("version")
    args, extra = parser.parse_known_args(argv)
    try:
        defs = environments.definitions()
        if args.command == "run":
            budget = _budget_s(defs)
            for name in args.only:
                defs.get(name)
            return runner.execute(defs, args.started or time.time(), budget, extra, args.only, args.all,
                                  args.bootstrap_s)
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        if args.command == "plan":
            heavy = [(e, reuse.standing(e, defs.max_age_s)) for e in defs.tier("heavy")]
            change = defs.tier("change")
            left = _budget_s(defs) - max([e.reference_s for e in change if e.lane], default=0) \
                - sum(e.reference_s for e in change if not e.lane)
            print(f"change tier (every run): {', '.join(defs.names('change'))}")
            print(f"heavy tier, {left:.0f} s of budget left after the change tier's references:")
            stands = dict(heavy)
            for d in schedule.plan(heavy, left, 1.0):
                last = reuse.describe_pass(stands[d.env].reusable or stands[d.env].last)
                print(f"  {d.env.name:<22} {d.action:<8} {d.why}" + (f" (expected {d.expected_s:.0f} s)"
                                                                      if d.action == "run" else "")
                      + f"; {last}")
            return 0
        if args.command == "list":
            for env in defs.environments:
                print(f"{env.name:<22} {env.tier:<6} tox -e {env.tox} {' '.join(env.pytest + env.args)}".rstrip()
                      + f"  [GitLab {env.gitlab}]\n    inputs: {', '.join(env.inputs)}")
            return 0
        if args.command == "gitlab":
            if args.write:
                jobs = gitlab.write(defs)
                print(f"{gitlab.PIPELINE}: rules:changes written for {', '.join(jobs) or 'no job (all current)'}")
                return 0
            found = gitlab.differences(defs)
            print("\n".join(found) or f"{gitlab.PIPELINE}: every job's rules:changes are its environments' inputs")
            return 1 if found else 0
        from ..judge.records import VALIDATION_DIR

        version = args.version.removeprefix("v")
        path, pending = release.write(version, defs, VALIDATION_DIR)
        print(f"{path}: {len(defs.environments) - len(pending)} of {len(defs.environments)} environments passed "
              "on this tree" + (f"; pending: {', '.join(pending)}" if pending else ""))
        return 1 if pending else 0
    except RefarchError as exc:
        print(f"refarch ci: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
