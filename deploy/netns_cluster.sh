#!/usr/bin/env bash
# Run N skueued daemons as separate "hosts", one per Linux network namespace.
#
#   netns_cluster.sh start N [--port P] [--structure queue|stack] [--log-format json|console]
#                            [--durable [--replicas K [--failover]]] [--prefix NAME]
#                            [--state-dir DIR] [--skueued PATH] [--timeout S]
#   netns_cluster.sh join    [--seed I] [--prefix NAME] [--state-dir DIR] [--timeout S]
#   netns_cluster.sh leave I   [--prefix NAME] [--state-dir DIR] [--timeout S]
#   netns_cluster.sh kill I    [--prefix NAME] [--state-dir DIR] [--timeout S]
#   netns_cluster.sh restart I [--prefix NAME] [--state-dir DIR] [--timeout S]
#   netns_cluster.sh cut I     [--prefix NAME] [--state-dir DIR]
#   netns_cluster.sh heal I    [--prefix NAME] [--state-dir DIR]
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
# With --durable each daemon keeps its input log in <state dir>/data/<host> (default:
# --in-memory, nothing kept), which `restart` needs; --replicas K and --failover are
# passed to every daemon (skueued's options of the same names; they need --durable).
# Unlike skueued, whose default from 3 durable members is 3 replicas with failover, the
# script runs what it is told: --replicas 1 unless given, failover only with --failover.
#
# Changing the cluster while it runs (the settings of `start` are kept in the state
# directory and used again):
#   join     adds host N (the next number): a namespace on the bridge, a certificate, and
#            `skueued --join` the address of host --seed (default 0); prints its address
#            once it is in the ring.
#   leave I  runs `skueue leave` against host I from inside it and waits for its daemon
#            to exit (its elements are then held by the others); status shows it "left".
#   kill I   SIGKILL to host I's daemon (a crash); status shows it "dead".
#   cut I    cuts host I off the others: its port on the bridge goes down (a network
#            partition; its daemon runs on, and nothing reaches it or leaves it);
#   heal I   puts it back.
#   restart I  starts host I's daemon again with the same flags and data directory
#            (--durable only) and waits until it is ready.  (skueued today: a member
#            started with --peers comes back only while every one of those peers is still
#            a member; one that joined comes back whoever left.)
#
# `stop` works from the namespace names alone (SIGTERM to every process in them, SIGKILL
# after --timeout, then deletes the namespaces), so it also cleans up after a lost state
# directory; it removes the data directories too.  Requires root and iproute2 (`ip`).
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
DURABLE=0
REPLICAS=1
FAILOVER=0
SEED=0
LAUNCHED=   # pid of the daemon launch_daemon started last
WHY=        # why wait_ready failed

die() { echo "$PROG: error: $*" >&2; exit 1; }
note() { echo "$PROG: $*" >&2; }

usage() {
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2
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

# in_namespace PID NS: PID is alive and a process of namespace NS (a recycled pid is not).
in_namespace() { [ "$(ip netns identify "$1" 2>/dev/null)" = "$2" ]; }

# Remove what this script put in the state directory, and the directory if that empties
# it (never rm -rf of the directory itself: --state-dir may name one holding other things).
clear_state() {
    local keep_logs=${1:-0} data
    rm -f -- "$STATE_DIR/daemons" "$STATE_DIR/cluster.conf" "$STATE_DIR/network.err" \
        "$STATE_DIR/cluster.key" "$STATE_DIR/leave.err"
    rm -f -- "$STATE_DIR/tls/"*.crt "$STATE_DIR/tls/"*.key "$STATE_DIR/tls.err"
    rmdir -- "$STATE_DIR/tls" 2>/dev/null || true
    if [ "$keep_logs" -eq 0 ]; then
        rm -f -- "$STATE_DIR/${PREFIX}"[0-9]*.log
        # The hosts' data directories (--durable), each named after its host.
        for data in "$STATE_DIR/data/${PREFIX}"[0-9]*; do
            [ ! -d "$data" ] || rm -rf -- "$data"
        done
        rmdir -- "$STATE_DIR/data" 2>/dev/null || true
    fi
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
            --durable) DURABLE=1; shift ;;
            --replicas) REPLICAS=${2:?--replicas needs a value}; shift 2 ;;
            --failover) FAILOVER=1; shift ;;
            --seed) SEED=${2:?--seed needs a value}; shift 2 ;;
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
    in_range "$SEED" 0 $((HOSTS_MAX - 1)) || die "--seed: a host number, not '$SEED'"
    case $STRUCTURE in queue|stack) ;; *) die "--structure: queue or stack, not '$STRUCTURE'" ;; esac
    case $REPLICAS in 1|3|5) ;; *) die "--replicas: 1, 3 or 5, not '$REPLICAS'" ;; esac
    case $LOG_FORMAT in json|console) ;; *) die "--log-format: json or console, not '$LOG_FORMAT'" ;; esac
    STATE_DIR=${STATE_DIR:-$DEFAULT_STATE_ROOT/$PREFIX}
}

# host_number COMMAND I: I names a host (0-63), or die saying which command wanted it.
host_number() {
    in_range "${2:-}" 0 $((HOSTS_MAX - 1)) || die "$1: I must be a host number 0-$((HOSTS_MAX - 1)), not '${2:-}'"
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

# skueue (for `skueue certs` and `skueue leave`): beside skueued, else this checkout's,
# else on PATH.
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

# -- the state directory: the cluster's settings and its hosts --------------------------
#
# cluster.conf: the settings `start` was given (KEY=value lines), which join and restart
# use again.  daemons: one line per host, "NS PID ADDRESS LOG STATE HOW", STATE "member" or
# "left", HOW "peers=ADDR,..." or "join=SEED" (the flags its daemon starts with).

save_conf() {
    printf 'PORT=%s\nSTRUCTURE=%s\nLOG_FORMAT=%s\nDURABLE=%s\nSKUEUED=%s\nREPLICAS=%s\nFAILOVER=%s\n' \
        "$PORT" "$STRUCTURE" "$LOG_FORMAT" "$DURABLE" "$SKUEUED" "$REPLICAS" "$FAILOVER" \
        >"$STATE_DIR/cluster.conf"
}

load_conf() {
    if [ ! -f "$STATE_DIR/cluster.conf" ] || [ ! -f "$STATE_DIR/daemons" ]; then
        echo "no cluster in $STATE_DIR" >&2
        exit 2
    fi
    local key value
    while IFS='=' read -r key value; do
        case $key in
            PORT) PORT=$value ;;
            STRUCTURE) STRUCTURE=$value ;;
            LOG_FORMAT) LOG_FORMAT=$value ;;
            DURABLE) DURABLE=$value ;;
            SKUEUED) SKUEUED=$value ;;
            REPLICAS) REPLICAS=$value ;;
            FAILOVER) FAILOVER=$value ;;
        esac
    done <"$STATE_DIR/cluster.conf"
    [ -x "$SKUEUED" ] || die "$SKUEUED (from $STATE_DIR/cluster.conf) is not executable"
    find_skueue
}

# host_fields NS: that host's line of the daemons file (empty if it has none).
host_fields() { awk -v ns="$1" '$1 == ns' "$STATE_DIR/daemons"; }

# set_host NS PID STATE: record the host's current daemon and state.
set_host() {
    awk -v ns="$1" -v pid="$2" -v state="$3" \
        'BEGIN { OFS = " " } $1 == ns { $2 = pid; $5 = state } { print }' \
        "$STATE_DIR/daemons" >"$STATE_DIR/daemons.new"
    mv -- "$STATE_DIR/daemons.new" "$STATE_DIR/daemons"
}

# member_host COMMAND I: set NS PID ADDRESS LOG STATE HOW of host I, a member (not left).
member_host() {
    NS=$(ns_name "$2")
    local fields
    fields=$(host_fields "$NS")
    [ -n "$fields" ] || die "$1: no host $NS in $STATE_DIR/daemons"
    read -r NS PID ADDRESS LOG STATE HOW <<<"$fields"
    [ "$STATE" = member ] || die "$1: $NS ($ADDRESS) has left the cluster"
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

# add_host_network I: namespace <prefix>I with eth0 at .(10+I), its veth peer on the bridge.
# Called as `add_host_network ... || ...`, where set -e does not apply: check every step.
add_host_network() {
    local i=$1 ns
    ns=$(ns_name "$i")
    ip netns add "$ns" || return 1
    ip -n "$ns" link set lo up || return 1
    # Both ends are created inside namespaces: the root namespace never sees them.
    ip -n "$(hub)" link add "veth$i" type veth peer name eth0 netns "$ns" || return 1
    ip -n "$(hub)" link set "veth$i" master "$BRIDGE" up || return 1
    ip -n "$ns" addr add "${SUBNET_PREFIX}.$((HOST_OFFSET + i))/24" dev eth0 || return 1
    ip -n "$ns" link set eth0 up || return 1
}

build_network() {
    local n=$1 i
    ip netns add "$(hub)" || return 1
    ip -n "$(hub)" link set lo up || return 1
    ip -n "$(hub)" link add "$BRIDGE" type bridge || return 1
    ip -n "$(hub)" link set "$BRIDGE" up || return 1
    for ((i = 0; i < n; i++)); do
        add_host_network "$i" || return 1
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

# ready_count LOG: how many ready lines the log holds (a restarted daemon appends to it).
ready_count() {
    local count
    count=$(grep -c '^skueued ready: ' "$1" 2>/dev/null) || true
    echo "${count:-0}"
}

# launch_daemon NS ADDRESS HOW LOG: start host NS's daemon in the background, appending to
# LOG; its pid in LAUNCHED.
launch_daemon() {
    local ns=$1 address=$2 how=$3 log=$4
    local -a membership storage
    case $how in
        peers=*) membership=(--peers "${how#peers=}") ;;
        join=*) membership=(--join "${how#join=}") ;;
        *) die "host $ns: '$how' in $STATE_DIR/daemons is neither peers=... nor join=..." ;;
    esac
    if [ "$DURABLE" -eq 1 ]; then
        storage=(--data-dir "$STATE_DIR/data/$ns" --replicas "$REPLICAS")
        if [ "$FAILOVER" -eq 1 ]; then storage+=(--failover)
        elif [ "$REPLICAS" -gt 1 ]; then storage+=(--no-failover); fi
    else
        storage=(--in-memory)  # nothing kept: stop leaves nothing behind
    fi
    # setsid: the daemon outlives this script and the terminal it ran in.
    PYTHONUNBUFFERED=1 setsid ip netns exec "$ns" "$SKUEUED" \
        --listen "$address" "${membership[@]}" --id "$ns" "${storage[@]}" \
        --cluster-key "$STATE_DIR/cluster.key" \
        --tls-cert "$STATE_DIR/tls/$ns.crt" --tls-key "$STATE_DIR/tls/$ns.key" \
        --tls-ca "$STATE_DIR/tls/ca.crt" \
        --structure "$STRUCTURE" --log-format "$LOG_FORMAT" \
        </dev/null >>"$log" 2>&1 &
    LAUNCHED=$!
}

# wait_ready "NS PID LOG BEFORE ADDRESS"...: wait (bounded by --timeout) until each of
# these daemons' logs holds more than BEFORE ready lines.  Returns 1 with the reason in
# WHY (naming the daemon, with its log's tail) if one exits or is not ready in time.
wait_ready() {
    local deadline=$((SECONDS + TIMEOUT_S + 1)) waiting entry ns pid log before address
    while :; do
        waiting=0
        for entry in "$@"; do
            read -r ns pid log before address <<<"$entry"
            [ "$(ready_count "$log")" -le "$before" ] || continue
            waiting=1
            if ! kill -0 "$pid" 2>/dev/null; then
                WHY="daemon $ns ($address) exited before it was ready; last lines of its log:
$(log_tail "$log")"
                return 1
            fi
            if [ $SECONDS -ge $deadline ]; then
                WHY="daemon $ns ($address) not ready within ${TIMEOUT_S} s; last lines of its log:
$(log_tail "$log")"
                return 1
            fi
        done
        [ $waiting -eq 1 ] || return 0
        sleep 0.1
    done
}

# wait_gone PID NS: wait (bounded by --timeout) until PID is no longer a process of NS.
wait_gone() {
    local deadline=$((SECONDS + TIMEOUT_S + 1))
    while in_namespace "$1" "$2"; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.1
    done
}

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
    save_conf
    : >"$STATE_DIR/daemons"
    trap 'fail_start "interrupted"' INT TERM
    build_network "$n" 2>"$STATE_DIR/network.err" \
        || fail_start "cannot build the namespace network: $(cat "$STATE_DIR/network.err")"

    # The hosts talk over a (virtual) network: their links prove a cluster key, made here
    # for this cluster (32 random bytes as hex, what `skueue keygen` writes).
    (umask 077 && od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$STATE_DIR/cluster.key") \
        || fail_start "cannot write $STATE_DIR/cluster.key"
    local i j peers ns log
    local -a addresses=() hosts=() waiting=()
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
        peers=
        for ((j = 0; j < n; j++)); do
            [ "$j" -eq "$i" ] || peers+=${peers:+,}${addresses[$j]}
        done
        log="$STATE_DIR/$ns.log"
        launch_daemon "$ns" "${addresses[$i]}" "peers=$peers" "$log"
        echo "$ns $LAUNCHED ${addresses[$i]} $log member peers=$peers" >>"$STATE_DIR/daemons"
        waiting+=("$ns $LAUNCHED $log 0 ${addresses[$i]}")
    done
    wait_ready "${waiting[@]}" || fail_start "$WHY"
    trap - INT TERM
    printf '%s\n' "${addresses[@]}"
}

# -- changing a running cluster -------------------------------------------------------

cmd_join() {
    parse_options "$@"
    need_tools
    load_conf
    local NS PID ADDRESS LOG STATE HOW
    member_host join "$SEED"
    in_namespace "$PID" "$NS" || die "join: the seed $NS ($ADDRESS) is not running"
    local seed=$ADDRESS i ns address log last
    last=$(our_namespaces | sed -n "s/^${PREFIX}\([0-9][0-9]*\)\$/\1/p" | sort -n | tail -n 1)
    i=$((${last:--1} + 1))
    [ "$i" -lt $HOSTS_MAX ] || die "join: $HOSTS_MAX hosts at most"
    ns=$(ns_name "$i")
    address=$(address_of "$i")
    log="$STATE_DIR/$ns.log"
    if ! add_host_network "$i" 2>"$STATE_DIR/network.err"; then
        ip netns del "$ns" 2>/dev/null || true
        die "join: cannot add $ns to the network: $(cat "$STATE_DIR/network.err")"
    fi
    # The CA made at start signs the new host's certificate (skueue certs keeps it).
    if ! "$SKUEUE_CLI" certs "$STATE_DIR/tls" --host "$ns,${address%:*}" 2>"$STATE_DIR/tls.err"; then
        ip netns del "$ns" 2>/dev/null || true
        die "join: cannot make $ns's certificate: $(cat "$STATE_DIR/tls.err")"
    fi
    launch_daemon "$ns" "$address" "join=$seed" "$log"
    echo "$ns $LAUNCHED $address $log member join=$seed" >>"$STATE_DIR/daemons"
    if ! wait_ready "$ns $LAUNCHED $log 0 $address"; then
        # Not in the ring: take the host away again (its log stays, for a closer look).
        kill -KILL "$LAUNCHED" 2>/dev/null || true
        wait_gone "$LAUNCHED" "$ns" || true
        ip netns del "$ns" 2>/dev/null || true
        awk -v ns="$ns" '$1 != ns' "$STATE_DIR/daemons" >"$STATE_DIR/daemons.new"
        mv -- "$STATE_DIR/daemons.new" "$STATE_DIR/daemons"
        die "join: $WHY"
    fi
    echo "$address"
}

cmd_leave() {
    host_number leave "${1:-}"
    local i=$1
    shift
    parse_options "$@"
    need_tools
    load_conf
    local NS PID ADDRESS LOG STATE HOW
    member_host leave "$i"
    in_namespace "$PID" "$NS" || die "leave: $NS ($ADDRESS) is not running"
    # From inside the host, as an operator on it would: returns 0 once the others hold
    # its elements; the daemon then exits by itself.
    ip netns exec "$NS" "$SKUEUE_CLI" leave --node "$ADDRESS" --tls-ca "$STATE_DIR/tls/ca.crt" \
        --timeout "$TIMEOUT_S" >/dev/null 2>"$STATE_DIR/leave.err" \
        || die "leave: skueue leave --node $ADDRESS failed: $(cat "$STATE_DIR/leave.err")"
    wait_gone "$PID" "$NS" || die "leave: $NS ($ADDRESS) left but its daemon still runs after ${TIMEOUT_S} s"
    set_host "$NS" "$PID" left
    note "$NS ($ADDRESS) left the cluster"
}

cmd_kill() {
    host_number kill "${1:-}"
    local i=$1
    shift
    parse_options "$@"
    need_tools
    load_conf
    local NS PID ADDRESS LOG STATE HOW
    member_host kill "$i"
    in_namespace "$PID" "$NS" || die "kill: $NS ($ADDRESS) is not running"
    kill -KILL "$PID"
    wait_gone "$PID" "$NS" || die "kill: pid $PID of $NS survived SIGKILL for ${TIMEOUT_S} s"
    note "killed $NS ($ADDRESS, pid $PID) with SIGKILL"
}

cmd_restart() {
    host_number restart "${1:-}"
    local i=$1 before
    shift
    parse_options "$@"
    need_tools
    load_conf
    [ "$DURABLE" -eq 1 ] || die "restart: the cluster was started without --durable; an in-memory daemon would come back empty, as a member the others refuse"
    local NS PID ADDRESS LOG STATE HOW
    member_host restart "$i"
    ! in_namespace "$PID" "$NS" || die "restart: $NS ($ADDRESS) is running (pid $PID)"
    before=$(ready_count "$LOG")
    launch_daemon "$NS" "$ADDRESS" "$HOW" "$LOG"
    set_host "$NS" "$LAUNCHED" member
    wait_ready "$NS $LAUNCHED $LOG $before $ADDRESS" || die "restart: $WHY"
    note "restarted $NS ($ADDRESS, pid $LAUNCHED) from $STATE_DIR/data/$NS"
}

# cut_link I up|down: host I's port on the bridge.
cut_link() {
    host_number "$1" "${2:-}"
    local i=$2 state=$3
    shift 3
    parse_options "$@"
    need_tools
    load_conf
    local NS PID ADDRESS LOG STATE HOW
    member_host "$1" "$i"
    ip -n "$(hub)" link set "veth$i" "$state" || die "$1: cannot set veth$i $state in $(hub)"
    if [ "$state" = down ]; then note "cut $NS ($ADDRESS) off the others"; else note "healed $NS ($ADDRESS)"; fi
}

cmd_status() {
    parse_options "$@"
    need_tools
    [ -f "$STATE_DIR/daemons" ] || { echo "no cluster in $STATE_DIR" >&2; exit 2; }
    local ns pid address log state how all=0
    while read -r ns pid address log state how; do
        if [ "$state" = left ]; then
            echo "$ns $address left pid=$pid log=$log"
        elif in_namespace "$pid" "$ns"; then
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
        join) cmd_join "$@" ;;
        leave) cmd_leave "$@" ;;
        kill) cmd_kill "$@" ;;
        restart) cmd_restart "$@" ;;
        cut) cut_link cut "${1:-}" down "${@:2}" ;;
        heal) cut_link heal "${1:-}" up "${@:2}" ;;
        status) cmd_status "$@" ;;
        stop) cmd_stop "$@" ;;
        -h|--help|help) usage ;;
        *) die "unknown command '$command' (start, join, leave, kill, restart, cut, heal, status or stop)" ;;
    esac
}

main "$@"
