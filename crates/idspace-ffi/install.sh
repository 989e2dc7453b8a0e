#!/bin/sh
# Installs libidspace into PREFIX: include/idspace.h, lib/libidspace.a, lib/libidspace.so and
# lib/pkgconfig/idspace.pc, from a release build of this crate (built here unless
# IDSPACE_LIB_DIR names a directory that already holds libidspace_ffi.a and .so).
#
#   crates/idspace-ffi/install.sh /usr/local
#   cc example.c $(pkg-config --cflags --libs idspace)
#
# A script rather than cargo-c: cargo-c builds for minutes on a 2-core machine, and its newest
# release needs a newer Rust than the workspace's.
set -eu
if [ $# -ne 1 ]; then
  echo "usage: $0 PREFIX" >&2
  exit 2
fi
# Absolute, so that idspace.pc's paths (and the library's rpath) hold from any directory.
mkdir -p "$1"
prefix=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${IDSPACE_LIB_DIR:-}" ]; then
  cargo build --release -p idspace-ffi --manifest-path "$here/Cargo.toml"
  IDSPACE_LIB_DIR=${CARGO_TARGET_DIR:-$here/../../target}/release
fi
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$here/../../Cargo.toml" | head -n 1)
mkdir -p "$prefix/include" "$prefix/lib/pkgconfig"
cp "$here/include/idspace.h" "$prefix/include/idspace.h"
cp "$IDSPACE_LIB_DIR/libidspace_ffi.a" "$prefix/lib/libidspace.a"
cp "$IDSPACE_LIB_DIR/libidspace_ffi.so" "$prefix/lib/libidspace.so"
cat >"$prefix/lib/pkgconfig/idspace.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: idspace
Description: The Linux kernel's task-ID machinery as user-space concurrent data structures
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lidspace
Libs.private: -lpthread -ldl -lm -lrt -lutil -lgcc_s
PC
echo "installed libidspace $version into $prefix"
