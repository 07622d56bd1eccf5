# Shared helpers for scripts/*.sh: build the project and find its binaries. Source, don't run.
ISERKIT_SOURCE=${ISERKIT_SOURCE:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
ISERKIT_BUILD=${ISERKIT_BUILD:-$ISERKIT_SOURCE/build}
# ccache hashes paths relative to the source tree, so every clone of the project shares one cache.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ISERKIT_SOURCE} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}

say() { printf '\033[1m== %s\033[0m\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }
# usage: --help's text, the running script's header comment (line 2 up to the first line that is
# not a comment) without its "# ": it cannot drift from the header as a fixed line range did.
usage() { awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; }

# ninja_progress NINJA-ARGS...: ninja with a progress line every 10 % of its steps (and its errors)
# instead of a line per file; on failure ninja runs again on one job with its whole output.
ninja_progress() {
  local start=$SECONDS
  if ninja -j"$(nproc)" "$@" | awk -v start="$start" '
      /^\[[0-9]+\/[0-9]+\]/ { split(substr($1, 2, length($1) - 2), f, "/")
                                 p = int(100 * f[1] / f[2])
                                 if (p >= last + 10 || f[1] == f[2]) { printf "   %3d %% (%d of %d steps)\n", p, f[1], f[2]; last = p; fflush() } }
      /error:|FAILED:/ { print; fflush() }'; then
    say "built in $((SECONDS - start)) s"
  else
    ninja -j1 "$@"
  fi
}

# The options every script configures $ISERKIT_BUILD with: the same as scripts/test.sh's, so that
# a build one script made is the build the next one uses (-Werror changes every compile command:
# a build configured without it is rebuilt whole by scripts/test.sh).
ISERKIT_CMAKE_OPTIONS=(-G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DISERKIT_WERROR=ON)

# build_project [extra cmake args...]: configure (once) and build everything into $ISERKIT_BUILD.
build_project() {
  if [[ ! -f $ISERKIT_BUILD/build.ninja ]]; then
    cmake -S "$ISERKIT_SOURCE" -B "$ISERKIT_BUILD" "${ISERKIT_CMAKE_OPTIONS[@]}" "$@" >/dev/null
  fi
  ninja_progress -C "$ISERKIT_BUILD"
}

# build_programs: configure (once) and build only the four programs into $ISERKIT_BUILD/bin
# (iserkit-target, iserkit, iserkit-nbd, iserkit-fuse), not the tests: what scripts/demo.sh needs.
# The build directory is the same one scripts/test.sh later completes.
build_programs() {
  if [[ ! -f $ISERKIT_BUILD/build.ninja ]]; then
    cmake -S "$ISERKIT_SOURCE" -B "$ISERKIT_BUILD" "${ISERKIT_CMAKE_OPTIONS[@]}" >/dev/null
  fi
  local targets=() t
  for t in iserkit-target iserkit iserkit-nbd iserkit-fuse; do
    ninja -C "$ISERKIT_BUILD" -t query "$t" >/dev/null 2>&1 && targets+=("$t")
  done
  ninja_progress -C "$ISERKIT_BUILD" "${targets[@]}"
}

# wait_for_file PATH SECONDS: wait until PATH exists and is non-empty.
wait_for_file() {
  local path=$1 deadline=$((SECONDS + $2))
  until [[ -s $path ]]; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}
