#!/bin/bash
# Every check that needs a CUDA GPU and has its predictions written down in docs/measurements, in one go:
# the recurrent layers and steps (gpu_rnn.py), the fresh set of zoo steps (gpu_steps.py --set fresh) and a
# recurrent model profiled as a user profiles it, then predicted from that profile. Each part's output goes
# to OUT_DIR (at most 8 files); a part that fails leaves the others to run.
#
#     bash bench/gpu_session.sh OUT_DIR        # from the repository, with Stash's requirements importable
set -u
if [ $# -ne 1 ]; then
    echo "usage: bash bench/gpu_session.sh OUT_DIR" >&2
    exit 2
fi
out=$(mkdir -p "$1" && cd "$1" && pwd) || exit 2
cd "$(dirname "$0")/.." || exit 2
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
python=${PYTHON:-python3}
log="$out/session.log"
began=$(date +%s)
stamp() { echo "=== $1 at +$(($(date +%s) - began)) s" | tee -a "$log"; }
{
    nvidia-smi -L
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,pcie.link.gen.current \
        --format=csv
    nproc
    uptime
    "$python" -c "import torch, duckdb, pandas; print('torch', torch.__version__, 'cuda', torch.version.cuda,
'nccl', torch.cuda.nccl.version(), 'cudnn', torch.backends.cudnn.version(), 'duckdb', duckdb.__version__,
'pandas', pandas.__version__)"
} 2>&1 | tee "$log"
stamp "recurrent layers and steps"
"$python" bench/gpu_rnn.py --out "$out/rnn" > "$out/rnn.log" 2>&1
echo "exit $?" >> "$out/rnn.log"
tail -40 "$out/rnn.log"
stamp "fresh zoo steps"
"$python" bench/gpu_steps.py --set fresh --budget-s 1 --csv "$out/fresh.csv" > "$out/fresh.log" 2>&1
echo "exit $?" >> "$out/fresh.log"
tail -20 "$out/fresh.log"
stamp "a recurrent model profiled, then predicted from its profile"
work=$(mktemp -d)
model=examples/models/recurrent.py:lstm
{
    timeout 150 "$python" -m stash_core profile --model "$model" --input-shape 64,1024 --batch-size 32 \
        --stalls compute --device cuda --instance gpu-lab --db "$work/r.duckdb" \
        --out "$out/profile-lstm.json" --max-phase-seconds 10 --progress none
    echo "exit $?"
    for precision in tf32 fp32; do
        "$python" -m stash_core predict --model "$model" --input-shape 64,1024 --batch-size 32 \
            --instances p5en.48xlarge,p5.48xlarge --workers-per-instance 1 --precision "$precision" \
            --db "$work/r.duckdb"
    done
} 2>&1 | tee -a "$log"
rm -rf "$work"
stamp end
