# Shared helpers for scripts/*.sh: build the project and find its binaries. Source, don't run.
ISERKIT_SOURCE=${ISERKIT_SOURCE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
ISERKIT_BUILD=${ISERKIT_BUILD:-$ISERKIT_SOURCE/build}
# ccache hashes paths relative to the source tree, so every clone of the project shares one cache.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ISERKIT_SOURCE} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}

say() { printf '\033[1m== %s\033[0m\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# build_project [extra cmake args...]: configure (once) and build everything into $ISERKIT_BUILD.
build_project() {
  if [[ ! -f $ISERKIT_BUILD/build.ninja ]]; then
    cmake -S "$ISERKIT_SOURCE" -B "$ISERKIT_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  fi
  ninja -C "$ISERKIT_BUILD" -j"$(nproc)" >/dev/null || ninja -C "$ISERKIT_BUILD" -j1
}

# build_programs: configure (once) and build only the four programs into $ISERKIT_BUILD/bin
# (iserkit-target, iserkit, iserkit-nbd, iserkit-fuse), not the tests: what scripts/demo.sh needs.
# The build directory is the same one scripts/test.sh later completes.
build_programs() {
  if [[ ! -f $ISERKIT_BUILD/build.ninja ]]; then
    cmake -S "$ISERKIT_SOURCE" -B "$ISERKIT_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  fi
  local targets=() t
  for t in iserkit-target iserkit iserkit-nbd iserkit-fuse; do
    ninja -C "$ISERKIT_BUILD" -t query "$t" >/dev/null 2>&1 && targets+=("$t")
  done
  ninja -C "$ISERKIT_BUILD" -j"$(nproc)" "${targets[@]}" >/dev/null || ninja -C "$ISERKIT_BUILD" -j1 "${targets[@]}"
}

# wait_for_file PATH SECONDS: wait until PATH exists and is non-empty.
wait_for_file() {
  local path=$1 deadline=$((SECONDS + $2))
  until [[ -s $path ]]; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}
