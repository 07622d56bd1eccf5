#!/usr/bin/env bash
# Man pages against --help, both ways: for each program, every option in the option table of
# `PROGRAM --help` (lines starting with "-x, --name" or "--name") must be documented in its page's
# source (packaging/man/PROGRAM.N.scd, an option entry is a line starting with "*-"), and every
# option the page documents must be in --help. A failure names the page, the program and the
# missing options, so whoever adds or removes an option sees what to change. When the build made
# the pages (scdoc installed), each one must also exist and render with man.
# Usage: man_help_test.sh BUILD_DIR       (ISERKIT_BIN, ISERKIT_SOURCE from ctest)
set -euo pipefail
build=${1:?usage: man_help_test.sh BUILD_DIR}
bin=${ISERKIT_BIN:?}
pages=${ISERKIT_SOURCE:?}/packaging/man

declare -A page_of=([iserkit]=iserkit.1 [iserkit-nbd]=iserkit-nbd.1 [iserkit-fuse]=iserkit-fuse.1
                    [iserkit-target]=iserkit-target.8)
status=0
checked=0
for program in iserkit iserkit-nbd iserkit-fuse iserkit-target; do
  page=${page_of[$program]}
  src=$pages/$page.scd
  if [[ ! -x $bin/$program ]]; then
    echo "FAIL: $bin/$program was not built (the man page check needs it)"; status=1; continue
  fi
  [[ -f $src ]] || { echo "FAIL: $program has no man page source $src"; status=1; continue; }
  help=$("$bin/$program" --help 2>&1) || { echo "FAIL: $program --help exited non-zero"; status=1; continue; }
  in_help=$(grep -E '^ +(-[A-Za-z0-9], )?--[a-z0-9-]+' <<<"$help" | grep -oE -- '--[a-z0-9-]+' || true)
  # Short options without a long name ("-o arg"): name them by the short form.
  in_help+=$'\n'$(grep -E '^ +-[A-Za-z0-9] [a-z]' <<<"$help" | grep -oE -- '^ +-[A-Za-z0-9]' | tr -d ' ' || true)
  in_page=$(grep -E '^\*-' "$src" | grep -oE -- '--[a-z0-9-]+' | sort -u || true)
  in_page+=$'\n'$(grep -E '^\*-[A-Za-z0-9]\* _' "$src" | grep -oE -- '^\*-[A-Za-z0-9]' | tr -d '*' || true)
  in_help=$(sed '/^$/d' <<<"$in_help" | sort -u)
  in_page=$(sed '/^$/d' <<<"$in_page" | sort -u)
  [[ -n $in_help ]] || { echo "FAIL: found no options in $program --help (has its format changed?)"; status=1; continue; }
  missing_in_page=$(comm -23 <(echo "$in_help") <(echo "$in_page") | tr '\n' ' ')
  missing_in_help=$(comm -13 <(echo "$in_help") <(echo "$in_page") | tr '\n' ' ')
  if [[ -n ${missing_in_page// } ]]; then
    echo "FAIL: packaging/man/$page.scd does not document these options of $program --help: $missing_in_page"
    status=1
  fi
  if [[ -n ${missing_in_help// } ]]; then
    echo "FAIL: packaging/man/$page.scd documents options $program --help does not have: $missing_in_help"
    status=1
  fi
  checked=$((checked + $(wc -l <<<"$in_help")))
  if [[ -d $build/man ]]; then
    [[ -s $build/man/$page ]] || { echo "FAIL: the build did not make $build/man/$page"; status=1; continue; }
    if command -v man >/dev/null; then
      out=$(MANWIDTH=80 man -l "$build/man/$page" 2>&1) || { echo "FAIL: man -l $page: $out"; status=1; }
      grep -q "$program" <<<"$out" || { echo "FAIL: $page renders without its program's name"; status=1; }
    fi
  fi
done
[[ -f $pages/iserkit-target.toml.5.scd ]] || { echo "FAIL: no iserkit-target.toml(5) source"; status=1; }
if [[ -d $build/man && ! -s $build/man/iserkit-target.toml.5 ]]; then
  echo "FAIL: the build did not make iserkit-target.toml.5"; status=1
fi
# The configuration page's EXAMPLE must be a file iserkit-target accepts (unknown keys are errors).
tmp=$(mktemp -d /tmp/iserkit-man.XXXXXX)
target_pid=""
cleanup() { [[ -n $target_pid ]] && kill "$target_pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
sed -n '/^# EXAMPLE$/,/^# SEE ALSO$/p' "$pages/iserkit-target.toml.5.scd" | sed -n '/^```$/,/^```$/p' | sed '/^```$/d' |
  sed 's/^listen = .*/listen = ["127.0.0.1:0"]/' >"$tmp/target.toml"
if ! grep -q '^\[\[targets\]\]' "$tmp/target.toml"; then
  echo "FAIL: found no example with [[targets]] in iserkit-target.toml.5.scd"; status=1
else
  truncate -s 16M "$tmp/vol1.img"
  ISERKIT_DISCOVERY_SECRET=discovery-secret-0123 ISERKIT_ALICE_SECRET=alice-secret-0123456 \
    "$bin/iserkit-target" --config "$tmp/target.toml" --port-file "$tmp/port" >"$tmp/target.log" 2>&1 &
  target_pid=$!
  for _ in $(seq 100); do [[ -s $tmp/port ]] && break; kill -0 $target_pid 2>/dev/null || break; sleep 0.1; done
  if [[ ! -s $tmp/port ]]; then
    echo "FAIL: iserkit-target refused the example of iserkit-target.toml(5):"; cat "$tmp/target.log"; status=1
  fi
fi

((status == 0)) && echo "PASS: $checked options of 4 programs documented in their man pages, and no others"
exit $status
