#!/usr/bin/env bash
# The iserkit lab, host side: boots Debian's own kernel (bookworm's 6.1 by default, trixie-backports'
# 7.x with --kernel 7) in QEMU (KVM when /dev/kvm works, else TCG), the host's root file system
# shared read-only over virtio-9p under a tmpfs overlay, runs the lab scenarios
# (tests/lab/scenarios/NN-name.sh) in that one boot, and prints what passed, failed and was skipped,
# with reasons, times and the kernel. The guest side is tests/lab/guest/.
#
# Usage: tests/lab/lab.sh [options]
#   --bin DIR        the build's bin directory (default $ISERKIT_BIN, else <source>/build/bin)
#   --out DIR        results directory (default: a new /var/tmp/iserkit-lab.XXXXXX, kept)
#   --only A,B       run only these scenarios (names as in --list); the opt-in ones (benchmarks,
#                    marked "(opt-in)" in --list) run only when named here
#   --list           list the scenarios and exit
#   --accel A        kvm, tcg or auto (default: $ISERKIT_LAB_ACCEL, else auto = KVM when usable)
#   --kernel K       6.1 (Debian 12's linux-image-amd64) or 7 (trixie-backports' 7.x, fetched through
#                    a private apt state); default $ISERKIT_LAB_KERNEL, else 6.1
#   --install        apt-get install the lab's packages that are missing (scripts/lab.sh does)
#   --timeout SEC    power the VM off after SEC seconds (default 5400; TCG on a busy host is slow)
#   --mem MIB        guest memory (default 3072), --cpus N (default 2)
#   --vm-status      exit status says only whether the VM ran and reported (for ctest's lab_boot)
#   --report NAME    do not boot: print scenario NAME's results from --out and exit 0 (passed),
#                    1 (a check failed) or 77 (skipped, or the lab did not run)
#   -v, --verbose    also print the guest kernel's console messages
# Environment: ISERKIT_LAB_CACHE (kernel, initramfs; default /var/tmp/iserkit-lab-cache),
#   ISERKIT_LAB_KERNEL (6.1 or 7, as --kernel), ISERKIT_LAB_KERNEL_PKG (6.1: default what
#   linux-image-amd64 depends on), ISERKIT_LAB_KERNEL_ABI (7: default what trixie-backports'
#   linux-image-amd64 depends on, e.g. 7.3.4+deb13-amd64), ISERKIT_LAB_QEMU,
#   ISERKIT_LAB_BENCH_* (passed to the guest: the benchmark scenarios' knobs, see tests/lab/README.md),
#   ISERKIT_LAB_ISER_STAGS (passed to the guest: ISERKIT_ISER_STAGS of every iserkit initiator there),
#   ISERKIT_LAB_ISER_CHAIN (passed to the guest: ISERKIT_ISER_CHAIN of every iserkit program there;
#   off = RDMA Writes and Bind MWs posted on their own, as before issue 23 item 7).
# Files a scenario leaves in the results directory's docs/ (generated benchmark pages) are copied to
#   the source tree's docs/ when the run ends.
# Exit status: 0 nothing failed; 1 a check failed; 2 usage or the VM broke (timeout, no results);
#   77 the lab cannot run here (no qemu, no kernel), with the reason.
set -euo pipefail

lab_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source_dir=$(cd "$lab_dir/../.." && pwd)
bin_dir=${ISERKIT_BIN:-$source_dir/build/bin}
out=""
only=""
install=0
vm_status=0
report=""
verbose=0
timeout_s=5400
mem=3072
cpus=2
accel=${ISERKIT_LAB_ACCEL:-auto}
kernel_series=${ISERKIT_LAB_KERNEL:-6.1}
cache=${ISERKIT_LAB_CACHE:-/var/tmp/iserkit-lab-cache}
qemu=${ISERKIT_LAB_QEMU:-qemu-system-x86_64}
busybox=/bin/busybox
# What the lab installs with --install: QEMU and the initramfs tools, and the peers the scenarios run.
# python3-rtslib-fb: the iser-lio scenario configures the kernel's LIO target (with isert) through it;
# dmsetup: iser-chain's timeout-abort puts a dm-delay device under a LUN.
# multipath-tools, sg3-utils: alua-multipathd runs multipathd (prio alua), sg_rtpg and sg_stpg.
lab_packages=(qemu-system-x86 busybox-static kmod rdma-core ibverbs-utils rdmacm-utils perftest tgt
  open-iscsi nbd-client e2fsprogs fio python3-rtslib-fb dmsetup multipath-tools sg3-utils)

note() { echo "lab: $*" >&2; }
unavailable() { echo "lab: SKIP: the lab cannot run here: $*" >&2; [[ -z $out ]] || echo "$*" >"$out/unavailable"; exit 77; }
broken() { echo "lab: ERROR: $*" >&2; exit 2; }
usage() { sed -n '8,33p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit "${1:-2}"; }

scenario_files() { find "$lab_dir/scenarios" -maxdepth 1 -name '[0-9][0-9]-*.sh' | sort; }
scenario_name() { local b; b=$(basename "$1" .sh); echo "${b#[0-9][0-9]-}"; }
# opt-in scenarios (a "# lab: opt-in" line in the file: the benchmarks) run only when --only names them
scenario_opt_in() { grep -q '^# lab: opt-in' "$1"; }

while (($#)); do
  case $1 in
    --bin) bin_dir=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --install) install=1; shift ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    --cpus) cpus=$2; shift 2 ;;
    --accel) accel=$2; shift 2 ;;
    --kernel) kernel_series=$2; shift 2 ;;
    --vm-status) vm_status=1; shift ;;
    --report) report=$2; shift 2 ;;
    --list)
      for f in $(scenario_files); do
        printf '%-22s %s%s\n' "$(scenario_name "$f")" "$(scenario_opt_in "$f" && echo '(opt-in) ')" "$(sed -n '2s/^# //p' "$f")"
      done
      exit 0 ;;
    -v|--verbose) verbose=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "lab: unknown option $1" >&2; usage 2 ;;
  esac
done

# ------------------------------------------------------------------------------------ summary ----
# results.tsv (written by the guest): scenario TAB check TAB PASS|FAIL|SKIP TAB seconds TAB reason TAB kernel
# scenarios.tsv: scenario TAB seconds TAB exit status TAB why it gave up (empty: it ran to the end) TAB kernel
# A scenario FAILs when a check failed, is SKIPped when it gave up before its subject could be tried
# (iSER missing, ...), and PASSes otherwise; skipped checks of a passing scenario are listed.
print_tables() {  # print_tables DIR [SCENARIO]
  awk -F'\t' -v want="${2:-}" '
    function cut(s) { return length(s) > 100 ? substr(s, 1, 97) "..." : s }
    function flush() {  # a run of skipped checks with one reason: one row
      if (run == 0) return
      label = run == 1 ? rsc "/" rfirst : rsc "/" rfirst " .. " rlast " (" run " checks)"
      printf "  %-4s %7s  %-46s  %s\n", "SKIP", "-", label, cut(rreason)
      run = 0
    }
    FNR == 1 { file++ }
    want != "" && $1 != want { next }
    file == 1 && !header++ { printf "  %-4s %7s  %-46s  %s\n", "", "time", "scenario/check", "reason" }
    file == 1 {
      if ($6 != "" && !(($6) in seenk)) { seenk[$6] = 1; kernels = kernels (kernels == "" ? "" : ", ") $6 }
      total[$3]++; n[$1]++; if ($3 == "PASS") npass[$1]++
      if ($3 == "FAIL" && !(($1) in firstfail)) firstfail[$1] = $2 ": " $5
      if ($3 == "SKIP") { skipped[$1] = skipped[$1] (skipped[$1] == "" ? "" : ", ") $2; skipwhy[$1] = $5 }
      if ($3 == "SKIP" && run > 0 && rsc == $1 && rreason == $5) { run++; rlast = $2; next }
      flush()
      if ($3 == "SKIP") { run = 1; rsc = $1; rfirst = $2; rlast = $2; rreason = $5; next }
      printf "  %-4s %6.1fs  %-46s  %s\n", $3, $4, $1 "/" $2, cut($5)
      next
    }
    file == 2 { flush(); order[++m] = $1; took[$1] = $2; rc[$1] = $3; gave[$1] = $4 }
    END {
      flush()
      print ""
      printf "  %-24s %-6s %8s  %s\n", "scenario", "result", "time", "reason"
      for (i = 1; i <= m; i++) {
        s = order[i]
        if (s in firstfail) { st = "FAIL"; why = firstfail[s] }
        else if (gave[s] != "" || npass[s] == 0) { st = "SKIP"; why = gave[s] != "" ? gave[s] : skipwhy[s] }
        else {
          st = "PASS"; why = npass[s] "/" n[s] " checks passed"
          if (skipped[s] != "") why = why "; skipped: " skipped[s] " (" skipwhy[s] ")"
        }
        count[st]++
        printf "  %-24s %-6s %7.1fs  %s\n", s, st, took[s], cut(why)
      }
      printf "  scenarios: %d passed, %d failed, %d skipped; checks: %d passed, %d failed, %d skipped\n",
        count["PASS"], count["FAIL"], count["SKIP"], total["PASS"], total["FAIL"], total["SKIP"]
      printf "  kernel: %s\n", kernels == "" ? "not recorded" : kernels
    }' "$1/results.tsv" "$1/scenarios.tsv"
}
# scenario_status DIR NAME: PASS, FAIL or SKIP (the rule above)
scenario_status() {
  print_tables "$1" "$2" | awk -v s="$2" '$1 == s && ($2 == "PASS" || $2 == "FAIL" || $2 == "SKIP") { st = $2 } END { print st }'
}

if [[ -n $report ]]; then
  [[ -n $out ]] || broken "--report needs --out DIR"
  if [[ -f $out/unavailable ]]; then echo "SKIP: the lab did not run: $(cat "$out/unavailable")"; exit 77; fi
  [[ -s $out/results.tsv ]] || { echo "SKIP: no lab results in $out (lab_boot did not run or broke)"; exit 77; }
  grep -q "^$report"$'\t' "$out/scenarios.tsv" 2>/dev/null ||
    { echo "SKIP: scenario $report did not run (not selected, or the VM stopped before it)"; exit 77; }
  print_tables "$out" "$report"
  case $(scenario_status "$out" "$report") in
    PASS) exit 0 ;;
    SKIP) echo "SKIP: $report could not be tried here (reason above)"; exit 77 ;;
    *) echo "--- $out/logs/$report.log (last 40 lines)"; tail -n 40 "$out/logs/$report.log" 2>/dev/null; exit 1 ;;
  esac
fi

# ---------------------------------------------------------------------------- requirements ----
if [[ -z $out ]]; then
  out=$(mktemp -d /var/tmp/iserkit-lab.XXXXXX)
else
  mkdir -p "$out"
  rm -rf "${out:?}/results.tsv" "$out/scenarios.tsv" "$out/logs" "$out/docs" "$out/unavailable" "$out/console.log" "$out/finished" "$out/dmesg.txt"
fi
out=$(cd "$out" && pwd)
mkdir -p "$out/logs"

if ((install)); then
  missing=()
  for p in "${lab_packages[@]}"; do
    [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true) == "install ok installed" ]] || missing+=("$p")
  done
  if ((${#missing[@]})); then
    note "installing the lab's packages: ${missing[*]}"
    ((EUID == 0)) || unavailable "installing ${missing[*]} needs root"
    export DEBIAN_FRONTEND=noninteractive
    { apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
      { apt-get update -qq && apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }; } ||
      unavailable "apt-get install ${missing[*]} failed"
  fi
fi
command -v "$qemu" >/dev/null || unavailable "$qemu is not installed (apt-get install qemu-system-x86, or run scripts/lab.sh)"
[[ -x $busybox ]] && ! ldd "$busybox" >/dev/null 2>&1 ||
  unavailable "$busybox is not a static busybox (apt-get install busybox-static)"
command -v depmod >/dev/null || unavailable "depmod is missing (apt-get install kmod)"
((EUID == 0)) || unavailable "the lab must run as root (QEMU exports the host root over 9p with the caller's rights)"
for b in iserkit-target iserkit-nbd iserkit; do
  [[ -x $bin_dir/$b ]] || broken "$bin_dir/$b is missing: build first (ninja -C build) or pass --bin"
done
bin_dir=$(cd "$bin_dir" && pwd)

scenarios=()
for f in $(scenario_files); do
  name=$(scenario_name "$f")
  if [[ -n $only && ",$only," != *",$name,"* ]]; then continue; fi
  if [[ -z $only ]] && scenario_opt_in "$f"; then continue; fi
  scenarios+=("$(basename "$f")")
done
for want in ${only//,/ }; do
  [[ " ${scenarios[*]} " == *"-$want.sh "* ]] || broken "no scenario $want (--list shows them)"
done
((${#scenarios[@]})) || broken "no scenario selected (--list shows them)"

case $kernel_series in
  6|6.1) kernel_series=6.1 ;;
  7|7.*) kernel_series=7 ;;
  *) broken "--kernel (ISERKIT_LAB_KERNEL) must be 6.1 or 7, not '$kernel_series'" ;;
esac

# ---------------------------------------------------------------------------------- kernel ----
# Debian's own kernel, fetched with apt-get download into the cache and unpacked once; modules.dep
# is made with depmod (the package's postinst would do that on a real install).
#   6.1: bookworm's linux-image-6.1.0-N-amd64 (what linux-image-amd64 depends on), through the
#        system's apt sources; vmlinuz under boot/, modules under lib/modules/KVER.
#   7:   trixie-backports' 7.x kernel, through a private apt state in the cache (its own sources list,
#        lists and archives; the system's apt sources are never read or changed). From 7.x Debian
#        splits a kernel into linux-binary-unsigned-ABI (usr/lib/modules/ABI/vmlinuz*),
#        linux-modules-ABI (.ko.xz) and linux-base-ABI (modules.builtin, config, System.map); ABI is
#        what trixie-backports' linux-image-amd64 depends on (linux-image-ABI). All three are unpacked
#        into one tree.
mkdir -p "$cache"
exec 8>"$cache/.lock"
flock 8
# lab_apt ARGS...: apt-get/apt-cache with the private trixie-backports state ($cache/apt-trixie-backports)
bpo_state=$cache/apt-trixie-backports
bpo_source="deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie-backports main"
lab_apt() {
  local tool=$1
  shift
  "$tool" -q -o Dir::State="$bpo_state" -o Dir::State::Lists="$bpo_state/lists" -o Dir::State::status=/dev/null \
    -o Dir::Etc::SourceList="$bpo_state/sources.list" -o Dir::Etc::SourceParts="$bpo_state/empty.d" \
    -o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts="$bpo_state/empty.d" \
    -o Dir::Cache="$bpo_state/cache" -o APT::Sandbox::User=root "$@"
}
# unpack_kernel ROOT DEB...: the packages into ROOT, lib/modules → usr/lib/modules when the package
# has only the latter, depmod; ROOT/.unpacked holds KVER when done
unpack_kernel() {
  local root=$1 d v
  shift
  [[ -f $root/.unpacked ]] && return 0
  note "unpacking $(for d in "$@"; do basename "$d"; done | tr '\n' ' ')"
  rm -rf "$root"
  for d in "$@"; do dpkg-deb -x "$d" "$root" || broken "dpkg-deb -x $d failed"; done
  v=$(basename "$(find "$root" -path '*/lib/modules/*' -maxdepth 4 -mindepth 3 -type d -name '[0-9]*' | head -n 1)")
  [[ -n $v ]] || broken "$* hold no lib/modules/KVER"
  [[ -d $root/lib/modules ]] || { mkdir -p "$root/lib"; ln -s ../usr/lib/modules "$root/lib/modules"; }
  depmod -b "$root" "$v" || broken "depmod for $v failed"
  echo "$v" >"$root/.unpacked"
}
case $kernel_series in
  6.1)
    pkg=${ISERKIT_LAB_KERNEL_PKG:-$(apt-cache depends linux-image-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }')}
    [[ -n $pkg ]] || unavailable "apt-cache knows no linux-image-amd64 (set ISERKIT_LAB_KERNEL_PKG)"
    deb=$(find "$cache" -maxdepth 1 -name "${pkg}_*.deb" | sort | tail -n 1)
    if [[ -z $deb ]]; then
      note "downloading $pkg (apt-get download) into $cache"
      (cd "$cache" && apt-get -q -o APT::Sandbox::User=root download "$pkg" >&2) || unavailable "apt-get download $pkg failed"
      deb=$(find "$cache" -maxdepth 1 -name "${pkg}_*.deb" | sort | tail -n 1)
    fi
    kroot=$cache/$(basename "$deb" .deb)
    unpack_kernel "$kroot" "$deb"
    kver=$(cat "$kroot/.unpacked")
    kernel=$kroot/boot/vmlinuz-$kver
    ;;
  7)
    mkdir -p "$bpo_state/lists/partial" "$bpo_state/cache/archives/partial" "$bpo_state/empty.d"
    [[ -r /usr/share/keyrings/debian-archive-keyring.gpg ]] ||
      unavailable "/usr/share/keyrings/debian-archive-keyring.gpg is missing (apt-get install debian-archive-keyring)"
    echo "$bpo_source" >"$bpo_state/sources.list"
    # the package lists: fetched when missing or older than a day; a failed update with lists
    # already there goes on with them (offline runs use the cached packages)
    if [[ -z $(find "$bpo_state/lists" -maxdepth 1 -name '*_Packages*' -mtime -1 2>/dev/null) ]]; then
      note "apt-get update of the lab's private trixie-backports state ($bpo_state)"
      lab_apt apt-get update >&2 ||
        [[ -n $(find "$bpo_state/lists" -maxdepth 1 -name '*_Packages*') ]] ||
        unavailable "apt-get update of trixie-backports failed (network?) and no package lists are cached"
    fi
    abi=${ISERKIT_LAB_KERNEL_ABI:-$(lab_apt apt-cache depends linux-image-amd64 2>/dev/null |
      awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { sub(/^linux-image-/, "", $2); print $2; exit }')}
    [[ -n $abi ]] || unavailable "trixie-backports' linux-image-amd64 names no linux-image-ABI (set ISERKIT_LAB_KERNEL_ABI)"
    pkgs=("linux-binary-unsigned-$abi" "linux-modules-$abi" "linux-base-$abi")
    pkg="linux-image-$abi (trixie-backports)"
    debs=()
    for p in "${pkgs[@]}"; do
      d=$(find "$cache" -maxdepth 1 -name "${p}_*.deb" | sort | tail -n 1)
      if [[ -z $d ]]; then
        note "downloading $p (apt-get download, trixie-backports) into $cache"
        (cd "$cache" && lab_apt apt-get download "$p" >&2) || unavailable "apt-get download $p (trixie-backports) failed"
        d=$(find "$cache" -maxdepth 1 -name "${p}_*.deb" | sort | tail -n 1)
      fi
      debs+=("$d")
    done
    version=$(dpkg-deb -f "${debs[0]}" Version)
    kroot=$cache/linux-${abi}_${version}
    unpack_kernel "$kroot" "${debs[@]}"
    kver=$(cat "$kroot/.unpacked")
    kernel=$(find "$kroot/usr/lib/modules/$kver" -maxdepth 1 -name 'vmlinuz*' | sort | head -n 1)
    [[ -n $kernel ]] || broken "no vmlinuz in $kroot/usr/lib/modules/$kver (linux-binary-unsigned-$abi)"
    note "kernel: ${pkgs[*]} $version (cached in $cache)"
    ;;
  *) broken "--kernel must be 6.1 or 7 (got $kernel_series)" ;;
esac
[[ -f $kernel ]] || broken "no kernel image $kernel"
modules=$(cd "$kroot/lib/modules/$kver" && pwd -P)

# ------------------------------------------------------------------------------- initramfs ----
# busybox, the modules that reach the 9p root (virtio-pci, 9p, overlay; in dependency order; the
# ones built in, as virtio_pci in 7.x, are skipped) and guest/init. Compressed modules (7.x ships
# .ko.xz) are stored decompressed, so busybox's insmod needs no decompressor. Rebuilt when the
# kernel, busybox or guest/init change.
early_modules=(virtio_pci 9pnet_virtio 9p overlay)
stamp=$({ echo "$kver ${early_modules[*]}"; cat "$lab_dir/guest/init" "$busybox"; } | sha256sum | cut -c1-16)
initrd=$cache/initrd-$kver-$stamp.cpio.gz
if [[ ! -s $initrd ]]; then
  note "building the initramfs $initrd"
  staging=$(mktemp -d)
  mkdir -p "$staging"/{bin,dev,proc,sys,ro,rw,newroot,modules}
  cp "$busybox" "$staging/bin/busybox"
  cp "$lab_dir/guest/init" "$staging/init"
  chmod 755 "$staging/init"
  for m in "${early_modules[@]}"; do
    modprobe -d "$kroot" -S "$kver" --show-depends "$m" | awk '$1 == "insmod" { print $2 }'
  done | awk '!seen[$0]++' | while read -r ko; do
    case $ko in
      *.ko.xz) name=$(basename "$ko" .xz); xz -dc "$ko" >"$staging/modules/$name" ;;
      *.ko.zst) name=$(basename "$ko" .zst); zstd -qdc "$ko" >"$staging/modules/$name" ;;
      *) name=$(basename "$ko"); cp "$ko" "$staging/modules/" ;;
    esac
    echo "$name" >>"$staging/modules/load-order"
  done
  (cd "$staging" && find . | "$busybox" cpio -o -H newc 2>/dev/null | gzip -1) >"$initrd.partial"
  mv "$initrd.partial" "$initrd"
  rm -rf "$staging"
  find "$cache" -maxdepth 1 -name "initrd-$kver-*.cpio.gz" ! -name "$(basename "$initrd")" -delete
fi
flock -u 8

# ----------------------------------------------------------------------------- accelerator ----
# KVM when the CPU has hardware virtualisation (vmx/svm), /dev/kvm opens and QEMU starts a KVM
# machine; TCG otherwise. The CPU flag matters: on a Firecracker VM whose CPUs show no vmx, /dev/kvm
# exists and QEMU starts, but the guest kernel hangs in its decompressor. The guest is told which
# accelerator ran (LAB_ACCEL): timings differ by an order of magnitude.
kvm_usable() {
  grep -Eqw 'vmx|svm' /proc/cpuinfo || return 1
  [[ -r /dev/kvm && -w /dev/kvm ]] || return 1
  echo quit | timeout 20 "$qemu" -machine none,accel=kvm -nodefaults -no-user-config -display none \
    -monitor stdio >/dev/null 2>&1
}
case $accel in
  auto) if kvm_usable; then accel=kvm; else accel=tcg; fi ;;
  kvm) [[ -r /dev/kvm && -w /dev/kvm ]] || broken "--accel kvm: /dev/kvm is missing or not accessible" ;;
  tcg) ;;
  *) broken "--accel must be kvm, tcg or auto" ;;
esac

# ------------------------------------------------------------------------------------- run ----
# The guest reads its job from the results share: which scenarios, where the sources and binaries
# are (the same paths as on the host: it sees the host's root).
{
  printf 'LAB_SOURCE=%q\n' "$source_dir"
  printf 'LAB_BIN=%q\n' "$bin_dir"
  printf 'LAB_SCENARIOS=%q\n' "${scenarios[*]}"
  printf 'LAB_KVER=%q\n' "$kver"
  printf 'LAB_SCENARIO_TIMEOUT=%q\n' "${ISERKIT_LAB_SCENARIO_TIMEOUT:-1800}"
  # what generated reports (benchmarks) name as their origin
  printf 'LAB_ACCEL=%q\n' "$accel"
  printf 'LAB_CPUS=%q\n' "$cpus"
  printf 'LAB_MEM=%q\n' "$mem"
  printf 'LAB_KERNEL_PKG=%q\n' "$pkg"
  printf 'LAB_COMMIT=%q\n' "$(git -C "$source_dir" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(
    [[ -z $(git -C "$source_dir" status --porcelain --untracked-files=no 2>/dev/null) ]] || echo ' (with uncommitted changes)')"
  printf 'LAB_HOST_CPU=%q\n' "$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) CPUs"
  while IFS='=' read -r k v; do printf '%s=%q\n' "$k" "$v"; done < <(env | grep -E '^ISERKIT_LAB_(BENCH_[A-Z0-9_]*|ISER_STAGS|ISER_CHAIN|ROUNDTRIPS)=' || true)
} >"$out/job.env"

qemu_args=(
  -machine "pc,accel=$accel" -cpu max -smp "$cpus" -m "$mem"
  -nodefaults -no-user-config -nographic -no-reboot
  -kernel "$kernel" -initrd "$initrd"
  -append "console=ttyS0 rdinit=/init panic=-1 loglevel=$((verbose ? 7 : 3)) mitigations=off nokaslr"
  -serial "file:$out/console.log"
  -fsdev "local,id=fs0,path=/,readonly=on,security_model=none,multidevs=remap"
  -device virtio-9p-pci,fsdev=fs0,mount_tag=labroot
  -fsdev "local,id=fs1,path=$modules,readonly=on,security_model=none"
  -device virtio-9p-pci,fsdev=fs1,mount_tag=labmodules
  -fsdev "local,id=fs2,path=$out,security_model=none"
  -device virtio-9p-pci,fsdev=fs2,mount_tag=labout
)
note "booting $pkg ($kver) under ${accel^^}: ${cpus} vCPUs, ${mem} MiB; scenarios: ${scenarios[*]}"
note "results in $out"
start=$SECONDS
: >"$out/console.log"
qemu_pid=""
tail_pid=""
stop_all() {
  [[ -z $qemu_pid ]] || kill "$qemu_pid" 2>/dev/null || true
  [[ -z $tail_pid ]] || kill "$tail_pid" 2>/dev/null || true
}
trap stop_all EXIT
trap 'stop_all; exit 130' INT TERM
timeout -k 10 "$timeout_s" "$qemu" "${qemu_args[@]}" </dev/null >"$out/qemu.log" 2>&1 &
qemu_pid=$!
# the guest's own lines ("lab…"); with -v the kernel's too
if ((verbose)); then
  tail -n +1 -F --pid="$qemu_pid" "$out/console.log" 2>/dev/null &
else
  tail -n +1 -F --pid="$qemu_pid" "$out/console.log" 2>/dev/null | grep --line-buffered -a '^lab' &
fi
tail_pid=$!
qemu_rc=0
wait "$qemu_pid" || qemu_rc=$?
qemu_pid=""
wait "$tail_pid" 2>/dev/null || true
tail_pid=""
elapsed=$((SECONDS - start))

echo
echo "== iserkit lab: $pkg ($kver), ${accel^^}, ${elapsed}s wall clock; logs in $out/logs"
if [[ -s $out/scenarios.tsv ]]; then print_tables "$out"; fi
if [[ ! -f $out/finished ]]; then
  ((qemu_rc == 124)) && note "the VM was stopped after ${timeout_s}s (--timeout)"
  note "the guest did not finish (qemu exit $qemu_rc); last console lines:"
  tail -n 30 "$out/console.log" >&2
  [[ ! -s $out/qemu.log ]] || { note "qemu said:"; cat "$out/qemu.log" >&2; }
  exit 2
fi
# the interop matrix: this run's check results merged into docs/interop-results.tsv (a scenario's
# newest run replaces its older one), docs/interop.md regenerated from them (interop_matrix.py)
if [[ -s $out/results.tsv ]]; then
  python3 "$lab_dir/interop_matrix.py" --cells "$lab_dir/interop.tsv" --store "$source_dir/docs/interop-results.tsv" \
    --out "$source_dir/docs/interop.md" --results "$out/results.tsv" --date "$(date -u +%F)" \
    --commit "$(source "$out/job.env" && echo "$LAB_COMMIT")" &&
    note "updated docs/interop.md and docs/interop-results.tsv (the interop matrix)"
fi
# generated pages (benchmarks) the scenarios left in docs/: into the source tree's docs/
if [[ -d $out/docs ]]; then
  for page in "$out"/docs/*.md; do
    [[ -f $page ]] || continue
    cp "$page" "$source_dir/docs/" && note "wrote docs/$(basename "$page") (generated by the lab)"
  done
fi
((vm_status)) && exit 0
if grep -q $'\tFAIL\t' "$out/results.tsv"; then exit 1; fi
exit 0
