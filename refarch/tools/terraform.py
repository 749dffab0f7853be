"""Terraform from Python through tftest, one state per run.

tftest runs Terraform in the module's folder and by default deletes state
when the wrapper object is collected; so each run gets its own copy of the
root module under ``runs/<run id>/terraform``, with the shared child modules
beside it in ``runs/<run id>/modules`` (state lives there and runs never
share it) and ``cleanup_on_exit=False`` keeps a kept cluster's state.
Inputs go into ``terraform.tfvars.json`` beside the copy, so ``destroy`` by
run id needs nothing but the run directory.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import stat
import threading
import time
from pathlib import Path

import tftest

from ..errors import CommandError, PhaseTimeout, PreflightError
from ..paths import TERRAFORM_DIR, write_private

_WRAPPER = """#!/bin/sh
# Lets the suite signal the very terraform process that tftest starts: a
# time limit or Ctrl-C/SIGTERM sends it SIGINT, so it stops cleanly and
# releases the state before teardown runs `terraform destroy`.
echo "$$" > "$REFARCH_TF_PIDFILE"
exec terraform "$@"
"""
#: Seconds terraform gets to stop after SIGINT before it is killed.
STOP_GRACE_S = 60


class Terraform:
    """A run's Terraform root module (a copy of ``descriptors/terraform/<cloud>``).

    Args:
        workdir: the run's ``terraform`` folder (made on first use).
        cloud: ``local`` or ``openstack``.
        log: file that receives Terraform's output.
        env: extra environment (e.g. OS_CLOUD for the OpenStack provider).
        source: the root module to copy (default ``descriptors/terraform/<cloud>``).
    """

    def __init__(self, workdir: Path, cloud: str, log: Path, env: dict | None = None, source: Path | None = None):
        self.workdir = workdir
        self.log = log
        if not (workdir / "main.tf").exists():
            shutil.copytree(source or TERRAFORM_DIR / cloud, workdir, dirs_exist_ok=True)
            # Child modules ("../modules/...") beside the copy, as in descriptors/.
            shutil.copytree(TERRAFORM_DIR / "modules", workdir.parent / "modules", dirs_exist_ok=True)
        wrapper = workdir.parent / "bin" / "terraform"
        wrapper.parent.mkdir(exist_ok=True)
        wrapper.write_text(_WRAPPER, encoding="utf-8")
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
        env = {"TF_IN_AUTOMATION": "1", "CHECKPOINT_DISABLE": "1", **(env or {})}
        self.tf = tftest.TerraformTest(str(workdir), binary=str(wrapper), env=env)
        # A TF_CLI_CONFIG_FILE that points nowhere only produces warnings.
        cli_config = self.tf.env.get("TF_CLI_CONFIG_FILE")
        if cli_config and not os.path.exists(cli_config):
            del self.tf.env["TF_CLI_CONFIG_FILE"]
        self._initialised = (workdir / ".terraform").exists() or (workdir / "terraform.tfstate").exists()

    def _call(self, what: str, limit: float, fn, *args, quiet: bool = False, **kwargs):
        """Run a tftest method under a time limit with its log in the run's
        terraform log; ``quiet`` keeps the command's output out of the log
        (``output -json`` prints sensitive values in clear)."""
        pidfile = self.workdir.parent / "bin" / "terraform.pid"
        pidfile.unlink(missing_ok=True)
        self.tf.env["REFARCH_TF_PIDFILE"] = str(pidfile)
        timed_out = threading.Event()

        def on_timeout():
            timed_out.set()
            _stop(pidfile, wait=False)

        timer = threading.Timer(limit, on_timeout)
        timer.daemon = True
        handler = logging.FileHandler(self.log)
        if quiet:
            handler.addFilter(lambda _record: False)
            with open(self.log, "a", encoding="utf-8") as fh:
                fh.write(f"terraform {what}: output not logged (it may hold sensitive values)\n")
        logger = logging.getLogger("tftest")
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False  # into the run's log, not the console
        timer.start()
        try:
            result = fn(*args, **kwargs)
            if timed_out.is_set():
                raise PhaseTimeout(f"terraform {what} ran past its {int(limit)} s limit")
            return result
        except tftest.TerraformTestError as exc:
            if timed_out.is_set():
                raise PhaseTimeout(f"terraform {what} ran past its {int(limit)} s limit") from None
            errors = diagnostics(exc.cmd_error or "")
            text = "; ".join(errors) if errors else " ".join(str(exc).split())[-600:]
            raise CommandError(f"terraform {what} failed: {text}") from None
        except BaseException:
            # Ctrl-C / SIGTERM while terraform runs: stop it before anything
            # else touches the state.
            _stop(pidfile, wait=True)
            raise
        finally:
            timer.cancel()
            pidfile.unlink(missing_ok=True)  # terraform has exited: its pid means nothing now
            logger.removeHandler(handler)
            handler.close()
            # State holds every secret of the deployment in clear.
            for state in self.workdir.glob("terraform.tfstate*"):
                state.chmod(0o600)

    def write_vars(self, tf_vars: dict) -> None:
        """Write the module's inputs (``terraform.tfvars.json``)."""
        write_private(self.workdir / "terraform.tfvars.json", json.dumps(tf_vars, indent=2))

    def init(self, limit: float = 300) -> None:
        """``terraform init`` (offline: the local module needs no provider).

        Raises:
            PreflightError: a provider cannot be installed (no registry and
                no mirror); nothing has been created yet.
        """
        if not self._initialised:
            try:
                self._call("init", limit, self.tf.setup, cleanup_on_exit=False)
            except CommandError as exc:
                if "provider" in str(exc).lower():
                    raise PreflightError("terraform init cannot install the module's providers (no registry access "
                                         "and no provider mirror?): " + str(exc)[-300:]) from None
                raise
            self._initialised = True

    def apply(self, limit: float) -> None:
        """``terraform apply -auto-approve`` within ``limit`` seconds.

        Raises:
            CommandError: apply failed.  PhaseTimeout: it ran past ``limit``.
        """
        self.init()
        self._call("apply", limit, self.tf.apply)

    def outputs(self) -> dict:
        """``terraform output -json`` as plain values: {name: value}."""
        raw = self._call("output", 60, self.tf.output, quiet=True)
        return {name: raw[name] for name in raw}

    def destroy(self, limit: float) -> None:
        """``terraform destroy -auto-approve`` within ``limit`` seconds."""
        if not (self.workdir / "terraform.tfstate").exists():
            return
        self.init()
        self._call("destroy", limit, self.tf.destroy)

    def state_list(self) -> list[str]:
        """Addresses in the state (``terraform state list``); empty when none."""
        if not (self.workdir / "terraform.tfstate").exists():
            return []
        out = self._call("state list", 60, self.tf.execute_command, "state", "list").out
        return [line for line in out.splitlines() if line.strip()]


#: Characters of one error diagnostic kept in a message (Neutron's and
#: Nova's errors quote whole JSON bodies).
DIAGNOSTIC_CHARS = 700
#: The first line of a diagnostic's location: ``with <address>,`` or ``on <file> line <n>``.
_LOCATION = re.compile(r"\s+(with|on) ")


def diagnostics(stderr: str) -> list[str]:
    """Terraform's error diagnostics in ``stderr`` (its human output with
    ``-no-color``: a block per error, ``Error: <summary>``, then where:
    ``with <resource address>,`` and/or ``on <file> line <n>...`` with the
    source excerpt up to a blank line, then the detail paragraphs), each as
    one line ``<where>: <summary>: <detail>`` whose ``<summary>: <detail>``
    is at most :data:`DIAGNOSTIC_CHARS` characters (a long detail keeps its
    end, where a failed command's output names its cause), in Terraform's order;
    ``<where>`` is the resource address, else ``<file> line <n>``.  Empty
    when ``stderr`` holds none.  After a detail that quotes a command's
    output, only a block with its location starts a new diagnostic: one
    without (rare there) is read as more of that output."""
    found = []
    lines_all = stderr.splitlines()
    # A diagnostic starts after a blank line.  A command's output quoted in
    # a detail ("... Output: ...", local-exec's) may have lines that start
    # "Error: " too: inside one, only a block with its location starts anew.
    starts: list[int] = []
    for i, line in enumerate(lines_all):
        if not line.startswith("Error: ") or (i and lines_all[i - 1].strip()):
            continue
        located = any(_LOCATION.match(n) for n in lines_all[i + 1:i + 4])
        if not starts or located or not any("Output:" in n for n in lines_all[starts[-1]:i]):
            starts.append(i)
    for k, start in enumerate(starts):
        lines = lines_all[start:starts[k + 1] if k + 1 < len(starts) else len(lines_all)]
        summary, where, rest = lines[0].removeprefix("Error: ").strip(), "", lines[1:]
        while rest and not rest[0].strip():
            rest = rest[1:]
        if rest and _LOCATION.match(rest[0]):
            for line in rest:
                if not line.strip():
                    break
                address = re.match(r"\s+with (\S+?),?$", line)
                source = re.match(r"\s+on (\S+ line \d+)", line)
                if address or (source and not where):
                    where = (address or source).group(1)
            blank = next(i for i, line in enumerate(rest + [""]) if not line.strip())
            rest = rest[blank:]
        detail = " ".join(line.strip() for line in rest if line.strip())
        if len(summary) > DIAGNOSTIC_CHARS // 2 and detail:
            summary = summary[:DIAGNOSTIC_CHARS // 2 - 3] + "..."
        text = f"{summary}: {detail}" if detail else summary
        if len(text) > DIAGNOSTIC_CHARS:
            # A command's output ends with its cause: keep the end.
            keep = DIAGNOSTIC_CHARS - len(summary) - 5
            text = f"{summary}: ...{detail[-keep:]}" if keep > 0 else text[:DIAGNOSTIC_CHARS - 3] + "..."
        found.append(f"{where}: {text}" if where else text)
    return found


def _stop(pidfile: Path, wait: bool) -> None:
    """SIGINT the terraform process named in ``pidfile``; with ``wait``, reap
    it (it is our child) and SIGKILL it after :data:`STOP_GRACE_S`."""
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, signal.SIGINT)
    except ProcessLookupError:
        return
    if not wait:
        return
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done:
            return
        time.sleep(0.5)
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
