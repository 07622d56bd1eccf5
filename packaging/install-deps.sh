#!/usr/bin/env bash
# Installs the Debian 12 packages iserkit needs, by purpose, and only those that are missing.
# Does nothing (and needs no network) when they are all present already.
#
# Usage: packaging/install-deps.sh [SET...] [--print]
#   SET: build  the compilers and the -dev packages the four programs build with
#        demo   build + what scripts/demo.sh runs (FUSE, mkfs, losetup, the nbd client)
#        test   everything scripts/test.sh runs (all the sets below but lab: peers, Ceph, clang)
#        bench  build + the peers scripts/bench.sh measures against (tgtd, qemu-nbd, nbdkit, fio)
#        rbd    the Ceph RBD backend and its throwaway test cluster
#        lab    build + the QEMU lab's host side (tests/lab/lab.sh installs the rest itself)
#        all    every set (the default)
#   --print: list the packages of the sets and exit.
set -euo pipefail

build=(
  build-essential cmake ninja-build pkg-config git
  ccache                  # compiler cache: rebuilds of unchanged sources are cache hits (CMake uses it when found)
  libboost-dev            # Boost.Asio 1.74 (header-only): sockets, coroutines
  liburing-dev            # target io_uring backend
  libisal-dev             # ISA-L: CRC32C header/data digests
  libexpected-dev         # tl::expected (GCC 12 has no std::expected in C++20)
  libcxxopts-dev          # command-line options
  libsgutils2-dev         # sg3_utils' sense key and ASC/ASCQ tables: SCSI errors in words in every program
  libssl-dev              # OpenSSL libcrypto: CHAP digests (MD5, SHA-1, SHA-256, SHA3-256) and RAND_bytes challenges
  libtomlplusplus-dev     # toml++: iserkit-target --config FILE
  libsystemd-dev          # sd_notify (iserkit-target Type=notify: READY/STATUS/RELOADING/STOPPING) and sd_listen_fds (iserkit-nbd socket activation)
  libfuse3-dev            # iserkit-fuse: the FUSE view (libfuse 3 low-level API)
  libspdlog-dev libfmt-dev
  libgnutls28-dev         # GnuTLS: iserkit-nbd --tls (NBD_OPT_STARTTLS with X.509 or PSK), the TLS library of qemu-nbd, nbdkit and libnbd
  prometheus-cpp-dev      # Prometheus client (pull exposer over civetweb): iserkit-nbd --metrics HOST:PORT
  nlohmann-json3-dev      # header-only JSON: `iserkit --json` documents and the daemons' --status-socket answers
  libgtest-dev libgmock-dev   # CMake configures the tests with the programs (tests/CMakeLists.txt)
  libibverbs-dev librdmacm-dev   # iSER datamover (RFC 7145): verbs + RDMA CM (WITH_ISER turns on when found)
  rdma-core               # the userspace verbs providers (rxe, mlx5, …) and udev rules iSER runs on
  python3 coreutils procps iproute2
)
demo=(
  fuse3 e2fsprogs util-linux kmod nbd-client   # the FUSE mount, mkfs/e2fsck, losetup, the kernel's nbd client
)
rbd=(
  librbd-dev              # target Ceph RBD backend: librbd + librados (WITH_RBD turns on when found)
  ceph-mon ceph-osd ceph-common   # RBD backend tests: a throwaway one-monitor, one-OSD cluster on loopback (tests/support/ceph_cluster.sh)
  uuid-runtime            # uuidgen, for that cluster's fsid and OSD id
)
bench=(
  tgt                     # tgtd: a peer target for our initiator
  tgt-rbd                 # tgtd's bs_rbd backing store: the peer of our RBD backend in scripts/bench.sh --rbd
  qemu-utils qemu-block-extra   # qemu-img and qemu-nbd with the libiscsi block driver (a peer bridge in the benchmarks)
  libiscsi-bin            # iscsi-inq, iscsi-ls, iscsi-readcapacity16, iscsi-perf, iscsi-test-cu
  libnbd-bin python3-libnbd   # nbdinfo, nbdcopy, nbdfuse; nbdsh
  fio                     # FUSE view tests: psync/io_uring jobs with crc32c verification; benchmarks (nbd, io_uring engines)
  nbdkit                  # benchmarks: the NBD ceiling (file and memory plugins, no iSCSI); runs nbdkit-iserkit-plugin in its test
  iperf3                  # benchmarks: raw loopback TCP throughput ceiling for scripts/bench.sh
  strace                  # tests/bench/syscalls: system calls per request of both daemons (strace -c)
)
test=(
  clang-14                # clang++-14: scripts/test.sh's ASan tree, which holds the libFuzzer targets (GCC has no -fsanitize=fuzzer)
  libclang-rt-14-dev      # clang 14's compiler-rt: the libFuzzer runtime (libclang_rt.fuzzer) and ASan/UBSan
  nbdkit-plugin-dev       # nbdkit-plugin.h: nbdkit-iserkit-plugin.so (nbdkit_plugin/; skipped with a message when absent)
  # packaging (packaging/README.md)
  scdoc                   # man pages from packaging/man/*.scd (small, one plain-text source per page)
  debhelper dpkg-dev fakeroot   # packaging/build-debs.sh: dpkg-buildpackage -b with dh (compat 13)
  lintian                 # the packages are checked for lintian errors (tests/packaging/debs)
  gnutls-bin              # certtool and psktool: the NBD TLS test makes its CA, certificates and PSK keys
  systemd                 # systemd-analyze verify of packaging/systemd/*, systemd-socket-activate for iserkit-nbd socket activation tests
)
lab=(
  qemu-system-x86 busybox-static   # the lab VM and its initramfs (tests/lab/lab.sh adds the guest's tools)
  multipath-tools sg3-utils   # the guest's dm-multipath client (multipathd, prio alua) and sg_stpg/sg_rtpg: lab scenario alua-multipathd
)

wanted=()
print=0
chosen=()
for arg in "$@"; do
  case $arg in
    --print) print=1 ;;
    build|demo|test|bench|rbd|lab|all) chosen+=("$arg") ;;
    *) echo "install-deps: unknown set '$arg' (build, demo, test, bench, rbd, lab, all)" >&2; exit 2 ;;
  esac
done
((${#chosen[@]})) || chosen=(all)
for set in "${chosen[@]}"; do
  case $set in
    build) wanted+=("${build[@]}") ;;
    demo) wanted+=("${build[@]}" "${demo[@]}") ;;
    bench) wanted+=("${build[@]}" "${bench[@]}") ;;
    rbd) wanted+=("${build[@]}" "${rbd[@]}") ;;
    lab) wanted+=("${build[@]}" "${lab[@]}") ;;
    test) wanted+=("${build[@]}" "${demo[@]}" "${rbd[@]}" "${bench[@]}" "${test[@]}") ;;
    all) wanted+=("${build[@]}" "${demo[@]}" "${rbd[@]}" "${bench[@]}" "${test[@]}" "${lab[@]}") ;;
  esac
done
# Each package once, in the order first named.
packages=()
declare -A seen=()
for p in "${wanted[@]}"; do
  [[ -n ${seen[$p]:-} ]] && continue
  seen[$p]=1
  packages+=("$p")
done

if ((print)); then printf '%s\n' "${packages[@]}"; exit 0; fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ $status == "install ok installed" ]] || missing+=("$p")
done
if ((${#missing[@]} == 0)); then exit 0; fi

echo "install-deps: installing: ${missing[*]}" >&2
sudo=""
if ((EUID != 0)); then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
