#!/bin/bash
# Benchmark on Soft-RoCE: fio (nbd engine) via iserkit-nbd over iSER and TCP to iserkit-target, over iSER to tgtd
# lab: opt-in (a benchmark: scripts/lab.sh --only bench-iser); writes docs/benchmarks-iser.md
# Issue 6, part 3. fio's nbd engine drives, in one boot and interleaved, the same workloads through:
#   iserkit-iser  iserkit-nbd iser://   -> iserkit-target (Soft-RoCE)
#   iserkit-tcp   iserkit-nbd iscsi://  -> the same iserkit-target, same address (TCP)
#   iserkit-iser-slab  as iserkit-iser (whose default exposes each command through a memory window of
#                 its own, bound and invalidated per command), with --iser-stags whole-slab (the
#                 registered pool's rkey for the connection's life): issue 13 item 2's cost
#   tgtd-iser     iserkit-nbd iser://   -> tgtd's iSER portal (Soft-RoCE)
#   qemu-tgtd     qemu-nbd iscsi:// (libiscsi) -> tgtd over TCP: the peers' chain, for reference
# All four serve one backing file on the guest's tmpfs (the guest has no disk): a memory LUN for all
# systems alike. Workloads: 4 KiB random read QD1 and QD32, 4 KiB random write QD32, 1 MiB
# sequential read and write QD8, and the same 8 MiB in flight as 512 KiB sequential QD16: over iSER
# iserkit-nbd advertises a 512 KiB maximum NBD request (iSER transfers are capped at 512 KiB, tgt's
# RDMA buffer size) and libnbd refuses larger requests, so a workload whose requests exceed a
# bridge's advertised maximum (nbdinfo) is not run there and the page says "n/a" and why.
# REPS repetitions, the systems' order rotated each time. Per run:
# IOPS, MiB/s, p50/p99 latency, CPU ticks of each daemon (/proc/PID/stat) and of the whole VM
# (/proc/stat). guest/bench_report.py turns the runs into the markdown page. PASS: every system
# (qemu-tgtd may SKIP when qemu-nbd cannot reach iSCSI) ran every workload with non-zero figures.
# Knobs (host environment, passed through job.env): ISERKIT_LAB_BENCH_REPS (3),
# ISERKIT_LAB_BENCH_SECONDS (4 s per run), ISERKIT_LAB_BENCH_SIZE_MIB (512, the backing file).
source "$LAB_SOURCE/tests/lab/guest/lib.sh"
# shellcheck disable=SC1091
source "$out/job.env"   # LAB_ACCEL, LAB_CPUS, LAB_MEM, LAB_COMMIT, ISERKIT_LAB_BENCH_*: for the report
plan soft-roce backing-file iserkit-target tgtd bridge-iserkit-iser bridge-iserkit-iser-slab bridge-iserkit-tcp \
  bridge-tgtd-iser bridge-qemu-tgtd runs figures-iserkit-iser figures-iserkit-iser-slab figures-iserkit-tcp \
  figures-tgtd-iser figures-qemu-tgtd report iser-posts

reps=${ISERKIT_LAB_BENCH_REPS:-3}
secs=${ISERKIT_LAB_BENCH_SECONDS:-4}
size_mib=${ISERKIT_LAB_BENCH_SIZE_MIB:-512}
python=/usr/bin/python3

check soft-roce rxe_up || give_up "no Soft-RoCE device"
if reason=$(iser_missing); then give_up "$reason"; fi
command -v tgtd >/dev/null || give_up "tgt is not installed (tgtd is one of the compared systems)"
fio --enghelp 2>/dev/null | grep -qw nbd || give_up "fio has no nbd engine"
[[ -x $python ]] || give_up "$python is missing (it writes the report)"

# One backing file for every target, filled so that no run pays for tmpfs page allocation.
image=$work/bench.img
fill() {
  dd if=/dev/zero of="$image" bs=1M count="$size_mib" status=none || return 1
  echo "$image: $size_mib MiB on $(stat -f -c %T "$work") (the guest has no disk: a memory LUN for every system)"
}
check backing-file fill || give_up "cannot create the backing file"

# iserkit-target on :3261 (tgtd takes 3260 for both its TCP and its iSER portal); each portal of
# iserkit-target listens for iSCSI/TCP and, as an RDMA device exists, for iSER.
iqn=iqn.2026-11.org.iserkit.lab:bench
tgt_iqn=iqn.2026-11.org.iserkit.lab:bench-tgtd-iser
tgt_tcp_iqn=iqn.2026-11.org.iserkit.lab:bench-tgtd-tcp
our_portal=$LAB_RDMA_IP:3261
tgt_portal=$LAB_RDMA_IP:3260
target_cmd=(iserkit-target --iqn "$iqn" --lun "$image" --listen "$our_portal" --port-file "$work/port")
daemon target "${target_cmd[@]}"
check iserkit-target serving iserkit-target "$work/port" 120 || give_up "iserkit-target did not start"

# tgtd: one iSER target and one TCP target (for qemu-nbd) on the same file; rdwr backing store.
# tgtd allocates and registers its iSER buffer pool (1 GiB by default) at the first iSER connect
# request; under TCG that outlasts the initiator's 15 s login timeout, and tgtd then faults in
# librdmacm on the abandoned connection. A 128 MiB pool (256 buffers of 512 KiB, far more than the
# deepest queue here) and one discovery before the bridge starts keep that out of the runs.
tgtd_cmd=(tgtd -f --iser pool_sz_mb=128)
tgtd_up() {
  daemon tgtd "${tgtd_cmd[@]}"
  wait_until 60 tgtadm --op show --mode sys || { echo "tgtadm cannot reach tgtd"; return 1; }
  tgtadm --lld iser --op new --mode target --tid 1 -T "$tgt_iqn" &&
    tgtadm --lld iser --op new --mode logicalunit --tid 1 --lun 1 -b "$image" &&
    tgtadm --lld iser --op bind --mode target --tid 1 -I ALL &&
    tgtadm --lld iser --op bind --mode target --tid 1 -Q "$LAB_INITIATOR_IQN" || return 1
  tgtadm --lld iscsi --op new --mode target --tid 2 -T "$tgt_tcp_iqn" &&
    tgtadm --lld iscsi --op new --mode logicalunit --tid 2 --lun 1 -b "$image" &&
    tgtadm --lld iscsi --op bind --mode target --tid 2 -I ALL || return 1
  timeout 120 iserkit --initiator-name "$LAB_INITIATOR_IQN" discover "iser://$tgt_portal" | grep -q "$tgt_iqn" ||
    { echo "tgtd does not list $tgt_iqn in a discovery over iSER"; return 1; }
  kill -0 "${_daemons[tgtd]}" 2>/dev/null || { echo "tgtd died during the first iSER connection"; return 1; }
  echo "tgtd: $tgt_iqn (iSER, buffer pool ready) and $tgt_tcp_iqn (TCP), LUN 1 = $image, portals $tgt_portal"
}
check tgtd tgtd_up || give_up "tgtd did not come up"

# The systems: name, bridge command, which daemon is the target. Every bridge serves a Unix socket.
systems=(iserkit-iser iserkit-iser-slab iserkit-tcp tgtd-iser qemu-tgtd)
declare -A bridge_cmd=() target_of=() label=() bridge_name=()
bridge_cmd[iserkit-iser]="iserkit-nbd iser://$our_portal/$iqn/0 --socket $work/iserkit-iser.sock --initiator-name $LAB_INITIATOR_IQN --log-level info"
bridge_cmd[iserkit-iser-slab]="iserkit-nbd iser://$our_portal/$iqn/0 --socket $work/iserkit-iser-slab.sock --initiator-name $LAB_INITIATOR_IQN --iser-stags whole-slab --log-level info"
bridge_cmd[iserkit-tcp]="iserkit-nbd iscsi://$our_portal/$iqn/0 --socket $work/iserkit-tcp.sock --initiator-name $LAB_INITIATOR_IQN"
bridge_cmd[tgtd-iser]="iserkit-nbd iser://$tgt_portal/$tgt_iqn/1 --socket $work/tgtd-iser.sock --initiator-name $LAB_INITIATOR_IQN"
bridge_cmd[qemu-tgtd]="qemu-nbd --socket=$work/qemu-tgtd.sock --persistent --format=raw iscsi://$tgt_portal/$tgt_tcp_iqn/1"
target_of=([iserkit-iser]=target [iserkit-iser-slab]=target [iserkit-tcp]=target [tgtd-iser]=tgtd [qemu-tgtd]=tgtd)
bridge_name=([iserkit-iser]=iserkit-nbd [iserkit-iser-slab]=iserkit-nbd [iserkit-tcp]=iserkit-nbd [tgtd-iser]=iserkit-nbd [qemu-tgtd]=qemu-nbd)
label=([iserkit-iser]="iserkit-nbd → iserkit-target, iSER" [iserkit-iser-slab]="iserkit-nbd → iserkit-target, iSER, whole-slab STag" [iserkit-tcp]="iserkit-nbd → iserkit-target, TCP"
  [tgtd-iser]="iserkit-nbd → tgtd, iSER" [qemu-tgtd]="qemu-nbd (libiscsi) → tgtd, TCP")
ran=()
declare -A max_request=()
# max_request_of SOCKET: the largest NBD request the bridge accepts (NBD_INFO_BLOCK_SIZE), 0 = none said
max_request_of() {
  nbdinfo --no-content --json "nbd+unix:///?socket=$1" 2>/dev/null | jq -r '.exports[0].block_size_maximum // 0'
}
for s in "${systems[@]}"; do
  if [[ $s == qemu-tgtd ]] && ! command -v qemu-nbd >/dev/null; then
    skip "bridge-$s" "qemu-nbd is not installed (qemu-utils): the peers' chain is left out"
    continue
  fi
  # shellcheck disable=SC2086  # the command lines above are word lists without spaces in words
  daemon "bridge-$s" ${bridge_cmd[$s]}
  if check "bridge-$s" serving "${bridge_name[$s]}" "$work/$s.sock" 180; then
    # the two iSER bridges of iserkit-target must run the STag modes they are compared in
    want_stags=
    [[ $s == iserkit-iser ]] && want_stags='STags: per command'
    [[ $s == iserkit-iser-slab ]] && want_stags='STags: whole slab'
    if [[ -n $want_stags ]] && ! wait_until 10 grep -q "$want_stags" "$logdir/$scenario.bridge-$s.log"; then
      fail "figures-$s" "the bridge does not say '$want_stags': $(grep -o 'STags: [^)]*' "$logdir/$scenario.bridge-$s.log" | head -n 1)"
      continue
    fi
    ran+=("$s")
    max_request[$s]=$(max_request_of "$work/$s.sock")
    echo "$s: maximum NBD request ${max_request[$s]:-?} bytes (0: not advertised)"
  elif [[ $s == qemu-tgtd ]]; then
    tail -n 3 "$logdir/$scenario.bridge-$s.log"
  fi
done
((${#ran[@]})) || give_up "no bridge came up"

# ---- the runs
workloads=(randread-4k-qd1 randread-4k-qd32 randwrite-4k-qd32 read-1m-qd8 write-1m-qd8 read-512k-qd16 write-512k-qd16)
declare -A wl_rw=([randread-4k-qd1]=randread [randread-4k-qd32]=randread [randwrite-4k-qd32]=randwrite
  [read-1m-qd8]=read [write-1m-qd8]=write [read-512k-qd16]=read [write-512k-qd16]=write)
declare -A wl_bs=([randread-4k-qd1]=4k [randread-4k-qd32]=4k [randwrite-4k-qd32]=4k [read-1m-qd8]=1m [write-1m-qd8]=1m
  [read-512k-qd16]=512k [write-512k-qd16]=512k)
declare -A wl_bytes=([4k]=4096 [512k]=524288 [1m]=1048576)
declare -A wl_qd=([randread-4k-qd1]=1 [randread-4k-qd32]=32 [randwrite-4k-qd32]=32 [read-1m-qd8]=8 [write-1m-qd8]=8
  [read-512k-qd16]=16 [write-512k-qd16]=16)
# applies WORKLOAD SYSTEM: are the workload's requests within what the system's bridge accepts?
applies() {
  local max=${max_request[$2]:-0}
  ((max == 0 || ${wl_bytes[${wl_bs[$1]}]} <= max))
}
fio_args() {  # fio_args WORKLOAD SOCKET: the fio command line of one run
  echo fio --name="$1" --ioengine=nbd "--uri=nbd+unix:///?socket=$2" --rw="${wl_rw[$1]}" --bs="${wl_bs[$1]}" \
    --iodepth="${wl_qd[$1]}" --size="${size_mib}M" --time_based --runtime="$secs" --lat_percentiles=1 \
    --percentile_list=50:99 --output-format=json
}
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }  # utime+stime, all threads
vm_busy() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }   # user nice system irq softirq
runs=$work/runs.tsv
printf 'rep\tworkload\tsystem\tstatus\tiops\tbw_bytes\tio_bytes\tp50_ns\tp99_ns\tbridge_ticks\ttarget_ticks\tvm_ticks\telapsed_s\n' >"$runs"
one_run() {  # one_run REP WORKLOAD SYSTEM: one fio run, one line of runs.tsv
  local rep=$1 wl=$2 s=$3 bpid tpid b0 t0 v0 start rc json fields
  if ! applies "$wl" "$s"; then
    printf '%s\t%s\t%s\tn/a: max request %s\t0\t0\t0\t0\t0\t0\t0\t0\t0\n' "$rep" "$wl" "$s" "${max_request[$s]}" >>"$runs"
    echo "rep $rep $wl $s: not run, the bridge accepts requests of at most ${max_request[$s]} bytes"
    return 0
  fi
  bpid=${_daemons[bridge-$s]} tpid=${_daemons[${target_of[$s]}]}
  json=$work/fio-$rep-$wl-$s.json
  b0=$(ticks "$bpid") t0=$(ticks "$tpid") v0=$(vm_busy) start=$EPOCHREALTIME
  # shellcheck disable=SC2046
  timeout $((secs * 10 + 120)) $(fio_args "$wl" "$work/$s.sock") >"$json.raw" 2>"$json.err"
  rc=$?
  printf -v fields '%s\t%s\t%s' "$(($(ticks "$bpid") - b0))" "$(($(ticks "$tpid") - t0))" "$(($(vm_busy) - v0))"
  # fio's nbd engine prints "fio: connected to NBD server" before the JSON
  sed -n '/^{/,$p' "$json.raw" >"$json"
  local m
  m=$(jq -r '.jobs[0] | (if .read.io_bytes > 0 then .read else .write end)
    | [.iops, .bw_bytes, .io_bytes, .lat_ns.percentile["50.000000"] // 0, .lat_ns.percentile["99.000000"] // 0] | @tsv' \
    "$json" 2>/dev/null)
  [[ -n $m ]] || { m=$'0\t0\t0\t0\t0'; ((rc)) || rc=1; }
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "$wl" "$s" "$rc" "$m" "$fields" "$(seconds_since "$start")" >>"$runs"
  echo "rep $rep $wl $s: exit $rc, $(cut -f1,2 <<<"$m" | awk '{ printf "%.0f IOPS %.1f MiB/s", $1, $2 / 1048576 }')"
  ((rc == 0)) || tail -n 3 "$json.err"
}
bench() {
  local rep wl i n=${#ran[@]} start=$EPOCHREALTIME
  for ((rep = 1; rep <= reps; rep++)); do
    for wl in "${workloads[@]}"; do
      # interleaved, and the order rotated each repetition: no system always runs first
      for ((i = 0; i < n; i++)); do one_run "$rep" "$wl" "${ran[(i + rep - 1) % n]}"; done
    done
  done
  echo "$(awk -F'\t' 'NR > 1 && $4 !~ /^n\/a/' "$runs" | wc -l) runs of ${secs} s (${reps} repetitions x ${#workloads[@]} workloads x $n systems, less those n/a) in $(seconds_since "$start") s"
}
check runs bench

# figures-SYSTEM: every workload, every repetition ran and moved data
figures() {
  local s=$1
  awk -F'\t' -v s="$s" -v all=$((reps * ${#workloads[@]})) '
    NR > 1 && $3 == s && $4 ~ /^n\/a/ { na++; why = $4; next }
    NR > 1 && $3 == s { n++; if ($4 == 0 && $5 > 0 && $6 > 0) ok++; else bad = bad " rep" $1 "/" $2 "(exit " $4 ")" }
    END {
      if (n + na != all || ok != n || n == 0) { printf "%d of %d runs produced figures;%s\n", ok, all - na, bad; exit 1 }
      printf "%d runs, all with non-zero IOPS and MiB/s%s\n", n, na ? sprintf("; %d not applicable (%s)", na, why) : ""
    }' "$runs"
}
for s in "${systems[@]}"; do
  [[ -z ${reported[figures-$s]:-} ]] || continue
  if [[ " ${ran[*]} " == *" $s "* ]]; then
    check "figures-$s" figures "$s"
  elif [[ $s == qemu-tgtd ]]; then
    skip "figures-$s" "qemu-nbd did not serve (see bridge-$s): the reference chain is left out"
  else
    fail "figures-$s" "its bridge did not come up"
  fi
done

# ---- the report: written to docs/ (copied into the source tree by the host) only when every
# compared system produced figures; otherwise next to the logs, for reading
report() {
  local dest=$out/benchmarks-iser.md commands=$work/commands.txt s
  if ! grep -q $'\tFAIL\t' <(grep "^$scenario"$'\t' "$results"); then
    mkdir -p "$out/docs"
    dest=$out/docs/benchmarks-iser.md
  fi
  {
    printf 'iserkit-target\t%s\n' "${target_cmd[*]}"
    printf 'tgtd\t%s\n' "${tgtd_cmd[*]}; tgtadm --lld iser: target $tgt_iqn, LUN 1 -b $image, bind -I ALL -Q $LAB_INITIATOR_IQN; tgtadm --lld iscsi: target $tgt_tcp_iqn, LUN 1 -b $image, bind -I ALL"
    for s in "${ran[@]}"; do printf 'bridge %s\t%s\n' "$s" "${bridge_cmd[$s]}"; done
    for wl in "${workloads[@]}"; do printf 'fio %s\t%s\n' "$wl" "$(fio_args "$wl" SOCKET)"; done
  } >"$commands"
  for s in "${systems[@]}"; do printf '%s\t%s\t%s\n' "$s" "${label[$s]}" "${bridge_name[$s]}/$([[ ${target_of[$s]} == target ]] && echo iserkit-target || echo tgtd)"; done >"$work/systems.tsv"
  BENCH_DATE=$(date -u '+%Y-%m-%d %H:%M UTC') BENCH_KERNEL=$(uname -r) BENCH_VCPUS=$(nproc) \
    BENCH_MEM_MIB=$(awk '/^MemTotal/ { printf "%d", $2 / 1024 }' /proc/meminfo) BENCH_ACCEL=${LAB_ACCEL:-unknown} \
    BENCH_COMMIT=${LAB_COMMIT:-unknown} BENCH_HOST_CPU=${LAB_HOST_CPU:-unknown} BENCH_REPS=$reps BENCH_SECONDS=$secs \
    BENCH_SIZE_MIB=$size_mib BENCH_FS=$(stat -f -c %T "$work") BENCH_RXE="$LAB_RDMA_DEV on $LAB_RDMA_NETDEV ($LAB_RDMA_IP)" \
    BENCH_CLK_TCK=$(getconf CLK_TCK) \
    "$python" "$LAB_SOURCE/tests/lab/guest/bench_report.py" "$runs" "$work/systems.tsv" "$commands" >"$dest" || return 1
  cp "$runs" "$logdir/$scenario.runs.tsv"
  cat "$dest"
  echo "report: $dest"
}
check report report

for s in "${ran[@]}"; do stop_daemon "bridge-$s" 30 >/dev/null; done
stop_daemon target 30 >/dev/null
tgtadm --op delete --mode system >/dev/null 2>&1   # how tgtd is told to exit
stop_daemon tgtd 20 >/dev/null || true

# The iSER send queues' use (issue 23 item 7), from the "iser posts:" line each iserkit program
# prints at exit: ibv_post_send calls and work requests per SCSI command, per bridge (its STag
# mode) and for iserkit-target (both iSER bridges' commands). ISERKIT_LAB_ISER_CHAIN=off measures
# the posting before the chaining.
iser_posts() {
  local f line out=() chain=${ISERKIT_ISER_CHAIN:-on}
  for f in bridge-iserkit-iser bridge-iserkit-iser-slab bridge-tgtd-iser target; do
    line=$(grep -o 'iser posts: .*' "$logdir/$scenario.$f.log" | tail -n 1)
    [[ -n $line ]] || continue
    out+=("$(awk -v who="$f" '{ for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      c = v["scsi_commands"]; if (c == 0) c = 1
      printf "%s: %.2f posts/cmd, %.2f WRs/cmd (%d cmds)", who, v["post_send_calls"] / c, v["work_requests"] / c, v["scsi_commands"] }' <<<"$line")")
  done
  ((${#out[@]} > 0)) || { echo "no 'iser posts:' line in the logs (a build without the counter)"; return 1; }
  local joined
  joined=$(printf '%s; ' "${out[@]}")
  echo "chain=$chain; ${joined%; }"
}
if grep -q 'iser posts:' "$logdir/$scenario.target.log" 2>/dev/null; then
  check iser-posts iser_posts
else
  skip iser-posts "the programs print no 'iser posts:' line (a build without the counter)"
fi
