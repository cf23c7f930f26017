#!/usr/bin/env bash
# A cluster of container "nodes" for multi-node tests (T4): N containers node1..nodeN
# on a private bridge network, each with its own hostname and address, its own PID
# namespace and its own /dev/shm, the project checkout mounted read-only at the same path,
# so `rtrun --launch-agent 'docker exec -i {host}'` can start the project's binaries in them.
# Whole-node faults are then `docker kill` (crash), `docker pause` (hang), `docker network
# disconnect` (partition) and `tc netem` inside a node (delay, loss).
#
#   cluster.sh up N [--slurm]   build the image if needed (cached), start N nodes (1..=16)
#                               (--slurm: also munge + slurmctld in `slurmctl`, slurmd in
#                               every node; see docs/SLURM.md)
#   cluster.sh down             remove every node container and the network
#   cluster.sh status           what runs, and the rtrun command line to use
#   cluster.sh image            build the image only
#   cluster.sh kv-addr          print the bridge address rtrun's --kv-addr must use
#
# The image is built from Debian packages only (no registry): `debootstrap
# --variant=minbase bookworm` into a temporary directory, then `docker import`; it is
# tagged with a hash of this recipe, so a changed package list builds a new one, and the
# temporary root file system is removed. Addresses: 10.79.0.0/24 (RT_CLUSTER_NET=10.X.Y to
# change), the host side of the bridge is .1, node i is .(10+i), slurmctl is .2. The
# network is `--internal`: nothing routes out of it.
#
# RT_CLUSTER_NAME=X (default empty) runs a second cluster beside the default one: the
# container names get the prefix (Xnode1.., Xslurmctl), the network is rt-cluster-X, the
# bridge rtc-X, the label org.runthrough.cluster.X and the Slurm state
# /var/tmp/rt-cluster-X; host names stay node1..N and slurmctl (each container's
# /etc/hosts names every node), so `--host node1,..` is the same and the agent is
# `--launch-agent 'docker exec -i X{host}'`. Give it its own RT_CLUSTER_NET too.
#
# Exit codes: 0 done, 1 failed, 2 usage, 3 cannot run here (no docker, not root), with the
# reason on stderr.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROJECT=$(cd "$HERE/.." && pwd)
PREFIX=${RT_CLUSTER_NET:-10.79.0}
[[ "$PREFIX" =~ ^10\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || { echo "RT_CLUSTER_NET must look like 10.X.Y" >&2; exit 2; }
NAME=${RT_CLUSTER_NAME:-}
[[ "$NAME" =~ ^[a-z0-9]{0,8}$ ]] || { echo "RT_CLUSTER_NAME must be at most 8 of [a-z0-9]" >&2; exit 2; }
NETWORK=rt-cluster${NAME:+-$NAME}
BRIDGE=rtc${NAME:+-$NAME}
[ -n "$NAME" ] || BRIDGE=rtc0
LABEL=org.runthrough.cluster${NAME:+.$NAME}
MAX_NODES=16
# What goes into the image: the runtime libraries of the project's binaries, Slurm and
# munge, PMIx, and the tools the fault tests use inside a node (tc, iptables, ps, kill,
# ping).
PACKAGES=adduser,libfabric1,libhwloc15,libpmix2,iproute2,iptables,procps,iputils-ping,python3,libnuma1,tini
PACKAGES_2="munge slurmd slurmctld slurm-client"
RECIPE_HASH=$( (echo "$PACKAGES $PACKAGES_2"; echo bookworm-minbase-v2) | sha256sum | cut -c1-12)
IMAGE=runthrough-node:$RECIPE_HASH
MIRROR=${RT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# RT_CLUSTER_MOUNTS: more directories (colon-separated) mounted read-only at the same
# path, e.g. a CARGO_TARGET_DIR outside the checkout.
MOUNTS=()
IFS=: read -r -a _extra <<<"${RT_CLUSTER_MOUNTS:-}"
for d in "${_extra[@]}"; do
  [ -n "$d" ] && [ -d "$d" ] && case "$d/" in "$PROJECT"/*) ;; *) MOUNTS+=(-v "$d:$d:ro") ;; esac
done

say() { echo "cluster: $*"; }
die() { echo "cluster: $*" >&2; exit 1; }
cannot() { echo "cluster: cannot run here: $*" >&2; exit 3; }
usage() { echo "usage: $0 up N [--slurm] | down | status | image | kv-addr" >&2; exit 2; }

preflight() {
  command -v docker >/dev/null 2>&1 || cannot "docker is not installed"
  docker info >/dev/null 2>&1 || cannot "the docker daemon does not answer (docker info failed)"
}

image_exists() { docker image inspect "$IMAGE" >/dev/null 2>&1; }

build_image() {
  if image_exists; then
    return 0
  fi
  [ "$(id -u)" -eq 0 ] || cannot "building the image needs root (debootstrap)"
  if ! command -v debootstrap >/dev/null 2>&1; then
    say "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null \
      || die "apt-get install debootstrap failed"
  fi
  local root
  root=$(mktemp -d /var/tmp/rt-rootfs.XXXXXX)
  # Whatever happens, the temporary root file system does not stay behind.
  trap 'rm -rf --one-file-system "'"$root"'"' EXIT
  say "building $IMAGE: debootstrap bookworm into $root (a few minutes, once)"
  local t0=$SECONDS
  # Two stages: debootstrap with the libraries, then apt-get inside the new root for
  # munge and Slurm (as --include, munge's configure step failed one run in two here and
  # left Slurm unconfigured). No service is started inside the root (policy-rc.d).
  if ! debootstrap --variant=minbase --include="$PACKAGES" bookworm "$root" "$MIRROR" >"$root.log" 2>&1; then
    grep -E '^(E|W):' "$root.log" | tail -5 >&2 || true
    rm -f "$root.log"
    die "debootstrap failed"
  fi
  rm -f "$root.log"
  # munge's postinst makes a key with `su munge -c mungekey`, which fails in a chroot;
  # with a key present it only fixes its owner. That placeholder is removed again: each
  # cluster gets its own key at `up --slurm`.
  mkdir -p "$root/etc/munge"
  head -c 1024 /dev/urandom >"$root/etc/munge/munge.key"
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
  chmod +x "$root/usr/sbin/policy-rc.d"
  if ! chroot "$root" sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends $PACKAGES_2" >"$root.log" 2>&1; then
    tail -20 "$root.log" >&2
    rm -f "$root.log"
    die "apt-get install $PACKAGES_2 inside the image root failed"
  fi
  rm -f "$root.log" "$root/usr/sbin/policy-rc.d" "$root/etc/munge/munge.key"
  # Smaller image, no stale package lists; a machine-id for munge/slurm; no daemons
  # started by package scripts inside the image.
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* \
    "$root"/usr/share/man/* "$root"/usr/share/locale/*
  : >"$root/etc/machine-id"
  tar -C "$root" -c . | docker import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'CMD ["/bin/bash"]' \
    -m "runthrough node image: debootstrap bookworm minbase + $PACKAGES + $PACKAGES_2" - "$IMAGE" >/dev/null \
    || die "docker import failed"
  rm -rf --one-file-system "$root"
  trap - EXIT
  # Images of older recipes are not kept.
  docker images --format '{{.Repository}}:{{.Tag}}' runthrough-node | grep -vx "$IMAGE" | xargs -r docker rmi >/dev/null 2>&1 || true
  say "image $IMAGE built in $((SECONDS - t0)) s"
}

nodes() { docker ps -a --filter "label=$LABEL" --format '{{.Names}}' | sort -V; }

ensure_network() {
  if docker network inspect "$NETWORK" >/dev/null 2>&1; then
    return 0
  fi
  docker network create --driver bridge --internal --subnet "$PREFIX.0/24" --gateway "$PREFIX.1" \
    --label "$LABEL=1" -o com.docker.network.bridge.name="$BRIDGE" "$NETWORK" >/dev/null \
    || die "docker network create $NETWORK failed"
}

CORES=1
# Common options of every container: own hostname, address, PID namespace and /dev/shm
# (1 GiB: the segment of 8 ranks with 1 MiB bulk buffers fits), the checkout read-only at
# the same path (so `rtrun`'s program path means the same inside), NET_ADMIN for tc netem.
start_node() {
  local name=$1 ip=$2
  shift 2
  docker run -d --name "$NAME$name" --hostname "$name" --label "$LABEL=1" \
    --network "$NETWORK" --ip "$ip" --shm-size 1g --cap-add NET_ADMIN -e RT_NODE_CORES="$CORES" \
    --init -v "$PROJECT:$PROJECT:ro" -w "$PROJECT" "${MOUNTS[@]}" \
    "$@" "$IMAGE" sleep infinity >/dev/null || die "docker run $name failed"
}

up() {
  local n=$1 slurm=$2
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le $MAX_NODES ] || usage
  preflight
  build_image
  if [ -n "$(nodes)" ]; then
    say "removing the previous cluster first"
    down >/dev/null
  fi
  ensure_network
  # The nodes share this machine's cores: each is told its share (RT_NODE_CORES, at
  # least 1; RT_CLUSTER_CORES to override), so its ranks scale the detector timeout and
  # back off their waits as on a node that size. Without it every node sees all the
  # cores, its ranks spin in their waits and starve the others' (a false failure in the
  # first run here). A CPU quota (--cpus) would tell them too, but throttles a node in
  # bursts of tens of milliseconds that no real node has.
  CORES=${RT_CLUSTER_CORES:-$(( ($(nproc) + n - 1) / n ))}
  local i
  # Every container knows every host name (a prefixed cluster's containers are not
  # found by host name in Docker's DNS).
  local extra=(--add-host "slurmctl:$PREFIX.2")
  for i in $(seq 1 "$n"); do extra+=(--add-host "node$i:$PREFIX.$((10 + i))"); done
  if [ "$slurm" = 1 ]; then
    extra+=(-v "$(slurm_dir):/etc/slurm:ro" -v "$(slurm_dir)/munge.key:/etc/munge/munge.key.src:ro")
    slurm_config "$n"
    start_node slurmctl "$PREFIX.2" "${extra[@]}"
  fi
  for i in $(seq 1 "$n"); do
    start_node "node$i" "$PREFIX.$((10 + i))" "${extra[@]}"
  done
  if [ "$slurm" = 1 ]; then
    slurm_start "$n"
  fi
  say "$n nodes up on $NETWORK ($PREFIX.0/24), image $IMAGE"
  hint "$n"
}

hint() {
  local n=$1 hosts
  hosts=$(seq -s, -f 'node%g' 1 "$n")
  echo "  target/release/rtrun -n $((2 * n)) --host $hosts --launch-agent 'docker exec -i $NAME{host}' --kv-addr $PREFIX.1 target/release/examples/ring"
}

down() {
  preflight
  local list
  list=$(nodes)
  if [ -n "$list" ]; then
    # Paused containers cannot be removed: unpause first (errors ignored: most are not).
    # shellcheck disable=SC2086
    docker unpause $list >/dev/null 2>&1 || true
    # shellcheck disable=SC2086
    docker rm -f $list >/dev/null 2>&1 || true
  fi
  if docker network inspect "$NETWORK" >/dev/null 2>&1; then
    docker network rm "$NETWORK" >/dev/null 2>&1 || true
  fi
  # Whatever raced with this (another `down`), nothing of this cluster may remain.
  [ -z "$(nodes)" ] || die "containers left: $(nodes | tr '\n' ' ')"
  ! docker network inspect "$NETWORK" >/dev/null 2>&1 || die "network $NETWORK left"
  rm -rf "$(slurm_dir)"
  rmdir "$(dirname "$(slurm_dir)")" 2>/dev/null || true
  say "down (image $IMAGE kept)"
}

status() {
  preflight
  if image_exists; then say "image $IMAGE present"; else say "image $IMAGE not built"; fi
  local list
  list=$(nodes)
  if [ -z "$list" ]; then
    say "no nodes"
    return 0
  fi
  docker ps -a --filter "label=$LABEL" --format '{{.Names}}\t{{.Status}}' | sort -V
  hint "$(echo "$list" | grep -c "^${NAME}node")"
}

# --- Slurm (slurmctld + munge in `slurmctl`, slurmd in each node) --------------------------

slurm_dir() { echo "${RT_CLUSTER_STATE:-/var/tmp/rt-cluster${NAME:+-$NAME}}/slurm"; }

slurm_config() {
  local n=$1 dir
  dir=$(slurm_dir)
  rm -rf "$dir"
  mkdir -p "$dir"
  dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none
  chmod 0400 "$dir/munge.key"
  # Each node has every core of this machine as far as Slurm sees (--cpus is a quota).
  sed -e "s/@NODES@/node[1-$n]/g" -e "s/@CTL_ADDR@/$PREFIX.2/g" -e "s/@CPUS@/$(nproc)/g" \
    "$HERE/slurm.conf.in" >"$dir/slurm.conf"
}

# Starts munged everywhere, slurmctld on slurmctl, slurmd on each node, and waits until
# every node is idle.
slurm_start() {
  local n=$1 c i
  # Slurm's mpi/pmix plugin dlopens pmix2/lib/libpmix.so, which only libpmix-dev has.
  for c in slurmctl $(seq -f 'node%g' 1 "$n"); do
    docker exec "$NAME$c" sh -c 'for d in /usr/lib/*/pmix2/lib; do ln -sf libpmix.so.2 "$d/libpmix.so"; done &&
      install -o munge -g munge -m 0400 /etc/munge/munge.key.src /etc/munge/munge.key &&
      mkdir -p /run/munge /var/spool/slurmd /var/spool/slurmctld /var/log/slurm &&
      chown munge:munge /run/munge && chown slurm:slurm /var/spool/slurmctld /var/log/slurm &&
      runuser -u munge -- munged --force' || die "munged did not start on $NAME$c"
  done
  docker exec "${NAME}slurmctl" sh -c 'slurmctld -i >/var/log/slurm/ctld.out 2>&1' || die "slurmctld did not start"
  for i in $(seq 1 "$n"); do
    docker exec "${NAME}node$i" sh -c 'slurmd -N $(hostname) >/var/log/slurm/slurmd.out 2>&1' \
      || die "slurmd did not start on ${NAME}node$i"
  done
  local t0=$SECONDS
  while :; do
    local idle
    idle=$(docker exec "${NAME}slurmctl" sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2=="idle"' | wc -l)
    [ "$idle" -ge "$n" ] && break
    if [ $((SECONDS - t0)) -gt 60 ]; then
      docker exec "${NAME}slurmctl" sinfo -N >&2 || true
      docker exec "${NAME}slurmctl" tail -20 /var/log/slurm/slurmctld.log >&2 || true
      die "Slurm nodes not idle after 60 s"
    fi
    sleep 1
  done
  say "slurm: $n nodes idle in $((SECONDS - t0)) s (srun from any node, e.g. docker exec ${NAME}node1 srun -N $n ...)"
}

cmd=${1:-}
case "$cmd" in
  up)
    [ $# -ge 2 ] || usage
    slurm=0
    [ "${3:-}" = "--slurm" ] && slurm=1
    up "$2" "$slurm"
    ;;
  down) down ;;
  status) status ;;
  image) preflight; build_image; say "image $IMAGE ready" ;;
  kv-addr) echo "$PREFIX.1" ;;
  *) usage ;;
esac
