"""The run commands: a run's stages on their own (up, configure, inventory, test,
destroy), the sweep of leftovers, the list of runs and OpenStack's janitor.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

from .. import owner
from ..clouds import local as localcloud
from ..cluster import Cluster
from ..errors import RefarchError
from ..lifecycle import guarded
from ..overrides import parse_overrides
from ..owner import Owner
from ..paths import ROOT
from ..profile import available_profiles, load_profile
from ..run import RunDir, orphaned_runs, validate_run_id


def up(args) -> int:
    from ..clouds import aio

    overrides, _, served, owned = aio.serve_profile(args.profile, parse_overrides(args.set))
    if owned:
        served.rundir.update_meta(kept=True)
        print(f"refarch: started the all-in-one {served.run_id} and kept it: `refarch aio down {served.run_id}` "
              f"stops it", file=sys.stderr)
    cluster = Cluster.create(args.profile, overrides, run_id=args.run_id)
    print(f"run id: {cluster.run_id}", flush=True)

    def teardown():
        print(f"refarch: tearing down {cluster.run_id}", file=sys.stderr, flush=True)
        cluster.destroy()

    kept = {"ok": False}
    if args.keep_on_failure:
        cluster.rundir.update_meta(kept=True)  # a stale sweep must spare it too
    with guarded(teardown, keep=lambda: kept["ok"] or args.keep_on_failure):
        cluster.prepare()
        contract = cluster.deploy()
        if not args.no_configure:
            cluster.configure()
        kept["ok"] = True
    # Made for a longer-lived owner (the role-scenario runner): its life
    # protects the run, and its death lets the stale sweep remove it.
    cluster.rundir.update_meta(kept=not owner.delegated())
    for node in contract.nodes:
        print(f"  {node.name:<8} {node.address}")
    print(f"kept. ssh: ssh -F {cluster.rundir.ssh_dir / 'config'} {contract.nodes[0].name}")
    print(f"checks: ci/refarch test {cluster.run_id}    destroy: ci/refarch destroy {cluster.run_id}")
    return 0


def configure(args) -> int:
    cluster = Cluster.attach(args.run_id)
    result = cluster.configure()
    print(json.dumps({"changed": result.changed}))
    return 0


def inventory(args) -> int:
    cluster = Cluster.attach(args.run_id)
    print(cluster.write_inventory())
    return 0


def test(args) -> int:
    RunDir.open(args.run_id)
    cmd = [sys.executable, "-m", "pytest", str(ROOT / "tests" / "integration"), "--run-id", args.run_id,
           *args.pytest_args]
    return subprocess.call(cmd, cwd=ROOT)


def destroy(args) -> int:
    if RunDir.open(args.run_id).read_meta().get("cloud") == "vm":
        from ..clouds import vm

        left = vm.destroy(args.run_id)
        print(json.dumps({"leaks": left}, indent=2))
        if left:
            raise RefarchError(f"run {args.run_id} left behind: {left}")
        return 0
    cluster = Cluster.attach(args.run_id)
    report = cluster.destroy()
    print(json.dumps(report, indent=2))
    return 0


def sweep(args) -> int:
    """Remove resources of runs whose owner process is gone (``--stale``) or
    of the given run ids.  Ownership is read from the resources' labels, so
    the verdict is the same from every checkout: a run whose owner process
    lives is never touched; kept runs are spared by ``--stale`` unless
    ``--include-kept``."""
    if args.stale:
        localcloud.sweep_stale(include_kept=args.include_kept, dry_run=args.dry_run)
        from ..clouds import vm

        for run_id in vm.stale_runs():
            print(f"{'would remove' if args.dry_run else 'removing'} stale VM run {run_id} (owner gone, not kept)")
            if not args.dry_run:
                vm.destroy(run_id)
    verdicts = localcloud.stale_runs(include_kept=True)
    for run_id in sorted(set(args.run_ids)):
        validate_run_id(run_id)
        if run_id not in verdicts:
            print(f"nothing of {run_id} on this host")
            continue
        _stale, reason, labels = verdicts[run_id]
        owner = Owner.from_labels(labels)
        if owner is not None and owner.alive():
            print(f"leaving {run_id}: {reason}")
            continue
        localcloud.remove_run(run_id, Path(owner.rundir) if owner else None, dry_run=args.dry_run)
    failed = []
    if args.unfinished:
        for run_id in unfinished_runs():
            print(f"tearing down unfinished run {run_id}", flush=True)
            if not args.dry_run:
                try:  # one run's failed teardown must not leave the others
                    print(json.dumps(Cluster.attach(run_id).destroy(), indent=2))
                except RefarchError as exc:
                    print(f"refarch: error: {exc}", file=sys.stderr, flush=True)
                    failed.append(run_id)
    if not args.stale and not args.run_ids and not args.unfinished:
        print("nothing to sweep: give run ids, --stale or --unfinished")
    if failed:
        raise RefarchError(f"teardown failed for {', '.join(failed)} (each error above)")
    return 0


def unfinished_runs() -> list[str]:
    """Run ids under runs/ (``$REFARCH_RUNS_DIR``) that were deployed and
    never destroyed, are not kept, and whose owner process is gone: what a
    cancelled CI job leaves (GitLab runs ``after_script`` after a cancel).
    Works for every cloud: each run is torn down through its own Terraform
    state."""
    return [path.name for path, _meta in orphaned_runs() if (path / "terraform").exists()]


def run_rows() -> list[dict]:
    """One row per run directory, oldest first: run id, started (UTC),
    profile, overrides, state (live, kept, destroyed, gone), outcome (from
    results.json: passed, FAILED n, interrupted, or "-" without results)."""
    from ..judge.results import failures, verdict

    live = localcloud.all_run_ids()
    rows = []
    for rundir in RunDir.all():
        meta = rundir.read_meta()
        state = "live" if rundir.run_id in live else ("destroyed" if meta.get("destroyed") else "gone")
        if state == "live" and meta.get("kept"):
            state = "kept"
        outcome = "-"
        data = rundir.read_results()
        if data is not None:
            outcome = {"INTERRUPTED": "interrupted", "FAILED": f"FAILED {failures(data)}"}.get(
                verdict(data), f"passed {data.get('check_counts', {}).get('passed', 0)}")
        started = meta.get("started_at")
        rows.append({"run_id": rundir.run_id, "started": dt.datetime.fromtimestamp(started, dt.timezone.utc)
                     .strftime("%Y-%m-%d %H:%M") if started else "?", "profile": meta.get("profile", "?"),
                     "overrides": " ".join(f"{k}={v}" for k, v in (meta.get("overrides") or {}).items()) or "-",
                     "state": state, "outcome": outcome, "_t": started or 0})
    return sorted(rows, key=lambda r: r["_t"])


def list_runs(_args) -> int:
    rows = run_rows()
    fmt = "{run_id:<24} {started:<17} {profile:<14} {state:<10} {outcome:<12} {overrides}"
    print(fmt.format(run_id="RUN ID", started="STARTED (UTC)", profile="PROFILE", state="STATE",
                     outcome="OUTCOME", overrides="OVERRIDES"))
    for row in rows:
        print(fmt.format(**row))
    return 0


def parse_age(text: str) -> dt.timedelta:
    """``"90m"``, ``"6h"``, ``"2d"`` -> timedelta.

    Raises:
        RefarchError: not a number followed by s, m, h or d.
    """
    units = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
    if len(text) < 2 or text[-1] not in units or not text[:-1].isdigit():
        raise RefarchError(f"malformed age {text!r}: use e.g. 90m, 6h or 2d")
    return dt.timedelta(**{units[text[-1]]: int(text[:-1])})


def janitor(args) -> int:
    from ..clouds import openstack as ostk

    age = parse_age(args.older_than)
    conn = ostk.connect(args.cloud)
    report = ostk.janitor(conn, args.prefix, age, dry_run=not args.delete)
    verb = "deleted" if args.delete else "would delete"
    done = report.deleted if args.delete else report.selected
    for kind, name in done:
        print(f"{verb} {kind:<16} {name}")
    for kind, name, why in report.failed:
        print(f"FAILED {kind:<16} {name}: {why}")
    for line in report.waits:
        print(f"waited: {line}")
    if not report.selected:
        print(f"nothing matches prefix {args.prefix!r} older than {args.older_than}")
    return 1 if report.failed else 0


MAIN_JOB_USAGE = """usage: ci/main-job.sh [--profile NAME] [--set KEY=VALUE ...] [--keep] [pytest options]

Deploys a cluster from descriptors/profiles/NAME.yml (default: $REFARCH_PROFILE
or local), configures it, runs the checks and properties, tears it down.
  --profile NAME     one of: {profiles}
  --set KEY=VALUE    override a profile value by its dotted key (nodes.count=3,
                     nodes.flavor.memory_mb=4096, properties.scaling.efficiency.reference.lower=0.5)
  --keep             keep the cluster afterwards (ci/refarch destroy RUN_ID)
  --long-properties  also the properties that stop and start nodes (availability)
  -k EXPR            run only the checks whose names match (pytest)
Results: runs/<run id>/ (results.json, junit.xml, logs/); the summary at the end names it.
Expected: about 11 min cold (image and wheel builds), under 5 min warm."""


def check_args(args) -> int:
    """Validate the main job's arguments before anything runs: 0 when they
    are good, 3 after printing the usage (--help), 2 with one line on bad
    input (printed last)."""

    rest = list(args.job_args)
    if "-h" in rest or "--help" in rest:
        print(MAIN_JOB_USAGE.format(profiles=", ".join(available_profiles())))
        return 3
    name = os.environ.get("REFARCH_PROFILE", "local")
    sets = []
    for i, arg in enumerate(rest):
        if arg == "--profile" and i + 1 < len(rest):
            name = rest[i + 1]
        elif arg.startswith("--profile="):
            name = arg.split("=", 1)[1]
        elif arg == "--set" and i + 1 < len(rest):
            sets.append(rest[i + 1])
        elif arg.startswith("--set="):
            sets.append(arg.split("=", 1)[1])
    try:
        load_profile(name, parse_overrides(sets))
    except RefarchError as exc:
        print(f"ci/main-job.sh: error: {exc}", file=sys.stderr)
        return 2
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add this module's commands (up, configure, inventory, destroy, test, sweep, list,
    janitor, check-args) to the ``refarch`` parser's subcommands."""

    u = sub.add_parser("up", help="deploy and configure a cluster, and keep it")
    u.add_argument("--profile", default="local",
                    help=f"profile in descriptors/profiles: {', '.join(available_profiles())} (default local)")
    u.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a profile value by its dotted key, e.g. nodes.count=3")
    u.add_argument("--run-id", help="use this run id instead of a new one")
    u.add_argument("--no-configure", action="store_true", help="deploy only")
    u.add_argument("--keep-on-failure", action="store_true", help="do not tear down when a stage fails")
    u.set_defaults(func=up)
    for name, func, text in (("configure", configure, "run the playbook against a kept cluster"),
                             ("inventory", inventory, "write the Ansible inventory of a kept cluster (the one "
                                                       "site.yml gets) and print its path"),
                             ("destroy", destroy, "destroy a kept cluster and check nothing is left")):
        sp = sub.add_parser(name, help=text, description=text)
        sp.add_argument("run_id", help="a run id from `refarch list`")
        sp.set_defaults(func=func)
    t = sub.add_parser("test", help="run the checks and the smoke job against a kept cluster",
                       description="run tests/integration against the kept cluster RUN_ID (pytest --run-id)")
    t.add_argument("run_id", help="a kept run's id (`refarch list`, state kept)")
    t.add_argument("pytest_args", nargs=argparse.REMAINDER,
                   help="passed to pytest, e.g. -k sshd or --long-properties")
    t.set_defaults(func=test)
    s = sub.add_parser("sweep", help="remove leftovers of runs by their run-id label")
    s.add_argument("run_ids", nargs="*")
    s.add_argument("--stale", action="store_true", help="every run whose owner process is gone")
    s.add_argument("--include-kept", action="store_true", help="with --stale: kept runs too")
    s.add_argument("--unfinished", action="store_true",
                   help="tear down every run under runs/ that was deployed, not destroyed, not kept, and whose "
                        "owner is gone (a cancelled CI job's after_script; any cloud)")
    s.add_argument("--dry-run", action="store_true")
    s.set_defaults(func=sweep)
    sub.add_parser("list", help="list runs: id, start, profile, state, outcome, overrides",
                   description="list the run directories under runs/ (or $REFARCH_RUNS_DIR), oldest first"
                   ).set_defaults(func=list_runs)
    j = sub.add_parser("janitor", help="OpenStack: delete run-scoped resources older than an age")
    j.add_argument("--cloud", required=True, help="clouds.yaml entry")
    j.add_argument("--prefix", default="hvd-", help="run-id prefix of names and tags (default hvd-)")
    j.add_argument("--older-than", default="6h", help="age such as 90m, 6h, 2d (default 6h)")
    j.add_argument("--delete", action="store_true", help="really delete (default: dry run)")
    j.set_defaults(func=janitor)
    c = sub.add_parser("check-args", help="validate the main job's arguments (profile, --set) before it runs",
                       add_help=False)
    c.add_argument("job_args", nargs=argparse.REMAINDER)
    c.set_defaults(func=check_args)
