#!/bin/bash
# Every check that needs a CUDA GPU and has its predictions written down in docs/measurements, in one go:
# the recurrent layers and steps (gpu_rnn.py), the fresh set of zoo steps (gpu_steps.py --set fresh), a
# recurrent model profiled as a user profiles it, then predicted from that profile, and on a machine of two or
# more GPUs the all-reduce bus bandwidth and data-parallel steps (gpu_multi.py). Each part's output goes to
# OUT_DIR (7 files: session.log and six CSV or JSON files); a part that fails leaves the others to run.
#
#     bash bench/gpu_session.sh OUT_DIR        # from the repository, with Stash's requirements importable
#     PARTS="rnn multi" bash bench/gpu_session.sh OUT_DIR   # some parts only: rnn, fresh, profile, multi
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
parts=" ${PARTS:-rnn fresh profile multi} "
for part in $parts; do
    case "$part" in
        rnn | fresh | profile | multi) ;;
        *) echo "PARTS: unknown part '$part' (the parts: rnn fresh profile multi, separated by spaces)" >&2
           exit 2 ;;
    esac
done
wanted() { [[ "$parts" == *" $1 "* ]]; }
ended() { echo "exit $1" | tee -a "$log"; }  # a part's exit status, also where it printed nothing
{
    nvidia-smi -L
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,pcie.link.gen.current \
        --format=csv
    nproc
    uptime
    "$python" -c "import torch, duckdb, pandas
nccl = torch.cuda.nccl.version() if torch.cuda.is_available() else None
print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', nccl, 'cudnn',
      torch.backends.cudnn.version(), 'duckdb', duckdb.__version__, 'pandas', pandas.__version__)"
} 2>&1 | tee "$log"
if wanted rnn; then
    stamp "recurrent layers and steps"
    "$python" bench/gpu_rnn.py --out "$out/rnn" 2>&1 | tee -a "$log" | tail -40
    ended "${PIPESTATUS[0]}"
fi
if wanted fresh; then
    stamp "fresh zoo steps"
    "$python" bench/gpu_steps.py --set fresh --budget-s 1 --csv "$out/fresh.csv" 2>&1 | tee -a "$log" | tail -20
    ended "${PIPESTATUS[0]}"
fi
if wanted profile; then
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
fi
gpus=$("$python" -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
if wanted multi && [ "$gpus" -ge 2 ]; then
    stamp "all-reduce and data-parallel steps on $gpus GPUs"
    "$python" bench/gpu_multi.py --gpus 2,4,8 --out "$out/multi" 2>&1 | tee -a "$log"  # the counts it has
    ended "${PIPESTATUS[0]}"
elif wanted multi; then
    echo "=== multi skipped: $gpus GPU(s) here, an all-reduce needs 2" | tee -a "$log"
fi
stamp end
