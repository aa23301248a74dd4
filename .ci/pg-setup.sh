#!/usr/bin/env bash
# Installs PostgreSQL 15 and builds pgvector from Debian's own source package (pgvector is
# not packaged for Debian 12), then starts a throwaway server on a loopback port and prints
# its DSN on the last line. Idempotent: skips what is already there.
set -euo pipefail
PORT="${LIGHTMEM_PG_PORT:-55432}"
DATA="${LIGHTMEM_PG_DATA:-/tmp/lightmem-pg}"
PGBIN=/usr/lib/postgresql/15/bin
if [ ! -x "$PGBIN/postgres" ] || [ ! -f /usr/include/postgresql/15/server/postgres.h ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 postgresql-server-dev-15 build-essential >/dev/null
fi
if [ ! -f /usr/share/postgresql/15/extension/vector.control ]; then
  # The machine's own Debian mirror (first URI of its main archive), so no host is named here.
  mirror=$( (cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null || true) \
    | awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }
           $1 == "URIs:" && $2 !~ /security/ { print $2; exit }')
  if [ -z "$mirror" ]; then
    echo "pg-setup: no Debian mirror found in the apt sources" >&2
    exit 1
  fi
  echo "deb-src $mirror trixie main" > /etc/apt/sources.list.d/lightmem-trixie-src.list
  apt-get update -qq
  src=$(mktemp -d)
  (cd "$src" && apt-get source --download-only pgvector >/dev/null 2>&1 && dpkg-source -x pgvector_*.dsc pgvector >/dev/null)
  make -C "$src/pgvector" PG_CONFIG="$PGBIN/pg_config" OPTFLAGS="" >/dev/null
  make -C "$src/pgvector" PG_CONFIG="$PGBIN/pg_config" install >/dev/null
  rm -f /etc/apt/sources.list.d/lightmem-trixie-src.list
fi
if ! su postgres -c "$PGBIN/pg_ctl -D $DATA status" >/dev/null 2>&1; then
  rm -rf "$DATA"
  mkdir -p "$DATA" && chown postgres "$DATA"
  su postgres -c "$PGBIN/initdb -D $DATA -A trust -U postgres" >/dev/null
  su postgres -c "$PGBIN/pg_ctl -D $DATA -o '-p $PORT -k /tmp -c listen_addresses=127.0.0.1' -l $DATA/log -w start" >/dev/null 2>&1
fi
echo "postgresql://postgres@127.0.0.1:$PORT/postgres"
