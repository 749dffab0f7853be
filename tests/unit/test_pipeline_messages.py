"""gitlab-ci-local's own error reaches the failure message: recorded output of
a fresh machine without rsync (the shell executor copies the project with it,
so no job ran)."""

from pathlib import Path

from refarch.tools import pipeline

DATA = Path(__file__).parent / "data" / "pipeline"


def test_a_job_that_never_ran_quotes_the_tools_own_error():
    output = (DATA / "gitlab-ci-local-no-rsync.txt").read_text(encoding="utf-8")
    assert pipeline.failed_jobs(output, ["lint", "unit"]) == [
        "job lint: did not run; gitlab-ci-local: bash: line 1: rsync: command not found",
        "job unit: did not run; gitlab-ci-local: bash: line 1: rsync: command not found"]


def test_a_failed_job_gives_its_verdict_and_passed_jobs_nothing():
    output = ("[10:00:01   3 s] lint > ruff check refarch\n[10:00:02   4 s] lint > E501 too long\n"
              " PASS  [  40 s] unit\n FAIL  [  41 s] lint\n")
    assert pipeline.failed_jobs(output, ["lint", "unit"]) == [
        "job lint: FAIL\n[10:00:01   3 s] lint > ruff check refarch\n[10:00:02   4 s] lint > E501 too long"]
