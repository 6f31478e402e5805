#!/bin/bash
# Bring up a throw-away Slurm 22.05 cluster on 127.0.0.1 for gpufair's tests and demos:
# one munged (private socket), one slurmctld, one slurmd per emulated node (all NodeAddr
# 127.0.0.1, one port each), GPUs as typed GRES backed by symlinks to /dev/null, and the
# gpufair prolog/epilog hooks. Nothing is written outside $SLURM_LO_BASE.
# Usage:  scripts/slurm/up.sh [--restd] [--hard] [--accounting]
#   --restd  also start slurmrestd (local auth on $BASE/run/slurmrestd.sock; JWT on TCP)
#   --hard   install gpufair/deploy/job_submit.lua: jobs of managed partitions arrive held for gpufair
#   --accounting  also start a private MariaDB and slurmdbd (accounting.sh): sacct, sacctmgr,
#            GPUs as TRES (gres/gpu, gres/gpu:TYPE); cluster "loopback", accounts research,
#            vision and nlp, user root in all three
# Env:    SLURM_LO_BASE=/tmp/gpufair-slurm  SLURM_LO_NODES="name:type:count[:memory_mb] ..."
#            (memory default 128000 MB a node)
#         SLURM_LO_PORT0 (first slurmd)  SLURM_LO_CTLD_PORT  SLURM_LO_RESTD_PORT
#         SLURM_LO_DBD_PORT (slurmdbd, with --accounting): default, a free block of ports
#         (printed at the end, and kept in $BASE/etc/ports)
#         GPUFAIR_PYTHON (interpreter for the hooks; default: python3 on PATH)
#         SLURM_LO_SLURM_USER (SlurmUser, default root: with another user, slurmctld and the
#         PrologSlurmctld/EpilogSlurmctld run as that user and it owns state, logs and keys)
#         SLURM_LO_HOOKS (a directory holding prolog, epilog, prolog-slurmctld and
#         epilog-slurmctld, e.g. /usr/local/lib/gpufair from `gpufair admin write-files`:
#         slurm.conf names those instead of this repository's wrapper)
#         SLURM_LO_JOB_SUBMIT (with --hard: the job_submit.lua to install; default the
#         package's, which lets only root release managed jobs)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BASE=${SLURM_LO_BASE:-/tmp/gpufair-slurm}
NODES=${SLURM_LO_NODES:-"gpu-v100-1:v100:4 gpu-v100-2:v100:4 gpu-k80-1:k80:4 gpu-k80-2:k80:4"}
# ports not given are picked free: a block of (nodes + 2) consecutive ports that nothing
# listens on, starting at a random offset, so two clusters (two test runs) never collide
free_block() {
  python3 - "$1" <<'PY'
import random, socket, sys
size = int(sys.argv[1])
for _ in range(500):
    start = random.randrange(20000, 60000 - size)
    socks = []
    try:
        for port in range(start, start + size):
            s = socket.socket()
            s.bind(("127.0.0.1", port))
            socks.append(s)
    except OSError:
        continue
    finally:
        for s in socks:
            s.close()
    print(start)
    break
else:
    sys.exit("no free block of ports on 127.0.0.1")
PY
}
read -r -a _node_words <<< "$NODES"
if [[ -z ${SLURM_LO_PORT0:-} || -z ${SLURM_LO_CTLD_PORT:-} || -z ${SLURM_LO_RESTD_PORT:-} \
      || -z ${SLURM_LO_EVENT_PORT:-} || -z ${SLURM_LO_DBD_PORT:-} ]]; then
  _block=$(free_block $(( ${#_node_words[@]} + 4 )))
fi
CTLD_PORT=${SLURM_LO_CTLD_PORT:-$_block}
RESTD_PORT=${SLURM_LO_RESTD_PORT:-$((_block + 1))}
PORT0=${SLURM_LO_PORT0:-$((_block + 2))}
EVENT_PORT=${SLURM_LO_EVENT_PORT:-$((_block + 2 + ${#_node_words[@]}))}
DBD_PORT=${SLURM_LO_DBD_PORT:-$((_block + 3 + ${#_node_words[@]}))}
# SLURM_LO_MULTIHOST=1: every slurmd on its own loopback address (127.0.0.2, .3, ...) with a
# node-local hook spool the daemon cannot read, as on a real cluster: hook events reach the
# daemon only over UDP (127.0.0.1:$EVENT_PORT, HMAC key $BASE/etc/event.key)
MULTIHOST=${SLURM_LO_MULTIHOST:-0}
WITH_RESTD=0; HARD=0; ACCOUNTING=0
for a in "$@"; do
  case $a in
    --restd) WITH_RESTD=1;; --hard) HARD=1;; --accounting) ACCOUNTING=1;;
    *) echo "unknown arg $a" >&2; exit 2;;
  esac
done
for b in munged slurmctld slurmd sinfo scontrol; do
  command -v "$b" >/dev/null || { echo "missing $b: run scripts/slurm/install.sh" >&2; exit 1; }
done
[[ $BASE == /?* && $BASE != */ ]] || { echo "SLURM_LO_BASE must be an absolute path" >&2; exit 2; }
if [[ -e $BASE/run/slurmctld.pid ]] && kill -0 "$(cat "$BASE/run/slurmctld.pid")" 2>/dev/null; then
  echo "a cluster is already running in $BASE (run down.sh first)" >&2; exit 1
fi
SLURM_USER=${SLURM_LO_SLURM_USER:-root}
id -u "$SLURM_USER" >/dev/null 2>&1 || { echo "SlurmUser $SLURM_USER: no such user" >&2; exit 2; }
HOOKS=${SLURM_LO_HOOKS:-$BASE/scripts}
JOB_SUBMIT=${SLURM_LO_JOB_SUBMIT:-$REPO/gpufair/deploy/job_submit.lua}
rm -rf "$BASE"
mkdir -p "$BASE"/{etc,munge,state,spool,log,run,scripts,dev,work,gpufair}
chmod 755 "$BASE" "$BASE/munge"
dd if=/dev/urandom of="$BASE/etc/munge.key" bs=1024 count=1 status=none
chmod 400 "$BASE/etc/munge.key"
dd if=/dev/urandom of="$BASE/etc/jwt_hs256.key" bs=32 count=1 status=none
chmod 600 "$BASE/etc/jwt_hs256.key"
# a non-root SlurmUser: slurmctld drops to it after start, so it must own what it writes
# (state, its log, pid file, job completion log) and read the JWT key; slurmd stays root
touch "$BASE/log/slurmctld.log" "$BASE/log/jobcomp.txt"
chown "$SLURM_USER:" "$BASE/state" "$BASE/run" "$BASE/etc/jwt_hs256.key" \
  "$BASE/log/slurmctld.log" "$BASE/log/jobcomp.txt"

# --- hooks: the project's wrapper under the four names slurm.conf uses ---------------
for k in prolog epilog prolog-slurmctld epilog-slurmctld; do
  install -m 755 "$REPO/gpufair/deploy/gpufair-hook" "$BASE/scripts/$k"
done
cat > "$BASE/scripts/gpufair-hook.env" <<ENV
GPUFAIR_PYTHON=${GPUFAIR_PYTHON:-$(command -v python3)}
GPUFAIR_HOOK_PY=$REPO/gpufair/plugin/hooks.py
GPUFAIR_HOOK_DIR=$BASE/gpufair
ENV
if [[ $MULTIHOST == 1 ]]; then
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$BASE/etc/event.key"
  chmod 600 "$BASE/etc/event.key"
  cat >> "$BASE/scripts/gpufair-hook.env" <<ENV
GPUFAIR_HOOK_DIR=$BASE/nodes/%n/gpufair
GPUFAIR_EVENT_ADDR=127.0.0.1:$EVENT_PORT
GPUFAIR_EVENT_KEY=$BASE/etc/event.key
export GPUFAIR_EVENT_ADDR GPUFAIR_EVENT_KEY
ENV
fi

# --- config ----------------------------------------------------------------------------
sed -e "s#@BASE@#$BASE#g" -e "s#@CTLD_PORT@#$CTLD_PORT#g" -e "s#@SLURM_USER@#$SLURM_USER#g" \
  -e "s#@HOOKS@#$HOOKS#g" "$HERE/slurm.conf.in" > "$BASE/etc/slurm.conf"
if [[ $HARD == 1 ]]; then
  # its submission stamp in this cluster's hook directory (gpufair.plugin.submit_stamp)
  sed -e "s#^local SUBMIT_STAMP = \"/var/spool/gpufair/submitted\"#local SUBMIT_STAMP = \"$BASE/gpufair/submitted\"#" \
    "$JOB_SUBMIT" > "$BASE/etc/job_submit.lua"
  chmod 644 "$BASE/etc/job_submit.lua"
  echo "JobSubmitPlugins=lua" >> "$BASE/etc/slurm.conf"
fi
echo "AutoDetect=off" > "$BASE/etc/gres.conf"
gpu_types=()
port=$PORT0; names=(); addr=1
for spec in $NODES; do
  IFS=: read -r name type count memory <<<"$spec"
  names+=("$name")
  [[ " ${gpu_types[*]} " == *" $type "* ]] || gpu_types+=("$type")
  mkdir -p "$BASE/dev/$name" "$BASE/spool/$name"
  # fake GPUs must be char devices (gotcha 3): symlinks to /dev/null
  for ((i=0; i<count; i++)); do ln -s /dev/null "$BASE/dev/$name/nvidia$i"; done
  [[ $MULTIHOST == 1 ]] && addr=$((addr + 1))
  echo "NodeName=$name NodeAddr=127.0.0.$addr NodeHostname=localhost Port=$port CPUs=32" \
       "RealMemory=${memory:-128000} Gres=gpu:$type:$count Feature=$type State=UNKNOWN" >> "$BASE/etc/slurm.conf"
  echo "NodeName=$name Name=gpu Type=$type File=$BASE/dev/$name/nvidia[0-$((count-1))]" \
       >> "$BASE/etc/gres.conf"
  port=$((port+1))
done
cat >> "$BASE/etc/slurm.conf" <<CONF
PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP PriorityTier=1
PartitionName=urgent Nodes=ALL MaxTime=INFINITE State=UP PriorityTier=10
CONF
if [[ $ACCOUNTING == 1 ]]; then
  # slurmctld reaches slurmdbd with the munge socket of AccountingStoragePass, not AuthInfo;
  # GPUs become TRES (AllocTRES/ReqTRES in sacct) only with slurmdbd
  sed -i -e 's#^AccountingStorageType=.*#AccountingStorageType=accounting_storage/slurmdbd#' \
    -e 's#^JobAcctGatherType=.*#JobAcctGatherType=jobacct_gather/linux#' "$BASE/etc/slurm.conf"
  tres=gres/gpu; for t in "${gpu_types[@]}"; do tres+=",gres/gpu:$t"; done
  cat >> "$BASE/etc/slurm.conf" <<CONF
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
AccountingStoragePass=$BASE/munge/munge.socket
AccountingStorageTRES=$tres
AccountingStorageEnforce=associations,limits,qos,safe
JobAcctGatherFrequency=30
CONF
fi
export SLURM_CONF=$BASE/etc/slurm.conf

# --- daemons (pid files under $BASE/run: down.sh stops exactly these) -----------------
munged -f --key-file="$BASE/etc/munge.key" --socket="$BASE/munge/munge.socket" \
  --pid-file="$BASE/run/munged.pid" --log-file="$BASE/log/munged.log" \
  --seed-file="$BASE/munge/munged.seed"
if [[ $ACCOUNTING == 1 ]]; then
  bash "$HERE/accounting.sh" "$BASE" "$DBD_PORT" "$SLURM_USER" || exit 1
fi
slurmctld -c -f "$SLURM_CONF"
for n in "${names[@]}"; do slurmd -f "$SLURM_CONF" -N "$n"; done

# --- readiness: the controller answers and every node is idle --------------------------
want=${#names[@]}; idle=0
for i in $(seq 1 120); do
  if scontrol ping >/dev/null 2>&1; then
    idle=$(sinfo -h -N -p gpu -t idle -o '%N' 2>/dev/null | wc -l)
    [[ $idle -eq $want ]] && break
  fi
  if (( i > 4 )); then
    p=$(cat "$BASE/run/slurmctld.pid" 2>/dev/null || true)
    [[ -n $p ]] && kill -0 "$p" 2>/dev/null || break
  fi
  sleep 0.5
done
if [[ $idle -ne $want ]]; then
  echo "cluster not ready: $idle/$want nodes idle" >&2; sinfo -N -l >&2 || true
  tail -20 "$BASE/log/slurmctld.log" >&2 || true; exit 1
fi

if [[ $WITH_RESTD == 1 ]]; then
  command -v slurmrestd >/dev/null || { echo "missing slurmrestd: run install.sh" >&2; exit 1; }
  plugins=openapi/v0.0.36,openapi/v0.0.37,openapi/v0.0.38   # dbv* are fatal without slurmdbd
  SLURMRESTD_SECURITY=disable_user_check setsid slurmrestd -s "$plugins" -a rest_auth/local \
    "unix:$BASE/run/slurmrestd.sock" >"$BASE/log/slurmrestd-local.log" 2>&1 </dev/null &
  echo $! > "$BASE/run/slurmrestd-local.pid"
  SLURM_JWT=daemon setsid slurmrestd -u nobody -s "$plugins" -a rest_auth/jwt \
    "127.0.0.1:$RESTD_PORT" >"$BASE/log/slurmrestd-jwt.log" 2>&1 </dev/null &
  echo $! > "$BASE/run/slurmrestd-jwt.pid"
  for i in $(seq 1 40); do
    [[ -S $BASE/run/slurmrestd.sock ]] && (exec 3<>"/dev/tcp/127.0.0.1/$RESTD_PORT") 2>/dev/null \
      && break
    sleep 0.25
  done
  [[ -S $BASE/run/slurmrestd.sock ]] || { echo "slurmrestd not ready" >&2; exit 1; }
fi
printf 'CTLD_PORT=%s\nRESTD_PORT=%s\nPORT0=%s\nEVENT_PORT=%s\nDBD_PORT=%s\n' "$CTLD_PORT" \
  "$RESTD_PORT" "$PORT0" "$EVENT_PORT" "$DBD_PORT" >"$BASE/etc/ports"
echo "ready: $want nodes (slurmctld port $CTLD_PORT, slurmrestd $RESTD_PORT, slurmd from $PORT0);"\
  "export SLURM_CONF=$SLURM_CONF"
