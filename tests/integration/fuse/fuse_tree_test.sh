#!/usr/bin/env bash
# The FUSE view on a real mount, against two iserkit-target processes (one with --export-dir: two
# targets with 2 and 1 LUNs; one with a 4096-byte-block LUN), both URLs in one mount:
#  - the tree: one directory per target, lun<N> files of the LUNs' capacities, info, .rescan;
#  - xattrs against `iserkit inquiry`/`readcap` and libiscsi's iscsi-inq; info JSON contents;
#  - dd/cmp round trips at odd offsets and sizes (512 and 4096-byte blocks), checked against the
#    target's backing files; 300 random unaligned pread/pwrite, buffered and O_DIRECT, against a model;
#  - end of LUN: read returns 0, write ENOSPC, a crossing write is short; truncate EINVAL; punch
#    hole → zeroes at the target; fsync; a read-only mount refuses writes with EROFS;
#  - listings refresh: after the cache time, on a .rescan write, on SIGHUP; I/O resumes after the
#    target restarts (reconnect);
#  - SIGTERM unmounts cleanly and logs every session out.
source "$(dirname "$0")/lib.sh"

base=iqn.2026-11.org.iserkit
mkdir -p "$tmp/exp/alpha" "$tmp/exp/beta"
truncate -s 8M "$tmp/exp/alpha/a.img"
truncate -s 4M "$tmp/exp/alpha/b.img"
truncate -s 6M "$tmp/exp/beta/c.img"
truncate -s 16M "$tmp/solo.img"
start_target portal --iqn $base --export-dir "$tmp/exp"
start_target solo --iqn $base:solo --lun "$tmp/solo.img" --block-size 4096
A=iscsi://127.0.0.1:${target_port[portal]}
S=iscsi://127.0.0.1:${target_port[solo]}
mnt=$tmp/mnt
mount_view "$mnt" "$A" "$S" --cache-time 1 --timeout 5
main_pid=$fuse_pid
alpha=$mnt/$base:alpha
beta=$mnt/$base:beta
solo=$mnt/$base:solo

echo "== tree"
listing=$(ls -A "$mnt" | sort | tr '\n' ' ')
[[ $listing == ".rescan $base:alpha $base:beta $base:solo " ]] || fail "root lists: $listing"
[[ $(ls "$alpha" | tr '\n' ' ') == "info lun0 lun1 " ]] || fail "alpha lists: $(ls "$alpha")"
[[ $(ls "$beta" | tr '\n' ' ') == "info lun0 " ]] || fail "beta lists: $(ls "$beta")"
[[ $(stat -c %s "$alpha/lun0") == $((8 << 20)) ]] || fail "alpha/lun0 size $(stat -c %s "$alpha/lun0")"
[[ $(stat -c %s "$alpha/lun1") == $((4 << 20)) ]] || fail "alpha/lun1 size"
[[ $(stat -c %s "$beta/lun0") == $((6 << 20)) ]] || fail "beta/lun0 size"
[[ $(stat -c %s "$solo/lun0") == $((16 << 20)) ]] || fail "solo/lun0 size"
[[ -f $alpha/lun0 && -d $alpha ]] || fail "lun0 is not a regular file in a directory"
[[ ! -e $alpha/lun7 && ! -e $mnt/iqn.nope ]] || fail "names that do not exist resolve"
echo "  $listing"

echo "== xattrs and info against INQUIRY / VPD / READ CAPACITY"
check_lun() {  # FILE URL
  local file=$1 url=$2
  "$BIN/iserkit" inquiry "$url" >"$tmp/inq.txt" || fail "iserkit inquiry $url"
  "$BIN/iserkit" readcap "$url" >"$tmp/cap.txt" || fail "iserkit readcap $url"
  if command -v iscsi-inq >/dev/null; then
    iscsi-inq "$url" >"$tmp/iscsi-inq.txt" || fail "iscsi-inq $url"
    iscsi-inq -e 1 -c 128 "$url" >"$tmp/iscsi-inq-80.txt" || fail "iscsi-inq VPD 0x80 $url"
  else
    : >"$tmp/iscsi-inq.txt"; : >"$tmp/iscsi-inq-80.txt"
  fi
  python3 - "$file" "$tmp/inq.txt" "$tmp/cap.txt" "$tmp/iscsi-inq.txt" "$tmp/iscsi-inq-80.txt" <<'PY' || fail "xattrs of $file"
import os, re, sys
f, inq, cap, peer, peer80 = sys.argv[1:]
x = {n[len("user.iscsi."):]: os.getxattr(f, n).decode() for n in os.listxattr(f)}
kv = {}
designators = []
for line in open(inq):
    k, _, v = line.rstrip("\n").partition(": ")
    if k == "designator": designators.append(v)
    else: kv[k] = v
for line in open(cap):
    k, _, v = line.rstrip("\n").partition(": ")
    kv["cap." + k] = v
assert x["vendor"] == kv["vendor"], (x, kv)
assert x["product"] == kv["product"], (x, kv)
assert x["revision"] == kv["revision"], (x, kv)
assert x["serial"] == kv["serial"], (x, kv)
assert x["designators"].split("\n") == designators, (x["designators"], designators)
naa = [d.split(" ", 1)[1] for d in designators if d.startswith("naa ")]
assert x["naa"] == naa[0], (x, naa)
assert int(x["block_size"]) == int(kv["cap.block size"]), (x, kv)
assert int(x["blocks"]) == int(kv["cap.blocks"]), (x, kv)
assert x["thin"] == ("1" if kv["cap.thin"] == "yes" else "0"), (x, kv)
assert os.stat(f).st_size == int(kv["cap.bytes"])
# libiscsi's view of the same unit (an independent INQUIRY parser), where installed.
p = open(peer).read()
if p:
    assert re.search(r"^Vendor:%s\s*$" % re.escape(x["vendor"]), p, re.M), p
    assert re.search(r"^Product:%s\s*$" % re.escape(x["product"]), p, re.M), p
    assert re.search(r"^Revision:%s\s*$" % re.escape(x["revision"]), p, re.M), p
    assert "Unit Serial Number:[%s]" % x["serial"] in open(peer80).read()
try:
    os.getxattr(f, "user.iscsi.nothing"); raise SystemExit("unknown xattr answered")
except OSError as e:
    assert e.errno == 61, e   # ENODATA
try:
    os.setxattr(f, "user.iscsi.vendor", b"x"); raise SystemExit("setxattr succeeded")
except OSError as e:
    assert e.errno == 95, e   # ENOTSUP
print("  %s: %s %s %s serial=%s naa=%s %s×%s thin=%s" % (os.path.basename(f), x["vendor"], x["product"],
      x["revision"], x["serial"], x["naa"], x["blocks"], x["block_size"], x["thin"]))
PY
}
check_lun "$alpha/lun0" "$A/$base:alpha/0"
check_lun "$alpha/lun1" "$A/$base:alpha/1"
check_lun "$beta/lun0" "$A/$base:beta/0"
check_lun "$solo/lun0" "$S/$base:solo/0"
python3 - "$alpha" "${target_port[portal]}" "$base:alpha" <<'PY' || fail "alpha/info"
import json, os, sys
d, port, iqn = sys.argv[1:]
info = json.load(open(os.path.join(d, "info")))
assert info["target"] == iqn, info
assert info["portal"] == "127.0.0.1:" + port, info
assert info["session"]["state"] == "logged-in", info
p = info["session"]["parameters"]
for k in ("MaxBurstLength", "FirstBurstLength", "MaxOutstandingR2T", "InitiatorMaxRecvDataSegmentLength",
          "TargetMaxRecvDataSegmentLength"):
    assert isinstance(p[k], int) and p[k] > 0, (k, p)
assert p["HeaderDigest"] in ("None", "CRC32C") and p["ErrorRecoveryLevel"] == 0, p
assert [l["file"] for l in info["luns"]] == ["lun0", "lun1"], info
for l in info["luns"]:
    f = os.path.join(d, l["file"])
    assert l["size_bytes"] == os.stat(f).st_size, l
    assert l["serial"] == os.getxattr(f, "user.iscsi.serial").decode(), l
    assert l["naa"] == os.getxattr(f, "user.iscsi.naa").decode(), l
    assert l["block_size"] * l["blocks"] == l["size_bytes"], l
assert os.stat(os.path.join(d, "info")).st_mode & 0o222 == 0
try:
    open(os.path.join(d, "info"), "w"); raise SystemExit("info opened for writing")
except PermissionError:
    pass
print("  info:", info["target"], info["portal"], "luns", [l["file"] for l in info["luns"]])
PY

echo "== dd / cmp at odd offsets and sizes"
head -c 1234567 /dev/urandom >"$tmp/rand.bin"
for pair in "$alpha/lun0:$tmp/exp/alpha/a.img" "$solo/lun0:$tmp/solo.img"; do
  file=${pair%%:/tmp*}; file=${pair%:*}; backing=${pair##*:}
  for off in 777777 4095 3; do
    dd if="$tmp/rand.bin" of="$file" bs=4099 seek=$off oflag=seek_bytes conv=notrunc,fsync status=none ||
      fail "dd write at $off to $file"
    cmp <(dd if="$file" bs=65536 skip=$off count=1234567 iflag=skip_bytes,count_bytes status=none) "$tmp/rand.bin" ||
      fail "read back at $off from $file differs"
    cmp <(dd if="$file" bs=4096 skip=$off count=1234567 iflag=skip_bytes,count_bytes,direct status=none 2>/dev/null ||
          dd if="$file" bs=65536 skip=$off count=1234567 iflag=skip_bytes,count_bytes status=none) "$tmp/rand.bin" ||
      fail "O_DIRECT read back at $off from $file differs"
    cmp <(dd if="$backing" bs=65536 skip=$off count=1234567 iflag=skip_bytes,count_bytes status=none) "$tmp/rand.bin" ||
      fail "the target's backing file differs at $off ($backing)"
  done
done
echo "  1234567 bytes at offsets 777777, 4095, 3 on 512- and 4096-byte-block LUNs: identical"

echo "== random unaligned I/O against a model, buffered and O_DIRECT"
python3 - "$alpha/lun1" "$tmp/exp/alpha/b.img" <<'PY' || fail "random I/O"
import mmap, os, random, sys
path, backing = sys.argv[1:]
size = os.stat(path).st_size
rng = random.Random(7)
with open(path, "rb") as f:
    model = bytearray(f.read())
assert len(model) == size
buffered = os.open(path, os.O_RDWR)
direct = os.open(path, os.O_RDWR | os.O_DIRECT)
aligned = mmap.mmap(-1, 1 << 20)   # page-aligned buffer for O_DIRECT
for i in range(300):
    off = rng.randrange(0, size - 1)
    n = rng.randrange(1, min(70000, size - off) + 1)
    if i % 3 == 2:   # O_DIRECT, block aligned
        off -= off % 4096
        n = max(4096, n - n % 4096)
        n = min(n, size - off)
        if rng.random() < 0.5:
            data = os.urandom(n)
            aligned[:n] = data
            assert os.pwritev(direct, [memoryview(aligned)[:n]], off) == n
            model[off:off + n] = data
        else:
            assert os.preadv(direct, [memoryview(aligned)[:n]], off) == n
            assert aligned[:n] == model[off:off + n], ("direct read", off, n)
    elif rng.random() < 0.5:
        data = os.urandom(n)
        assert os.pwrite(buffered, data, off) == n
        model[off:off + n] = data
    else:
        got = os.pread(buffered, n, off)
        assert got == model[off:off + n], ("read", off, n)
os.fsync(buffered)
with open(path, "rb") as f:
    assert f.read() == model, "whole LUN differs from the model"
with open(backing, "rb") as f:
    assert f.read() == model, "the target's file differs from the model"
print("  300 operations: LUN file, model and backing file agree")
PY

echo "== end of LUN, truncate, punch hole, fsync"
python3 - "$beta/lun0" "$tmp/exp/beta/c.img" <<'PY' || fail "edges"
import errno, os, subprocess, sys
path, backing = sys.argv[1:]
size = os.stat(path).st_size
fd = os.open(path, os.O_RDWR)
assert os.pread(fd, 4096, size) == b"", "read at the end returned data"
assert os.pread(fd, 4096, size - 100) == os.pread(fd, 100, size - 100)
try:
    os.pwrite(fd, b"x", size); raise SystemExit("write at the end succeeded")
except OSError as e:
    assert e.errno == errno.ENOSPC, e
assert os.pwrite(fd, b"y" * 1000, size - 300) == 300, "a write crossing the end is not short"
try:
    os.ftruncate(fd, size // 2); raise SystemExit("truncate succeeded")
except OSError as e:
    assert e.errno == errno.EINVAL, e
os.ftruncate(fd, size)   # its own size is fine
os.pwrite(fd, b"\xab" * (1 << 20), 1 << 20)
os.fsync(fd)
subprocess.run(["fallocate", "--punch-hole", "--offset", str((1 << 20) + 1000), "--length", str(300000), path],
               check=True)
got = os.pread(fd, 1 << 20, 1 << 20)
want = b"\xab" * 1000 + bytes(300000) + b"\xab" * ((1 << 20) - 301000)
assert got == want, "punched range does not read back as zeroes (or neighbours changed)"
os.fsync(fd)
with open(backing, "rb") as f:
    f.seek(1 << 20)
    assert f.read(1 << 20) == want, "the target's file does not show the hole"
print("  read at end: EOF; write at end: ENOSPC; crossing write: short; truncate: EINVAL; punch: zeroes")
PY

echo "== read-only mount"
mount_view "$tmp/ro" "$A" --read-only --cache-time 3600
ro_pid=$fuse_pid
python3 - "$tmp/ro/$base:alpha/lun0" "$tmp/rand.bin" <<'PY' || fail "read-only mount"
import errno, os, sys
path, rand = sys.argv[1:]
try:
    os.open(path, os.O_WRONLY); raise SystemExit("opened for writing")
except OSError as e:
    assert e.errno == errno.EROFS, e
with open(path, "rb") as f:
    f.seek(3)
    assert f.read(1000) == open(rand, "rb").read(1000)
print("  open for write: EROFS; reads work")
PY

echo "== listings refresh: cache time, .rescan, SIGHUP; reconnect after a target restart"
kill "${target_pid[portal]}"; wait "${target_pid[portal]}" 2>/dev/null || true
mkdir -p "$tmp/exp/gamma"; truncate -s 2M "$tmp/exp/gamma/g.img"
port=${target_port[portal]} start_target portal --iqn $base --export-dir "$tmp/exp"
sleep 1.2   # past --cache-time 1
ls "$mnt" | grep -qx "$base:gamma" || fail "main mount did not pick up gamma after the cache time: $(ls "$mnt")"
[[ $(stat -c %s "$mnt/$base:gamma/lun0") == $((2 << 20)) ]] || fail "gamma/lun0 size"
cmp <(dd if="$alpha/lun0" bs=65536 skip=3 count=1234567 iflag=skip_bytes,count_bytes status=none) "$tmp/rand.bin" ||
  fail "alpha/lun0 after the target restart differs (no reconnect?)"
grep -q "logged in again: target=$base:alpha" "$tmp/fuse-mnt.log" || fail "no re-login logged"
ls "$tmp/ro" | grep -qx "$base:gamma" && fail "the read-only mount (cache 3600 s) refreshed by itself"
echo 1 >"$tmp/ro/.rescan" || fail "write to .rescan"
ls "$tmp/ro" | grep -qx "$base:gamma" || fail ".rescan did not show gamma: $(ls "$tmp/ro")"
kill "${target_pid[portal]}"; wait "${target_pid[portal]}" 2>/dev/null || true
rm -rf "$tmp/exp/beta"
port=${target_port[portal]} start_target portal --iqn $base --export-dir "$tmp/exp"
kill -HUP $ro_pid
for _ in $(seq 50); do ls "$tmp/ro" | grep -qx "$base:beta" || break; sleep 0.1; done
ls "$tmp/ro" | grep -qx "$base:beta" && fail "SIGHUP did not drop beta: $(ls "$tmp/ro")"
[[ ! -e $tmp/ro/$base:beta/lun0 ]] || fail "a vanished target's file still resolves"
echo "  gamma appeared (cache time, .rescan), beta vanished (SIGHUP), alpha reconnected"

echo "== SIGTERM: clean unmount, sessions logged out"
# Use alpha once more, so the main mount holds a (re-established) session to log out.
cmp <(dd if="$alpha/lun0" bs=65536 skip=3 count=1234567 iflag=skip_bytes,count_bytes status=none) "$tmp/rand.bin" ||
  fail "alpha/lun0 after the second restart differs"
unmount_view "$tmp/ro" $ro_pid
# A LUN file and an info file still open at unmount: no FUSE_RELEASE comes for them, and
# iserkit-fuse must free their handles itself (under ASan, LeakSanitizer fails the exit).
exec 7<"$alpha/lun0" 8<"$alpha/info"
unmount_view "$mnt" $main_pid
exec 7<&- 8<&-
for t in alpha solo; do
  grep -q "logged out: target=$base:$t" "$tmp/fuse-mnt.log" || fail "no logout of $t on SIGTERM"
done
echo "PASS"
