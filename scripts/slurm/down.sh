#!/bin/bash
# Stop what up.sh started, by the PIDs in $BASE/run (never by process name).
# Usage: scripts/slurm/down.sh [--purge]
BASE=${SLURM_LO_BASE:-/tmp/gpufair-slurm}
export SLURM_CONF=$BASE/etc/slurm.conf
alive() { [[ -n $1 ]] && kill -0 "$1" 2>/dev/null; }
pidof_file() { cat "$1" 2>/dev/null || true; }

# 1. cancel jobs while the daemons are up, so slurmstepd kills job processes and runs the
#    Epilog; suspended jobs must be resumed first or they cannot die.
if alive "$(pidof_file "$BASE/run/slurmctld.pid")"; then
  mapfile -t ids < <(squeue -h -o %A 2>/dev/null)
  if (( ${#ids[@]} )); then
    scontrol resume "${ids[@]}" >/dev/null 2>&1 || true
    scancel "${ids[@]}" 2>/dev/null || true
    for i in $(seq 1 40); do
      [[ -z $(squeue -h -t R,S,CG,CF -o %A 2>/dev/null) ]] && break; sleep 0.25
    done
  fi
fi

waitpids() {
  local i p alive_any
  for i in $(seq 1 40); do
    alive_any=0; for p in "$@"; do alive "$p" && alive_any=1; done
    [[ $alive_any == 0 ]] && return 0; sleep 0.25
  done
  for p in "$@"; do alive "$p" && { echo "SIGKILL $p" >&2; kill -KILL "$p"; }; done
}
# 2. daemons: slurmrestd, slurmd, slurmctld
pids=()
for f in "$BASE"/run/slurmrestd-*.pid "$BASE"/run/slurmd-*.pid "$BASE/run/slurmctld.pid"; do
  [[ -f $f ]] || continue
  p=$(pidof_file "$f"); alive "$p" || continue
  kill -TERM "$p"; pids+=("$p")
done
(( ${#pids[@]} )) && waitpids "${pids[@]}"
# accounting (up.sh --accounting): slurmdbd once slurmctld has sent it its last records, then
# its MariaDB; munged last (the others need it to say goodbye)
for f in "$BASE/run/slurmdbd.pid" "$BASE/run/mariadbd.pid"; do
  p=$(pidof_file "$f")
  alive "$p" && kill -TERM "$p" && waitpids "$p"
done
p=$(pidof_file "$BASE/run/munged.pid")
alive "$p" && kill -TERM "$p" && waitpids "$p"

# 3. strays: slurmstepd or job processes of THIS cluster (SLURM_CONF in their environment)
stray=()
for d in /proc/[0-9]*; do
  p=${d#/proc/}; [[ $p == "$$" || $p == "$PPID" ]] && continue
  env=$(tr '\0' '\n' 2>/dev/null < "$d/environ") || continue
  grep -qx "SLURM_CONF=$SLURM_CONF" <<<"$env" || continue
  if [[ $(cat "$d/comm" 2>/dev/null) == slurmstepd ]] || grep -q '^SLURM_JOB_ID=' <<<"$env"; then
    stray+=("$p")
  fi
done
if (( ${#stray[@]} )); then echo "killing stray job processes: ${stray[*]}" >&2; kill -KILL "${stray[@]}" 2>/dev/null; fi
[[ ${1:-} == --purge ]] && rm -rf "$BASE"
echo "down"
