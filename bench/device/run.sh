#!/usr/bin/env bash
# Run THERE, on the many-core device machine (no network), from the checkout's root with
# .device/ carried along (made here by bench/device/prepare.sh):
#     bash bench/device/run.sh [more bench/scale_out.py options, which win]
# Installs the carried wheels into .device/site (once), then runs the scale-out benchmark
# with the 16-core settings of issue 30: 1..12 daemons (12 share the daemons' cores; the
# 8 load processes keep theirs), 8 of them durable too, Redis from .device/redis.
# Results: $OUT/scale_out.json and $OUT/scale_out.txt (what it printed); the plot is
# drawn back here: `.venv/bin/python bench/scale_out.py --replot <the JSON>`.
set -euo pipefail
top="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$top"
out="${OUT:?set OUT to the folder the results go to}"
python="${PYTHON:-python3}"
site=.device/site

# The wheels were chosen for Python 3.12 on manylinux x86_64: stop early on another one.
"$python" -c 'import sys; assert sys.version_info[:2] == (3, 12), sys.version' ||
    { echo "run.sh: needs Python 3.12 (PYTHON=...), the wheels' version" >&2; exit 2; }
if [ ! -f "$site/.installed" ]; then
    rm -rf "$site"
    if "$python" -m pip --version >/dev/null 2>&1; then
        "$python" -m pip install --quiet --no-index --no-deps --target "$site" .device/wheels/*.whl
    else  # no pip there: a wheel is a zip laid out for site-packages
        for wheel in .device/wheels/*.whl; do "$python" -m zipfile -e "$wheel" "$site"; done
    fi
    touch "$site/.installed"
fi
# Ours first, so the machine's own (older) copies of some packages are not mixed in; the
# daemons are started as `python -m` with the same path.
export PYTHONPATH="$top:$top/$site${PYTHONPATH:+:$PYTHONPATH}"
export SKUEUED="$python -m skueue.cli.skueued"
chmod +x .device/redis/bin/redis-server  # in case the carry dropped the mode
mkdir -p "$out"
# Python buffers when piped; -u keeps the progress lines in order with the report.
"$python" -u bench/scale_out.py --nodes 1,2,4,8,12 --durable-nodes 8 --seconds 6 \
    --redis-server .device/redis/bin/redis-server --out "$out/scale_out.json" "$@" 2>&1 |
    tee "$out/scale_out.txt"
exit "${PIPESTATUS[0]}"
