#!/bin/sh
# Builds the Python wheelhouse every node installs from: TensorFlow and its
# dependencies as released, and Horovod compiled against that TensorFlow with
# the controllers named in versions.yml (horovod_build_env).
# Runs as root in a throwaway container made from the node image, so the
# wheels fit the nodes' Python and libraries.  Inputs come from the
# environment (set by the suite from descriptors/versions.yml):
#   TF_PACKAGE TF_VERSION HOROVOD_VERSION BUILD_PACKAGES HOROVOD_WITH_* ...
# Output: /out/*.whl, /out/constraints.txt (the resolved set), /out/check-build.txt
set -eu

# Extra CA certificates (a TLS-intercepting proxy on the way to PyPI).
if ls /extra-ca/*.crt >/dev/null 2>&1; then
    cp /extra-ca/*.crt /usr/local/share/ca-certificates/
    update-ca-certificates >/dev/null
fi
export PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_DISABLE_PIP_VERSION_CHECK=1
export DEBIAN_FRONTEND=noninteractive

apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $BUILD_PACKAGES >/dev/null

python3 -m venv /opt/build
. /opt/build/bin/activate
pip install -q "setuptools<70" wheel
pip download -q -d /out "$TF_PACKAGE==$TF_VERSION"
pip install -q --no-index --find-links /out "$TF_PACKAGE==$TF_VERSION"
# Horovod's setup imports these at build time.
pip install -q cloudpickle psutil pyyaml packaging cffi
MAKEFLAGS="-j$(nproc)" pip wheel -q --no-build-isolation --no-deps -w /out "horovod==$HOROVOD_VERSION"
pip download -q -d /out --find-links /out "horovod==$HOROVOD_VERSION"
pip install -q --no-index --find-links /out "horovod==$HOROVOD_VERSION"
pip freeze --exclude-editable | grep -v -E '^(pip|setuptools|wheel)==' > /out/constraints.txt
horovodrun --check-build > /out/check-build.txt
cat /out/check-build.txt
