"""Command line: the stages of a run, each on its own (as Terratest's
skippable stages and Molecule's steps), plus the sweep.

  refarch up --profile local [--set K=V]   deploy + configure, keep; prints the run id
  refarch configure RUN_ID                 run the playbook against a kept cluster
  refarch inventory RUN_ID                 write its Ansible inventory, print the path
  refarch test RUN_ID [-- PYTEST ARGS]     node/cluster checks and smoke job against it
  refarch destroy RUN_ID                   terraform destroy + sweep + leak check
  refarch sweep [--stale] [--dry-run]      remove leftovers of runs (by label)
  refarch list                             runs and their state
  refarch janitor --cloud NAME [--prefix hvd-] [--older-than 6h] [--delete]
                                           OpenStack: run-scoped resources older than
                                           the age, in deletion order (dry run by default)
  refarch record RUN_DIR... [--name NAME]  validation record of the runs' profile
  refarch gate VERSION                     may VERSION be released (release criteria + records)
  refarch mr-note RUN_DIR                  post the run's summary on the merge request
  refarch roles [-s NAME]                  Molecule scenario of every role (or NAME)
  refarch toolset build [--force] | tag    the toolset image (podman): every tool of the
                                           cluster-free stages; prints its tag
  refarch toolset stage ENV [-- ARGS]      tox.ini's commands of ENV with the tools on PATH

The default full job (deploy, configure, check, smoke, destroy) is
``pytest tests/integration --profile local`` (``tox -e integration``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

from .clouds import local as localcloud
from .clouds import owner
from .clouds.owner import Owner
from .cluster import Cluster
from .errors import RefarchError
from .lifecycle import guarded
from .paths import ROOT, runs_dir
from .profile import parse_overrides
from .run import RunDir, orphaned_runs, validate_run_id


def _up(args) -> int:
    cluster = Cluster.create(args.profile, parse_overrides(args.set), run_id=args.run_id)
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


def _configure(args) -> int:
    cluster = Cluster.attach(args.run_id)
    result = cluster.configure()
    print(json.dumps({"changed": result.changed}))
    return 0


def _inventory(args) -> int:
    cluster = Cluster.attach(args.run_id)
    print(cluster.write_inventory())
    return 0


def _test(args) -> int:
    RunDir.open(args.run_id)
    cmd = [sys.executable, "-m", "pytest", str(ROOT / "tests" / "integration"), "--run-id", args.run_id,
           *args.pytest_args]
    return subprocess.call(cmd, cwd=ROOT)


def _destroy(args) -> int:
    if RunDir.open(args.run_id).read_meta().get("cloud") == "vm":
        from .clouds import vm

        left = vm.destroy(args.run_id)
        print(json.dumps({"leaks": left}, indent=2))
        if left:
            raise RefarchError(f"run {args.run_id} left behind: {left}")
        return 0
    cluster = Cluster.attach(args.run_id)
    report = cluster.destroy()
    print(json.dumps(report, indent=2))
    return 0


def _sweep(args) -> int:
    """Remove resources of runs whose owner process is gone (``--stale``) or
    of the given run ids.  Ownership is read from the resources' labels, so
    the verdict is the same from every checkout: a run whose owner process
    lives is never touched; kept runs are spared by ``--stale`` unless
    ``--include-kept``."""
    if args.stale:
        localcloud.sweep_stale(include_kept=args.include_kept, dry_run=args.dry_run)
        from .clouds import vm

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
    from .judge.results import failures, verdict

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


def _cache(args) -> int:
    from .clouds import caches

    if args.action == "list":
        for entry in caches.entries():
            print(caches.describe(entry))
        return 0
    removed, problems = caches.prune(keep=args.keep, dry_run=args.dry_run)
    verb = "would remove" if args.dry_run else "removed"
    for entry in removed:
        print(f"{verb} {caches.describe(entry)}")
    for problem in problems:
        print(f"kept (in use): {problem}")
    if not removed:
        print("nothing to prune")
    return 0


def _report(args) -> int:
    from .report import html as report

    if args.trend:
        print(report.render_trend(runs_dir()))
        return 0
    if not args.run_id:
        raise RefarchError("report: give a RUN_ID or --trend")
    results = RunDir.at(runs_dir() / args.run_id).results_file
    if not results.is_file():
        raise RefarchError(f"report: run {args.run_id} has no results.json (see `refarch list`)")
    print(report.render(results))
    return 0


def _toolset(args) -> int:
    from .paths import cache_dir
    from .tools import toolset

    if args.action == "stage":
        return toolset.run_stage(args.env, args.posargs[1:] if args.posargs[:1] == ["--"] else args.posargs)
    if args.action == "tag":
        print(toolset.toolset_tag())
        return 0
    toolset.require_podman()
    log = cache_dir() / "toolset" / "build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"refarch: toolset image: building unless cached (log: {log})", file=sys.stderr, flush=True)
    tag, built = toolset.ensure_toolset(log, force=args.force)
    print(f"refarch: toolset image {'built' if built else 'cached'}: {tag}", file=sys.stderr, flush=True)
    print(tag)
    return 0


def _list(_args) -> int:
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


def _janitor(args) -> int:
    from .clouds import openstack as ostk

    age = parse_age(args.older_than)
    conn = ostk.connect(args.cloud)
    report = ostk.janitor(conn, args.prefix, age, dry_run=not args.delete)
    verb = "deleted" if args.delete else "would delete"
    done = report.deleted if args.delete else report.selected
    for kind, name in done:
        print(f"{verb} {kind:<16} {name}")
    for kind, name, why in report.failed:
        print(f"FAILED {kind:<16} {name}: {why}")
    if not report.selected:
        print(f"nothing matches prefix {args.prefix!r} older than {args.older_than}")
    return 1 if report.failed else 0


def _record(args) -> int:
    from .judge import records

    runs = [records.load_results(Path(d)) for d in args.run_dirs]
    record = records.build_record(runs, args.name)
    path = records.write_record(record, Path(args.out))
    print(f"{path}: {record['verdict']} ({len(record['checks'])} checks, {len(record['properties'])} properties, "
          f"runs {', '.join(record['run_ids'])}; descriptors {record['tree_hash'][:12]})")
    for what in record["failed_checks"] + record["failed_properties"]:
        print(f"  failed: {what}")
    return 0


def _gate(args) -> int:
    from .judge import gate

    criteria = gate.load_criteria(Path(args.criteria))
    args.version = args.version.removeprefix("v")
    result = gate.evaluate(args.version, criteria, Path(args.records))
    for line in result.warnings:
        print(f"warning: {line}")
    for line in result.problems:
        print(f"REFUSED: {line}")
    if not result.passed:
        print(f"gate: version {args.version} may not be released ({len(result.problems)} problems)")
        return 1
    path = gate.write_gate(result, Path(args.records))
    compared = ", ".join(f"{k} vs {v}" for k, v in result.previous.items()) or "first release: nothing to compare"
    print(f"gate: version {args.version} may be released (descriptors {result.tree_hash[:12]}; {compared}); "
          f"wrote {path}")
    return 0


def _compare(args) -> int:
    from .judge import compare

    baseline = args.baseline
    if not baseline:
        try:
            baseline = compare.previous_tag()
        except RefarchError as exc:
            if not args.first_release_ok:
                raise
            print(f"compare: a first release: nothing to compare with ({exc})")
            return 0
    result = compare.run(baseline, args.candidate, args.repetitions, args.profile, parse_overrides(args.set),
                         Path(args.out) if args.out else None)
    print(f"compare: {result['baseline']} ({result['baseline_version']}) against {result['candidate']} "
          f"({result['candidate_version']}), {result['repetitions']} repetitions each, side by side in "
          f"{result['duration_s']:.0f} s:")
    for fig in result["figures"]:
        print(f"  {fig['message']}")
    print(f"wrote {result['folder']}/compare.json" + (f" and {args.out}" if args.out else ""))
    return 1 if any(f["verdict"] == "regression" for f in result["figures"]) else 0


def _vm(args) -> int:
    from .clouds import vm

    if args.action == "up":
        volumes = {}
        for spec in args.volume:
            node, _, size = spec.partition("=")
            if not node or not size.isdigit():
                raise RefarchError(f"--volume {spec!r}: use NODE=GB, e.g. node1=1")
            volumes[node] = int(size)
        rundir = vm.up(args.nodes, volumes, seed_without_host_keys=args.seed_without_host_keys)
        print(f"run id: {rundir.run_id}")
        print(f"inventory: {rundir.path / 'inventory.yml'}")
        print(f"ssh: ssh -F {rundir.ssh_dir / 'config'} node1    destroy: ci/refarch destroy {rundir.run_id}")
        return 0
    vm.reboot(RunDir.open(args.run_id), args.node)
    print(f"{args.node} of {args.run_id} is back")
    return 0


def _roles(args) -> int:
    from .tools import roles

    if args.list:
        for name in roles.scenarios():
            why = roles.skip_reason(name)
            print(f"{name}" + (f"  (skipped here: {why})" if why else ""))
        return 0
    if args.no_reuse:
        os.environ["REFARCH_ROLES_REUSE"] = "0"
    outcomes, out = roles.run_scenarios(args.scenario)
    reused = [o.scenario for o in outcomes if o.reused_from]
    if reused:
        print(f"roles: reused (passed on this machine within 24 h with the same inputs): {', '.join(reused)}; "
              "--no-reuse runs them again")
    bad = [o.scenario for o in outcomes if o.status == "failed"]
    print(f"roles: {len(outcomes) - len(bad)} of {len(outcomes)} scenarios passed or skipped; logs, "
          f"results.json and junit.xml in {out}" + (f"; FAILED: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


def _mr_note(args) -> int:
    from .report import mrnote

    print(mrnote.post_summary(Path(args.run_dir)))
    return 0


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


def _check_args(args) -> int:
    """Validate the main job's arguments before anything runs: 0 when they
    are good, 3 after printing the usage (--help), 2 with one line on bad
    input (printed last)."""
    import os

    from .profile import available_profiles, load_profile, parse_overrides

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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="refarch", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="deploy and configure a cluster, and keep it")
    from .profile import available_profiles

    up.add_argument("--profile", default="local",
                    help=f"profile in descriptors/profiles: {', '.join(available_profiles())} (default local)")
    up.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a profile value by its dotted key, e.g. nodes.count=3")
    up.add_argument("--run-id", help="use this run id instead of a new one")
    up.add_argument("--no-configure", action="store_true", help="deploy only")
    up.add_argument("--keep-on-failure", action="store_true", help="do not tear down when a stage fails")
    up.set_defaults(func=_up)
    for name, func, text in (("configure", _configure, "run the playbook against a kept cluster"),
                             ("inventory", _inventory, "write the Ansible inventory of a kept cluster (the one "
                                                       "site.yml gets) and print its path"),
                             ("destroy", _destroy, "destroy a kept cluster and check nothing is left")):
        sp = sub.add_parser(name, help=text, description=text)
        sp.add_argument("run_id", help="a run id from `refarch list`")
        sp.set_defaults(func=func)
    t = sub.add_parser("test", help="run the checks and the smoke job against a kept cluster",
                       description="run tests/integration against the kept cluster RUN_ID (pytest --run-id)")
    t.add_argument("run_id", help="a kept run's id (`refarch list`, state kept)")
    t.add_argument("pytest_args", nargs=argparse.REMAINDER,
                   help="passed to pytest, e.g. -k sshd or --long-properties")
    t.set_defaults(func=_test)
    s = sub.add_parser("sweep", help="remove leftovers of runs by their run-id label")
    s.add_argument("run_ids", nargs="*")
    s.add_argument("--stale", action="store_true", help="every run whose owner process is gone")
    s.add_argument("--include-kept", action="store_true", help="with --stale: kept runs too")
    s.add_argument("--unfinished", action="store_true",
                   help="tear down every run under runs/ that was deployed, not destroyed, not kept, and whose "
                        "owner is gone (a cancelled CI job's after_script; any cloud)")
    s.add_argument("--dry-run", action="store_true")
    s.set_defaults(func=_sweep)
    sub.add_parser("list", help="list runs: id, start, profile, state, outcome, overrides",
                   description="list the run directories under runs/ (or $REFARCH_RUNS_DIR), oldest first"
                   ).set_defaults(func=_list)
    rp = sub.add_parser("report", help="write runs/RUN_ID/report.html, or runs/trend.html with --trend",
                        description="render a run's HTML report from its results.json (the main job writes it "
                                    "too), or the trend page across every run under runs/")
    rp.add_argument("run_id", nargs="?", help="a run id from `refarch list`")
    rp.add_argument("--trend", action="store_true", help="images/sec and efficiency of every run")
    rp.set_defaults(func=_report)
    cc = sub.add_parser("cache", help="list or prune the node images and wheelhouses (one per pin set)",
                        description="node images (podman) and wheelhouses (~/.cache/refarch): list them, or "
                                    "prune all but the current pins' and the KEEP newest others")
    cc.add_argument("action", choices=["list", "prune"])
    cc.add_argument("--keep", type=int, default=1, help="with prune: newest other entries kept per kind (default 1)")
    cc.add_argument("--dry-run", action="store_true", help="with prune: only say what would go")
    cc.set_defaults(func=_cache)
    c = sub.add_parser("check-args", help="validate the main job's arguments (profile, --set) before it runs",
                       add_help=False)
    c.add_argument("job_args", nargs=argparse.REMAINDER)
    c.set_defaults(func=_check_args)
    j = sub.add_parser("janitor", help="OpenStack: delete run-scoped resources older than an age")
    j.add_argument("--cloud", required=True, help="clouds.yaml entry")
    j.add_argument("--prefix", default="hvd-", help="run-id prefix of names and tags (default hvd-)")
    j.add_argument("--older-than", default="6h", help="age such as 90m, 6h, 2d (default 6h)")
    j.add_argument("--delete", action="store_true", help="really delete (default: dry run)")
    j.set_defaults(func=_janitor)
    r = sub.add_parser("record", help="write the validation record of one profile's runs for the architecture version",
                       description="one record per profile and version (validation/<version>/<name>.json) from "
                                   "the results of its runs, e.g. the main job's and the availability job's")
    r.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories (runs/<run id>)")
    r.add_argument("--name", help="record name (default: the profile; required for runs with overrides)")
    r.add_argument("--out", default=str(ROOT / "validation"), help="records root (default validation/)")
    r.set_defaults(func=_record)
    g = sub.add_parser("gate", help="decide whether an architecture version may be released",
                       description="checks the version's validation records against the release criteria and the "
                                   "previous release; exit 0 and writes validation/<version>/gate.json, or exit 1 "
                                   "listing each missing record, failed property and regression")
    g.add_argument("version", help="the version to release (descriptors/VERSION; a tag v1.2.3 gives 1.2.3)")
    g.add_argument("--criteria", default=str(ROOT / "validation" / "release-criteria.yml"), help="release criteria file")
    g.add_argument("--records", default=str(ROOT / "validation"), help="records root (default validation/)")
    g.set_defaults(func=_gate)
    c = sub.add_parser("compare", help="measure two versions side by side on this machine",
                       description="deploys the baseline's and the candidate's descriptors as two kept clusters, "
                                   "measures them interleaved N times (where memory holds one cluster only: the "
                                   "baseline's N, then the candidate's) and writes compare.json: each figure's "
                                   "candidate/baseline ratio with a 95 %% interval and its verdict; exit 1 on a "
                                   "regression")
    c.add_argument("baseline", nargs="?", help="git ref (default: the highest v* tag below descriptors/VERSION)")
    c.add_argument("candidate", nargs="?", default="worktree", help="git ref (default: the working tree)")
    c.add_argument("-n", "--repetitions", type=int, default=5, help="repetitions per version (default 5, at least 3)")
    c.add_argument("--profile", default="local", help="profile of both clusters (default local)")
    c.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a profile value of both, e.g. nodes.flavor.memory_mb=4096")
    c.add_argument("--out", help="also write compare.json here (validation/<version>/compare.json for the gate)")
    c.add_argument("--first-release-ok", action="store_true",
                   help="with no BASELINE and no release tag below descriptors/VERSION, say so and exit 0 "
                        "(the tag pipeline of a first release)")
    c.set_defaults(func=_compare)
    v = sub.add_parser("vm", help="QEMU virtual machines with a real kernel (the nfs scenario: cloud-init boot and NFS)",
                       description="up: boot VMs from the cached VM image with cloud-init seeds rendered by "
                                   "Terraform, kept until `refarch destroy RUN_ID`; reboot: reboot one and wait")
    v.add_argument("action", choices=["up", "reboot"])
    v.add_argument("run_id", nargs="?", help="reboot: the VM run")
    v.add_argument("--nodes", type=int, default=1, choices=range(1, 5), help="up: how many VMs (1-4)")
    v.add_argument("--volume", action="append", default=[], metavar="NODE=GB", help="up: an extra disk (/dev/vdb)")
    v.add_argument("--seed-without-host-keys", action="store_true",
                   help="up: drop the host keys from the seed (proves the strict SSH check notices)")
    v.add_argument("--node", default="node1", help="reboot: which VM")
    v.set_defaults(func=_vm)
    ro = sub.add_parser("roles", help="test every Ansible role on its own with Molecule (tox -e molecule)",
                        description="molecule test of each scenario in descriptors/ansible/molecule (one per role), "
                                    "one at a time; Ctrl-C destroys the running scenario's nodes")
    ro.add_argument("-s", "--scenario", action="append", default=[], metavar="NAME",
                    help="run only this scenario (repeatable); default all")
    ro.add_argument("--list", action="store_true", help="list the scenarios and which this host skips")
    ro.add_argument("--no-reuse", action="store_true",
                    help="run every scenario, also those that passed here within 24 h with the same inputs "
                         "(REFARCH_ROLES_REUSE=0)")
    ro.set_defaults(func=_roles)
    ts = sub.add_parser("toolset", help="the toolset image (podman): build it, print its tag, or run a tox stage "
                                        "with its tools",
                        description="the toolset image: a Debian root made by debootstrap with the host commands, "
                                    "the locked Python dependencies, the Ansible collections, terraform and this "
                                    "suite, for the cluster-free stages and deploying by hand")
    tsub = ts.add_subparsers(dest="action", required=True)
    tb = tsub.add_parser("build", help="build the image unless its tag exists; print the tag",
                         description="build localhost/refarch-toolset:<version>-<inputs hash> with podman unless "
                                     "it exists; print the tag (the build's log: <cache>/toolset/build.log)")
    tb.add_argument("--force", action="store_true", help="build again even when the tag exists (no layer cache)")
    tb.set_defaults(func=_toolset)
    tsub.add_parser("tag", help="print the tag of the current inputs without building",
                    description="print localhost/refarch-toolset:<version>-<inputs hash> without building"
                    ).set_defaults(func=_toolset)
    tst = tsub.add_parser("stage", help="run tox.ini's commands of a stage with the tools on PATH (in the image)",
                          description="tox.ini's commands of ENV (lint, policy, unit, gate) run in the checkout "
                                      "with the tools on PATH, without tox: what a job in the toolset image runs")
    tst.add_argument("env", help="a tox environment: lint, policy, unit, gate")
    tst.add_argument("posargs", nargs=argparse.REMAINDER, help="its {posargs}, after --")
    tst.set_defaults(func=_toolset)
    m = sub.add_parser("mr-note", help="post a run's summary as a note on the GitLab merge request",
                       description="Markdown summary (verdict, properties, report link) posted with python-gitlab "
                                   "when a token (REFARCH_GITLAB_TOKEN) and a merge request (CI_MERGE_REQUEST_IID) "
                                   "are present; otherwise says why nothing was posted")
    m.add_argument("run_dir", help="a run directory (runs/<run id>)")
    m.set_defaults(func=_mr_note)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["check-args"]:  # the job's own options follow: not argparse's
        return _check_args(argparse.Namespace(job_args=argv[1:]))
    args = build_parser().parse_args(argv)
    if getattr(args, "pytest_args", None) and args.pytest_args[0] == "--":
        args.pytest_args = args.pytest_args[1:]
    try:
        return args.func(args)
    except RefarchError as exc:
        print(f"refarch: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print(f"refarch: interrupted ({exc or 'SIGINT'})", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
