#!/bin/bash
# Install Debian 12's Slurm 22.05 + munge (+ slurmrestd and the JWT plugin, and slurmdbd with
# MariaDB for `up.sh --accounting`) when missing. The packages start no daemons here (no
# systemd; policy-rc.d); up.sh starts private ones.
set -euo pipefail
PKGS=(slurmctld slurmd slurm-client munge slurmrestd slurm-wlm-jwt-plugin slurmdbd mariadb-server)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if (( ${#missing[@]} == 0 )); then echo "slurm packages already installed"; exit 0; fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "installed: ${missing[*]}"
