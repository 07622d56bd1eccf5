#!/usr/bin/env bash
# Tenants on loopback portals (issue 14; target/README.md "Tenants"): the per-tenant limits, one
# scenario per run. Two tenants in the target's own network namespace (no `netns`: the limits do
# not depend on where a portal lives), blue on 127.0.0.2 and red on 127.0.0.3; no root needed.
# Usage: tenants_loopback_test.sh SCENARIO
#   budget     one tenant fills its payload budget, the other's I/O proceeds (tenants_budget.py)
#   reinstate  a reinstatement is admitted at the tenant's session cap, a new session is not
#              (tenants_reinstate.py)
#   admission  one tenant (and the untenanted portal) floods connects, fills its connections and
#              gets its address throttled; the other still logs in (tenants_admission.py)
set -euo pipefail
skip() { echo "SKIP: $*" >&2; exit 77; }
scenario=${1:?scenario}
command -v python3 >/dev/null || skip "python3 is not installed"
BIN=${ISERKIT_BIN:?ISERKIT_BIN must name the bin directory of the build}
export ISERKIT_SOURCE=${ISERKIT_SOURCE:-$(cd "$(dirname "$0")/../../.." && pwd)}
here=$(dirname "$0")
source "$here/../../support/target_toml.sh"
tmp=$(mktemp -d /tmp/iserkit-tenant-loop.XXXXXX)
TARGET_PID=""  # start_config_target (tests/support/target_toml.sh) sets it
cleanup() { [[ -z $TARGET_PID ]] || { kill "$TARGET_PID" 2>/dev/null; wait "$TARGET_PID" 2>/dev/null; } || true; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; echo "--- target log"; cat "$tmp/target.log"; exit 1; } >&2
blue=iqn.2026-11.org.example:blue-vol red=iqn.2026-11.org.example:red-vol
blue_chap=iqn.2026-11.org.example:blue-locked plain=iqn.2026-11.org.example:plain
# The [limits] and [login_throttle] tables and the two tenants' limits of each scenario.
case "$scenario" in
  budget)
    # The target-wide budget as small as blue's: a budget shared with blue would stall red.
    global_tables() { toml_table limits global_payload_budget=4M; }
    blue_limits='{ payload_budget = "4M" }' red_limits='{}' ;;
  reinstate)
    global_tables() { :; }
    blue_limits='{}' red_limits='{ max_sessions = 1 }' ;;
  admission)
    global_tables() {
      toml_table limits max_logging_in=16 login_timeout=30
      toml_table login_throttle free_failures=1 base_delay_ms=30000
    }
    blue_limits='{ max_logging_in = 4, max_connections = 6 }' red_limits='{}' ;;
  *) echo "unknown scenario $scenario" >&2; exit 2 ;;
esac
{
  toml_keys 'listen=["127.0.0.1:0"]'
  global_tables
  toml_tenant blue 127.0.0.2:0 limits="$blue_limits"
  toml_tenant red 127.0.0.3:0 limits="$red_limits"
  toml_target "$blue" mem:64M tenant=blue
  toml_target "$blue_chap" mem:1M tenant=blue 'chap_users=[{ user = "blue", secret = "blue-secret-123" }]'
  toml_target "$plain" mem:1M
  toml_target "$red" mem:64M tenant=red
} >"$tmp/target.toml"
start_config_target "$tmp" || fail "target did not start"
bp=$(tenant_portal "$tmp/target.log" blue) rp=$(tenant_portal "$tmp/target.log" red)
[[ -n $bp && -n $rp ]] || fail "no tenant portals in the log"
case "$scenario" in
  budget) timeout 120 python3 "$here/tenants_budget.py" "$tmp/target.log" "$bp" "$blue" "$rp" "$red" ;;
  admission)
    ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
    timeout 120 python3 "$here/tenants_admission.py" "$tmp/target.log" "$bp" "$blue" "$blue_chap" "$rp" "$red" \
      "127.0.0.1:$(cat "$tmp/port")" ;;
  reinstate) timeout 120 python3 "$here/tenants_reinstate.py" "$tmp/target.log" "$rp" "$red" ;;
esac || fail "tenants_$scenario.py"
kill -0 "$TARGET_PID" || fail "the target died"
echo PASS
