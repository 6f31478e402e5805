#!/bin/bash
# Accounting for the loopback Slurm (`up.sh --accounting`): a private MariaDB and slurmdbd.
# MariaDB listens on a unix socket only (--skip-networking; its datadir, socket and pid file
# are under $BASE, no system config is read, no system service is touched); slurmdbd reaches
# it through that socket (libmariadb takes it from MYSQL_UNIX_PORT when StorageHost is
# localhost) and listens on 127.0.0.1:$DBD_PORT. Called by up.sh after munged and BEFORE
# slurmctld: slurmctld registers with slurmdbd when it starts. down.sh stops both by pid file.
# Usage (from up.sh): accounting.sh BASE DBD_PORT SLURM_USER
set -euo pipefail
BASE=$1; DBD_PORT=$2; SLURM_USER=$3
export SLURM_CONF=$BASE/etc/slurm.conf
for b in mariadbd mariadb-install-db mariadb slurmdbd sacctmgr; do
  command -v "$b" >/dev/null || { echo "missing $b: run scripts/slurm/install.sh" >&2; exit 1; }
done
SOCK=$BASE/run/mysqld.sock
mkdir -p "$BASE/mysql"
# the password only guards a socket under $BASE; it is random so no fixed secret is shipped
PW=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')

# --- MariaDB: own datadir, socket only, no system config (--no-defaults) ------------------
# latin1 with the client's charset ignored: the bytes a user typed (a job name that is not
# UTF-8) are stored and given back as they are, as on the many sites whose database kept
# MySQL's old latin1 default; with utf8mb4 MariaDB stores '?' for each such byte
mariadb-install-db --no-defaults --user=root --datadir="$BASE/mysql" \
  --auth-root-authentication-method=socket --skip-test-db >"$BASE/log/mariadb-install.log" 2>&1
setsid mariadbd --no-defaults --user=root --datadir="$BASE/mysql" --skip-networking \
  --socket="$SOCK" --pid-file="$BASE/run/mariadbd.pid" --log-error="$BASE/log/mariadb.log" \
  --character-set-server=latin1 --collation-server=latin1_swedish_ci --skip-character-set-client-handshake \
  --innodb-buffer-pool-size=32M --innodb-log-file-size=16M --innodb_lock_wait_timeout=900 \
  --skip-name-resolve </dev/null >/dev/null 2>&1 &
for _ in $(seq 1 240); do
  mariadb --no-defaults -S "$SOCK" -uroot -e 'select 1' >/dev/null 2>&1 && break
  sleep 0.25
done
mariadb --no-defaults -S "$SOCK" -uroot <<SQL || { tail -20 "$BASE/log/mariadb.log" >&2; exit 1; }
CREATE USER 'slurm'@'localhost' IDENTIFIED BY '$PW';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
SQL

# --- slurmdbd: its conf sits next to slurm.conf, mode 600, owned by SlurmUser -------------
cat > "$BASE/etc/slurmdbd.conf" <<CONF
AuthType=auth/munge
AuthInfo=socket=$BASE/munge/munge.socket
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=$SLURM_USER
PidFile=$BASE/run/slurmdbd.pid
LogFile=$BASE/log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$PW
StorageLoc=slurm_acct_db
CONF
chown "$SLURM_USER:" "$BASE/etc/slurmdbd.conf"
chmod 600 "$BASE/etc/slurmdbd.conf"
touch "$BASE/log/slurmdbd.log"; chown "$SLURM_USER:" "$BASE/log/slurmdbd.log"
MYSQL_UNIX_PORT=$SOCK slurmdbd
# readiness: the TCP port answers (a sacctmgr poll can hang for seconds a try)
ready=0
for _ in $(seq 1 240); do
  (exec 3<>"/dev/tcp/127.0.0.1/$DBD_PORT") 2>/dev/null && { ready=1; break; }
  sleep 0.25
done
if [[ $ready != 1 ]]; then
  echo "slurmdbd not ready on 127.0.0.1:$DBD_PORT" >&2; tail -20 "$BASE/log/slurmdbd.log" >&2
  exit 1
fi
# the cluster and the accounts every accounting cluster has; tests and record_history.py
# add their own users with `sacctmgr -i add user NAME Account=...`
sacctmgr -i add cluster loopback >/dev/null
sacctmgr -i add account research,vision,nlp Cluster=loopback Organization=lab >/dev/null
sacctmgr -i add user root Account=research,vision,nlp DefaultAccount=research >/dev/null
echo "slurmdbd ready on 127.0.0.1:$DBD_PORT (MariaDB on $SOCK)"
