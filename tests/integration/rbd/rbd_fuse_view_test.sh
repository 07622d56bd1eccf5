#!/usr/bin/env bash
# A pool's images as the FUSE view's directories (issue 12 items 1 and 4): a throwaway cluster
# (tests/support/ceph_cluster.sh), two images, iserkit-target --export-rbd POOL, and iserkit-fuse
# on the portal: one directory per image (<iqn>:<image>) with its LUN 0 file, whose bytes are the
# image's (what `rbd import` wrote is read through the view; what is written through the view,
# `rbd export` reads back); a new image appears after the target's SIGHUP and the view's .rescan.
# Skips (77) without the Ceph packages, FUSE, or a build without librbd or iserkit-fuse.
source "$(dirname "$0")/lib.sh"
[[ -c /dev/fuse ]] || skip "/dev/fuse is missing"
command -v fusermount3 >/dev/null || skip "fusermount3 is not installed (package fuse3)"
[[ -x $BIN/iserkit-fuse ]] || skip "iserkit-fuse is not built (libfuse3-dev missing at configure time)"
rbd_test_init rbd-fuse
rbd_cluster_up
iqn=iqn.2026-11.org.iserkit:pool
head -c $((2 << 20)) /dev/urandom >"$tmp/seed.bin"
rbd import --no-progress "$tmp/seed.bin" rbd/alpha
rbd create rbd/beta --size 8M

"$BIN/iserkit-target" --iqn $iqn --ceph-conf "$CEPH_CONF" --export-rbd rbd --rbd-rescan-interval 0 --no-iser \
  --listen 127.0.0.1:0 --port-file "$tmp/port" >"$tmp/target.log" 2>&1 &
target_pid=$!; pids+=($target_pid)
for _ in $(seq 150); do [[ -s $tmp/port ]] && break; kill -0 $target_pid 2>/dev/null || break; sleep 0.1; done
if [[ ! -s $tmp/port ]]; then
  grep -q "no RBD backend" "$tmp/target.log" && skip "this build has no RBD backend (WITH_RBD=OFF)"
  fail "the target did not start"
fi
port=$(cat "$tmp/port")

mkdir -p "$tmp/view"
"$BIN/iserkit-fuse" "iscsi://127.0.0.1:$port" "$tmp/view" --foreground >"$tmp/fuse.log" 2>&1 &
fuse_pid=$!; pids+=($fuse_pid)
for _ in $(seq 100); do
  mountpoint -q "$tmp/view" && [[ -f $tmp/view/$iqn:alpha/lun0 ]] && break
  kill -0 $fuse_pid 2>/dev/null || break
  sleep 0.1
done
[[ -f $tmp/view/$iqn:alpha/lun0 ]] || { ls -la "$tmp/view" || true; fail "no directory for image alpha in the view"; }
[[ -f $tmp/view/$iqn:beta/lun0 ]] || { ls -la "$tmp/view"; fail "no directory for image beta in the view"; }
[[ $(stat -c %s "$tmp/view/$iqn:beta/lun0") == $((8 << 20)) ]] || fail "beta's LUN file is not 8 MiB"
cmp -n $((2 << 20)) "$tmp/view/$iqn:alpha/lun0" "$tmp/seed.bin" || fail "alpha read through the view differs from rbd import"
head -c 65536 /dev/urandom >"$tmp/w.bin"
dd if="$tmp/w.bin" of="$tmp/view/$iqn:beta/lun0" bs=65536 seek=3 conv=notrunc,fsync status=none ||
  fail "write through the view"
rbd export --no-progress rbd/beta "$tmp/beta.bin"
cmp -n 65536 -i $((3 * 65536)):0 "$tmp/beta.bin" "$tmp/w.bin" || fail "rbd export does not read what the view wrote"
echo "ok: one directory per image; data both ways"

# A new image: the target adds it on SIGHUP, the view lists it after .rescan.
rbd create rbd/gamma --size 4M
kill -HUP $target_pid
for _ in $(seq 100); do grep -q "added target $iqn:gamma" "$tmp/target.log" && break; sleep 0.1; done
grep -q "added target $iqn:gamma" "$tmp/target.log" || fail "the target did not add image gamma on SIGHUP"
echo now >"$tmp/view/.rescan"
for _ in $(seq 100); do [[ -f $tmp/view/$iqn:gamma/lun0 ]] && break; sleep 0.1; done
[[ -f $tmp/view/$iqn:gamma/lun0 ]] || { ls -la "$tmp/view"; fail "the view does not list image gamma after .rescan"; }
echo "ok: a new image appears in the view after SIGHUP and .rescan"
kill -TERM $fuse_pid; wait $fuse_pid || fail "iserkit-fuse exited with $? on SIGTERM"
! mountpoint -q "$tmp/view" || fail "the view is still mounted"
echo "PASS: $(( $(date +%s) - start )) s"
