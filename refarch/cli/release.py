"""The release commands: a run's report, the validation records, the release
gate, the side-by-side comparison and the merge-request note.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import RefarchError
from ..overrides import parse_overrides
from ..paths import ROOT, runs_dir
from ..run import RunDir


def report(args) -> int:
    from ..report import html as report

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


def record(args) -> int:
    from ..judge import records

    runs = [records.load_results(Path(d)) for d in args.run_dirs]
    record = records.build_record(runs, args.name)
    path = records.write_record(record, Path(args.out))
    print(f"{path}: {record['verdict']} ({len(record['checks'])} checks, {len(record['properties'])} properties, "
          f"runs {', '.join(record['run_ids'])}; descriptors {record['tree_hash'][:12]})")
    for what in record["failed_checks"] + record["failed_properties"]:
        print(f"  failed: {what}")
    return 0


def _environment_problems(version: str, validation: Path) -> list[str]:
    """What the release gate needs of the suite's CI: every environment of
    both tiers passed on this tree's exact key (refarch.ci.release)."""
    from ..ci import environments
    from ..ci import release as ci_release

    return ci_release.problems(version, environments.definitions(), validation)


def gate(args) -> int:
    from ..judge import criteria as release_criteria
    from ..judge import gate

    criteria = release_criteria.load_criteria(Path(args.criteria))
    args.version = args.version.removeprefix("v")
    result = gate.evaluate(args.version, criteria, Path(args.records), environments=_environment_problems,
                           release=not args.merge_request)
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


def compare(args) -> int:
    from . import compare

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


def mr_note(args) -> int:
    from ..report import mrnote

    print(mrnote.post_summary(Path(args.run_dir)))
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add this module's commands (report, record, gate, compare, mr-note) to the
    ``refarch`` parser's subcommands."""

    rp = sub.add_parser("report", help="write runs/RUN_ID/report.html, or runs/trend.html with --trend",
                        description="render a run's HTML report from its results.json (the main job writes it "
                                    "too), or the trend page across every run under runs/")
    rp.add_argument("run_id", nargs="?", help="a run id from `refarch list`")
    rp.add_argument("--trend", action="store_true", help="images/sec and efficiency of every run")
    rp.set_defaults(func=report)
    r = sub.add_parser("record", help="write the validation record of one profile's runs for the architecture version",
                       description="one record per profile and version (validation/<version>/<name>.json) from "
                                   "the results of its runs, e.g. the main job's and the availability job's")
    r.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories (runs/<run id>)")
    r.add_argument("--name", help="record name (default: the profile; required for runs with overrides)")
    r.add_argument("--out", default=str(ROOT / "validation"), help="records root (default validation/)")
    r.set_defaults(func=record)
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
    g.set_defaults(func=gate)
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
    c.set_defaults(func=compare)
    m = sub.add_parser("mr-note", help="post a run's summary as a note on the GitLab merge request",
                       description="Markdown summary (verdict, properties, report link) posted with python-gitlab "
                                   "when a token (REFARCH_GITLAB_TOKEN) and a merge request (CI_MERGE_REQUEST_IID) "
                                   "are present; otherwise says why nothing was posted")
    m.add_argument("run_dir", help="a run directory (runs/<run id>)")
    m.set_defaults(func=mr_note)
