#!/usr/bin/env bash
# Per-tenant payload budget (issue 14; target/README.md "Tenants"): one tenant fills its budget,
# the other tenant's I/O proceeds (tenants_budget.py says how). Two tenants in the target's own
# network namespace (no `netns`: the budget does not depend on where the portal lives), each on its
# own loopback address; no root needed.
set -euo pipefail
skip() { echo "SKIP: $*" >&2; exit 77; }
command -v python3 >/dev/null || skip "python3 is not installed"
BIN=${ISERKIT_BIN:?ISERKIT_BIN must name the bin directory of the build}
tmp=$(mktemp -d /tmp/iserkit-tenant-budget.XXXXXX)
pid=""
cleanup() { [[ -z $pid ]] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; } || true; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- target log"; cat "$tmp/target.log"; exit 1; } >&2
blue=iqn.2026-11.org.example:blue-vol red=iqn.2026-11.org.example:red-vol
cat >"$tmp/target.toml" <<TOML
listen = ["127.0.0.1:0"]

[limits]
global_payload_budget = "4M"     # as small as blue's: a budget shared with blue would stall red

[[tenants]]
name = "blue"
listen = ["127.0.0.2:0"]
limits = { payload_budget = "4M" }

[[tenants]]
name = "red"
listen = ["127.0.0.3:0"]

[[targets]]
iqn = "$blue"
tenant = "blue"
luns = ["mem:64M"]

[[targets]]
iqn = "$red"
tenant = "red"
luns = ["mem:64M"]
TOML
"$BIN/iserkit-target" --config "$tmp/target.toml" --port-file "$tmp/port" >"$tmp/target.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [[ -s $tmp/port ]] && break; sleep 0.1; done
[[ -s $tmp/port ]] || fail "target did not start"
portal() { sed -n "s/.*tenant $1: listening on \([0-9.:]*\).*/\1/p" "$tmp/target.log" | head -1; }
bp=$(portal blue) rp=$(portal red)
[[ -n $bp && -n $rp ]] || fail "no tenant portals in the log"
ISERKIT_SOURCE=${ISERKIT_SOURCE:-$(cd "$(dirname "$0")/../../.." && pwd)} \
  timeout 120 python3 "$(dirname "$0")/tenants_budget.py" "$tmp/target.log" "$bp" "$blue" "$rp" "$red" ||
  fail "tenants_budget.py"
kill -0 "$pid" || fail "the target died"
echo PASS
