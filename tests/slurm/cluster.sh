#!/usr/bin/env bash
# A real, 4-node Slurm cluster on ONE machine, for fray's tests.
#
#   bash tests/slurm/cluster.sh install        # apt-get install slurm-wlm munge (idempotent)
#   bash tests/slurm/cluster.sh start  [DIR]   # write config, start munged+slurmctld+4 slurmd, wait
#   bash tests/slurm/cluster.sh stop   [DIR]   # stop everything, leave no processes
#   bash tests/slurm/cluster.sh status [DIR]   # sinfo (+ squeue)
#   bash tests/slurm/cluster.sh env    [DIR]   # prints: export SLURM_CONF=DIR/etc/slurm.conf
#
# DIR defaults to $FRAY_SLURM_DIR, else /tmp/fray-slurm. Everything the cluster
# writes lives under it: DIR/etc (slurm.conf, gres.conf, cgroup.conf),
# DIR/dev (fake GPU "device" files), DIR/state (slurmctld state save),
# DIR/spool/slurmd-<node>, DIR/log (*.log), DIR/run (*.pid), DIR/jobs (cwd for
# the smoke job). Only munged uses system paths (/etc/munge, /run/munge).
#
# How it works: Debian's slurm-wlm (22.05 on bookworm) is built with
# MULTIPLE_SLURMD, so several `slurmd -N <node>` can run on one host. All four
# nodes share NodeHostname=<this host> / NodeAddr=127.0.0.1 and differ by Port=.
# Node CPUs/memory are *declared* (CPUs=4, RealMemory=2000 each, more than the
# machine may have); SlurmdParameters=config_overrides keeps slurmd from
# draining a node whose real hardware is smaller. GPUs are GRES with
# AutoDetect=off and File=DIR/dev/<node>/nvidiaN (symlinks to /dev/null), so
# jobs get CUDA_VISIBLE_DEVICES / SLURM_JOB_GPUS but no real device.
#
#   partition cpu  (Default=YES) : n1 n2 n3 n4
#   partition a100               : n1 n2   (Gres=gpu:a100:2 each)
#   partition h100               : n3 n4   (Gres=gpu:h100:4 each; feature ib)
#
# Ports: slurmctld $FRAY_SLURM_PORT (default 16817); slurmd nK on
# FRAY_SLURM_PORT+K (16818..16821).
#
# Simulating a node fault (what tests do):
#   export SLURM_CONF=DIR/etc/slurm.conf
#   kill -9 $(cat DIR/run/slurmd-n3.pid)        # the node's slurmd "crashes"
#   # Measured here (SlurmdTimeout=5): 5.5-10 s later the node is
#   # NOT_RESPONDING ("idle*" in sinfo), 12-18 s later DOWN* (Reason=Not
#   # responding); it depends on where the controller's ping cycle
#   # (SlurmdTimeout/3) happens to be. Poll with a deadline, don't sleep:
#   #   sinfo -h -N -n n3 -o %t     -> idle, idle*, down*, ...
#   #   scontrol show node n3       -> State=IDLE+NOT_RESPONDING / DOWN+NOT_RESPONDING
#   FRAY_SLURM_DIR=DIR slurmd -N n3 -f DIR/etc/slurm.conf    # restart it ...
#   # ... it re-registers within a second and, thanks to ReturnToService=2,
#   # goes back to idle (even from DOWN). Running `cluster.sh start DIR` again
#   # does the same: start is idempotent and starts only missing daemons.
# (FRAY_SLURM_DIR=DIR marks the daemon so `stop` finds it and the slurmstepds
# it forks; stop also finds slurmd/slurmctld by "-f DIR/etc/slurm.conf".)
# tests/slurm/fixture.py has kill_slurmd()/restart_slurmd()/wait_node_state().
# SIGTERM instead of -9 works the same way (slurmd exits cleanly).
set -euo pipefail
export PATH=$PATH:/usr/sbin:/sbin  # slurmctld, slurmd, munged live in sbin

NODES=(n1 n2 n3 n4)
CLUSTER_NAME=fray-test
SLURMD_TIMEOUT=5
START_DEADLINE=${FRAY_SLURM_START_TIMEOUT:-60}
PORT_BASE=${FRAY_SLURM_PORT:-16817}

die() { echo "cluster.sh: $*" >&2; exit 1; }
log() { echo "cluster.sh: $*" >&2; }

resolve_dir() {
    local d=${1:-${FRAY_SLURM_DIR:-/tmp/fray-slurm}}
    mkdir -p "$d"
    DIR=$(cd "$d" && pwd -P)
    CONF=$DIR/etc/slurm.conf
    export SLURM_CONF=$CONF
}

have_slurm() {
    command -v slurmctld >/dev/null 2>&1 && command -v slurmd >/dev/null 2>&1 &&
        command -v sbatch >/dev/null 2>&1 && command -v munged >/dev/null 2>&1
}

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo -n "$@"; fi
}

cmd_install() {
    if have_slurm && dpkg -s slurm-wlm munge >/dev/null 2>&1; then
        log "slurm-wlm and munge already installed ($(slurmd -V))"
        return 0
    fi
    local pkgs=(slurm-wlm munge)
    export DEBIAN_FRONTEND=noninteractive
    if ! as_root apt-get install -y --no-install-recommends "${pkgs[@]}"; then
        log "apt-get install failed; running apt-get update and retrying"
        as_root apt-get update
        as_root apt-get install -y --no-install-recommends "${pkgs[@]}"
    fi
    have_slurm || die "install finished but slurm binaries are missing"
    log "installed $(slurmd -V)"
}

# ---------------------------------------------------------------- munge ----

munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

ensure_munge() {
    if munge_ok; then return 0; fi
    local key=/etc/munge/munge.key
    as_root mkdir -p /etc/munge /var/lib/munge /var/log/munge /run/munge
    if [ ! -s "$key" ]; then
        log "creating munge key $key"
        if command -v mungekey >/dev/null 2>&1; then
            as_root mungekey --create --keyfile="$key" --force
        else
            as_root dd if=/dev/urandom of="$key" bs=1 count=1024 status=none
        fi
    fi
    as_root chown -R munge:munge /etc/munge /var/lib/munge /var/log/munge /run/munge
    as_root chmod 0700 /etc/munge /var/lib/munge /var/log/munge
    as_root chmod 0755 /run/munge
    as_root chmod 0600 "$key"
    # A stale munged (pid file but dead socket) would make the new one refuse.
    if [ -f /run/munge/munged.pid ] && ! proc_alive "$(cat /run/munge/munged.pid)"; then
        as_root rm -f /run/munge/munged.pid
    fi
    log "starting munged"
    # --force: tolerate "insecure" directory permissions found on CI runners.
    as_root runuser -u munge -- /usr/sbin/munged --force ||
        as_root /usr/sbin/munged --force
    local i
    for i in $(seq 50); do munge_ok && return 0; sleep 0.1; done
    tail -n 20 /var/log/munge/munged.log >&2 2>/dev/null || true
    die "munged does not work (munge -n | unmunge fails)"
}

# --------------------------------------------------------------- config ----

write_config() {
    local host
    host=$(hostname -s)
    mkdir -p "$DIR"/{etc,dev,state,spool,log,run,jobs}
    local n
    for n in "${NODES[@]}"; do mkdir -p "$DIR/spool/slurmd-$n" "$DIR/dev/$n"; done
    # Fake GPUs. The trailing number is the device index Slurm puts in
    # CUDA_VISIBLE_DEVICES. slurmd 22.05 stat()s each File= and, for a plain
    # file, logs "is not a valid character or block device" and then sets NO
    # CUDA_VISIBLE_DEVICES; a symlink to /dev/null (a char device) passes and
    # needs no mknod privilege.
    local i
    for n in n1 n2; do for i in 0 1; do ln -sfn /dev/null "$DIR/dev/$n/nvidia$i"; done; done
    for n in n3 n4; do for i in 0 1 2 3; do ln -sfn /dev/null "$DIR/dev/$n/nvidia$i"; done; done

    cat >"$DIR/etc/slurm.conf.new" <<EOF
# Generated by tests/slurm/cluster.sh -- a whole cluster on host $host.
ClusterName=$CLUSTER_NAME
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$PORT_BASE
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge

StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/slurmd-%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true

# No cgroups (containers), no accounting daemon.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none

SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# Nodes declare more CPUs than the machine has; don't drain them for it.
SlurmdParameters=config_overrides
GresTypes=gpu
# (No AccountingStorageTRES=gres/gpu: in 22.05 slurmctld refuses it without slurmdbd.)

# Fast scheduling and fast fault detection.
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,sched_min_interval=100000,bf_interval=1,bf_resolution=1
SlurmdTimeout=$SLURMD_TIMEOUT
SlurmctldTimeout=10
MessageTimeout=5
TCPTimeout=2
KillWait=2
InactiveLimit=0
MinJobAge=30
ReturnToService=2
Waittime=0
UnkillableStepTimeout=20

# (NodeHostname/NodeAddr may not go on NodeName=DEFAULT.)
NodeName=DEFAULT CPUs=4 RealMemory=2000 State=UNKNOWN
NodeName=n1 NodeHostname=$host NodeAddr=127.0.0.1 Port=$((PORT_BASE + 1)) Gres=gpu:a100:2
NodeName=n2 NodeHostname=$host NodeAddr=127.0.0.1 Port=$((PORT_BASE + 2)) Gres=gpu:a100:2
NodeName=n3 NodeHostname=$host NodeAddr=127.0.0.1 Port=$((PORT_BASE + 3)) Gres=gpu:h100:4 Features=ib
NodeName=n4 NodeHostname=$host NodeAddr=127.0.0.1 Port=$((PORT_BASE + 4)) Gres=gpu:h100:4 Features=ib

PartitionName=cpu  Nodes=n[1-4] Default=YES MaxTime=INFINITE State=UP
PartitionName=a100 Nodes=n[1-2] MaxTime=1-00:00:00 State=UP
PartitionName=h100 Nodes=n[3-4] MaxTime=INFINITE State=UP
EOF
    mv "$DIR/etc/slurm.conf.new" "$CONF"

    cat >"$DIR/etc/gres.conf" <<EOF
AutoDetect=off
NodeName=n1 Name=gpu Type=a100 File=$DIR/dev/n1/nvidia[0-1]
NodeName=n2 Name=gpu Type=a100 File=$DIR/dev/n2/nvidia[0-1]
NodeName=n3 Name=gpu Type=h100 File=$DIR/dev/n3/nvidia[0-3]
NodeName=n4 Name=gpu Type=h100 File=$DIR/dev/n4/nvidia[0-3]
EOF

    # Not used by the plugins above; present so nothing goes looking in /etc/slurm.
    cat >"$DIR/etc/cgroup.conf" <<EOF
CgroupPlugin=autodetect
EOF
}

# -------------------------------------------------------------- daemons ----

pid_alive() {  # pidfile expected-comm
    local f=$1 comm=$2 pid
    [ -s "$f" ] || return 1
    pid=$(cat "$f" 2>/dev/null) || return 1
    [ -n "$pid" ] && proc_alive "$pid" || return 1
    [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = "$comm" ]
}

# Alive and not a zombie (daemons we start get reparented to PID 1, which in a
# container may not reap them; kill -0 succeeds on a zombie).
proc_alive() {
    local st
    st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
    [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

ctld_alive() { pid_alive "$DIR/run/slurmctld.pid" slurmctld; }
slurmd_alive() { pid_alive "$DIR/run/slurmd-$1.pid" slurmd; }

# Every daemon we start carries FRAY_SLURM_DIR=$DIR in its environment (and
# slurmstepd inherits it from slurmd), so stop can find strays reliably.
marked_pids() {
    local p
    for p in /proc/[0-9]*; do
        p=${p#/proc/}
        [ "$p" = $$ ] && continue
        if { tr '\0' '\n' <"/proc/$p/environ"; } 2>/dev/null | grep -qxF "FRAY_SLURM_DIR=$DIR"; then
            case "$(cat /proc/"$p"/comm 2>/dev/null)" in
                slurmctld | slurmd | slurmstepd) echo "$p" ;;
            esac
        fi
    done
}

# Daemons run as root (SlurmUser=root; slurmd must be root to launch jobs),
# via sudo when the caller is not root (e.g. a CI runner user).
start_daemon() {
    as_root env FRAY_SLURM_DIR="$DIR" SLURM_CONF="$CONF" "$@"
}

show_logs() {
    local f
    for f in "$DIR"/log/*.log; do
        [ -f "$f" ] || continue
        echo "===== tail $f" >&2
        tail -n 25 "$f" >&2
    done
    echo "===== sinfo" >&2
    sinfo -N -o '%N %P %t %G %E' >&2 2>&1 || true
}

nodes_ready() {  # all nodes in a usable state, none "not responding" (*)
    local out n st
    out=$(sinfo -h -N -o '%N %t' 2>/dev/null) || return 1
    for n in "${NODES[@]}"; do
        st=$(awk -v n="$n" '$1==n {print $2; exit}' <<<"$out")
        case "$st" in
            idle | mix | mixed | alloc | allocated | comp | completing) ;;
            *) return 1 ;;
        esac
    done
}

cmd_start() {
    have_slurm || die "Slurm not installed: run 'bash tests/slurm/cluster.sh install'"
    ensure_munge
    local t0=$SECONDS fresh=0
    if ! ctld_alive; then
        fresh=1
        # Nothing of ours should survive a dead controller: start clean.
        if [ -n "$(our_pids)" ]; then log "slurmctld is down but other daemons run: stopping them first"; cmd_stop_inner; fi
        as_root rm -rf "$DIR/state" "$DIR/spool" "$DIR/run" "$DIR/log"
        write_config
        log "starting slurmctld (conf $CONF)"
        start_daemon slurmctld -f "$CONF" || { show_logs; die "slurmctld failed to start"; }
    fi
    local n
    for n in "${NODES[@]}"; do
        if ! slurmd_alive "$n"; then
            log "starting slurmd -N $n"
            start_daemon slurmd -N "$n" -f "$CONF" || { show_logs; die "slurmd -N $n failed to start"; }
        fi
    done

    local deadline=$((SECONDS + START_DEADLINE))
    until nodes_ready; do
        if [ $SECONDS -ge $deadline ]; then
            show_logs
            die "cluster did not come up within ${START_DEADLINE}s (see logs above)"
        fi
        ctld_alive || { show_logs; die "slurmctld died"; }
        sleep 0.5
    done

    # Smoke test: a trivial job must run end to end.
    mkdir -p "$DIR/jobs"
    local out
    if ! out=$(cd "$DIR/jobs" && timeout 30 srun -p cpu -N1 -n1 -t 1 -J fray-smoke hostname 2>&1); then
        echo "$out" >&2
        show_logs
        die "smoke job (srun hostname) failed"
    fi
    log "cluster $CLUSTER_NAME up in $((SECONDS - t0))s ($([ $fresh = 1 ] && echo cold || echo reused)); SLURM_CONF=$CONF"
}

# Our daemons: marked ones, plus slurmctld/slurmd started by hand with our conf.
our_pids() {
    {
        marked_pids
        local p
        for p in /proc/[0-9]*; do
            p=${p#/proc/}
            case "$(cat /proc/"$p"/comm 2>/dev/null)" in
                slurmctld | slurmd)
                    if { tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null | grep -qF -- "$CONF"; then echo "$p"; fi ;;
            esac
        done
    } | sort -u | while read -r p; do proc_alive "$p" && echo "$p"; done
}

wait_gone() {  # seconds
    local deadline=$((SECONDS + $1))
    while [ -n "$(our_pids)" ]; do
        [ $SECONDS -ge $deadline ] && return 1
        sleep 0.2
    done
}

cmd_stop_inner() {
    local pids i
    if ctld_alive; then
        # Cancel jobs first so slurmstepd and job processes end with them.
        local jobs
        jobs=$(squeue -h -o %i 2>/dev/null || true)
        if [ -n "$jobs" ]; then
            # shellcheck disable=SC2086
            as_root scancel $jobs 2>/dev/null || true
            for i in $(seq 20); do
                [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
                sleep 0.5
            done
        fi
        # Shuts down slurmctld and every slurmd it can reach.
        as_root timeout 10 scontrol shutdown >/dev/null 2>&1 || true
    fi
    wait_gone 5 && { as_root rm -f "$DIR"/run/*.pid; return 0; }
    pids=$(our_pids)
    log "terminating leftover processes: ${pids//$'\n'/ }"
    # shellcheck disable=SC2086
    as_root kill -TERM $pids 2>/dev/null || true
    wait_gone 4 && { as_root rm -f "$DIR"/run/*.pid; return 0; }
    pids=$(our_pids)
    log "killing leftover processes: ${pids//$'\n'/ }"
    # shellcheck disable=SC2086
    as_root kill -KILL $pids 2>/dev/null || true
    wait_gone 3 || die "could not stop: $(our_pids)"
    as_root rm -f "$DIR"/run/*.pid
}

cmd_stop() {
    if [ ! -f "$CONF" ]; then log "no cluster config in $DIR; nothing to stop"; return 0; fi
    cmd_stop_inner
    log "stopped (DIR=$DIR)"
}

cmd_status() {
    [ -f "$CONF" ] || die "no cluster config in $DIR (not started?)"
    sinfo -o '%P %a %D %t %N %G'
    echo
    squeue
}

cmd_env() {
    echo "export SLURM_CONF=$CONF"
    echo "export FRAY_SLURM_DIR=$DIR"
}

main() {
    local cmd=${1:-}
    shift || true
    case "$cmd" in
        install) cmd_install ;;
        start) resolve_dir "${1:-}"; cmd_start ;;
        stop) resolve_dir "${1:-}"; cmd_stop ;;
        status) resolve_dir "${1:-}"; cmd_status ;;
        env) resolve_dir "${1:-}"; cmd_env ;;
        *) echo "usage: $0 {install|start [DIR]|stop [DIR]|status [DIR]|env [DIR]}" >&2; exit 2 ;;
    esac
}

main "$@"
