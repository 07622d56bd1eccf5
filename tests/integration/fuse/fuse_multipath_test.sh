#!/usr/bin/env bash
# --multipath in the FUSE view on loopback (no network namespace): a target on two portals
# (127.0.0.1 and 127.0.0.2, portal groups 1 and 2) plus a second iserkit-target process that
# carries the same name (spelled in capitals: iSCSI names compare without case, RFC 7143 §4.2.7.1)
# but another logical unit (its VPD 0x83 NAA differs). Mounted with the three URLs and
# --multipath round-robin: the root lists the name once; the info file shows the two good paths up
# and the third refused, and the view logs the refusal; data written through the LUN file lands
# in the good target's file on both paths and never in the other one's. Without --multipath the
# same URLs give one directory on the first URL and no "multipath" in info. Bad option values exit 2;
# an iser:// URL with --multipath mounts.
source "$(dirname "$0")/lib.sh"
iqn=iqn.2026-11.org.iserkit:mp
truncate -s 8M "$tmp/good.img" "$tmp/other.img"
start_target good --iqn "$iqn" --lun "$tmp/good.img" --no-iser --listen 127.0.0.2:0,tpgt=2
start_target other --iqn "${iqn^^}" --lun "$tmp/other.img" --no-iser
for _ in $(seq 50); do grep -q 'listening on 127.0.0.2:' "$tmp/good.log" && break; sleep 0.1; done
p1=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$tmp/good.log")
p2=$(sed -n 's/^listening on 127\.0\.0\.2:\([0-9]*\)$/\1/p' "$tmp/good.log")
[[ -n $p1 && -n $p2 ]] || fail "the good target's two ports are not in its log"
urls=("iscsi://127.0.0.1:$p1/$iqn" "iscsi://127.0.0.2:$p2/$iqn" "iscsi://127.0.0.1:${target_port[other]}/$iqn")

echo "== bad values exit 2"
rc=0; "$BIN/iserkit-fuse" "${urls[0]}" "$tmp" --multipath sideways >/dev/null 2>&1 || rc=$?
((rc == 2)) || fail "--multipath sideways: exit $rc, want 2"

# iSER portals are accepted with --multipath (issue 24 item 3; they used to exit 2): the view
# mounts and keeps trying the portal (this host has no RDMA device, so its login fails).
echo "== --multipath with an iser:// URL mounts"
mount_view "$tmp/iser" "iser://127.0.0.1:$p1/$iqn" --multipath failover
unmount_view "$tmp/iser" "$fuse_pid"

# field LUN-PATH-INDEX KEY [INFO]: a path's KEY in LUN 0's paths of the info file.
field() {
  python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["luns"][0]["paths"][int(sys.argv[2])][sys.argv[3]])' \
    "${3:-$tmp/mnt/$iqn/info}" "$1" "$2"
}

echo "== --multipath round-robin: one directory, two paths up, the other unit's path refused"
mount_view "$tmp/mnt" "${urls[@]}" --multipath round-robin
[[ $(ls "$tmp/mnt") == "$iqn" ]] || fail "root lists: $(ls "$tmp/mnt" | tr '\n' ' ')"
cat "$tmp/mnt/$iqn/info" >"$tmp/info.json"  # not cp: it stopped at the size getattr gave before the login
python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); assert j["multipath"]["policy"] == "round-robin"
assert [p["state"] for p in j["multipath"]["paths"]] == ["up", "up", "refused"], j["multipath"]' "$tmp/info.json" ||
  fail "info: $(cat "$tmp/info.json")"
[[ $(field 0 state "$tmp/info.json") == up && $(field 1 state "$tmp/info.json") == up &&
   $(field 2 state "$tmp/info.json") == refused ]] || fail "LUN 0's paths: $(cat "$tmp/info.json")"
grep -q "fuse: multipath: path refused, it leads to another logical unit: target=$iqn lun=0 url=${urls[2]}" \
  "$tmp/fuse-mnt.log" || fail "the view did not log the refused path"
head -c 4M /dev/urandom >"$tmp/rand.bin"
dd if="$tmp/rand.bin" of="$tmp/mnt/$iqn/lun0" bs=64k oflag=direct status=none || fail "dd write"
cmp -n 4194304 "$tmp/rand.bin" "$tmp/mnt/$iqn/lun0" || fail "read back through the view differs"
cmp -n 4194304 "$tmp/rand.bin" "$tmp/good.img" || fail "the good target's file does not hold the data"
cmp -n 8388608 "$tmp/other.img" /dev/zero || fail "data reached the other logical unit"
c0=$(field 0 commands); c1=$(field 1 commands); c2=$(field 2 commands)
echo "   commands per path: $c0 $c1 $c2"
((c0 > 0 && c1 > 0 && c2 == 0)) || fail "round-robin should use both good paths and never the refused one"
unmount_view "$tmp/mnt" $fuse_pid

echo "== without --multipath: the first URL only"
mount_view "$tmp/mnt" "${urls[@]}"
[[ $(ls "$tmp/mnt") == "$iqn" ]] || fail "root lists: $(ls "$tmp/mnt" | tr '\n' ' ')"
cat "$tmp/mnt/$iqn/info" >"$tmp/info.json"
! grep -q '"multipath"' "$tmp/info.json" || fail "info has multipath without --multipath"
grep -q "\"portal\": \"127.0.0.1:$p1\"" "$tmp/info.json" || fail "not on the first URL: $(cat "$tmp/info.json")"
cmp -n 4194304 "$tmp/rand.bin" "$tmp/mnt/$iqn/lun0" || fail "read back without multipath differs"
unmount_view "$tmp/mnt" $fuse_pid
echo PASS
