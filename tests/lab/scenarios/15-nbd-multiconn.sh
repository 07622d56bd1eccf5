#!/bin/bash
# NBD multi-conn with the kernel's nbd client (issue 23 item 5): iserkit-target (--threads 2) <-
# iSCSI/TCP <- iserkit-nbd --threads 2 <- `nbd-client -C 2` (two NBD connections on one /dev/nbd0).
# Everything on 127.0.0.1 inside the VM.
#  - multi-conn: nbd-client -C 2 attaches through two NBD connections, and the bridge's status
#    socket shows them one on each of its two loops (`loops[].open_connections`);
#  - fio verify through /dev/nbd0 (O_DIRECT, libaio, one job per vCPU so both blk-mq hardware
#    queues, hence both NBD connections, are used): every block verified (crc32c); both loops served
#    NBD requests and both target sessions carried writes and reads (the target's status socket);
#  - mkfs.ext4, mount, copy a tree, e2fsck -fn clean, remount, every SHA-256 matches;
#  - flush: 32 MiB of random data written through the page cache of /dev/nbd0 (no O_DIRECT) reach
#    the target only with writeback; `sync` on the device must put at least one SYNCHRONIZE CACHE on
#    a target session (the kernel sends NBD_CMD_FLUSH only when the bridge offers
#    NBD_FLAG_SEND_FLUSH; the bridge must pass it on, not answer it itself); then kill -9 of the
#    bridge, and the target's backing file must hold the 32 MiB (what sync returned for reached
#    the target; nothing may be left in the bridge);
#  - measured, unpinned (TCG: relative figures only): fio 4 KiB random read QD32 and 1 MiB
#    sequential read QD8, two jobs, through /dev/nbd0 attached with -C 2, to iserkit-nbd --threads 1
#    and --threads 2 in turn (ISERKIT_LAB_BENCH_MULTICONN_ROUNDS rounds, default 2, of
#    ISERKIT_LAB_BENCH_MULTICONN_SECONDS s each, default 6); the figures are in the check's reason and
#    logs/nbd-multiconn.bench.tsv;
#  - iserkit-target exits 0 on SIGTERM.
source "$LAB_SOURCE/tests/lab/guest/lib.sh"
plan target bridge nbd-attach-C2 two-loops fio-verify both-connections-used mkfs mount-copy e2fsck \
  remount-verify flush-reaches-target data-after-kill9 nbd-detach threads-1-vs-2 target-exit
source "$out/job.env" 2>/dev/null || true
rounds=${ISERKIT_LAB_BENCH_MULTICONN_ROUNDS:-2}
secs=${ISERKIT_LAB_BENCH_MULTICONN_SECONDS:-6}

iqn=iqn.2026-11.org.iserkit.lab:nbd-multiconn
tree=/usr/include/linux
dev=/dev/nbd0
truncate -s 512M "$work/lun.img"
daemon target iserkit-target --iqn "$iqn" --lun "$work/lun.img" --threads 2 --listen 127.0.0.1:0 \
  --port-file "$work/port" --status-socket "$work/target.status"
check target serving iserkit-target "$work/port" 120 || give_up "iserkit-target did not start"
port=$(cat "$work/port")
url=iscsi://127.0.0.1:$port/$iqn/0

# status.py SOCKET: the status document; sessions: isid -> {read, write, other} of normal sessions
cp "$LAB_SOURCE/tests/support/status_socket.py" "$work/status.py"
status() { python3 "$work/status.py" "$1" "$2"; }

start_bridge() {  # start_bridge NAME THREADS: returns once it serves its socket
  rm -f "$work/$1.sock" "$work/$1.status"
  daemon "$1" iserkit-nbd "$url" --threads "$2" --socket "$work/$1.sock" --status-socket "$work/$1.status" \
    --log-level info
  serving "iserkit-nbd --threads $2" "$work/$1.sock" 120
}
modprobe nbd nbds_max=4 || give_up "modprobe nbd failed"
attach() {  # attach SOCKET
  wait_until 10 test "$(cat /sys/block/nbd0/size)" -eq 0 || { echo "nbd0 is still attached"; return 1; }
  nbd-client -unix "$1" "$dev" -b 4096 -C 2 || return 1
  wait_until 30 test "$(cat /sys/block/nbd0/size)" -gt 0 || { echo "nbd0 has no size"; return 1; }
  echo "$dev: $(blockdev --getsize64 $dev) bytes through nbd-client -unix -C 2"
}

check bridge start_bridge bridge 2 || give_up "iserkit-nbd did not serve $url"
check nbd-attach-C2 attach "$work/bridge.sock" || give_up "the kernel nbd client could not attach with -C 2"

two_loops() {
  nap 0.6  # the worker loops' counters are sampled every 250 ms
  status "$work/bridge.status" doc >"$work/doc.json" || return 1
  python3 - "$work/doc.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
loops = doc["loops"]
print("loops:", [(l["index"], l["open_connections"]) for l in loops])
assert doc["threads"] == 2 and len(loops) == 2, "not two loops: %s" % doc.get("threads")
assert [l["open_connections"] for l in loops] == [1, 1], "the two NBD connections are not one per loop"
print("two NBD connections from nbd-client -C 2, one on each of the bridge's two loops")
PY
}
check two-loops two_loops

status "$work/target.status" sessions >"$work/before.json"
fio_two_queues() {
  # One job per vCPU (cpus_allowed_policy=split): blk-mq maps each CPU to one hardware queue, and
  # nbd gives each hardware queue one connection, so both connections carry I/O.
  fio --name=multiconn --filename="$dev" --direct=1 --ioengine=libaio --iodepth=16 --rw=randwrite \
    --bs=16k --numjobs=2 --cpus_allowed=0-1 --cpus_allowed_policy=split --size=48M \
    --offset_increment=64M --verify=crc32c --do_verify=1 --verify_fatal=1 --group_reporting \
    --output="$work/fio.txt" || { tail -n 5 "$work/fio.txt"; return 1; }
  grep -q 'err= 0' "$work/fio.txt" || { grep 'err=' "$work/fio.txt"; return 1; }
  echo "fio: 2 jobs x 48 MiB of random 16 KiB writes through $dev, every block verified (crc32c)"
}
check fio-verify fio_two_queues
both_used() {
  nap 0.6
  status "$work/target.status" sessions >"$work/after.json" || return 1
  status "$work/bridge.status" doc >"$work/doc.json" || return 1
  python3 - "$work/before.json" "$work/after.json" "$work/doc.json" <<'PY'
import json, sys
before, after, doc = (json.load(open(p)) for p in sys.argv[1:4])
assert len(after) == 2, "the target has %d normal sessions, not 2" % len(after)
out = []
for s, c in after.items():
    w = c["write"] - before.get(s, {"write": 0})["write"]
    r = c["read"] - before.get(s, {"read": 0})["read"]
    out.append("session %s: %d writes %d reads" % (s, w, r))
    assert w > 0 and r > 0, "session %s carried no writes or no reads: %s" % (s, out)
for l in doc["loops"]:
    out.append("loop %d: %d requests" % (l["index"], l["requests"]))
    assert l["requests"] > 0, "loop %d served no NBD request" % l["index"]
print("; ".join(out))
PY
}
check both-connections-used both_used

check mkfs mkfs_ext4 "$dev" || give_up "mkfs.ext4 failed"
mkdir -p /mnt/multiconn
check mount-copy copy_tree_in "$dev" /mnt/multiconn 32 || give_up "mount and copy failed"
check e2fsck e2fsck -fn "$dev"
check remount-verify remount_verify "$dev" /mnt/multiconn

# Flush: buffered writes (page cache of the block device), then sync. The region past the file
# system's use is overwritten: 32 MiB at 448 MiB (the file system is not mounted any more).
flush_offset_mib=448
head -c "$(mib 32)" /dev/urandom >"$work/flush.bin"
flush() {
  local others_before others_after synced
  dd if="$work/flush.bin" of="$dev" bs=1M seek=$flush_offset_mib status=none || return 1
  others_before=$(status "$work/target.status" sessions | python3 -c \
    'import json,sys; print(sum(c["other"] for c in json.load(sys.stdin).values()))') || return 1
  sync "$dev" || return 1  # fsync of the block device: writeback, then a cache flush
  nap 0.3
  others_after=$(status "$work/target.status" sessions | python3 -c \
    'import json,sys; print(sum(c["other"] for c in json.load(sys.stdin).values()))') || return 1
  synced=$((others_after - others_before))
  echo "sync $dev: $synced non-read/write command(s) reached the target (SYNCHRONIZE CACHE)"
  ((synced >= 1))
}
check flush-reaches-target flush
after_kill() {
  kill -KILL "$bridge_pid" || return 1
  wait "$bridge_pid" 2>/dev/null
  unset "_daemons[bridge]"
  local want got
  want=$(sha "$work/flush.bin")
  got=$(dd if="$work/lun.img" bs=1M skip=$flush_offset_mib count=32 status=none | sha256sum | cut -d' ' -f1)
  [[ $got == "$want" ]] || { echo "the target's backing file lacks the synced 32 MiB after kill -9 of the bridge"; return 1; }
  echo "bridge killed (-9) after sync: the target's backing file holds the 32 MiB (SHA-256 matches)"
}
check data-after-kill9 after_kill
check nbd-detach nbd_detach "$dev"

# 1 vs 2 threads through /dev/nbd0 (nbd-client -C 2), unpinned, rounds interleaved.
fio_rate() {  # fio_rate RW BS QD -> "IOPS MiB/s"
  fio --name=m --filename="$dev" --direct=1 --ioengine=libaio --rw="$1" --bs="$2" --iodepth="$3" \
    --numjobs=2 --size=256M --offset_increment=256M --time_based --runtime="$secs" --ramp_time=1 \
    --group_reporting --output-format=json --output="$work/m.json" >/dev/null 2>&1 || return 1
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["jobs"][0]["read"]; print("%.0f %.1f" % (r["iops"], r["bw"] / 1024))' "$work/m.json"
}
bench() {
  local r t name rr sr
  printf 'round\tthreads\trandread_4k_qd32_iops\tread_1m_qd8_mibs\n' >"$logdir/$scenario.bench.tsv"
  for ((r = 1; r <= rounds; r++)); do
    for t in 1 2; do
      [[ $((r % 2)) == 0 ]] && t=$((3 - t))  # alternate which goes first
      name=bench${t}r$r
      start_bridge "$name" "$t" >/dev/null 2>&1 || { echo "bridge --threads $t did not start"; return 1; }
      attach "$work/$name.sock" >/dev/null || { echo "attach -C 2 to --threads $t failed"; return 1; }
      rr=$(fio_rate randread 4k 32) || { echo "fio 4k failed (--threads $t)"; return 1; }
      sr=$(fio_rate read 1M 8) || { echo "fio 1M failed (--threads $t)"; return 1; }
      nbd-client -d "$dev" >/dev/null 2>&1
      stop_daemon "$name" 30 >/dev/null || { echo "bridge --threads $t did not exit 0"; return 1; }
      printf '%s\t%s\t%s\t%s\n' "$r" "$t" "${rr%% *}" "${sr##* }" >>"$logdir/$scenario.bench.tsv"
    done
  done
  cat "$logdir/$scenario.bench.tsv"
  python3 - "$logdir/$scenario.bench.tsv" "$secs" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
def med(t, k):
    return statistics.median(float(r[k]) for r in rows if r["threads"] == t)
a, b = med("1", "randread_4k_qd32_iops"), med("2", "randread_4k_qd32_iops")
c, d = med("1", "read_1m_qd8_mibs"), med("2", "read_1m_qd8_mibs")
print("TCG, relative only; unpinned, -C 2, 2 jobs, %s s x %d rounds, medians: 4k QD32 randread %.0f -> %.0f IOPS (%.2fx), "
      "1M QD8 read %.0f -> %.0f MiB/s (%.2fx), --threads 1 -> 2" % (sys.argv[2], len(rows) // 2, a, b, b / a, c, d, d / c))
PY
}
check threads-1-vs-2 bench
check target-exit stop_daemon target
