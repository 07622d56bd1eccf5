#!/usr/bin/env bash
# The README's first command (scripts/demo.sh) builds what the demo runs and nothing else:
# scripts/lib.sh's build_programs is run on a freshly configured build directory with a `ninja`
# on PATH that only lists the commands the build needs (ninja -t commands), and the plan must link the four programs and compile no test
# (nothing under tests/, no GoogleTest), with the options scripts/test.sh configures (-Werror), so
# that test.sh reuses its objects. demo.sh must call build_programs.
set -euo pipefail
source_dir=${ISERKIT_SOURCE:?}
command -v ninja >/dev/null || { echo "SKIP: ninja is not installed" >&2; exit 77; }
real_ninja=$(command -v ninja)
tmp=$(mktemp -d /tmp/iserkit-demo-build.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

grep -q '^build_programs$' "$source_dir/scripts/demo.sh" || fail "scripts/demo.sh does not call build_programs"

mkdir "$tmp/shim"
cat >"$tmp/shim/ninja" <<SHIM
#!/usr/bin/env bash
# A dry-run ninja for the demo's build directory: records the plan, changes nothing. Everything
# else (cmake's --version and try_compile builds, "-t query") runs the real ninja.
if [[ " \$* " != *" -C $tmp/build "* || " \$* " == *" -t "* ]]; then exec "$real_ninja" "\$@"; fi
# "-t commands" lists every command the targets need (all of them, the directory being fresh); a
# dry run (-n) would stop at CMake's glob check (CONFIGURE_DEPENDS).
"$real_ninja" "\$@" -t commands >>"$tmp/plan" 2>&1
SHIM
chmod +x "$tmp/shim/ninja"
PATH=$tmp/shim:$PATH ISERKIT_SOURCE=$source_dir ISERKIT_BUILD=$tmp/build \
  bash -c 'source "$ISERKIT_SOURCE/scripts/lib.sh" && build_programs' || fail "build_programs failed"
[[ -s $tmp/plan ]] || fail "build_programs ran no ninja"
for program in iserkit-target iserkit iserkit-nbd iserkit-fuse; do
  grep -qE -- "-o bin/$program( |$)" "$tmp/plan" || fail "the demo's build does not link $program"
done
if grep -E -- '-c [^ ]*/tests/|gtest' "$tmp/plan" | head -5 | grep .; then
  fail "the demo's build compiles tests (above)"
fi
# scripts/test.sh builds in the same directory with warnings as errors: the demo's objects are
# compiled with the same options (ISERKIT_CMAKE_OPTIONS), or test.sh would compile them all again.
without_werror=$(grep -E -- '/c\+\+ .* -c ' "$tmp/plan" | grep -v -- ' -Werror ' || true)
if [[ -n $without_werror ]]; then
  printf '%s\n' "$without_werror" | sed -n 1,3p >&2
  fail "the demo compiles without -Werror (above): scripts/test.sh would rebuild every object"
fi
grep -qE -- '/c\+\+ .* -Werror .* -c ' "$tmp/plan" || fail "no compile command found in the demo's plan"
echo "PASS: build_programs links the 4 programs and compiles $(grep -c -- ' -c ' "$tmp/plan") sources, none of them tests"
