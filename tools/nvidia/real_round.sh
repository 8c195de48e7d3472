#!/usr/bin/env bash
# One read-only round on a real NVIDIA machine: what the driver answers, what the backend discovers,
# the whole daemon serving the GPUs to the kubelet simulator, its start time, the bench on that
# machine's CPU (the groups in BENCH_GROUPS, default start,core), and the NVIDIA tests (their fake
# library must win over the real one the loader would find). Run from the repository root; results
# go to $1 (default ./real-round). Wheels for what the machine lacks may sit in .whl/ (installed to
# a private target, never over the system's packages). Nothing here changes MIG mode, creates
# instances or resets a GPU.
set -u
out=${1:-real-round}
mkdir -p "$out"
if compgen -G '.whl/*.whl' >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=".:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
step() { # name, seconds, command...: run one step with its own time limit, its output to $out/name.*
    local name=$1 limit=$2; shift 2
    local began=$SECONDS
    timeout "$limit" "$@" >"$out/$name.out" 2>"$out/$name.err"
    echo "== $name: rc $? in $((SECONDS - began)) s"
}
{
    nvidia-smi --query-gpu=name,driver_version,mig.mode.current,pci.bus_id --format=csv
    python3 -V
    python3 -c 'import grpc, google.protobuf, pynvml, yaml; print(grpc.__version__, google.protobuf.__version__, yaml.__version__, yaml.__with_libyaml__)'
    nproc
} 2>&1 | tee "$out/machine.txt"
step answers 150 python3 vendors/nvidia/tools/nvml_answers.py
step probe 150 python3 vendors/nvidia/tools/probe_real.py --health-seconds 3
step serve 150 python3 tools/nvidia/serve_real.py --health-seconds 3
step start_real 150 python3 tools/nvidia/start_real.py --rounds 10
step bench 400 python3 -m bench --only "${BENCH_GROUPS:-start,core}" --markdown
step tests 150 python3 -m pytest tests/nvidia -q -p no:cacheprovider
tail -n 30 "$out"/*.err
