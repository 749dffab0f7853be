"""Transient failures worth another try, kept as data.

As Terratest keeps its retryable errors (a map of regular expression to
reason, github.com/gruntwork-io/terratest ``modules/terraform``), each rule
here names the text of a transient failure, why it is transient, and how
many attempts it gets in all; a failure that matches no rule fails at once.
The patterns were written against recorded outputs
(``tests/unit/data/retry/``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Retryable:
    """One kind of transient failure.

    Attributes:
        id: short name used in logs and counts.
        pattern: regular expression searched in one failure's text.
        reason: why it is transient (printed when retrying).
        attempts: attempts in all, the first included.
        wait_s: seconds to wait before the next attempt.
    """

    id: str
    pattern: str
    reason: str
    attempts: int
    wait_s: float

    def matches(self, text: str) -> bool:
        return re.search(self.pattern, text) is not None


RETRYABLE: tuple[Retryable, ...] = (
    Retryable(
        "ssh-refused",
        r"Failed to connect to the host via ssh: .*(Connection refused|Connection reset by peer"
        r"|kex_exchange_identification|Connection timed out during banner exchange)",
        "sshd is not accepting connections yet while the node boots", attempts=4, wait_s=10),
    Retryable(
        "apt-lock",
        r"Could not get lock /var/lib/(dpkg/lock(-frontend)?|apt/lists/lock)"
        r"|Failed to lock apt for exclusive operation|Unable to acquire the dpkg frontend lock",
        "apt's lock is held (unattended-upgrades runs on a fresh cloud image)", attempts=4, wait_s=30),
    Retryable(
        "mirror",
        r"Failed to fetch \S+\s+(Could not connect to|Connection failed|Connection timed out"
        r"|Temporary failure resolving|500 |502 |503 |504 )"
        r"|Failed to update apt cache|Some index files failed to download",
        "the package mirror did not answer in time", attempts=3, wait_s=20),
)


def classify(failures: list[str], rules: tuple[Retryable, ...] = RETRYABLE) -> Retryable | None:
    """The rule that makes every one of ``failures`` retryable, or None.

    ``failures`` are the failure texts of one attempt (e.g. Ansible's
    ``fatal:`` lines with their details).  One failure that matches no rule
    makes the whole attempt non-retryable; with several rules matching, the
    one with the fewest attempts governs.
    """
    if not failures:
        return None
    governing: Retryable | None = None
    for text in failures:
        rule = next((r for r in rules if r.matches(text)), None)
        if rule is None:
            return None
        if governing is None or rule.attempts < governing.attempts:
            governing = rule
    return governing
