"""Terraform's providers as the users get them, built here from source.

Terraform's registry is out of reach on the suite's machines, but the Go
module proxy serves the providers' source: the pinned providers
(``terraform_providers`` in ``descriptors/versions.yml``, the same pins as
the OpenStack module's ``versions.tf``) are built with ``go install`` into a
filesystem mirror under the suite's cache, one folder per version (a warm
machine builds nothing), and a Terraform CLI config of the run points
Terraform at that mirror.  A researcher with internet gets the same versions
from the registry; the module does not change for them.

The mirror's layout is Terraform's "unpacked" one:
``<mirror>/registry.terraform.io/NAMESPACE/TYPE/VERSION/linux_amd64/terraform-provider-TYPE_vVERSION``
(https://developer.hashicorp.com/terraform/cli/config/config-file#filesystem_mirror).

``python -m refarch.tools.providers`` builds what is missing (the bootstrap
calls it) and prints the mirror's path.
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

from .. import proc
from ..errors import PreflightError
from ..paths import cache_dir, cache_lock, load_versions

REGISTRY = "registry.terraform.io"
#: Seconds one provider's cold build may take (about 65 s measured on 2 cores
#: with an empty module cache).
BUILD_TIMEOUT_S = 1200


def pins(versions: dict | None = None) -> list[dict]:
    """The pinned providers: ``[{source, version, go_module}]``."""
    return list((versions or load_versions()).get("terraform_providers") or [])


def target() -> str:
    """Terraform's platform name of this machine, e.g. ``linux_amd64``."""
    arch = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine(), platform.machine())
    return f"{sys.platform}_{arch}"


#: An image that carries the providers names its mirror here (the toolset).
MIRROR_ENV = "REFARCH_PROVIDER_MIRROR"


def mirror_dir() -> Path:
    """The filesystem mirror: ``$REFARCH_PROVIDER_MIRROR`` or
    ``<cache>/terraform-providers``."""
    return Path(os.environ.get(MIRROR_ENV) or cache_dir() / "terraform-providers")


def binary_path(pin: dict, mirror: Path | None = None) -> Path:
    """Where ``pin``'s binary lives in the mirror."""
    namespace, type_ = pin["source"].split("/")
    return ((mirror or mirror_dir()) / REGISTRY / namespace / type_ / pin["version"] / target()
            / f"terraform-provider-{type_}_v{pin['version']}")


def ensure_providers(log: Path | None = None) -> Path:
    """Build every pinned provider that the mirror lacks; return the mirror.

    Raises:
        PreflightError: ``go`` is not on PATH while a provider must be built.
        CommandError: ``go install`` failed (e.g. the proxy does not serve
            the version: its message is quoted).
        PhaseTimeout: a build ran past :data:`BUILD_TIMEOUT_S`.
    """
    mirror = mirror_dir()
    with cache_lock("terraform-providers"):
        for pin in pins():
            dest = binary_path(pin, mirror)
            if dest.exists():
                continue
            if not shutil.which("go"):
                raise PreflightError(f"go is not on PATH: it builds the Terraform provider {pin['source']} "
                                     f"{pin['version']} from {pin['go_module']} (ci/bootstrap.sh checks it)")
            dest.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(prefix="provider-", dir=mirror) as gobin:
                proc.run(["go", "install", f"{pin['go_module']}@v{pin['version']}"], timeout_s=BUILD_TIMEOUT_S,
                         log=log, env={"GOBIN": gobin, "CGO_ENABLED": "0", "GOFLAGS": "-buildvcs=false"},
                         cwd=gobin)
                built = Path(gobin) / f"terraform-provider-{pin['source'].split('/')[1]}"
                os.replace(built, dest)
    return mirror


def write_cli_config(path: Path, mirror: Path | None = None) -> Path:
    """A Terraform CLI config at ``path`` that installs the pinned providers
    from the mirror only (nothing from the network); returns ``path``, for
    ``TF_CLI_CONFIG_FILE``."""
    mirror = mirror or mirror_dir()
    include = ", ".join(f'"{REGISTRY}/{p["source"]}"' for p in pins())
    path.write_text(
        "# Made by refarch.tools.providers: the pinned providers from the suite's own mirror.\n"
        "provider_installation {\n"
        f"  filesystem_mirror {{\n    path    = \"{mirror}\"\n    include = [{include}]\n  }}\n"
        "}\n", encoding="utf-8")
    return path


if __name__ == "__main__":
    print(ensure_providers())
