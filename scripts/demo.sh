#!/usr/bin/env bash
# The main job, end to end, on the embedded default: the bundled target serves a fresh sparse
# image over iSCSI/TCP on loopback, the initiator library connects to it, and the host attaches the
# LUN as a real block device — where the kernel has nbd, through iserkit-nbd and the kernel's nbd
# client; otherwise through iserkit-fuse (the FUSE view: the LUN is a file) and a loop device over
# that file. Then: mkfs.ext4, mount, copy a real directory tree, unmount, e2fsck, remount, verify
# every checksum.
#
# Usage: scripts/demo.sh [--size 2G] [--tree DIR] [--keep]      (needs root: mount, losetup)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

size=2G
tree=/usr/include
keep=0
while (($#)); do
  case $1 in
    --size) size=$2; shift 2 ;;
    --tree) tree=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option $1" ;;
  esac
done
((EUID == 0)) || die "the demo mounts a filesystem: run it as root (sudo $0)"
[[ -d $tree ]] || die "no directory $tree to copy"

say "installing what is missing"
"$ISERKIT_SOURCE/packaging/install-deps.sh" demo
say "building the programs (not the tests: scripts/test.sh builds those)"
build_programs
bin=$ISERKIT_BUILD/bin

work=$(mktemp -d /tmp/iserkit-demo.XXXXXX)
pids=()
attached=""   # block device in use
mode=""
cleanup() {
  set +e
  mountpoint -q "$work/mnt" && umount "$work/mnt"
  if [[ $mode == nbd && -n $attached ]]; then nbd-client -d "$attached" >/dev/null 2>&1; fi
  if [[ $mode == fuse ]]; then
    [[ -n $attached ]] && losetup -d "$attached"
    mountpoint -q "$work/fuse" && fusermount3 -u "$work/fuse"
  fi
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  if ((keep)); then echo "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

say "starting iserkit-target on a fresh sparse $size image"
truncate -s "$size" "$work/volume.img"
iqn=iqn.2026-11.org.iserkit:demo
"$bin/iserkit-target" --iqn "$iqn" --lun "$work/volume.img" --listen 127.0.0.1:0 \
  --port-file "$work/target.port" >"$work/target.log" 2>&1 &
pids+=($!)
wait_for_file "$work/target.port" 10 || { cat "$work/target.log"; die "target did not start"; }
port=$(cat "$work/target.port")
url="iscsi://127.0.0.1:$port/$iqn/0"
echo "target: $url"

if [[ -e /dev/nbd0 ]] || modprobe nbd 2>/dev/null; then
  mode=nbd
  say "serving the LUN over NBD with iserkit-nbd"
  "$bin/iserkit-nbd" "$url" --socket "$work/nbd.sock" >"$work/nbd.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do [[ -S $work/nbd.sock ]] && break; sleep 0.1; done
  [[ -S $work/nbd.sock ]] || { cat "$work/nbd.log"; die "iserkit-nbd did not start"; }
  nbdinfo "nbd+unix:///?socket=$work/nbd.sock" | sed 's/^/  /'
  attached=/dev/nbd0
  say "attaching with the kernel nbd client at $attached"
  nbd-client -unix "$work/nbd.sock" "$attached" -b 4096 >/dev/null
else
  mode=fuse
  say "this kernel has no nbd module: mounting the FUSE view (iserkit-fuse) + a loop device"
  mkdir -p "$work/fuse"
  "$bin/iserkit-fuse" "iscsi://127.0.0.1:$port" "$work/fuse" --foreground >"$work/fuse.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do mountpoint -q "$work/fuse" && break; sleep 0.1; done
  mountpoint -q "$work/fuse" || { cat "$work/fuse.log"; die "iserkit-fuse did not mount"; }
  lunfile="$work/fuse/$iqn/lun0"
  [[ -f $lunfile ]] || { ls -lR "$work/fuse"; die "no LUN file $lunfile"; }
  ls -l "$work/fuse/$iqn" | sed 's/^/  /'
  python3 -c 'import json, sys; i = json.load(open(sys.argv[1])); l = i["luns"][0]
print("  info: %s lun0: %s %s, %d x %d-byte blocks, serial %s" % (i["target"], l["vendor"], l["product"],
      l["blocks"], l["block_size"], l["serial"]))' "$work/fuse/$iqn/info" 2>/dev/null || true
  attached=$(losetup --find --show --direct-io=on "$lunfile" 2>/dev/null ||
             losetup --find --show "$lunfile")
fi
echo "block device: $attached ($(blockdev --getsize64 "$attached") bytes)"

say "mkfs.ext4, mount, copy $tree"
mkfs.ext4 -q -F "$attached"
mkdir -p "$work/mnt"
mount "$attached" "$work/mnt"
(cd "$tree" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$work/source.sha256"
files=$(wc -l <"$work/source.sha256")
bytes=$(du -sb --apparent-size "$tree" | cut -f1)
t0=$(date +%s.%N)
cp -a "$tree/." "$work/mnt/"
sync -f "$work/mnt"
umount "$work/mnt"
t1=$(date +%s.%N)

say "e2fsck (must be clean)"
e2fsck -fn "$attached"

say "remount and verify every checksum"
mount "$attached" "$work/mnt"
t2=$(date +%s.%N)
echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
(cd "$work/mnt" && sha256sum --quiet -c "$work/source.sha256")
t3=$(date +%s.%N)
umount "$work/mnt"

rate() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.1f MiB/s", b / 1048576 / (s > 0 ? s : 1e-9) }'; }
write_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
read_s=$(awk -v a="$t2" -v b="$t3" 'BEGIN { print b - a }')
say "done: the remote LUN held a real filesystem end to end"
printf '  path:     iserkit-target (io_uring, %s) <- iSCSI/TCP <- %s\n' "$size sparse image" \
  "$([[ $mode == nbd ]] && echo "iserkit-nbd <- kernel nbd $attached" || echo "iserkit-fuse <- loop $attached")"
printf '  copied:   %s files, %s bytes from %s\n' "$files" "$bytes" "$tree"
printf '  write:    %.2f s (copy + sync + unmount), %s\n' "$write_s" "$(rate "$bytes" "$write_s")"
printf '  verify:   %.2f s (remount, read back, sha256 of every file), %s\n' "$read_s" "$(rate "$bytes" "$read_s")"
printf '  e2fsck:   clean\n'
