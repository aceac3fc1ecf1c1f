#!/usr/bin/env bash
# Set up everything Stash needs on a fresh Debian machine: system packages (when root) and a
# virtual environment in .venv with the pinned Python packages. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

with_system_packages="${1:-}"
apt_pid=""
if [ "$with_system_packages" = "--system" ]; then
    # beside the Python packages below: neither needs the other, and both mostly wait on downloads
    bash scripts/setup_system.sh &
    apt_pid=$!
fi

# An environment without pip is one whose making failed part-way (python3 without its venv package, Debian's
# python3-venv, leaves .venv/bin/python and no pip): made again.
if [ ! -x .venv/bin/python ] || [ ! -x .venv/bin/pip ]; then
    # checked before the old one goes: where no new environment can be made, the old one stays
    if ! python3 -c 'import ensurepip; ensurepip.version()' 2>/dev/null; then
        # Debian splits ensurepip (what gives a new environment its pip) off into python3.X-venv
        venv_package="python3.$(python3 -c 'import sys; print(sys.version_info.minor)')-venv"
        if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null; then
            echo "installing $venv_package (python3 cannot make an environment with pip without it)"
            { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$venv_package"; } \
                >/dev/null || { echo "apt-get could not install $venv_package (above)" >&2; exit 1; }
        else
            echo "python3 cannot make an environment with pip: install $venv_package (as root: apt-get install $venv_package), then run this again" >&2
            exit 1
        fi
    fi
    rm -rf .venv
    python3 -m venv .venv || { rm -rf .venv; echo "python3 -m venv .venv failed (above)" >&2; exit 1; }
fi
# The pinned packages by uv (UV_VERSION, from the package registry by pip): it fetches and unpacks in
# parallel, some 15 s for a fresh environment on 2 cores where pip took 80-90 s; once installed, a second
# run is a check of some 30 ms. uv does not read pip's configuration, so
# the machine's wheel folders (find-links: where the CPU build of torch lies) and constraints are passed on.
# Should uv be unavailable, pip does the same, slower.
UV_VERSION=0.13.9
pip_setting() {  # pip's values of a setting: its PIP_ variable and every section of its configuration files
    local variable="PIP_$(echo "$1" | tr 'a-z-' 'A-Z_')"
    { echo "${!variable:-}"; .venv/bin/pip config list 2>/dev/null | sed -n "s/^[^.]*\.$1='\(.*\)'\$/\1/p"; } |
        tr ' ' '\n' | awk 'NF && !seen[$0]++'  # each once (pip lists its variables too, as `:env:`)
}
uv_options=(--python .venv/bin/python)
for folder in $(pip_setting find-links); do uv_options+=(--find-links "$folder"); done
for file in $(pip_setting constraint); do uv_options+=(--constraint "$file"); done
installed_uv=$(.venv/bin/uv --version 2>/dev/null || true)
# The project itself (editable): again only when pyproject.toml changed (uv rebuilds it every time, ~3 s).
project_stamp=".venv/project-$(sha256sum pyproject.toml | cut -c1-16)"
if { [[ "$installed_uv" == "uv $UV_VERSION" || "$installed_uv" == "uv $UV_VERSION "* ]] ||
    .venv/bin/pip install -q "uv==$UV_VERSION"; } &&
    .venv/bin/uv pip install -q "${uv_options[@]}" -r requirements-dev.txt &&
    { [ -e "$project_stamp" ] || .venv/bin/uv pip install -q "${uv_options[@]}" --no-deps -e .; }; then
    touch "$project_stamp"
else
    echo "uv could not install the packages; installing them with pip" >&2
    .venv/bin/pip install -q -r requirements-dev.txt
    .venv/bin/pip install -q --no-deps -e .
fi
# Byte-code for the modules Stash's processes load (its commands, workers, dashboard and tests), written by
# importing them once per set of pins: where PYTHONDONTWRITEBYTECODE is set, a module without it is compiled
# again at every start. Not every file of every package (uv's --compile-bytecode: 10,457 files, 30 s on 2
# cores), some 2,900 in two processes side by side, ~16 s.
compiled_stamp=".venv/compiled-$(cat requirements.txt requirements-dev.txt | sha256sum | cut -c1-16)"
if [ ! -e "$compiled_stamp" ]; then
    load() { env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -c "import $(IFS=,; echo "$*")"; }
    load torch torch.distributed.run torch._dynamo torch.nn.parallel torch.utils.data stash_core.cli.main \
        stash_core.measure.worker stash_core.measure.script_entry stash_core.launch.torchrun &
    torch_pid=$!
    load pandas pyarrow.parquet duckdb streamlit streamlit.web.cli streamlit.testing.v1 altair PIL.Image numba \
        psutil pynvml pytest xdist &
    rest_pid=$!
    loaded=1
    wait "$torch_pid" || loaded=0
    wait "$rest_pid" || loaded=0
    [ "$loaded" = 0 ] || touch "$compiled_stamp"
fi
if [ -n "$apt_pid" ]; then
    wait "$apt_pid" || { echo "installing system packages failed" >&2; exit 1; }
fi
