#!/usr/bin/env bash
# A cluster of test "hosts" inside this machine: N network namespaces rt-h0..rt-h{N-1},
# each with `lo` up and one veth whose peer is enslaved to the bridge rtbr0 in the root
# namespace. Addresses are private and exist only here: 10.77.0.1/24 on the bridge,
# 10.77.0.{11+i}/24 in namespace rt-h{i}. No uplink, no default route, no NAT, no
# forwarding: no traffic leaves the machine. Only the network namespace differs, so the
# hosts share the file system, /dev/shm and pids with the root namespace.
#
#   netns-cluster.sh up N      create (idempotent: existing pieces are kept)
#   netns-cluster.sh down [N]  remove every rt-h* namespace, their veths and the bridge
#   netns-cluster.sh status [N]
#
# Then e.g.: rtrun -n 6 --host rt-h0=10.77.0.11,rt-h1=10.77.0.12,rt-h2=10.77.0.13 \
#              --launch-agent 'ip netns exec {host}' --kv-addr 10.77.0.1 prog
# Needs root and iproute2 (`ip`). Exit codes: 0 done, 1 failed, 2 usage, 3 cannot run
# here (not root, no `ip`, no network-namespace support) — with the reason on stderr.
set -euo pipefail

# NETNS_TAG (2 letters, default rt) and NETNS_NET (a /24 prefix, default 10.77.0) let
# several clusters live side by side (e.g. tests/startup.rs uses rs and 10.78.0, so it
# never shares a cluster that tests/multihost.rs brings up and down).
TAG=${NETNS_TAG:-rt}
[[ "$TAG" =~ ^[a-z]{2}$ ]] || { echo "NETNS_TAG must be two lowercase letters" >&2; exit 2; }
BRIDGE=${TAG}br0
PREFIX=${NETNS_NET:-10.77.0}
[[ "$PREFIX" =~ ^10\.[0-9]{1,3}\.[0-9]{1,3}$ ]] || { echo "NETNS_NET must look like 10.X.Y" >&2; exit 2; }
BRIDGE_ADDR="$PREFIX.1/24"
MAX_HOSTS=64

usage() {
  echo "usage: $0 up N | down [N] | status [N]   (N in 1..=$MAX_HOSTS)" >&2
  exit 2
}

cannot() {
  echo "netns-cluster: cannot run here: $*" >&2
  exit 3
}

say() { echo "netns-cluster: $*"; }

ns_name() { echo "${TAG}-h$1"; }
ns_addr() { echo "$PREFIX.$((11 + $1))"; }
# veth ends: root side (on the bridge) and namespace side. At most 15 characters.
veth_root() { echo "${TAG}b-h$1"; }
veth_ns() { echo "${TAG}n-h$1"; }

preflight() {
  command -v ip >/dev/null 2>&1 || cannot "the 'ip' command (iproute2) is not installed"
  [ "$(id -u)" -eq 0 ] || cannot "not root (network namespaces and bridges need CAP_NET_ADMIN)"
  [ -e /proc/self/ns/net ] || cannot "this kernel has no network namespace support"
  # Probe namespace creation once (it fails in unprivileged containers even as root).
  local probe="rt-probe-$$"
  if ! ip netns add "$probe" 2>/dev/null; then
    cannot "'ip netns add' failed (no network-namespace support or not permitted)"
  fi
  ip netns del "$probe" 2>/dev/null || true
}

ns_exists() { ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$1"; }
link_exists() { ip link show "$1" >/dev/null 2>&1; }

up() {
  local n=$1
  preflight
  if link_exists "$BRIDGE"; then
    say "bridge $BRIDGE exists"
  else
    ip link add "$BRIDGE" type bridge || cannot "cannot create bridge $BRIDGE (no bridge support?)"
    say "created bridge $BRIDGE"
  fi
  if ! ip -4 addr show dev "$BRIDGE" | grep -q "inet $BRIDGE_ADDR"; then
    ip addr add "$BRIDGE_ADDR" dev "$BRIDGE"
    say "address $BRIDGE_ADDR on $BRIDGE"
  fi
  ip link set "$BRIDGE" up
  # With br_netfilter loaded, frames crossing the bridge go through iptables' FORWARD
  # chain, which a Docker install sets to DROP: host-to-host traffic would vanish (only
  # the bridge address, in the root namespace, stays reachable). Accept what stays on
  # this bridge, and nothing else.
  if command -v iptables >/dev/null 2>&1 && iptables -S FORWARD >/dev/null 2>&1; then
    if ! iptables -C FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT 2>/dev/null; then
      iptables -I FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT
      say "iptables: FORWARD accepts $BRIDGE to $BRIDGE"
    fi
  fi
  local i ns vr vn addr
  for ((i = 0; i < n; i++)); do
    ns=$(ns_name "$i")
    vr=$(veth_root "$i")
    vn=$(veth_ns "$i")
    addr=$(ns_addr "$i")
    if ns_exists "$ns"; then
      say "namespace $ns exists"
    else
      ip netns add "$ns"
      say "created namespace $ns"
    fi
    ip -n "$ns" link set lo up
    if ! link_exists "$vr"; then
      # A stale namespace-side end (root side gone) is recreated.
      ip -n "$ns" link del "$vn" >/dev/null 2>&1 || true
      ip link add "$vr" type veth peer name "$vn"
      ip link set "$vn" netns "$ns"
      say "created veth $vr (on $BRIDGE) <-> $vn (in $ns)"
    fi
    ip link set "$vr" master "$BRIDGE"
    ip link set "$vr" up
    if ! ip -n "$ns" -4 addr show dev "$vn" | grep -q "inet $addr/24"; then
      ip -n "$ns" addr add "$addr/24" dev "$vn"
      say "address $addr/24 on $vn in $ns"
    fi
    ip -n "$ns" link set "$vn" up
  done
  # Wait until every namespace reaches the bridge address: a TCP connect to a closed port
  # answered with "refused" proves the path (no `ping` needed).
  local deadline=$((SECONDS + 10)) err
  for ((i = 0; i < n; i++)); do
    ns=$(ns_name "$i")
    while :; do
      err=$(ip netns exec "$ns" timeout 1 bash -c "echo > /dev/tcp/$PREFIX.1/9" 2>&1) && break
      case "$err" in *refused*) break ;; esac
      if [ "$SECONDS" -ge "$deadline" ]; then
        echo "netns-cluster: $ns cannot reach $PREFIX.1 through $BRIDGE: $err" >&2
        exit 1
      fi
      sleep 0.2
    done
  done
  say "up: $n hosts ${TAG}-h0..${TAG}-h$((n - 1)) at $(ns_addr 0)..$(ns_addr $((n - 1))), bridge $BRIDGE $BRIDGE_ADDR"
}

down() {
  command -v ip >/dev/null 2>&1 || cannot "the 'ip' command (iproute2) is not installed"
  [ "$(id -u)" -eq 0 ] || cannot "not root"
  local ns i
  # Every rt-h* namespace, whatever N was used for `up`.
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${TAG}-h[0-9]+\$" || true); do
    i=${ns#"${TAG}"-h}
    ip link del "$(veth_root "$i")" >/dev/null 2>&1 || true
    ip netns del "$ns"
    say "removed namespace $ns"
  done
  # Root-side veth ends left without a namespace.
  for vr in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^${TAG}b-h[0-9]+\$" || true); do
    ip link del "$vr" >/dev/null 2>&1 || true
    say "removed veth $vr"
  done
  if link_exists "$BRIDGE"; then
    ip link del "$BRIDGE"
    say "removed bridge $BRIDGE"
  fi
  while command -v iptables >/dev/null 2>&1 && iptables -C FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT 2>/dev/null; do
    iptables -D FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT
    say "iptables: removed the FORWARD rule of $BRIDGE"
  done
  say "down"
}

status() {
  command -v ip >/dev/null 2>&1 || cannot "the 'ip' command (iproute2) is not installed"
  local rc=0 ns
  if link_exists "$BRIDGE"; then
    say "bridge $BRIDGE: $(ip -br -4 addr show dev "$BRIDGE" | awk '{print $2, $3}')"
  else
    say "bridge $BRIDGE: absent"
    rc=1
  fi
  local list
  list=$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${TAG}-h[0-9]+\$" | sort -V || true)
  if [ -n "${1:-}" ]; then
    list=""
    for ((i = 0; i < $1; i++)); do list="$list $(ns_name "$i")"; done
  fi
  for ns in $list; do
    if ns_exists "$ns"; then
      say "$ns: $(ip -n "$ns" -br -4 addr show | awk '$1 != "lo" {print $1, $2, $3}' | tr '\n' ' ')"
    else
      say "$ns: absent"
      rc=1
    fi
  done
  return $rc
}

# Validates N in the current shell (a failure exits with the usage message).
check_count() {
  if ! [[ "${1:-}" =~ ^[0-9]+$ ]] || [ "$1" -lt 1 ] || [ "$1" -gt "$MAX_HOSTS" ]; then
    usage
  fi
}

case "${1:-}" in
  up) [ $# -eq 2 ] || usage; check_count "$2"; up "$2" ;;
  down) [ $# -le 2 ] || usage; [ $# -lt 2 ] || check_count "$2"; down ;;
  status)
    [ $# -le 2 ] || usage
    if [ $# -eq 2 ]; then check_count "$2"; status "$2"; else status; fi
    ;;
  *) usage ;;
esac
