"""The suite's own CI: its environments in two tiers (:mod:`.environments`,
from ``ci/environments.yml``), the records that let a heavy environment be
reused while its inputs are unchanged (:mod:`.reuse`), the order and budget
of a run (:mod:`.schedule`), the run itself (:mod:`.runner`, what
``ci/test.sh`` calls) and GitLab's ``rules:changes`` made from the same
definitions (:mod:`.gitlab`)."""
