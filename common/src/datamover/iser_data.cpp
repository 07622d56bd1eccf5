// iSER data transfer of an IserConnection: Put_Data / Get_Data as RDMA Write / RDMA Read (RFC 7145
// §7.3) and per-command STags (memory windows bound per task on the initiator, Send with
// Invalidate at both ends, RFC 7145 §9.2). The rest of the connection: iser_datamover.cpp.
#include "iserkit/datamover/iser_datamover.hpp"

#ifdef ISERKIT_WITH_ISER

#include <algorithm>
#include <cstring>
#include <new>
#include <span>

#include "iser_connection.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"

namespace iserkit::datamover {
namespace rdma {

// ---------------------------------------------------------------------------------------------
// Put_Data / Get_Data: RDMA Write / RDMA Read
// ---------------------------------------------------------------------------------------------

Awaitable<std::error_code> IserConnection::rdma(bool write, PeerBuffer remote, std::uint64_t offset, Buffer local) {
  if (failed_) co_return error_;
  if (local.bytes.empty()) co_return std::error_code{};
  if (local.lkey == 0) {
    auto reg = lookup(local.bytes);
    if (!reg) co_return make_error_code(errc::invalid_argument);  // not registered memory
    local.lkey = reg->lkey;
  }
  const std::size_t total = local.bytes.size();
  const auto pieces = static_cast<std::uint32_t>((total + max_rdma_piece - 1) / max_rdma_piece);
  Op op;
  op.remaining = 1;  // a token held while posting: completions cannot finish the Op early
  pending_.insert(&op);
  std::uint32_t posted = 0;
  std::size_t done = 0;
  while (done < total && !failed_) {
    // Post in batches that fit the send queue.
    const std::uint32_t batch = std::min(pieces - posted, std::max<std::uint32_t>(1, options_.send_depth / 2));
    if (!co_await acquire_sq(batch)) break;
    for (std::uint32_t i = 0; i < batch && done < total; ++i) {
      const auto n = static_cast<std::uint32_t>(std::min<std::size_t>(total - done, max_rdma_piece));
      ibv_sge sge{};
      sge.addr = reinterpret_cast<std::uintptr_t>(local.bytes.data() + done);
      sge.length = n;
      sge.lkey = local.lkey;
      ibv_send_wr wr{};
      wr.wr_id = reinterpret_cast<std::uintptr_t>(&op);
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.wr.rdma.remote_addr = remote.address() + offset + done;
      wr.wr.rdma.rkey = remote.key();
      ibv_send_wr* bad = nullptr;
      count_post_send(1);
      if (const int rc = ibv_post_send(id_->qp, &wr, &bad); rc != 0) {
        sq_in_use_ -= batch - i;
        log::info("iser {}: post {} failed: {}", peer_, write ? "rdma write" : "rdma read", std::strerror(rc));
        abort_connection(make_error_code(errc::connection_closed));
        break;
      }
      ++op.remaining;
      ++posted;
      done += n;
    }
  }
  if (failed_ && !op.ec) op.ec = error_;
  if (--op.remaining == 0) {  // nothing in flight any more (or nothing was posted)
    pending_.erase(&op);
    co_return op.ec;
  }
  co_await op.done.wait();
  co_return op.done.error();
}

// ---------------------------------------------------------------------------------------------
// Per-command STags: memory windows (initiator) and Send with Invalidate (both ends)
// ---------------------------------------------------------------------------------------------
// Work request ids of window operations: (slot << 3) | 2 for a Bind MW, | 4 for a Local
// Invalidate. Receives are odd and Op pointers are 8-byte aligned, so the three never collide.

Awaitable<std::error_code> IserConnection::bind_stags(const TaskData& task, std::vector<ibv_send_wr>* chain) {
  if (!stags_ || task.stags_bound()) co_return std::error_code{};
  const std::size_t needed = (task.read_region() ? 1 : 0) + (task.write_region() ? 1 : 0);
  if (chain != nullptr && !chain->empty() && !failed_ && stags_->free_count() < needed) {
    // The commands bound so far hold windows and may be what frees one: their binds go out now,
    // behind the queued Local Invalidates (what frees windows soonest).
    take_invalidates(*chain);
    for (std::size_t i = 0; i + 1 < chain->size(); ++i) (*chain)[i].next = &(*chain)[i + 1];
    chain->back().next = nullptr;
    ibv_send_wr* bad = nullptr;
    const int rc = ibv_post_send(id_->qp, chain->data(), &bad);
    count_post_send(chain->size());
    chain->clear();
    apply_window_rkeys();
    if (rc != 0) {
      log::info("iser {}: post bind memory window failed: {}", peer_, std::strerror(rc));
      abort_connection(make_error_code(errc::connection_closed));
      co_return error_;
    }
  }
  // Windows whose Local Invalidate is still queued for the pass's end free up only once it is
  // posted: not while this sender waits for them.
  if (!failed_ && stags_->free_count() < needed) invalidates_.flush();
  while (!failed_ && stags_->free_count() < needed) {
    Completion c;
    window_waiters_.push_back(&c);
    co_await c.wait();
  }
  if (failed_) co_return error_;
  for (const bool read : {true, false}) {
    const auto& region = read ? task.read_region() : task.write_region();
    if (!region) continue;
    ibv_mr* mr = device_->window_pool->memory_region(region->bytes);
    if (mr == nullptr) co_return make_error_code(errc::invalid_argument);
    auto bound = stags_->acquire();  // free_count() was checked with no suspension since
    if (!bound) co_return make_error_code(errc::connection_closed);
    ibv_send_wr wr{};
    wr.wr_id = (std::uint64_t{bound->slot} << 3) | 2u;
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.bind_mw.mw = windows_[bound->slot];
    wr.bind_mw.rkey = bound->rkey;
    wr.bind_mw.bind_info.mr = mr;
    wr.bind_mw.bind_info.addr = reinterpret_cast<std::uintptr_t>(region->bytes.data());
    wr.bind_mw.bind_info.length = region->bytes.size();
    // The target RDMA-writes read data and RDMA-reads write data: nothing more.
    wr.bind_mw.bind_info.mw_access_flags = read ? IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_READ;
    if (chain != nullptr) {
      chain->push_back(wr);  // posted at the head of the caller's chain, ahead of the SEND
    } else {
      ibv_send_wr* bad = nullptr;
      count_post_send(1);
      if (const int rc = ibv_post_send(id_->qp, &wr, &bad); rc != 0) {
        log::info("iser {}: post bind memory window failed: {}", peer_, std::strerror(rc));
        stags_->release(bound->slot);  // never bound: nothing to invalidate on a failing connection
        abort_connection(make_error_code(errc::connection_closed));
        co_return error_;
      }
    }
    // A type 2 window bound by a work request: libibverbs leaves ibv_mw::rkey alone, and the next
    // Bind MW must name the window by its current rkey (rxe checks it), so it is kept here — once
    // this one is posted: rxe's provider reads ibv_mw::rkey in ibv_post_send() to name the window.
    if (chain != nullptr) {
      rkeys_after_post_.push_back({bound->slot, bound->rkey});
    } else {
      windows_[bound->slot]->rkey = bound->rkey;
    }
    // From here the descriptor owns the window; its end gives it back (release_stag()).
    task.bind_stag(read, bound->rkey, StagLease(std::shared_ptr<StagOwner>(shared_from_this()), bound->slot));
  }
  co_return std::error_code{};
}

void IserConnection::apply_window_rkeys() noexcept {
  for (const auto& [slot, rkey] : rkeys_after_post_) windows_[slot]->rkey = rkey;
  rkeys_after_post_.clear();
}

void IserConnection::release_stag(std::uint32_t slot, bool answered) noexcept {
  if (!stags_) return;
  after_release(slot, stags_->release(slot), answered);
}

void IserConnection::after_release(std::uint32_t slot, iser::StagTable::Release release, bool answered) noexcept {
  if (release == iser::StagTable::Release::reusable) wake_one(window_waiters_);
  // deferred: the Bind MW's completion decides (on_window_completion()).
  if (release != iser::StagTable::Release::invalidate) return;
  // A failed connection's QP is in the error state: no peer access can reach the window any more,
  // and a posted Local Invalidate would only be flushed. The window stays out of use.
  if (failed_ || stopped_) return;
  // Now, or (an answered command during a held pass) at the head of the next chain posted, at the
  // latest when the pass ends: local_invalidates.hpp says what that delay exposes and why it is
  // acceptable. The window stays `invalidating` in the StagTable either way.
  try {
    invalidates_.add(slot, answered);
  } catch (const std::bad_alloc&) {
    invalidates_.flush();  // no room to queue it: what is queued goes now, then this one alone
    const std::uint32_t one[] = {slot};
    post_invalidates(one);
  }
}

void IserConnection::post_invalidates(std::span<const std::uint32_t> slots) noexcept {
  if (slots.empty() || failed_ || stopped_ || !stags_) return;
  // One chain; the send queue has room: each window has two entries of its own (window_wrs_), for
  // its Bind MW and this, and it has one of the two outstanding at most.
  ibv_send_wr* bad = nullptr;
  int rc = 0;
  if (slots.size() == 1) {
    ibv_send_wr wr = local_invalidate_wr(slots[0]);
    count_post_send(1);
    rc = ibv_post_send(id_->qp, &wr, &bad);
  } else {
    try {
      invalidate_wrs_.resize(slots.size());
    } catch (const std::bad_alloc&) {
      for (const std::uint32_t slot : slots) post_invalidates(std::span<const std::uint32_t>(&slot, 1));
      return;
    }
    for (std::size_t i = 0; i < slots.size(); ++i) {
      invalidate_wrs_[i] = local_invalidate_wr(slots[i]);
      invalidate_wrs_[i].next = i + 1 < slots.size() ? &invalidate_wrs_[i + 1] : nullptr;
    }
    count_post_send(slots.size());
    rc = ibv_post_send(id_->qp, invalidate_wrs_.data(), &bad);
  }
  if (rc != 0) {
    log::info("iser {}: post local invalidate failed: {}", peer_, std::strerror(rc));
    abort_connection(make_error_code(errc::connection_closed));
  }
}

std::size_t IserConnection::take_invalidates(std::vector<ibv_send_wr>& chain) {
  if (invalidates_.queued() == 0) return 0;
  if (failed_ || stopped_ || !stags_) {
    invalidates_.drop();
    return 0;
  }
  invalidate_slots_.reserve(invalidates_.queued());  // may throw: nothing taken yet
  invalidate_slots_.clear();
  invalidates_.take(invalidate_slots_);
  // Ahead of the chain's Bind MWs and SENDs: none of those names these windows (a queued window
  // is `invalidating`, so no bind can have taken it), and the invalidates free windows soonest.
  // The caller links the chain (`next`) after this.
  const std::size_t n = invalidate_slots_.size();
  try {
    chain.insert(chain.begin(), n, ibv_send_wr{});
  } catch (const std::bad_alloc&) {
    post_invalidates(invalidate_slots_);  // on their own, then
    return 0;
  }
  for (std::size_t i = 0; i < n; ++i) chain[i] = local_invalidate_wr(invalidate_slots_[i]);
  return n;
}

ibv_send_wr IserConnection::local_invalidate_wr(std::uint32_t slot) const noexcept {
  ibv_send_wr wr{};
  wr.wr_id = (std::uint64_t{slot} << 3) | 4u;  // on_window_completion(): bit 2 = an invalidate
  wr.opcode = IBV_WR_LOCAL_INV;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.invalidate_rkey = stags_->rkey(slot);
  return wr;
}

void IserConnection::on_window_completion(const ibv_wc& wc) {
  const auto slot = static_cast<std::uint32_t>(wc.wr_id >> 3);
  const bool invalidate = (wc.wr_id & 4u) != 0;
  const bool ok = wc.status == IBV_WC_SUCCESS;
  // A bind's completion, good or bad, is what allows (or forbids) its window's Local Invalidate.
  const auto after_bind =
      (!invalidate && stags_) ? stags_->bind_completed(slot, ok) : iser::StagTable::Release::ignored;
  if (!ok) {
    if (wc.status != IBV_WC_WR_FLUSH_ERR)
      log::info("iser {}: {} of memory window {} failed: {}", peer_, invalidate ? "local invalidate" : "bind", slot,
                ibv_wc_status_str(wc.status));
    abort_connection(make_error_code(errc::connection_closed), wc.status != IBV_WC_WR_FLUSH_ERR);
    return;  // the window stays out of use: the connection is gone
  }
  if (!invalidate) {
    // A release that waited for this bind: not known to be answered, so not delayed.
    after_release(slot, after_bind, false);
    return;
  }
  if (stags_) {
    ++local_invalidations_;
    stags_->invalidated(slot);
    wake_one(window_waiters_);
  }
}

void IserConnection::set_send_opcode(ibv_send_wr& wr, const PduOut& pdu) noexcept {
  wr.opcode = IBV_WR_SEND;
  if (initiator_ || !send_with_invalidate_ || invalidate_on_response_.empty()) return;
  if (static_cast<iscsi::Opcode>(iscsi::raw_opcode(pdu.bhs)) != iscsi::Opcode::scsi_response) return;
  const auto it = invalidate_on_response_.find(iscsi::to_u32(iscsi::itt_of(pdu.bhs)));
  if (it == invalidate_on_response_.end()) return;
  wr.opcode = IBV_WR_SEND_WITH_INV;
  wr.invalidate_rkey = it->second;
  invalidate_on_response_.erase(it);
}

void IserConnection::note_command_stag(const PduIn& in) {
  if (static_cast<iscsi::Opcode>(iscsi::raw_opcode(in.bhs)) != iscsi::Opcode::scsi_command) return;
  const auto itt = iscsi::to_u32(iscsi::itt_of(in.bhs));
  // One STag per command (as Linux isert): a command with both or neither is left to the
  // initiator's own Local Invalidate. A reused ITT replaces what an aborted command left.
  if (in.peer_read.has_value() == in.peer_write.has_value()) {
    invalidate_on_response_.erase(itt);
    return;
  }
  const std::uint32_t stag = in.peer_read ? in.peer_read->key() : in.peer_write->key();
  // Bounded: ITTs are the initiator's to choose; past the bound the initiator invalidates itself.
  if (invalidate_on_response_.size() >= 4 * std::size_t{options_.receive_depth} &&
      !invalidate_on_response_.contains(itt))
    return;
  invalidate_on_response_[itt] = stag;
}

}  // namespace rdma
}  // namespace iserkit::datamover

#endif  // ISERKIT_WITH_ISER
