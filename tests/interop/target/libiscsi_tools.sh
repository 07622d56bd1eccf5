# libiscsi utilities against iserkit-target: iscsi-inq (standard and VPD pages), iscsi-ls -s
# (SendTargets discovery + REPORT LUNS), iscsi-readcapacity16, over IPv4 and (if available) IPv6;
# a missing --lun file is refused at startup; SIGTERM exits 0.
source "$(dirname "$0")/lib.sh"
require iscsi-inq iscsi-ls iscsi-readcapacity16

truncate -s 64M "$WORK/disk.img"
if "$BIN/iserkit-target" --lun "$WORK/does-not-exist.img" --listen 127.0.0.1:0 >/dev/null 2>"$WORK/missing.err"; then
  fail "--lun with a missing file was accepted"
fi
grep -q "no such file" "$WORK/missing.err" || fail "missing-file message: $(cat "$WORK/missing.err")"

start_target --lun "$WORK/disk.img" --lun mem:16M
grep -q "^listening on 127.0.0.1:$PORT$" "$WORK/target.out" || fail "no 'listening on' line: $(cat "$WORK/target.out")"

out=$(iscsi-inq "$URL/0") || fail "iscsi-inq standard"
grep -q "Vendor:ISERKIT" <<<"$out" || fail "standard INQUIRY: $out"
grep -q "Peripheral Device Type:DIRECT_ACCESS" <<<"$out" || fail "standard INQUIRY: $out"
# iscsi-inq parses -c with atoi: page codes in decimal (0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2).
out=$(iscsi-inq -e 1 -c 0 "$URL/0") || fail "iscsi-inq VPD 0x00"
for name in UNIT_SERIAL_NUMBER DEVICE_IDENTIFICATION BLOCK_LIMITS BLOCK_DEVICE_CHARACTERISTICS LOGICAL_BLOCK_PROVISIONING; do
  grep -q "$name" <<<"$out" || fail "VPD 0x00 lacks $name: $out"
done
declare -A expect=([128]="Unit Serial Number" [131]="Designator" [176]="" [177]="" [178]="")
for page in 128 131 176 177 178; do
  out=$(iscsi-inq -e 1 -c "$page" "$URL/0") || fail "iscsi-inq VPD page $page"
  [[ -n "$out" ]] || fail "iscsi-inq VPD page $page printed nothing"
  [[ -z "${expect[$page]}" ]] || grep -qi "${expect[$page]}" <<<"$out" || fail "VPD page $page: $out"
done
# The two LUNs report different serial numbers.
s0=$(iscsi-inq -e 1 -c 128 "$URL/0"); s1=$(iscsi-inq -e 1 -c 128 "$URL/1")
[[ "$s0" != "$s1" ]] || fail "LUN 0 and 1 share a serial: $s0"

out=$(iscsi-ls -s "iscsi://127.0.0.1:$PORT") || fail "iscsi-ls"
grep -q "Target:$IQN Portal:127.0.0.1:$PORT,1" <<<"$out" || fail "iscsi-ls discovery: $out"
grep -q "Lun:0" <<<"$out" || fail "iscsi-ls LUN 0: $out"
grep -q "Lun:1" <<<"$out" || fail "iscsi-ls LUN 1: $out"

out=$(iscsi-readcapacity16 "$URL/0") || fail "iscsi-readcapacity16"
grep -q "Total size:67108864" <<<"$out" || fail "READ CAPACITY (16) LUN 0: $out"
out=$(iscsi-readcapacity16 "$URL/1") || fail "iscsi-readcapacity16 lun 1"
grep -q "Total size:16777216" <<<"$out" || fail "READ CAPACITY (16) LUN 1: $out"
stop_target

# IPv6 portal, when the loopback has ::1.
if ip -6 addr show lo 2>/dev/null | grep -q "::1"; then
  "$BIN/iserkit-target" --iqn "$IQN" --lun mem:8M --listen '[::1]:0' --port-file "$WORK/port6" \
    >"$WORK/target6.out" 2>"$WORK/target.err" &
  TARGET_PID=$!
  for _ in $(seq 100); do [[ -s "$WORK/port6" ]] && break; sleep 0.05; done
  P6=$(cat "$WORK/port6")
  grep -q "^listening on \[::1\]:$P6$" "$WORK/target6.out" || fail "IPv6 listening line: $(cat "$WORK/target6.out")"
  iscsi-inq "iscsi://[::1]:$P6/$IQN/0" | grep -q "Vendor:ISERKIT" || fail "iscsi-inq over IPv6"
  iscsi-ls "iscsi://[::1]:$P6" | grep -q "Portal:\[::1\]:$P6,1" || fail "SendTargets over IPv6"
  stop_target
else
  echo "note: no ::1 on lo; IPv6 part not run"
fi
# --export-dir: each subfolder a target <iqn>:<name>, its files sorted by name are lun0, lun1, ...
mkdir -p "$WORK/export/alpha" "$WORK/export/beta"
truncate -s 8M "$WORK/export/alpha/b.img"
truncate -s 4M "$WORK/export/alpha/a.img"
truncate -s 2M "$WORK/export/beta/only.img"
start_target --export-dir "$WORK/export" --block-size 4096
out=$(iscsi-ls -s "iscsi://127.0.0.1:$PORT") || fail "iscsi-ls on --export-dir"
grep -q "Target:$IQN:alpha Portal:127.0.0.1:$PORT,1" <<<"$out" || fail "export-dir target alpha: $out"
grep -q "Target:$IQN:beta Portal:127.0.0.1:$PORT,1" <<<"$out" || fail "export-dir target beta: $out"
out=$(iscsi-readcapacity16 "$URL:alpha/0") || fail "readcapacity16 alpha/0"
grep -q "Total size:4194304" <<<"$out" || fail "alpha lun0 is not a.img: $out"
grep -q "LOGICAL BLOCK LENGTH IN BYTES:4096" <<<"$out" || fail "--block-size 4096: $out"
out=$(iscsi-readcapacity16 "$URL:alpha/1") || fail "readcapacity16 alpha/1"
grep -q "Total size:8388608" <<<"$out" || fail "alpha lun1 is not b.img: $out"
stop_target
echo PASS
