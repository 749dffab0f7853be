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
  refarch ci plan | list | run | gitlab | record VERSION
                                           the suite's CI: its two tiers (python -m refarch.ci)

The default full job (deploy, configure, check, smoke, destroy) is
``pytest tests/integration --profile local`` (``tox -e integration``).
"""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import RefarchError
from ..paths import ROOT
from . import builds, release, runs

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

    from ..overrides import parse_overrides
    from ..profile import available_profiles, load_profile

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
    from ..profile import available_profiles

    up.add_argument("--profile", default="local",
                    help=f"profile in descriptors/profiles: {', '.join(available_profiles())} (default local)")
    up.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a profile value by its dotted key, e.g. nodes.count=3")
    up.add_argument("--run-id", help="use this run id instead of a new one")
    up.add_argument("--no-configure", action="store_true", help="deploy only")
    up.add_argument("--keep-on-failure", action="store_true", help="do not tear down when a stage fails")
    up.set_defaults(func=runs.up)
    for name, func, text in (("configure", runs.configure, "run the playbook against a kept cluster"),
                             ("inventory", runs.inventory, "write the Ansible inventory of a kept cluster (the one "
                                                       "site.yml gets) and print its path"),
                             ("destroy", runs.destroy, "destroy a kept cluster and check nothing is left")):
        sp = sub.add_parser(name, help=text, description=text)
        sp.add_argument("run_id", help="a run id from `refarch list`")
        sp.set_defaults(func=func)
    t = sub.add_parser("test", help="run the checks and the smoke job against a kept cluster",
                       description="run tests/integration against the kept cluster RUN_ID (pytest --run-id)")
    t.add_argument("run_id", help="a kept run's id (`refarch list`, state kept)")
    t.add_argument("pytest_args", nargs=argparse.REMAINDER,
                   help="passed to pytest, e.g. -k sshd or --long-properties")
    t.set_defaults(func=runs.test)
    s = sub.add_parser("sweep", help="remove leftovers of runs by their run-id label")
    s.add_argument("run_ids", nargs="*")
    s.add_argument("--stale", action="store_true", help="every run whose owner process is gone")
    s.add_argument("--include-kept", action="store_true", help="with --stale: kept runs too")
    s.add_argument("--unfinished", action="store_true",
                   help="tear down every run under runs/ that was deployed, not destroyed, not kept, and whose "
                        "owner is gone (a cancelled CI job's after_script; any cloud)")
    s.add_argument("--dry-run", action="store_true")
    s.set_defaults(func=runs.sweep)
    sub.add_parser("list", help="list runs: id, start, profile, state, outcome, overrides",
                   description="list the run directories under runs/ (or $REFARCH_RUNS_DIR), oldest first"
                   ).set_defaults(func=runs.list)
    rp = sub.add_parser("report", help="write runs/RUN_ID/report.html, or runs/trend.html with --trend",
                        description="render a run's HTML report from its results.json (the main job writes it "
                                    "too), or the trend page across every run under runs/")
    rp.add_argument("run_id", nargs="?", help="a run id from `refarch list`")
    rp.add_argument("--trend", action="store_true", help="images/sec and efficiency of every run")
    rp.set_defaults(func=release.report)
    cc = sub.add_parser("cache", help="list or prune the node images and wheelhouses (one per pin set)",
                        description="node images (podman) and wheelhouses (~/.cache/refarch): list them, or "
                                    "prune all but the current pins' and the KEEP newest others")
    cc.add_argument("action", choices=["list", "prune"])
    cc.add_argument("--keep", type=int, default=1, help="with prune: newest other entries kept per kind (default 1)")
    cc.add_argument("--dry-run", action="store_true", help="with prune: only say what would go")
    cc.set_defaults(func=builds.cache)
    c = sub.add_parser("check-args", help="validate the main job's arguments (profile, --set) before it runs",
                       add_help=False)
    c.add_argument("job_args", nargs=argparse.REMAINDER)
    c.set_defaults(func=_check_args)
    j = sub.add_parser("janitor", help="OpenStack: delete run-scoped resources older than an age")
    j.add_argument("--cloud", required=True, help="clouds.yaml entry")
    j.add_argument("--prefix", default="hvd-", help="run-id prefix of names and tags (default hvd-)")
    j.add_argument("--older-than", default="6h", help="age such as 90m, 6h, 2d (default 6h)")
    j.add_argument("--delete", action="store_true", help="really delete (default: dry run)")
    j.set_defaults(func=runs.janitor)
    r = sub.add_parser("record", help="write the validation record of one profile's runs for the architecture version",
                       description="one record per profile and version (validation/<version>/<name>.json) from "
                                   "the results of its runs, e.g. the main job's and the availability job's")
    r.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories (runs/<run id>)")
    r.add_argument("--name", help="record name (default: the profile; required for runs with overrides)")
    r.add_argument("--out", default=str(ROOT / "validation"), help="records root (default validation/)")
    r.set_defaults(func=release.record)
    g = sub.add_parser("gate", help="decide whether an architecture version may be released",
                       description="checks the version's validation records against the release criteria and the "
                                   "previous release; exit 0 and writes validation/<version>/gate.json, or exit 1 "
                                   "listing each missing record, failed property and regression")
    g.add_argument("version", help="the version to release (descriptors/VERSION; a tag v1.2.3 gives 1.2.3)")
    g.add_argument("--criteria", default=str(ROOT / "validation" / "release-criteria.yml"), help="release criteria file")
    g.add_argument("--records", default=str(ROOT / "validation"), help="records root (default validation/)")
    g.add_argument("--merge-request", action="store_true",
                   help="a preview on a merge request: a missing, other-tree or inconclusive side-by-side "
                        "comparison warns instead of refusing")
    g.set_defaults(func=release.gate)
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
    c.set_defaults(func=release.compare)
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
    v.set_defaults(func=builds.vm)
    ro = sub.add_parser("roles", help="test every Ansible role on its own with Molecule (tox -e molecule)",
                        description="molecule test of each scenario in descriptors/ansible/molecule (one per role), "
                                    "one at a time; Ctrl-C destroys the running scenario's nodes")
    ro.add_argument("-s", "--scenario", action="append", default=[], metavar="NAME",
                    help="run only this scenario (repeatable); default all")
    ro.add_argument("--list", action="store_true", help="list the scenarios and which this host skips")
    ro.add_argument("--no-reuse", action="store_true",
                    help="run every scenario, also those that passed here within 24 h with the same inputs "
                         "(REFARCH_ROLES_REUSE=0)")
    ro.set_defaults(func=builds.roles)
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
    tb.set_defaults(func=builds.toolset)
    tsub.add_parser("tag", help="print the tag of the current inputs without building",
                    description="print localhost/refarch-toolset:<version>-<inputs hash> without building"
                    ).set_defaults(func=builds.toolset)
    tst = tsub.add_parser("stage", help="run tox.ini's commands of a stage with the tools on PATH (in the image)",
                          description="tox.ini's commands of ENV (lint, policy, unit, gate) run in the checkout "
                                      "with the tools on PATH, without tox: what a job in the toolset image runs")
    tst.add_argument("env", help="a tox environment: lint, policy, unit, gate")
    tst.add_argument("posargs", nargs=argparse.REMAINDER, help="its {posargs}, after --")
    tst.set_defaults(func=builds.toolset)
    m = sub.add_parser("mr-note", help="post a run's summary as a note on the GitLab merge request",
                       description="Markdown summary (verdict, properties, report link) posted with python-gitlab "
                                   "when a token (REFARCH_GITLAB_TOKEN) and a merge request (CI_MERGE_REQUEST_IID) "
                                   "are present; otherwise says why nothing was posted")
    m.add_argument("run_dir", help="a run directory (runs/<run id>)")
    m.set_defaults(func=release.mr_note)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["ci"]:  # the suite's CI has its own command line
        from ..ci.__main__ import main as ci_main

        return ci_main(argv[1:])
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
