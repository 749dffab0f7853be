"""Errors the suite raises; each message is one line meant for a person."""


class RefarchError(Exception):
    """Base class: a problem the suite reports as one line and exits non-zero."""


class ProfileError(RefarchError):
    """A profile is unknown, malformed or asks for an impossible cluster."""


class PreflightError(RefarchError):
    """A tool, credential or input is missing; raised before anything is created."""


class PhaseTimeout(RefarchError):
    """A phase (deploy, configure, ...) ran past its time limit in seconds."""


class CommandError(RefarchError):
    """An external command (terraform, podman, ansible) failed."""


class LeakError(RefarchError):
    """Teardown left resources of the run behind."""


class TeardownError(RefarchError):
    """``terraform destroy`` failed: a defect of the descriptors (users tear
    the architecture down with Terraform), even when the suite's sweep then
    removed everything the run had made."""


class NotSupported(RefarchError):
    """The cloud driver has no such capability (e.g. the exposure survey on
    OpenStack); the check that needs it says so and does not run there."""


class CloudGone(RefarchError):
    """The cloud a run was deployed on is gone, and everything the run made
    went with it (the suite's all-in-one was stopped): there is nothing to
    reach, and ``destroy`` has nothing to remove."""
