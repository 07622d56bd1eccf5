#!/usr/bin/env bash
# tests/lab/interop_matrix.py without a VM: two partial "lab runs" (results.tsv as guest/lib.sh
# writes them) merge into the store; the page shows pass only when every check behind a cell passed,
# FAIL when one failed, "skipped", "not run" for scenarios no run recorded, "not tested" for cells
# no check covers; a newer run of a scenario replaces its older results; a malformed file is refused.
set -euo pipefail
export PATH=/usr/bin:$PATH   # the system python3 (a pyenv shim costs seconds per call)
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/iserkit-interop.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; echo "--- page"; cat "$tmp/interop.md" 2>/dev/null; exit 1; }
m() { python3 "$here/interop_matrix.py" --cells "$tmp/cells.tsv" --store "$tmp/store.tsv" --out "$tmp/interop.md" "$@"; }
printf '%s\t%s\t%s\n' login A 'a/login' login B 'b/login b/transport' io A 'a/io a/backing' io B 'b/io' \
  chap C 'c/chap' >"$tmp/cells.tsv"
printf '%s\t%s\t%s\t%s\t%s\n' a login PASS 1.0 "logged in" a io PASS 2.0 ok a backing FAIL 0.1 "differs" >"$tmp/run1.tsv"
m --results "$tmp/run1.tsv" --commit c1 --date d1
row() { grep "^| $1 |" "$tmp/interop.md"; }
row login | grep -q '| pass (d1, c1) \[1\] | not run (b) \[2\] |' || fail "login row after run 1: $(row login)"
row io | grep -q '| \*\*FAIL\*\* \[3\] |' || fail "a failed check must fail the cell: $(row io)"
row chap | grep -q '| not tested | not tested |' || fail "cells without checks: $(row chap)"
grep -q '`a/backing` FAIL (d1, c1, kernel 6.1 (build not recorded)): differs' "$tmp/interop.md" ||
  fail "the notes do not name the failed check (and a run without a kernel column as 6.1's)"
# run 2: only scenario b (a --only run); a's results stay, b's appear; one of b's checks skipped
printf '%s\t%s\t%s\t%s\t%s\n' b login PASS 1 ok b transport PASS 1 iser b io SKIP 0 "no disk" >"$tmp/run2.tsv"
m --results "$tmp/run2.tsv" --commit c2 --date d2
row login | grep -q '| pass (d1, c1) \[1\] | pass (d2, c2) \[2\] |' || fail "login row after run 2: $(row login)"
row io | grep -q 'skipped' || fail "a skipped check: $(row io)"
# run 3: a again, now passing: replaces a's older rows (no stale FAIL left)
printf '%s\t%s\t%s\t%s\t%s\n' a login PASS 1 ok a io PASS 1 ok a backing PASS 1 same >"$tmp/run3.tsv"
m --results "$tmp/run3.tsv" --commit c3 --date d3
row io | grep -q '| pass (d3, c3) ' || fail "a newer run must replace the older results: $(row io)"
[[ $(grep -c $'^a\t' "$tmp/store.tsv") == 3 ]] || fail "the store keeps stale rows: $(cat "$tmp/store.tsv")"
# the page regenerates from the store alone (no new results)
m && row login | grep -q 'pass (d2, c2)' || fail "regeneration from the store"
# run 4: a on another kernel (results.tsv's sixth column): a second table; 6.1's results stay
printf '%s\t%s\t%s\t%s\t%s\t%s\n' a login PASS 1 ok 7.3.4+deb13-amd64 a io FAIL 1 bad 7.3.4+deb13-amd64 \
  a backing PASS 1 same 7.3.4+deb13-amd64 >"$tmp/run4.tsv"
m --results "$tmp/run4.tsv" --commit c4 --date d4
grep -q '^## Linux 6.1 (6.1 (build not recorded))$' "$tmp/interop.md" || fail "no 6.1 table"
grep -q '^## Linux 7.3 (7.3.4+deb13-amd64)$' "$tmp/interop.md" || fail "no 7.3 table"
sed -n '/^## Linux 6.1/,/^## Linux 7.3/p' "$tmp/interop.md" | grep -q '^| io | pass (d3, c3) ' ||
  fail "a run on 7.3 must not replace 6.1's results"
sed -n '/^## Linux 7.3/,/^## Notes/p' "$tmp/interop.md" | grep -q '^| io | \*\*FAIL\*\* .* | not run (b) ' ||
  fail "7.3's io row: a FAIL for a, b not run on 7.3"
grep -q '`a/io` FAIL (d4, c4, kernel 7.3.4+deb13-amd64): bad' "$tmp/interop.md" || fail "the notes must name the kernel"
[[ $(grep -c $'^a\t' "$tmp/store.tsv") == 6 ]] || fail "the store keeps one run of a per kernel: $(cat "$tmp/store.tsv")"
# run 5: 6.1 again with its exact build: replaces the unrecorded 6.1 rows of a, not 7.3's
printf '%s\t%s\t%s\t%s\t%s\t%s\n' a login PASS 1 ok 6.1.0-56-amd64 a io PASS 1 ok 6.1.0-56-amd64 \
  a backing PASS 1 same 6.1.0-56-amd64 >"$tmp/run5.tsv"
m --results "$tmp/run5.tsv" --commit c5 --date d5
[[ $(grep -c $'^a\t.*\t7.3.4+deb13-amd64$' "$tmp/store.tsv") == 3 && $(grep -c $'^a\t.*\t6.1.0-56-amd64$' "$tmp/store.tsv") == 3 &&
  $(grep -c $'^a\t' "$tmp/store.tsv") == 6 ]] || fail "a 6.1 run with its build must replace the unrecorded 6.1 rows: $(cat "$tmp/store.tsv")"
grep -q '^## Linux 6.1 (6.1 (build not recorded), 6.1.0-56-amd64)$' "$tmp/interop.md" || fail "6.1's table must name both builds (b's rows are unrecorded)"
printf 'only\ttwo\n' >"$tmp/bad.tsv"
if m --results "$tmp/bad.tsv" 2>"$tmp/err"; then fail "a malformed results file was accepted"; fi
grep -q 'columns' "$tmp/err" || fail "no clear error for a malformed file: $(cat "$tmp/err")"
echo PASS
