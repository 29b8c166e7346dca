#!/usr/bin/env bash
# Run HERE, with network: gather in .device/ (ignored by git) what bench/device/run.sh
# needs on the many-core device machine, which has Python 3.12 but no network and no Redis:
#   .device/wheels/      wheels of the project's runtime dependencies and redis-py, for
#                        CPython 3.12 on manylinux x86_64 (their own dependencies too)
#   .device/redis/bin/   Debian's redis-server (installed through apt here where missing)
#   .device/redis/lib/   the libraries it needs that such a machine may lack
# Then carry .device with the checkout (the run tool's carry) and run bench/device/run.sh.
# DEVICE_PYTHON_VERSION (default 3.12) picks the wheels' Python, to rehearse elsewhere.
set -euo pipefail
top="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$top"
pyver="${DEVICE_PYTHON_VERSION:-3.12}"
python="python3"
[ -x .venv/bin/python ] && python=".venv/bin/python"

# The runtime dependencies as pyproject.toml lists them (one place to keep them), and
# redis-py for the Redis rows.  No matplotlib: the plot is drawn here afterwards with
# `bench/scale_out.py --replot`, which keeps .device small (the carry limit is 64 MiB).
mapfile -t deps < <("$python" - <<'PY'
import tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))
PY
)
rm -rf .device/wheels
mkdir -p .device/wheels
"$python" -m pip download --quiet --dest .device/wheels --only-binary=:all: \
    --python-version "$pyver" --implementation cp \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 \
    "${deps[@]}" "redis>=5"

# Redis: Debian's binary runs there with its libraries beside it.  redis-server is a link
# to redis-check-rdb (one program that acts by the name it was started as).
if ! command -v redis-server >/dev/null 2>&1; then
    sudo_cmd=""
    [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq redis-server >/dev/null
fi
binary="$(readlink -f "$(command -v redis-server)")"
rm -rf .device/redis
mkdir -p .device/redis/bin .device/redis/lib
cp "$binary" .device/redis/bin/redis-server
# Every library it links but the C and C++ runtimes, which any Linux machine has.
ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' |
    grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
    xargs -I{} cp -L {} .device/redis/lib/
LD_LIBRARY_PATH=.device/redis/lib .device/redis/bin/redis-server --version

echo "prepare: $(ls .device/wheels | wc -l) wheels, redis with $(ls .device/redis/lib | wc -l) libraries;" \
     "$(du -sh .device | cut -f1) in .device/ (carry it: the limit is 64 MiB)"
