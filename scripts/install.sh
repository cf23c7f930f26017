#!/usr/bin/env bash
# Installs runthrough like an MPI, from what cargo built (`make install` builds first):
#
#   bin/rtrun                     the launcher
#   bin/mpiexec -> rtrun          the launcher under MPI's standard name
#   bin/mpicc, bin/mpicxx         compiler wrappers (abi/wrappers/mpicc.in)
#   lib/libmpi_abi.so.1           the MPI-5 standard ABI library
#   lib/libmpi_abi.so -> libmpi_abi.so.1   the link name (-lmpi_abi)
#   include/mpi.h, mpi_abi.h, mpi-ext.h    abi/include/
#   lib/pkgconfig/mpi-abi.pc, mpi.pc       pkg-config modules `mpi-abi` and `mpi`
#   share/man/man1/rtrun.1        man page: `rtrun --generate-man`, from the clap
#                                 definition `rtrun --help` comes from (launch/src/cli/)
#   share/runthrough/pympi_ulfm.h     for mpi4py's standard-ABI build (docs/ABI.md)
#   share/runthrough/installed-dirs   the directories this install created (for uninstall)
#
# usage: scripts/install.sh install|uninstall
#
# Environment:
#   PREFIX            where (absolute; default /usr/local)
#   DESTDIR           staging root prepended to every path written (packaging); the
#                     installed files name PREFIX only
#   PROFILE           cargo profile whose build is installed: release (default), debug, ...
#   CARGO_TARGET_DIR  cargo's target directory (default: target/ of this checkout)
#
# `uninstall` (same PREFIX and DESTDIR) removes exactly the files above, then the
# directories the installs created, where they are empty; nothing else.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
action=${1:-}
PREFIX=${PREFIX:-/usr/local}
DESTDIR=${DESTDIR:-}
PROFILE=${PROFILE:-release}
target=${CARGO_TARGET_DIR:-$root/target}
case $target in /*) ;; *) target=$root/$target ;; esac
build=$target/$PROFILE

die() {
  echo "install.sh: $*" >&2
  exit 1
}

case $PREFIX in
  /*) ;;
  *) die "PREFIX must be an absolute path, not '$PREFIX'" ;;
esac
PREFIX=${PREFIX%/}
[ -n "$PREFIX" ] || PREFIX=/
dest=$DESTDIR$PREFIX

# Every file the install puts there (and uninstall removes), relative to the prefix.
files=(
  bin/rtrun bin/mpiexec bin/mpicc bin/mpicxx
  lib/libmpi_abi.so.1 lib/libmpi_abi.so
  include/mpi.h include/mpi_abi.h include/mpi-ext.h
  lib/pkgconfig/mpi-abi.pc lib/pkgconfig/mpi.pc
  share/man/man1/rtrun.1
  share/runthrough/pympi_ulfm.h
  share/runthrough/installed-dirs
)
# The directories it may create, parents first ('.': the prefix itself).
dirs=(. bin lib lib/pkgconfig include share share/man share/man/man1 share/runthrough)
record=share/runthrough/installed-dirs

version() {
  awk '/^\[workspace.package\]/ { p = 1; next } /^\[/ { p = 0 }
       p && $1 == "version" { gsub(/"/, "", $3); print $3; exit }' "$root/Cargo.toml"
}

# put SRC DST MODE: copy to a temporary name beside DST, then rename (a running program
# that has the old file mapped keeps it).
put() {
  local tmp
  tmp=$(dirname "$2")/.$(basename "$2").tmp.$$
  cp "$1" "$tmp"
  chmod "$3" "$tmp"
  mv -f "$tmp" "$2"
  echo "install.sh: installed $2"
}

# link TARGET NAME: the symbolic link NAME -> TARGET (replacing NAME).
link() {
  ln -sfn "$1" "$2"
  echo "install.sh: installed $2 -> $1"
}

do_install() {
  local lib=$build/libmpi_abi.so rtrun=$build/rtrun v
  [ -f "$lib" ] || die "no $lib: build it first (make install PROFILE=$PROFILE builds it)"
  [ -x "$rtrun" ] || die "no $rtrun: build it first (make install PROFILE=$PROFILE builds it)"
  v=$(version)
  [ -n "$v" ] || die "no [workspace.package] version in $root/Cargo.toml"

  # Directories: record the ones this install creates (added to an earlier record).
  local created=() d
  if [ -f "$dest/$record" ]; then
    mapfile -t created <"$dest/$record"
  fi
  for d in "${dirs[@]}"; do
    if [ ! -d "$dest/$d" ]; then
      mkdir -p "$dest/$d"
      created+=("$d")
    fi
  done
  printf '%s\n' "${created[@]}" | awk 'NF && !seen[$0]++' >"$dest/$record.tmp"
  mv -f "$dest/$record.tmp" "$dest/$record"
  echo "install.sh: installed $dest/$record"

  put "$rtrun" "$dest/bin/rtrun" 755
  link rtrun "$dest/bin/mpiexec"

  local name lang var def
  for name in mpicc mpicxx; do
    case $name in
      mpicc) lang=C var=CC def=cc ;;
      mpicxx) lang=C++ var=CXX def=c++ ;;
    esac
    sed -e "s/@NAME@/$name/g" -e "s/@LANG@/$lang/g" -e "s/@VAR@/$var/g" \
      -e "s/@DEFAULT@/$def/g" -e "s/@VERSION@/$v/g" \
      "$root/abi/wrappers/mpicc.in" >"$dest/bin/.$name.gen.$$"
    put "$dest/bin/.$name.gen.$$" "$dest/bin/$name" 755
    rm -f "$dest/bin/.$name.gen.$$"
  done

  put "$lib" "$dest/lib/libmpi_abi.so.1" 755
  link libmpi_abi.so.1 "$dest/lib/libmpi_abi.so"

  for name in mpi.h mpi_abi.h mpi-ext.h; do
    put "$root/abi/include/$name" "$dest/include/$name" 644
  done
  # For mpi4py's standard-ABI build: CFLAGS="-include $prefix/share/runthrough/pympi_ulfm.h"
  # turns its ULFM calls on (docs/ABI.md).
  put "$root/abi/mpi4py/pympi_ulfm.h" "$dest/share/runthrough/pympi_ulfm.h" 644

  local pc
  for pc in mpi-abi mpi; do
    cat >"$dest/lib/pkgconfig/.$pc.gen.$$" <<EOF
prefix=$PREFIX
includedir=\${prefix}/include
libdir=\${prefix}/lib

Name: $pc
Description: runthrough's MPI-5 standard ABI library (libmpi_abi.so.1), fault-tolerant MPI over shared memory and libfabric
Version: $v
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lmpi_abi
EOF
    put "$dest/lib/pkgconfig/.$pc.gen.$$" "$dest/lib/pkgconfig/$pc.pc" 644
    rm -f "$dest/lib/pkgconfig/.$pc.gen.$$"
  done

  # The man page comes from the same clap definition as `rtrun --help` (it names the
  # version rtrun was built as).
  local page=$dest/share/man/man1/.rtrun.1.gen.$$
  "$rtrun" --generate-man >"$page" || { rm -f "$page"; die "$rtrun --generate-man failed"; }
  [ -s "$page" ] || { rm -f "$page"; die "$rtrun --generate-man printed nothing"; }
  put "$page" "$dest/share/man/man1/rtrun.1" 644
  rm -f "$page"
  echo "install.sh: runthrough $v installed in $dest"
}

do_uninstall() {
  local created=() f d path
  if [ -f "$dest/$record" ]; then
    # Longest path first: a directory before its parent.
    mapfile -t created < <(awk '{ print length($0) "\t" $0 }' "$dest/$record" | sort -rn | cut -f2-)
  fi
  for f in "${files[@]}"; do
    if [ -e "$dest/$f" ] || [ -L "$dest/$f" ]; then
      rm -f "$dest/$f"
      echo "install.sh: removed $dest/$f"
    fi
  done
  # Only the directories of the list above, and only when empty.
  for d in "${created[@]}"; do
    case " ${dirs[*]} " in
      *" $d "*) ;;
      *) continue ;;
    esac
    if [ "$d" = . ]; then path=$dest; else path=$dest/$d; fi
    if [ -d "$path" ] && rmdir "$path" 2>/dev/null; then
      echo "install.sh: removed $path/"
    fi
  done
}

case $action in
  install) do_install ;;
  uninstall) do_uninstall ;;
  *) die "usage: PREFIX=... [DESTDIR=...] [PROFILE=...] $0 install|uninstall" ;;
esac
