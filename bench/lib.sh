# Shared helpers of the bench scripts (sourced; set `prog` first).
# shellcheck shell=bash

die() {
    echo "$prog: $*" >&2
    exit 1
}

log() {
    echo "$prog: $*" >&2
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
# shellcheck disable=SC2034  # used by the scripts that source this file
target=${CARGO_TARGET_DIR:-$root/target}
