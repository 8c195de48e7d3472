#!/usr/bin/env bash
# One read-only round on a real NVIDIA machine: what the driver answers, what the backend discovers,
# the whole daemon serving the GPUs to the kubelet simulator, its start time, and the bench's start
# and core groups on that machine's CPU, and the NVIDIA tests (their fake library must win over the
# real one the loader would find). Run from the repository root; results go to $1 (default
# ./real-round). Wheels for what the machine lacks may sit in .whl/ (installed to a private target,
# never over the system's packages). Nothing here changes MIG mode, creates instances or resets a GPU.
set -u
out=${1:-real-round}
mkdir -p "$out"
if compgen -G '.whl/*.whl' >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=".:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
step() { # name, command...: run one step with its own time limit, its output to $out/name.*
    local name=$1; shift
    local began=$SECONDS
    timeout 150 "$@" >"$out/$name.out" 2>"$out/$name.err"
    echo "== $name: rc $? in $((SECONDS - began)) s"
}
{
    nvidia-smi --query-gpu=name,driver_version,mig.mode.current,pci.bus_id --format=csv
    python3 -V
    python3 -c 'import grpc, google.protobuf, pynvml, yaml; print(grpc.__version__, google.protobuf.__version__, yaml.__version__, yaml.__with_libyaml__)'
    nproc
} 2>&1 | tee "$out/machine.txt"
step answers python3 vendors/nvidia/tools/nvml_answers.py
step probe python3 vendors/nvidia/tools/probe_real.py --health-seconds 3
step serve python3 tools/nvidia/serve_real.py --health-seconds 3
step start_real python3 tools/nvidia/start_real.py --rounds 10
step bench python3 -m bench --only start,core --markdown
step tests python3 -m pytest tests/nvidia -q -p no:cacheprovider
tail -n 30 "$out"/*.err
