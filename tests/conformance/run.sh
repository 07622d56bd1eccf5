#!/usr/bin/env bash
# Conformance runner: libiscsi's iscsi-test-cu (the whole ALL suite, every family on its own with
# --dataloss --allow-sanitize and a time limit) against iserkit-target, or against tgtd for an
# honest comparison from the same machine. Parses CUnit's verbose output into pass/fail/skip per
# family and LUN kind, prints a table and totals, and (for iserkit-target) fails when a test fails
# that tests/conformance/expected-failures.txt does not list for that LUN kind.
#
# Usage: run.sh [--target iserkit|tgtd] [--kinds mem,sparse,full] [--families F1,F2,...]
#               [--timeout SECONDS] [--lun-size SIZE] [--expected FILE] [--logs DIR] [--quiet]
#               [--sanitize-rate RATE]
#   --target   iserkit (default; needs ISERKIT_BIN or --bin) or tgtd (opt-in comparison; never fails
#              on test failures, only on a broken run)
#   --kinds    LUN kinds, each run as its own matrix column:
#                mem     iserkit: a sparse memory LUN (mem:SIZE); tgtd has no memory store, so a
#                        sparse file on tmpfs (/dev/shm) stands in
#                sparse  a sparse file (thin: holes are unmapped; tgtd: thin_provisioning=1)
#                full    a fully allocated file (fallocate; tgtd: thin provisioning off)
#                rbd     iserkit only: a Ceph RBD image (--lun rbd:rbd/IMAGE) in a throwaway
#                        single-node cluster (tests/support/ceph_cluster.sh) started for the run;
#                        a fresh image per family. Skips (77) when it is the only kind and the
#                        Ceph packages are missing; dropped with a note otherwise
#              default: $ISERKIT_CONFORMANCE_KINDS or "mem,sparse,full"
#   --families iscsi-test-cu families (ALL.<Family>); default: every family iscsi-test-cu -l lists
#   --timeout  seconds per family run (default 120); a family that times out fails its unfinished tests
#   --sanitize-rate  iserkit only: the target's --sanitize-rate (bytes per second, e.g. 10M) for
#              ALL.Sanitize, whose Reset test needs a sanitize still running ~5 s after it started
#              (unpaced, a 64M LUN is sanitized in milliseconds); the ctest
#              conformance_sanitize_paced runs the family that way
# Environment: ISERKIT_CONFORMANCE_TARGET_LOG sets iserkit-target's --log-level (default warn); each
# family's target log is kept beside its iscsi-test-cu log (LOGS/iserkit-KIND-FAMILY.target.log), and
# an unexpected failure prints its last lines.
# A fresh target (and LUN file) is started for every family, so one hang or crash sinks only it.
# ALL.ReadOnly runs against a write-protected LUN (its tests skip on a writable one).
# MultipathIO gets a second URL to the same LUN (a second session, iscsi-test-cu's multipath mode).
# Exit: 0 all failures expected; 1 an unexpected failure or a broken run; 77 a tool is missing.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../../scripts/lib.sh"  # usage()
TARGET=iserkit
KINDS=${ISERKIT_CONFORMANCE_KINDS:-mem,sparse,full}
FAMILIES=""
TIMEOUT=120
LUN_SIZE=64M
EXPECTED="$HERE/expected-failures.txt"
LOGS=""
QUIET=0
SANITIZE_RATE=""
BIN_DIR=${ISERKIT_BIN:-}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --target) TARGET=$2; shift 2 ;;
    --kinds) KINDS=$2; shift 2 ;;
    --families) FAMILIES=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --lun-size) LUN_SIZE=$2; shift 2 ;;
    --expected) EXPECTED=$2; shift 2 ;;
    --logs) LOGS=$2; shift 2 ;;
    --bin) BIN_DIR=$2; shift 2 ;;
    --quiet) QUIET=1; shift ;;
    --sanitize-rate) SANITIZE_RATE=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

skip() { echo "SKIP: $*"; exit 77; }
command -v iscsi-test-cu >/dev/null || skip "iscsi-test-cu not installed (Debian package libiscsi-bin)"
command -v timeout >/dev/null || skip "timeout not installed (coreutils)"
case "$TARGET" in
  iserkit)
    [[ -n "$BIN_DIR" ]] || { echo "run.sh: set ISERKIT_BIN or --bin to the build's bin directory" >&2; exit 2; }
    [[ -x "$BIN_DIR/iserkit-target" ]] || skip "iserkit-target not built ($BIN_DIR/iserkit-target)" ;;
  tgtd)
    command -v tgtd >/dev/null && command -v tgtadm >/dev/null || skip "tgtd/tgtadm not installed (Debian package tgt)" ;;
  *) echo "run.sh: --target must be iserkit or tgtd" >&2; exit 2 ;;
esac

WORK=$(mktemp -d /tmp/iserkit-conformance.XXXXXX)
SHM_WORK=""
[[ -d /dev/shm && -w /dev/shm ]] && SHM_WORK=$(mktemp -d /dev/shm/iserkit-conformance.XXXXXX)
[[ -n "$LOGS" ]] || LOGS="$WORK/logs"
mkdir -p "$LOGS"
TARGET_PID=""
TARGET_LOG="$WORK/target.err"
# iserkit-target's --log-level for every run (its log is kept beside each family's log).
TARGET_LOG_LEVEL=${ISERKIT_CONFORMANCE_TARGET_LOG:-warn}
IQN="iqn.2026-11.org.iserkit.conformance:lun$$"

stop_target() {
  [[ -n "$TARGET_PID" ]] || return 0
  if kill -0 "$TARGET_PID" 2>/dev/null; then
    if [[ "$TARGET" == tgtd ]]; then
      # tgtd does not exit on SIGTERM: delete our target, then ask it to shut down.
      timeout 5 tgtadm --lld iscsi --op delete --mode target --tid 1 --force >/dev/null 2>&1
      timeout 5 tgtadm --op delete --mode system >/dev/null 2>&1
    else
      kill -TERM "$TARGET_PID" 2>/dev/null
    fi
    for _ in $(seq 50); do kill -0 "$TARGET_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$TARGET_PID" 2>/dev/null
  fi
  wait "$TARGET_PID" 2>/dev/null
  TARGET_PID=""
}
cleanup() {
  stop_target
  [[ $(type -t ceph_cluster_stop) == function ]] && ceph_cluster_stop
  rm -rf "$WORK"
  [[ -n "$SHM_WORK" ]] && rm -rf "$SHM_WORK"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# make_lun KIND: creates the LUN's backing file (if any) and prints its path ("" for mem on iserkit).
make_lun() {
  local kind=$1 path
  case "$kind" in
    mem)
      if [[ "$TARGET" == iserkit ]]; then echo ""; return 0; fi
      [[ -n "$SHM_WORK" ]] || { echo "no /dev/shm for tgtd's memory stand-in" >&2; return 1; }
      path="$SHM_WORK/lun.img"; rm -f "$path"; truncate -s "$LUN_SIZE" "$path" ;;
    sparse) path="$WORK/lun.img"; rm -f "$path"; truncate -s "$LUN_SIZE" "$path" ;;
    full)
      path="$WORK/lun.img"; rm -f "$path"
      fallocate -l "$LUN_SIZE" "$path" 2>/dev/null || {
        rm -f "$path"; dd if=/dev/zero of="$path" bs=1M count=$(( $(numfmt --from=iec "$LUN_SIZE") >> 20 )) status=none; } ;;
    rbd)
      # A fresh image per family (as the files are fresh), named after it: rbd:POOL/IMAGE for --lun.
      path="conformance-${family:-lun}"
      rbd rm --no-progress "rbd/$path" >/dev/null 2>&1 || true
      rbd create "rbd/$path" --size "$LUN_SIZE" >&2 || return 1
      echo "rbd:rbd/$path"; return 0 ;;
    *) echo "unknown LUN kind $kind" >&2; return 1 ;;
  esac
  echo "$path"
}

# start_target KIND [ro]: fresh target with one LUN of KIND (write-protected with "ro"); sets URL.
start_target() {
  local kind=$1 ro=${2:-} lun port
  lun=$(make_lun "$kind") || return 1
  if [[ "$TARGET" == iserkit ]]; then
    local src=${lun:-mem:$LUN_SIZE}
    rm -f "$WORK/port"
    local ceph=() pace=()
    [[ "$kind" == rbd ]] && ceph=(--ceph-conf "$CEPH_CONF")
    # Paced ALL.Sanitize: Reset then sleeps 60 s in one thread that answers no NOP-In, so no idle
    # ping either (15 s + a 30 s answer timeout would end the session and each reconnect brings a
    # fresh POWER ON unit attention, forever).
    [[ -n "$SANITIZE_RATE" && "${family:-}" == Sanitize ]] && pace=(--sanitize-rate "$SANITIZE_RATE" --idle-interval 0)
    "$BIN_DIR/iserkit-target" --iqn "$IQN" --listen 127.0.0.1:0 --port-file "$WORK/port" --lun "$src" \
      "${ceph[@]}" "${pace[@]}" --log-level "$TARGET_LOG_LEVEL" ${ro:+--read-only} >"$WORK/target.out" \
      2>"$TARGET_LOG" &
    TARGET_PID=$!
    for _ in $(seq 200); do
      [[ -s "$WORK/port" ]] && break
      kill -0 "$TARGET_PID" 2>/dev/null || { cat "$TARGET_LOG" >&2; return 1; }
      sleep 0.05
    done
    [[ -s "$WORK/port" ]] || return 1
    URL="iscsi://127.0.0.1:$(cat "$WORK/port")/$IQN/0"
  else
    export TGT_IPC_SOCKET="$WORK/tgtd.socket"
    for _ in 1 2 3; do
      port=$(free_port)
      tgtd -f --iscsi portal=127.0.0.1:$port >>"$WORK/target.err" 2>&1 &
      TARGET_PID=$!
      for _ in $(seq 50); do
        tgtadm --lld iscsi --op show --mode target >/dev/null 2>&1 && break
        kill -0 "$TARGET_PID" 2>/dev/null || break
        sleep 0.1
      done
      kill -0 "$TARGET_PID" 2>/dev/null && break
    done
    kill -0 "$TARGET_PID" 2>/dev/null || { cat "$WORK/target.err" >&2; return 1; }
    tgtadm --lld iscsi --op new --mode target --tid 1 -T "$IQN" &&
      tgtadm --lld iscsi --op new --mode logicalunit --tid 1 --lun 1 -b "$lun" &&
      tgtadm --lld iscsi --op bind --mode target --tid 1 -I ALL || return 1
    if [[ "$kind" != full ]]; then
      tgtadm --lld iscsi --op update --mode logicalunit --tid 1 --lun 1 --params thin_provisioning=1 || return 1
    fi
    if [[ -n "$ro" ]]; then
      tgtadm --lld iscsi --op update --mode logicalunit --tid 1 --lun 1 --params readonly=1 || return 1
    fi
    URL="iscsi://127.0.0.1:$port/$IQN/1"
  fi
}

# parse_log LOG: prints "NAME RESULT" per test (pass, fail, skip) from CUnit's verbose output.
# A test that printed [SKIPPED] and passed is a skip; "[FAILED]" lines are messages, the result is
# the "passed"/"FAILED" word CUnit prints after the test's output.
parse_log() {
  awk '
    function flush() { if (name != "" && result == "") print name, "fail"; name = ""; result = "" }
    function scan(text) {
      if (name == "" || result != "") return
      # The result word comes first on its line; text after it (e.g. a teardown message) belongs to the teardown.
      if (text ~ /^passed/) { result = skipped ? "skip" : "pass"; print name, result }
      else if (text ~ /^FAILED/) { result = "fail"; print name, result }
      else if (text ~ /\[SKIPPED\]/) skipped = 1
    }
    /^  Test: / {
      flush(); name = $2; skipped = 0
      rest = $0; sub(/^  Test: [^ ]+ \.\.\./, "", rest); scan(rest); next
    }
    /^Run Summary:/ { flush(); next }
    { scan($0) }
    END { flush() }
  ' "$1"
}

# expected_failure NAME KIND: prints the reason if NAME is expected to fail on KIND.
expected_failure() {
  [[ -f "$EXPECTED" ]] || return 1
  awk -v name="$1" -v kind="$2" '
    /^[[:space:]]*(#|$)/ { next }
    $1 == name {
      n = split($2, kinds, ",")
      for (i = 1; i <= n; i++) if (kinds[i] == "all" || kinds[i] == kind) {
        $1 = ""; $2 = ""; sub(/^ +/, ""); print; found = 1; exit
      }
    }
    END { exit found ? 0 : 1 }
  ' "$EXPECTED"
}

ALL_TESTS=$(iscsi-test-cu -l 2>/dev/null | grep '^ALL\.' || true)
[[ -n "$ALL_TESTS" ]] || { echo "run.sh: iscsi-test-cu -l listed no tests" >&2; exit 1; }
if [[ -z "$FAMILIES" ]]; then
  FAMILIES=$(awk -F. 'NF == 2 { print $2 }' <<<"$ALL_TESTS" | tr '\n' ',')
fi
IFS=, read -r -a FAMILY_LIST <<<"$FAMILIES"
IFS=, read -r -a KIND_LIST <<<"$KINDS"

# The rbd kind needs a cluster: started once for the whole run, stopped by cleanup().
if [[ ",$KINDS," == *,rbd,* ]]; then
  why=""
  if [[ "$TARGET" != iserkit ]]; then
    why="the rbd kind runs against iserkit-target only (tgtd's bs_rbd is in tgt-rbd, not used here)"
  else
    source "$HERE/../support/ceph_cluster.sh"
    if ! ceph_cluster_available; then
      why="ceph-mon, ceph-osd, ceph-common (rbd) or uuid-runtime not installed"
    fi
  fi
  if [[ -n "$why" ]]; then
    [[ "$KINDS" == rbd ]] && skip "$why"
    echo "note: kind rbd dropped: $why"
    KIND_LIST=($(printf '%s\n' "${KIND_LIST[@]}" | grep -vx rbd))
  else
    ceph_cluster_start "$WORK/ceph" >"$WORK/ceph-start.log" 2>&1 ||
      { cat "$WORK/ceph-start.log" >&2; ceph_cluster_logs >&2; echo "run.sh: the Ceph cluster did not start" >&2; exit 1; }
  fi
fi

status=0
unexpected=()
stale=()
declare -A PASS FAIL SKIP
RESULTS="$WORK/results.txt"
: >"$RESULTS"
start_all=$(date +%s)
for kind in "${KIND_LIST[@]}"; do
  for family in "${FAMILY_LIST[@]}"; do
    [[ -n "$family" ]] || continue
    tests=$(awk -F. -v f="$family" 'NF == 3 && $2 == f { print $3 }' <<<"$ALL_TESTS")
    if [[ -z "$tests" ]]; then
      echo "note: this iscsi-test-cu has no family $family"; continue
    fi
    log="$LOGS/$TARGET-$kind-$family.log"
    TARGET_LOG="$LOGS/$TARGET-$kind-$family.target.log"
    t0=$(date +%s)
    # ALL.ReadOnly checks a write-protected LU: it gets one (the others a writable one).
    ro=""
    [[ "$family" == ReadOnly ]] && ro=ro
    if ! start_target "$kind" $ro; then
      echo "FAIL: $TARGET did not start for $family ($kind)"; status=1; stop_target; continue
    fi
    urls=("$URL")
    [[ "$family" == MultipathIO ]] && urls+=("$URL")
    timeout -k 5 "$TIMEOUT" iscsi-test-cu --dataloss --allow-sanitize --test="ALL.$family" "${urls[@]}" >"$log" 2>&1
    rc=$?
    alive=1
    kill -0 "$TARGET_PID" 2>/dev/null || alive=0
    stop_target
    [[ $rc -eq 124 || $rc -eq 137 ]] && echo "  TIMEOUT after ${TIMEOUT}s: ALL.$family ($kind)" >>"$log"
    [[ $alive -eq 0 ]] && echo "  the target died during ALL.$family ($kind)" | tee -a "$log"
    parsed=$(parse_log "$log")
    p=0 f=0 s=0
    for t in $tests; do
      r=$(awk -v t="$t" '$1 == t { print $2; exit }' <<<"$parsed")
      [[ -n "$r" ]] || r=fail  # never ran: timeout, crash or a suite that could not start
      echo "$kind ALL.$family.$t $r" >>"$RESULTS"
      case "$r" in
        pass) p=$((p + 1)) ;;
        skip) s=$((s + 1)) ;;
        fail)
          f=$((f + 1))
          if [[ "$TARGET" == iserkit ]]; then
            if reason=$(expected_failure "ALL.$family.$t" "$kind"); then
              [[ $QUIET -eq 1 ]] || echo "  expected failure ($kind): ALL.$family.$t — $reason"
            else
              unexpected+=("$kind ALL.$family.$t")
              echo "  UNEXPECTED FAILURE ($kind): ALL.$family.$t"
              awk -v t="$t" '$0 ~ "^  Test: " t " " {on = 1} on {print "    | " $0} on && /^(passed|FAILED)/ {exit}' "$log" | head -30
              if [[ "$TARGET" == iserkit && -s "$TARGET_LOG" ]]; then
                echo "    the target's log, last 20 lines ($TARGET_LOG):"
                tail -n 20 "$TARGET_LOG" | sed 's/^/    > /'
              fi
            fi
          fi ;;
      esac
    done
    PASS[$kind,$family]=$p FAIL[$kind,$family]=$f SKIP[$kind,$family]=$s
    [[ $QUIET -eq 1 ]] || printf '%-7s %-26s pass %3d  fail %3d  skip %3d  (%ss)\n' "$kind" "$family" "$p" "$f" "$s" $(( $(date +%s) - t0 ))
  done
done

# Entries of the expected-failures list that passed on every kind they name: candidates to remove.
if [[ "$TARGET" == iserkit && -f "$EXPECTED" ]]; then
  while read -r name kinds _; do
    [[ -z "$name" || "$name" == \#* ]] && continue
    grep -q " $name " "$RESULTS" || continue
    if ! awk -v n="$name" -v ks="$kinds" '
          BEGIN { split(ks, k, ","); for (i in k) want[k[i]] = 1 }
          $2 == n && $3 == "fail" && (want["all"] || want[$1]) { bad = 1 }
          END { exit bad ? 0 : 1 }' "$RESULTS"; then
      stale+=("$name")
    fi
  done <"$EXPECTED"
fi

echo
echo "iscsi-test-cu $(dpkg-query -W -f '${Version}' libiscsi-bin 2>/dev/null || echo '?') against $TARGET, LUN size $LUN_SIZE, per family with -d -S"
printf '%-26s' "family"
for kind in "${KIND_LIST[@]}"; do printf ' | %-16s' "$kind p/f/s"; done
echo
declare -A TP TF TS
for family in "${FAMILY_LIST[@]}"; do
  [[ -n "$family" && -n "${PASS[${KIND_LIST[0]},$family]:-}" ]] || continue
  printf '%-26s' "$family"
  for kind in "${KIND_LIST[@]}"; do
    printf ' | %4s %4s %4s    ' "${PASS[$kind,$family]:--}" "${FAIL[$kind,$family]:--}" "${SKIP[$kind,$family]:--}"
    TP[$kind]=$(( ${TP[$kind]:-0} + ${PASS[$kind,$family]:-0} ))
    TF[$kind]=$(( ${TF[$kind]:-0} + ${FAIL[$kind,$family]:-0} ))
    TS[$kind]=$(( ${TS[$kind]:-0} + ${SKIP[$kind,$family]:-0} ))
  done
  echo
done
printf '%-26s' "TOTAL"
for kind in "${KIND_LIST[@]}"; do printf ' | %4s %4s %4s    ' "${TP[$kind]:-0}" "${TF[$kind]:-0}" "${TS[$kind]:-0}"; done
echo
for kind in "${KIND_LIST[@]}"; do
  echo "$TARGET $kind: ${TP[$kind]:-0} passed, ${TF[$kind]:-0} failed, ${TS[$kind]:-0} skipped"
done
echo "elapsed: $(( $(date +%s) - start_all ))s; logs: $LOGS"
[[ ${#stale[@]} -gt 0 ]] && printf 'note: expected to fail but passed (remove from %s): %s\n' "$(basename "$EXPECTED")" "${stale[*]}"
if [[ ${#unexpected[@]} -gt 0 ]]; then
  echo "UNEXPECTED FAILURES (${#unexpected[@]}):"
  printf '  %s\n' "${unexpected[@]}"
  status=1
fi
exit $status
