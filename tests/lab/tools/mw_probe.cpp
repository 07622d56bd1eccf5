// iserkit-mw-probe: what one RDMA device (Soft-RoCE in the lab) really does with memory windows,
// outside iserkit. Two RC QPs on the same device are connected to each other (loopback through
// the port's GID): A owns the memory (an MR registered IBV_ACCESS_LOCAL_WRITE | MW_BIND, as
// iserkit's per-command pool), B plays the target and RDMA-reads/-writes A's memory through the
// windows' rkeys. Each step prints "PASS|FAIL|INFO step: detail"; exit 0 when no step failed,
// 1 when one did, 77 when there is no device or it has no memory windows.
//
// Steps: device attributes (max_mw, IBV_DEVICE_MEM_WINDOW*, MEM_MGT_EXTENSIONS); a type 1 window
// bound with ibv_bind_mw(), RDMA WRITE and READ through it; a type 2 window bound with
// IBV_WR_BIND_MW, RDMA WRITE/READ, Local Invalidate (IBV_WR_LOCAL_INV), rebound with a fresh key
// `--cycles` times (iserkit's per-command lifecycle); a stale rkey after a Local Invalidate gives
// B a remote access error; Send with Invalidate from B: does A's receive completion say
// IBV_WC_WITH_INV and the rkey, and is the window then unusable; deallocating a bound window.
// Never run: a Local Invalidate of a window that is not bound (on Debian 12's 6.1 rxe that
// dereferences a NULL QP pointer in rxe_do_invalidate_mw() and panics the kernel).
#include <infiniband/verbs.h>

#include <arpa/inet.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace {

int failures = 0;

void report(const char* status, const std::string& step, const std::string& detail) {
  std::printf("%s %s: %s\n", status, step.c_str(), detail.c_str());
  std::fflush(stdout);
  if (std::string_view(status) == "FAIL") ++failures;
}
void pass(const std::string& step, const std::string& detail) { report("PASS", step, detail); }
void fail(const std::string& step, const std::string& detail) { report("FAIL", step, detail); }
void info(const std::string& step, const std::string& detail) { report("INFO", step, detail); }

std::string hex(std::uint32_t v) {
  char b[16];
  std::snprintf(b, sizeof b, "0x%08x", v);
  return b;
}

struct Port {
  ibv_context* ctx = nullptr;
  std::uint8_t port = 1;
  int gid_index = -1;
  ibv_gid gid{};
  ibv_mtu mtu = IBV_MTU_1024;
};

struct Qp {
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
};

Qp make_qp(const Port& p, ibv_pd* pd) {
  Qp q;
  q.cq = ibv_create_cq(p.ctx, 64, nullptr, nullptr, 0);
  if (q.cq == nullptr) return q;
  ibv_qp_init_attr a{};
  a.send_cq = q.cq;
  a.recv_cq = q.cq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = 32;
  a.cap.max_recv_wr = 8;
  a.cap.max_send_sge = 1;
  a.cap.max_recv_sge = 1;
  q.qp = ibv_create_qp(pd, &a);
  return q;
}

void destroy(Qp& q) {
  if (q.qp != nullptr) ibv_destroy_qp(q.qp);
  if (q.cq != nullptr) ibv_destroy_cq(q.cq);
  q = {};
}

bool connect_qp(const Port& p, ibv_qp* qp, std::uint32_t remote_qpn) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = p.port;
  a.pkey_index = 0;
  a.qp_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
  if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0) return false;
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = p.mtu;
  a.dest_qp_num = remote_qpn;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = p.gid;
  a.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(p.gid_index);
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.port_num = p.port;
  if (ibv_modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
    return false;
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.sq_psn = 0;
  a.max_rd_atomic = 4;
  return ibv_modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                           IBV_QP_MAX_QP_RD_ATOMIC) == 0;
}

/// The completion of `wr_id` on `cq` (other completions are skipped), or one with status
/// IBV_WC_GENERAL_ERR and opcode 0xff after 5 s.
ibv_wc wait_wc(ibv_cq* cq, std::uint64_t wr_id) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < end) {
    ibv_wc wc{};
    const int n = ibv_poll_cq(cq, 1, &wc);
    if (n < 0) break;
    if (n == 1 && wc.wr_id == wr_id) return wc;
  }
  ibv_wc timeout{};
  timeout.status = IBV_WC_GENERAL_ERR;
  timeout.opcode = static_cast<ibv_wc_opcode>(0xff);
  timeout.wr_id = wr_id;
  return timeout;
}

std::string wc_text(const ibv_wc& wc) {
  if (static_cast<int>(wc.opcode) == 0xff) return "no completion within 5 s";
  return std::string(ibv_wc_status_str(wc.status));
}

/// Posts one work request on `q` and waits for its completion.
ibv_wc post_wait(Qp& q, ibv_send_wr& wr) {
  wr.send_flags |= IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  if (const int rc = ibv_post_send(q.qp, &wr, &bad); rc != 0) {
    ibv_wc wc{};
    wc.status = IBV_WC_LOC_QP_OP_ERR;
    wc.vendor_err = static_cast<std::uint32_t>(rc);
    return wc;
  }
  return wait_wc(q.cq, wr.wr_id);
}

/// B's RDMA WRITE (`write`) or READ of `len` bytes between `local` and A's `remote` via `rkey`.
ibv_wc rdma(Qp& b, ibv_mr* local_mr, std::byte* local, std::uint64_t remote, std::uint32_t rkey, std::uint32_t len,
            bool write, std::uint64_t id) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<std::uintptr_t>(local);
  sge.length = len;
  sge.lkey = local_mr->lkey;
  ibv_send_wr wr{};
  wr.wr_id = id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = rkey;
  return post_wait(b, wr);
}

ibv_wc bind2(Qp& a, ibv_mw* mw, ibv_mr* mr, std::byte* addr, std::size_t len, std::uint32_t rkey, unsigned access,
             std::uint64_t id) {
  ibv_send_wr wr{};
  wr.wr_id = id;
  wr.opcode = IBV_WR_BIND_MW;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = rkey;
  wr.bind_mw.bind_info.mr = mr;
  wr.bind_mw.bind_info.addr = reinterpret_cast<std::uintptr_t>(addr);
  wr.bind_mw.bind_info.length = len;
  wr.bind_mw.bind_info.mw_access_flags = access;
  return post_wait(a, wr);
}

ibv_wc local_inv(Qp& a, std::uint32_t rkey, std::uint64_t id) {
  ibv_send_wr wr{};
  wr.wr_id = id;
  wr.opcode = IBV_WR_LOCAL_INV;
  wr.invalidate_rkey = rkey;
  return post_wait(a, wr);
}

struct Pair {
  Qp a, b;
  bool ok = false;
};

Pair make_pair(const Port& p, ibv_pd* pd) {
  Pair pr;
  pr.a = make_qp(p, pd);
  pr.b = make_qp(p, pd);
  pr.ok = pr.a.qp != nullptr && pr.b.qp != nullptr && connect_qp(p, pr.a.qp, pr.b.qp->qp_num) &&
          connect_qp(p, pr.b.qp, pr.a.qp->qp_num);
  return pr;
}

void destroy(Pair& pr) {
  destroy(pr.a);
  destroy(pr.b);
}

bool find_gid(Port& p) {
  ibv_port_attr pa{};
  if (ibv_query_port(p.ctx, p.port, &pa) != 0) return false;
  p.mtu = pa.active_mtu;
  int any = -1;
  for (int i = 0; i < pa.gid_tbl_len && i < 32; ++i) {
    ibv_gid g{};
    if (ibv_query_gid(p.ctx, p.port, i, &g) != 0) continue;
    bool zero = true;
    for (auto byte : g.raw) zero = zero && byte == 0;
    if (zero) continue;
    // An IPv4-mapped GID (::ffff:a.b.c.d, RoCE v2) first: the route rdma_cm would use.
    static constexpr std::uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(g.raw, mapped, sizeof mapped) == 0) {
      p.gid_index = i;
      p.gid = g;
      return true;
    }
    if (any < 0) {
      any = i;
      p.gid = g;
    }
  }
  p.gid_index = any;
  return any >= 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string want_dev;
  int cycles = 200;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "-d" && i + 1 < argc) {
      want_dev = argv[++i];
    } else if (a == "--cycles" && i + 1 < argc) {
      cycles = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [-d DEVICE] [--cycles N]\n", argv[0]);
      return 2;
    }
  }
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) {
    std::printf("SKIP no RDMA device\n");
    return 77;
  }
  ibv_device* dev = nullptr;
  for (int i = 0; i < n; ++i)
    if (want_dev.empty() || want_dev == ibv_get_device_name(list[i])) {
      dev = list[i];
      break;
    }
  if (dev == nullptr) {
    std::printf("SKIP no RDMA device named %s\n", want_dev.c_str());
    ibv_free_device_list(list);
    return 77;
  }
  Port p;
  p.ctx = ibv_open_device(dev);
  if (p.ctx == nullptr) {
    fail("open", std::string("ibv_open_device: ") + std::strerror(errno));
    return 1;
  }
  ibv_device_attr attr{};
  ibv_query_device(p.ctx, &attr);
  const auto flags = static_cast<unsigned>(attr.device_cap_flags);
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s: max_mw=%d MEM_WINDOW=%d TYPE_2A=%d TYPE_2B=%d MEM_MGT_EXTENSIONS=%d",
                ibv_get_device_name(dev), attr.max_mw, (flags & IBV_DEVICE_MEM_WINDOW) != 0,
                (flags & IBV_DEVICE_MEM_WINDOW_TYPE_2A) != 0, (flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0,
                (flags & IBV_DEVICE_MEM_MGT_EXTENSIONS) != 0);
  info("device", buf);
  if (attr.max_mw == 0 || (flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) == 0) {
    std::printf("SKIP the device has no type 2B memory windows\n");
    return 77;
  }
  if (!find_gid(p)) {
    fail("gid", "no GID on port 1");
    return 1;
  }
  char gidtxt[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, p.gid.raw, gidtxt, sizeof gidtxt);
  info("gid", "index " + std::to_string(p.gid_index) + " " + gidtxt);

  ibv_pd* pd = ibv_alloc_pd(p.ctx);
  constexpr std::size_t size = 1 << 20;
  constexpr std::uint32_t piece = 4096;
  std::vector<std::byte> a_mem(size), b_mem(size);
  // A's memory: no remote access of its own, only through windows (iserkit's window pool).
  ibv_mr* a_mr = ibv_reg_mr(pd, a_mem.data(), size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
  // (int: ibv_reg_mr's macro masks the access with an enumerator of another enum, which clang
  // flags as a deprecated enum-enum operation when the argument is an enumerator itself.)
  ibv_mr* b_mr = ibv_reg_mr(pd, b_mem.data(), size, static_cast<int>(IBV_ACCESS_LOCAL_WRITE));
  if (pd == nullptr || a_mr == nullptr || b_mr == nullptr) {
    fail("setup", std::string("PD/MR: ") + std::strerror(errno));
    return 1;
  }
  pass("mr", "LOCAL_WRITE|MW_BIND MR of 1 MiB, lkey " + hex(a_mr->lkey) + " rkey " + hex(a_mr->rkey));
  Pair pr = make_pair(p, pd);
  if (!pr.ok) {
    fail("qp", std::string("loopback RC QP pair: ") + std::strerror(errno));
    return 1;
  }
  pass("qp", "loopback RC pair A " + std::to_string(pr.a.qp->qp_num) + " <-> B " + std::to_string(pr.b.qp->qp_num));
  std::uint64_t id = 1;
  const auto remote = [&](std::size_t off) { return reinterpret_cast<std::uintptr_t>(a_mem.data() + off); };

  // ---- a plain RDMA WRITE to A's MR rkey must fail: the MR grants no remote access ----
  // (skipped: a remote access error moves both QPs to the error state; the stale-rkey step
  // below shows the same refusal through a window)

  // ---- type 1 ----
  if (ibv_mw* mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1); mw1 == nullptr) {
    info("type1-alloc", std::string("ibv_alloc_mw(TYPE_1): ") + std::strerror(errno));
  } else {
    ibv_mw_bind bind{};
    bind.wr_id = id++;
    bind.send_flags = IBV_SEND_SIGNALED;
    bind.bind_info.mr = a_mr;
    bind.bind_info.addr = remote(0);
    bind.bind_info.length = piece;
    bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (const int rc = ibv_bind_mw(pr.a.qp, mw1, &bind); rc != 0) {
      info("type1-bind", std::string("ibv_bind_mw: ") + std::strerror(rc));
    } else if (auto wc = wait_wc(pr.a.cq, bind.wr_id); wc.status != IBV_WC_SUCCESS) {
      info("type1-bind", "completion: " + wc_text(wc));
    } else {
      std::memset(b_mem.data(), 0x11, piece);
      auto w = rdma(pr.b, b_mr, b_mem.data(), remote(0), mw1->rkey, piece, true, id++);
      const bool wrote = w.status == IBV_WC_SUCCESS && a_mem[0] == std::byte{0x11} && a_mem[piece - 1] == std::byte{0x11};
      (wrote ? pass : fail)("type1-rdma", "RDMA WRITE through type 1 rkey " + hex(mw1->rkey) + ": " + wc_text(w));
      // unbind: a zero-length bind
      bind.wr_id = id++;
      bind.bind_info.length = 0;
      bind.bind_info.mw_access_flags = 0;
      const int rc2 = ibv_bind_mw(pr.a.qp, mw1, &bind);
      const auto u = rc2 == 0 ? wait_wc(pr.a.cq, bind.wr_id) : ibv_wc{};
      info("type1-unbind", rc2 != 0 ? std::string(std::strerror(rc2)) : wc_text(u));
    }
    info("type1-dealloc", std::string("ibv_dealloc_mw: ") + std::strerror(ibv_dealloc_mw(mw1)));
  }

  // ---- type 2: iserkit's per-command lifecycle ----
  ibv_mw* mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
  if (mw == nullptr) {
    fail("type2-alloc", std::string("ibv_alloc_mw(TYPE_2): ") + std::strerror(errno));
    return 1;
  }
  pass("type2-alloc", "rkey " + hex(mw->rkey));
  int good = 0;
  std::string why;
  std::uint32_t first_rkey = 0;
  for (int c = 0; c < cycles; ++c) {
    const std::size_t off = (static_cast<std::size_t>(c) * piece) % (size - piece);
    const std::uint32_t rkey = ibv_inc_rkey(mw->rkey);
    const bool read_dir = (c % 2) == 0;  // alternate like Data-In (remote write) / Data-Out (remote read)
    auto b = bind2(pr.a, mw, a_mr, a_mem.data() + off, piece, rkey,
                   read_dir ? IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_READ, id++);
    if (b.status != IBV_WC_SUCCESS) {
      why = "bind " + std::to_string(c) + ": " + wc_text(b);
      break;
    }
    mw->rkey = rkey;  // libibverbs leaves it; the next bind names the window by it
    if (c == 0) first_rkey = rkey;
    const auto pattern = static_cast<std::byte>(c + 1);
    if (read_dir) {
      std::memset(b_mem.data(), static_cast<int>(pattern), piece);
      auto w = rdma(pr.b, b_mr, b_mem.data(), remote(off), rkey, piece, true, id++);
      if (w.status != IBV_WC_SUCCESS || a_mem[off] != pattern || a_mem[off + piece - 1] != pattern) {
        why = "RDMA WRITE " + std::to_string(c) + ": " + wc_text(w);
        break;
      }
    } else {
      std::memset(a_mem.data() + off, static_cast<int>(pattern), piece);
      auto r = rdma(pr.b, b_mr, b_mem.data(), remote(off), rkey, piece, false, id++);
      if (r.status != IBV_WC_SUCCESS || b_mem[0] != pattern || b_mem[piece - 1] != pattern) {
        why = "RDMA READ " + std::to_string(c) + ": " + wc_text(r);
        break;
      }
    }
    auto inv = local_inv(pr.a, rkey, id++);
    if (inv.status != IBV_WC_SUCCESS) {
      why = "local invalidate " + std::to_string(c) + ": " + wc_text(inv);
      break;
    }
    ++good;
  }
  if (good == cycles)
    pass("type2-cycles", std::to_string(cycles) + " x (IBV_WR_BIND_MW with ibv_inc_rkey, RDMA WRITE or READ through it, "
                                                  "IBV_WR_LOCAL_INV), data checked; first rkey " + hex(first_rkey) +
                             ", last " + hex(mw->rkey));
  else
    fail("type2-cycles", std::to_string(good) + " cycles good, then " + why);

  // ---- an rkey from before the last invalidate: B must get a remote access error ----
  if (good == cycles) {
    auto w = rdma(pr.b, b_mr, b_mem.data(), remote(0), mw->rkey, piece, true, id++);
    (w.status == IBV_WC_REM_ACCESS_ERR ? pass : fail)(
        "type2-stale-rkey", "RDMA WRITE through invalidated rkey " + hex(mw->rkey) + ": " + wc_text(w));
  }
  destroy(pr);

  // ---- Send with Invalidate from B (what a target negotiating it does) ----
  pr = make_pair(p, pd);
  if (!pr.ok) {
    fail("qp", "second loopback pair");
    return 1;
  }
  {
    const std::uint32_t rkey = ibv_inc_rkey(mw->rkey);
    auto b = bind2(pr.a, mw, a_mr, a_mem.data(), piece, rkey, IBV_ACCESS_REMOTE_WRITE, id++);
    if (b.status != IBV_WC_SUCCESS) {
      fail("swi-bind", wc_text(b));
    } else {
      mw->rkey = rkey;
      // A posts a receive; B sends with invalidate of A's window.
      ibv_sge rsge{};
      rsge.addr = reinterpret_cast<std::uintptr_t>(a_mem.data() + size - piece);
      rsge.length = piece;
      rsge.lkey = a_mr->lkey;
      ibv_recv_wr rwr{};
      rwr.wr_id = 0xfeed;
      rwr.sg_list = &rsge;
      rwr.num_sge = 1;
      ibv_recv_wr* rbad = nullptr;
      ibv_post_recv(pr.a.qp, &rwr, &rbad);
      ibv_sge sge{};
      sge.addr = reinterpret_cast<std::uintptr_t>(b_mem.data());
      sge.length = 64;
      sge.lkey = b_mr->lkey;
      ibv_send_wr s{};
      s.wr_id = id++;
      s.sg_list = &sge;
      s.num_sge = 1;
      s.opcode = IBV_WR_SEND_WITH_INV;
      s.invalidate_rkey = rkey;
      auto sw = post_wait(pr.b, s);
      auto rw = wait_wc(pr.a.cq, 0xfeed);
      const bool flagged = (rw.wc_flags & IBV_WC_WITH_INV) != 0;
      std::snprintf(buf, sizeof buf, "sender %s; receiver %s, wc_flags 0x%x (IBV_WC_WITH_INV %s), invalidated_rkey %s",
                    wc_text(sw).c_str(), wc_text(rw).c_str(), rw.wc_flags, flagged ? "set" : "NOT set",
                    hex(rw.invalidated_rkey).c_str());
      // Informational: whether the receiver learns of the invalidation decides whether the
      // initiator may ever offer Send with Invalidate on this kernel.
      info("swi-completion", buf);
      if (sw.status == IBV_WC_SUCCESS && rw.status == IBV_WC_SUCCESS) {
        auto w = rdma(pr.b, b_mr, b_mem.data(), remote(0), rkey, piece, true, id++);
        (w.status == IBV_WC_REM_ACCESS_ERR ? pass : fail)(
            "swi-stale-rkey", "RDMA WRITE through the rkey B invalidated with its SEND: " + wc_text(w));
      } else {
        fail("swi-send", "SEND_WITH_INV: sender " + wc_text(sw) + ", receiver " + wc_text(rw));
      }
    }
  }
  destroy(pr);

  // ---- deallocating a bound window (what a connection torn down mid-command does) ----
  pr = make_pair(p, pd);
  if (pr.ok) {
    ibv_mw* mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
    const std::uint32_t rkey = mw2 != nullptr ? ibv_inc_rkey(mw2->rkey) : 0;
    auto b = mw2 != nullptr ? bind2(pr.a, mw2, a_mr, a_mem.data(), piece, rkey, IBV_ACCESS_REMOTE_WRITE, id++)
                            : ibv_wc{};
    if (mw2 == nullptr || b.status != IBV_WC_SUCCESS) {
      fail("dealloc-bound", "could not bind a second window");
    } else {
      const int rc = ibv_dealloc_mw(mw2);
      (rc == 0 ? pass : fail)("dealloc-bound", std::string("ibv_dealloc_mw of a bound type 2 window: ") +
                                                   (rc == 0 ? "0" : std::strerror(rc)));
      auto w = rdma(pr.b, b_mr, b_mem.data(), remote(0), rkey, piece, true, id++);
      (w.status == IBV_WC_REM_ACCESS_ERR ? pass : fail)("dealloc-stale-rkey",
                                                          "RDMA WRITE through the deallocated window: " + wc_text(w));
    }
  }
  destroy(pr);
  ibv_dealloc_mw(mw);
  // Deregistering the MR once no window is bound over it, then the PD.
  const int mr_rc = ibv_dereg_mr(a_mr);
  (mr_rc == 0 ? pass : fail)("dereg", std::string("ibv_dereg_mr after the windows: ") +
                                          (mr_rc == 0 ? "0" : std::strerror(mr_rc)));
  ibv_dereg_mr(b_mr);
  ibv_dealloc_pd(pd);
  ibv_close_device(p.ctx);
  ibv_free_device_list(list);
  std::printf("%s\n", failures == 0 ? "RESULT all steps passed" : "RESULT some steps failed");
  return failures == 0 ? 0 : 1;
}
