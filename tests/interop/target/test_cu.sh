# libiscsi's iscsi-test-cu families against iserkit-target (a memory LUN and a sparse file LUN).
# Fails when any test of the families fails, except those listed in expected_failures.txt (each
# with its reason); a family this iscsi-test-cu does not have is reported and skipped.
source "$(dirname "$0")/lib.sh"
require iscsi-test-cu

FAMILIES=(Inquiry ReadCapacity10 ReadCapacity16 Read10 Read16 Write10 Write16 TestUnitReady ReportLuns)
EXPECTED="$(dirname "$0")/expected_failures.txt"
truncate -s 256M "$WORK/disk.img"
start_target --lun mem:128M --lun "$WORK/disk.img"
available=$(iscsi-test-cu -l 2>/dev/null)
status=0
families_run=0
for lun in 0 1; do
  for family in "${FAMILIES[@]}"; do
    if ! grep -qx "ALL\.$family" <<<"$available"; then
      echo "note: this iscsi-test-cu has no family $family"
      continue
    fi
    families_run=$((families_run + 1))
    log="$WORK/cu-$family-$lun.log"
    timeout 500 iscsi-test-cu --dataloss --test="ALL.$family" "$URL/$lun" >"$log" 2>&1 || true
    summary=$(grep -E "^ +tests " "$log" || true)
    if [[ -z "$summary" ]]; then
      echo "FAIL: $family lun $lun: no CUnit summary"; tail -20 "$log"; status=1; continue
    fi
    read -r _ total ran passed failed _ <<<"$summary"
    echo "$family lun $lun: total=$total ran=$ran passed=$passed failed=$failed"
    # Names of failed tests: a "Test: NAME ..." line followed (later) by FAILED.
    failed_names=$(awk '/^ *Test: /{name=$2} /FAILED/{if(name!="") print name; name=""}' "$log" | sort -u)
    for t in $failed_names; do
      if grep -qE "^ALL\.$family\.$t( |$)" "$EXPECTED"; then
        echo "  expected failure: ALL.$family.$t ($(grep -E "^ALL\.$family\.$t( |$)" "$EXPECTED" | cut -d' ' -f2-))"
      else
        echo "  FAILED: ALL.$family.$t"; grep -A3 "Test: $t " "$log" | head -8; status=1
      fi
    done
    if [[ "$failed" != "0" && -z "$failed_names" ]]; then
      echo "  FAILED tests could not be named:"; tail -30 "$log"; status=1
    fi
  done
done
stop_target
[[ $families_run -gt 0 ]] || { echo "FAIL: no test family ran"; exit 1; }
[[ $status -eq 0 ]] && echo PASS
exit $status
