#!/usr/bin/env bash
# Run N skueued daemons as separate "hosts", one per Linux network namespace.
#
#   netns_cluster.sh start N [--port P] [--structure queue|stack] [--log-format json|console]
#                            [--prefix NAME] [--state-dir DIR] [--skueued PATH] [--timeout S]
#   netns_cluster.sh status  [--prefix NAME] [--state-dir DIR]
#   netns_cluster.sh stop    [--prefix NAME] [--state-dir DIR] [--timeout S] [--keep-logs]
#
# The hosts talk TLS (a CA and one certificate per host, made by `skueue certs` in the
# state directory's tls/; peer links are mutual TLS) and prove a cluster key inside it.
# Clients reach them with SKUEUE_TLS_CA=<state dir>/tls/ca.crt.
#
# Topology (the subnet exists only inside these namespaces, nothing routes it anywhere):
#
#   namespace <prefix>hub:  bridge "skqbr" (no address, no uplink, no routes)
#        |-- veth0 <-> eth0 in <prefix>0   10.213.0.10/24
#        |-- veth1 <-> eth0 in <prefix>1   10.213.0.11/24
#        ...
#
# The root namespace is never touched: no interface, address, route or firewall rule is
# added there, so the cluster cannot reach (or be reached from) any real network.  Host i
# runs `skueued --listen 10.213.0.(10+i):PORT --id <prefix>i` with the others as --peers.
#
# `start` prints one address per line once every daemon printed its ready line (bounded by
# --timeout; on failure it names the daemon, shows the tail of its log and tears down).
# `stop` works from the namespace names alone (SIGTERM to every process in them, SIGKILL
# after --timeout, then deletes the namespaces), so it also cleans up after a lost state
# directory.  Requires root and iproute2 (`ip`).
set -euo pipefail

PROG=netns_cluster.sh
SUBNET_PREFIX=10.213.0      # a /24; host i gets .(10+i)
HOST_OFFSET=10
HOSTS_MAX=64
BRIDGE=skqbr
DEFAULT_STATE_ROOT=/run/skueue-netns

PREFIX=${SKQ_PREFIX:-skq}
PORT=7400
STRUCTURE=queue
LOG_FORMAT=console
TIMEOUT_S=30
STATE_DIR=
SKUEUED=
SKUEUE_CLI=
KEEP_LOGS=0

die() { echo "$PROG: error: $*" >&2; exit 1; }
note() { echo "$PROG: $*" >&2; }

usage() {
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# in_range VALUE LOW HIGH: VALUE is a whole number in [LOW, HIGH].
in_range() {
    [[ $1 =~ ^[0-9]{1,9}$ ]] || return 1
    [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]
}

hub() { echo "${PREFIX}hub"; }
ns_name() { echo "${PREFIX}$1"; }
address_of() { echo "${SUBNET_PREFIX}.$((HOST_OFFSET + $1)):${PORT}"; }

# Our namespaces that exist now: <prefix>0.. in numeric order, then the hub.
our_namespaces() {
    ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${PREFIX}[0-9]+\$" | sort -V || true
    if ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$(hub)"; then hub; fi
}

ns_pids() { ip netns pids "$1" 2>/dev/null || true; }

# Remove what this script put in the state directory, and the directory if that empties
# it (never rm -rf: --state-dir may name a directory holding other things).
clear_state() {
    local keep_logs=${1:-0}
    rm -f -- "$STATE_DIR/daemons" "$STATE_DIR/network.err" "$STATE_DIR/cluster.key"
    rm -f -- "$STATE_DIR/tls/"*.crt "$STATE_DIR/tls/"*.key "$STATE_DIR/tls.err"
    rmdir -- "$STATE_DIR/tls" 2>/dev/null || true
    [ "$keep_logs" -eq 1 ] || rm -f -- "$STATE_DIR/${PREFIX}"[0-9]*.log
    rmdir -- "$STATE_DIR" 2>/dev/null || true
    rmdir -- "$DEFAULT_STATE_ROOT" 2>/dev/null || true  # only if empty too
}

need_tools() {
    [ "$(id -u)" -eq 0 ] || die "must run as root (network namespaces need CAP_SYS_ADMIN)"
    command -v ip >/dev/null || die "'ip' (iproute2) not found"
}

parse_options() {
    while [ $# -gt 0 ]; do
        case $1 in
            --port) PORT=${2:?--port needs a value}; shift 2 ;;
            --structure) STRUCTURE=${2:?--structure needs a value}; shift 2 ;;
            --log-format) LOG_FORMAT=${2:?--log-format needs a value}; shift 2 ;;
            --prefix) PREFIX=${2:?--prefix needs a value}; shift 2 ;;
            --state-dir) STATE_DIR=${2:?--state-dir needs a value}; shift 2 ;;
            --skueued) SKUEUED=${2:?--skueued needs a value}; shift 2 ;;
            --timeout) TIMEOUT_S=${2:?--timeout needs a value}; shift 2 ;;
            --keep-logs) KEEP_LOGS=1; shift ;;
            -h|--help) usage ;;
            *) die "unknown option '$1' (see --help)" ;;
        esac
    done
    [[ $PREFIX =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "--prefix: 1-8 lowercase letters/digits, not '$PREFIX'"
    in_range "$PORT" 1 65535 || die "--port: a port 1-65535, not '$PORT'"
    in_range "$TIMEOUT_S" 1 3600 || die "--timeout: whole seconds 1-3600, not '$TIMEOUT_S'"
    case $STRUCTURE in queue|stack) ;; *) die "--structure: queue or stack, not '$STRUCTURE'" ;; esac
    case $LOG_FORMAT in json|console) ;; *) die "--log-format: json or console, not '$LOG_FORMAT'" ;; esac
    STATE_DIR=${STATE_DIR:-$DEFAULT_STATE_ROOT/$PREFIX}
}

find_skueued() {
    if [ -n "$SKUEUED" ]; then
        [ -x "$SKUEUED" ] || die "--skueued $SKUEUED is not executable"
        return
    fi
    local here
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    if [ -x "$here/../.venv/bin/skueued" ]; then
        SKUEUED=$(cd "$here/.." && pwd)/.venv/bin/skueued
    elif command -v skueued >/dev/null; then
        SKUEUED=$(command -v skueued)
    else
        die "skueued not found (no $here/../.venv/bin/skueued, none on PATH); use --skueued"
    fi
}

# skueue (for `skueue certs`): beside skueued, else this checkout's, else on PATH.
find_skueue() {
    local here beside
    here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
    beside=$(dirname "$SKUEUED")/skueue
    if [ -x "$beside" ]; then
        SKUEUE_CLI=$beside
    elif [ -x "$here/../.venv/bin/skueue" ]; then
        SKUEUE_CLI=$(cd "$here/.." && pwd)/.venv/bin/skueue
    elif command -v skueue >/dev/null; then
        SKUEUE_CLI=$(command -v skueue)
    else
        die "skueue not found (needed for skueue certs): install the project"
    fi
}

# -- stop -----------------------------------------------------------------------------

teardown() {
    local namespaces ns pid deadline left
    mapfile -t namespaces < <(our_namespaces)
    if [ ${#namespaces[@]} -eq 0 ]; then
        clear_state "$KEEP_LOGS"
        return 0
    fi
    for ns in "${namespaces[@]}"; do
        for pid in $(ns_pids "$ns"); do kill -TERM "$pid" 2>/dev/null || true; done
    done
    deadline=$((SECONDS + TIMEOUT_S + 1))  # SECONDS ticks in whole seconds: never short
    while :; do
        left=0
        for ns in "${namespaces[@]}"; do
            [ -z "$(ns_pids "$ns")" ] || left=1
        done
        if [ $left -eq 0 ] || [ $SECONDS -ge $deadline ]; then break; fi
        sleep 0.1
    done
    if [ $left -eq 1 ]; then
        for ns in "${namespaces[@]}"; do
            for pid in $(ns_pids "$ns"); do
                note "pid $pid in $ns ignored SIGTERM for ${TIMEOUT_S} s: SIGKILL"
                kill -KILL "$pid" 2>/dev/null || true
            done
        done
        deadline=$((SECONDS + 5))
        for ns in "${namespaces[@]}"; do
            while [ -n "$(ns_pids "$ns")" ] && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
            [ -z "$(ns_pids "$ns")" ] || die "processes still alive in $ns: $(ns_pids "$ns" | xargs)"
        done
    fi
    # Deleting a host namespace destroys its eth0 and, with it, the veth end in the hub.
    for ns in "${namespaces[@]}"; do
        ip netns del "$ns" || die "cannot delete namespace $ns"
    done
    clear_state "$KEEP_LOGS"
    note "stopped: removed ${namespaces[*]}"
}

# -- start ----------------------------------------------------------------------------

build_network() {
    # Called as `build_network || ...`, where set -e does not apply: check every step.
    local n=$1 i ns
    ip netns add "$(hub)" || return 1
    ip -n "$(hub)" link set lo up || return 1
    ip -n "$(hub)" link add "$BRIDGE" type bridge || return 1
    ip -n "$(hub)" link set "$BRIDGE" up || return 1
    for ((i = 0; i < n; i++)); do
        ns=$(ns_name "$i")
        ip netns add "$ns" || return 1
        ip -n "$ns" link set lo up || return 1
        # Both ends are created inside namespaces: the root namespace never sees them.
        ip -n "$(hub)" link add "veth$i" type veth peer name eth0 netns "$ns" || return 1
        ip -n "$(hub)" link set "veth$i" master "$BRIDGE" up || return 1
        ip -n "$ns" addr add "${SUBNET_PREFIX}.$((HOST_OFFSET + i))/24" dev eth0 || return 1
        ip -n "$ns" link set eth0 up || return 1
    done
}

fail_start() {
    note "$1"
    KEEP_LOGS=1  # the message quotes a log; keep them all for a closer look
    teardown >/dev/null 2>&1 || true
    note "logs kept in $STATE_DIR"
    exit 1
}

log_tail() { tail -n 15 "$1" 2>/dev/null | sed 's/^/    /'; }

cmd_start() {
    local n=${1:-}
    in_range "$n" 1 $HOSTS_MAX || die "start: N must be 1-$HOSTS_MAX, not '${n}'"
    shift
    parse_options "$@"
    need_tools
    find_skueued
    find_skueue
    local existing
    existing=$(our_namespaces | xargs)
    [ -z "$existing" ] || die "namespaces of a cluster exist already ($existing): run '$PROG stop --prefix $PREFIX' first"

    clear_state
    mkdir -p -- "$STATE_DIR"
    trap 'fail_start "interrupted"' INT TERM
    build_network "$n" 2>"$STATE_DIR/network.err" \
        || fail_start "cannot build the namespace network: $(cat "$STATE_DIR/network.err")"

    # The hosts talk over a (virtual) network: their links prove a cluster key, made here
    # for this cluster (32 random bytes as hex, what `skueue keygen` writes).
    (umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$STATE_DIR/cluster.key") \
        || fail_start "cannot write $STATE_DIR/cluster.key"
    local i j peers address ns log pid
    local -a addresses=() pids=() hosts=()
    for ((i = 0; i < n; i++)); do addresses+=("$(address_of "$i")"); done
    # TLS: a CA for this cluster and a member certificate per host naming its address
    # (beyond loopback skueued refuses to run without TLS unless told --plaintext).
    for ((i = 0; i < n; i++)); do
        hosts+=(--host "$(ns_name "$i"),${addresses[$i]%:*}")
    done
    "$SKUEUE_CLI" certs "$STATE_DIR/tls" "${hosts[@]}" 2>"$STATE_DIR/tls.err" \
        || fail_start "cannot make the TLS certificates: $(cat "$STATE_DIR/tls.err")"
    for ((i = 0; i < n; i++)); do
        ns=$(ns_name "$i")
        address=${addresses[$i]}
        peers=
        for ((j = 0; j < n; j++)); do
            [ "$j" -eq "$i" ] || peers+=${peers:+,}${addresses[$j]}
        done
        log="$STATE_DIR/$ns.log"
        # setsid: the daemon outlives this script and the terminal it ran in.
        # --in-memory: this demo keeps nothing, so that stop leaves nothing behind.
        PYTHONUNBUFFERED=1 setsid ip netns exec "$ns" "$SKUEUED" \
            --listen "$address" --peers "$peers" --id "$ns" --in-memory \
            --cluster-key "$STATE_DIR/cluster.key" \
            --tls-cert "$STATE_DIR/tls/$ns.crt" --tls-key "$STATE_DIR/tls/$ns.key" \
            --tls-ca "$STATE_DIR/tls/ca.crt" \
            --structure "$STRUCTURE" --log-format "$LOG_FORMAT" \
            </dev/null >"$log" 2>&1 &
        pids+=("$!")
        echo "$ns $! $address $log" >>"$STATE_DIR/daemons"
    done

    local deadline=$((SECONDS + TIMEOUT_S + 1)) waiting  # never shorter than asked
    while :; do
        waiting=0
        for ((i = 0; i < n; i++)); do
            ns=$(ns_name "$i")
            log="$STATE_DIR/$ns.log"
            grep -q '^skueued ready: ' "$log" 2>/dev/null && continue
            waiting=1
            if ! kill -0 "${pids[$i]}" 2>/dev/null; then
                fail_start "daemon $ns (${addresses[$i]}) exited before it was ready; last lines of its log:
$(log_tail "$log")"
            fi
            if [ $SECONDS -ge $deadline ]; then
                fail_start "daemon $ns (${addresses[$i]}) not ready within ${TIMEOUT_S} s; last lines of its log:
$(log_tail "$log")"
            fi
        done
        [ $waiting -eq 1 ] || break
        sleep 0.1
    done
    trap - INT TERM
    printf '%s\n' "${addresses[@]}"
}

cmd_status() {
    parse_options "$@"
    need_tools
    [ -f "$STATE_DIR/daemons" ] || { echo "no cluster in $STATE_DIR" >&2; exit 2; }
    local ns pid address log all=0
    while read -r ns pid address log; do
        if [ "$(ip netns identify "$pid" 2>/dev/null)" = "$ns" ]; then
            echo "$ns $address alive pid=$pid log=$log"
        else
            echo "$ns $address dead pid=$pid log=$log"
            all=1
        fi
    done <"$STATE_DIR/daemons"
    return $all
}

cmd_stop() {
    parse_options "$@"
    need_tools
    teardown
}

main() {
    [ $# -ge 1 ] || usage
    local command=$1
    shift
    case $command in
        start) cmd_start "$@" ;;
        status) cmd_status "$@" ;;
        stop) cmd_stop "$@" ;;
        -h|--help|help) usage ;;
        *) die "unknown command '$command' (start, status or stop)" ;;
    esac
}

main "$@"
