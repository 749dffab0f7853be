#!/bin/sh
# Builds the Python wheelhouse every node installs from: TensorFlow and its
# dependencies as released, and Horovod compiled against that TensorFlow with
# the controllers named in versions.yml (horovod_build_env).
# Runs as root in a throwaway container made from the node image, so the
# wheels fit the nodes' Python and libraries.  Inputs come from the
# environment (set by the suite from descriptors/versions.yml):
#   TF_PACKAGE TF_VERSION HOROVOD_VERSION BUILD_PACKAGES HOROVOD_WITH_* ...
#   EXTRA_PACKAGES (requirements resolved together with TensorFlow)
# Output: $OUT_DIR (default /out): *.whl, constraints.txt (the resolved set),
# check-build.txt.  The horovod role runs the same script on a GPU node
# (OUT_DIR on the shared storage, CUDA and NCCL from the gpu role).
set -eu
OUT_DIR="${OUT_DIR:-/out}"
EXTRA_CA_DIR="${EXTRA_CA_DIR:-/extra-ca}"
VENV="${BUILD_VENV:-/opt/build}"

# Extra CA certificates (a TLS-intercepting proxy on the way to PyPI).
if ls "$EXTRA_CA_DIR"/*.crt >/dev/null 2>&1; then
    cp "$EXTRA_CA_DIR"/*.crt /usr/local/share/ca-certificates/
    update-ca-certificates >/dev/null
fi
export PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_DISABLE_PIP_VERSION_CHECK=1
export DEBIAN_FRONTEND=noninteractive

apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $BUILD_PACKAGES >/dev/null

python3 -m venv "$VENV"
. "$VENV/bin/activate"
pip install -q "setuptools<70" wheel
# shellcheck disable=SC2086
pip download -q -d "$OUT_DIR" "$TF_PACKAGE==$TF_VERSION" ${EXTRA_PACKAGES:-}
# shellcheck disable=SC2086
pip install -q --no-index --find-links "$OUT_DIR" "$TF_PACKAGE==$TF_VERSION" ${EXTRA_PACKAGES:-}
# Horovod's setup imports these at build time.
pip install -q cloudpickle psutil pyyaml packaging cffi
MAKEFLAGS="-j$(nproc)" pip wheel -q --no-build-isolation --no-deps -w "$OUT_DIR" "horovod==$HOROVOD_VERSION"
pip download -q -d "$OUT_DIR" --find-links "$OUT_DIR" "horovod==$HOROVOD_VERSION"
pip install -q --no-index --find-links "$OUT_DIR" "horovod==$HOROVOD_VERSION"
pip freeze --exclude-editable | grep -v -E '^(pip|setuptools|wheel)==' > "$OUT_DIR"/constraints.txt
horovodrun --check-build > "$OUT_DIR"/check-build.txt
cat "$OUT_DIR"/check-build.txt
