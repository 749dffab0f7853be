#!/usr/bin/env bash
# Records the GPU tools' real outputs on a GPU host, for the parsing tests in
# tests/unit/test_gpu.py (copy the files from OUT into tests/unit/data/gpu/).
# Usage: OUT=/some/dir ci/device/record-gpu-outputs.sh
set -uo pipefail
OUT="${OUT:-./gpu-outputs}"
mkdir -p "$OUT"
run() { # name, command...
    local name="$1"; shift
    timeout 120 "$@" > "$OUT/$name" 2>&1; echo "exit $? : $*" >> "$OUT/commands.txt"
}
run nvidia-smi-query.csv nvidia-smi --query-gpu=index,name,driver_version,ecc.mode.current,ecc.errors.uncorrected.volatile.total,persistence_mode --format=csv,noheader,nounits
run nvidia-smi-banner.txt nvidia-smi
run nvcc-version.txt nvcc --version
run nccl-dpkg.txt dpkg-query -W -f '${Version}' libnccl2
command -v dcgmi >/dev/null && run dcgmi-diag-r1.txt dcgmi diag -r 1
ls -l "$OUT"
