// The control-type PDU path of an IserConnection (RFC 7145 §7.2): Send_Control as a SEND with the
// iSER header (one PDU, or a chain of Put_Data + SENDs posted together), the send-queue and
// unexpected-PDU credit gates, and the control receive that decodes a received SEND (RFC 7145 §8,
// §9.2). Setup, CM events and completions: iser_datamover.cpp; Put_Data / Get_Data: iser_data.cpp.
#include "iserkit/datamover/iser_datamover.hpp"

#ifdef ISERKIT_WITH_ISER

#include <algorithm>
#include <cstring>
#include <variant>

#include "iser_connection.hpp"
#include "iserkit/common/copy_counter.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/iser/header.hpp"

namespace iserkit::datamover {
namespace rdma {

namespace {

bool payload_opcode(const iscsi::Bhs& bhs) noexcept {
  const auto op = static_cast<iscsi::Opcode>(iscsi::raw_opcode(bhs));
  return op == iscsi::Opcode::scsi_command || op == iscsi::Opcode::data_out || op == iscsi::Opcode::data_in;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Send_Control: SENDs
// ---------------------------------------------------------------------------------------------

Awaitable<bool> IserConnection::acquire_sq(std::uint32_t entries) {
  while (!failed_ && sq_in_use_ + entries > options_.send_depth) {
    Completion c;
    sq_waiters_.push_back(&c);
    co_await c.wait();
  }
  if (failed_) co_return false;
  sq_in_use_ += entries;
  co_return true;
}

std::error_code IserConnection::prepare_send(const PduOut& pdu, std::uint32_t slot, std::array<ibv_sge, 2>& sge,
                                             int& num_sge, PooledBuffer& spill) {
  std::byte* s = send_region_.data() + std::size_t{slot} * send_slot_size_;
  sge = {};
  iser::Header h;
  if (pdu.task_data != nullptr) {
    if (const auto& b = pdu.task_data->read_region()) {
      h.read_valid = true;
      h.read_stag = pdu.task_data->read_stag();
      h.read_base_offset = reinterpret_cast<std::uintptr_t>(b->bytes.data());
    }
    if (const auto& b = pdu.task_data->write_region(); b && b->bytes.size() > pdu.data.size()) {
      // Linux iser_prepare_write_cmd: the Write Base Offset points past the immediate data.
      h.write_valid = true;
      h.write_stag = pdu.task_data->write_stag();
      h.write_base_offset = reinterpret_cast<std::uintptr_t>(b->bytes.data()) + pdu.data.size();
    }
  }
  iser::encode_header(h, std::span<std::byte, iser::header_size>(s, iser::header_size));
  std::memcpy(s + iser::header_size, pdu.bhs.data(), pdu.bhs.size());
  std::size_t length = iser::headers_size;
  if (!pdu.ahs.empty()) {
    if (pdu.ahs.size() > ahs_room) return make_error_code(errc::invalid_argument);
    std::memcpy(s + length, pdu.ahs.data(), pdu.ahs.size());
    length += pdu.ahs.size();
  }
  sge[0].addr = reinterpret_cast<std::uintptr_t>(s);
  sge[0].lkey = send_region_.lkey();
  num_sge = 1;
  if (!pdu.data.empty()) {
    if (auto reg = lookup(pdu.data)) {
      // Zero copy: the data segment goes straight from registered memory.
      sge[1].addr = reinterpret_cast<std::uintptr_t>(pdu.data.data());
      sge[1].length = static_cast<std::uint32_t>(pdu.data.size());
      sge[1].lkey = reg->lkey;
      num_sge = 2;
    } else if (length + pdu.data.size() <= send_slot_size_) {
      if (payload_opcode(pdu.bhs)) {
        copy_payload(s + length, pdu.data.data(), pdu.data.size());
      } else {
        std::memcpy(s + length, pdu.data.data(), pdu.data.size());  // control data: text, sense, ping
      }
      length += pdu.data.size();
    } else {
      spill = pool().allocate(pdu.data.size());
      if (payload_opcode(pdu.bhs)) {
        copy_payload(spill.data(), pdu.data.data(), pdu.data.size());
      } else {
        std::memcpy(spill.data(), pdu.data.data(), pdu.data.size());
      }
      sge[1].addr = reinterpret_cast<std::uintptr_t>(spill.data());
      sge[1].length = static_cast<std::uint32_t>(pdu.data.size());
      sge[1].lkey = spill.buffer().lkey;
      num_sge = 2;
    }
  }
  sge[0].length = static_cast<std::uint32_t>(length);
  return {};
}

Awaitable<std::error_code> IserConnection::send(PduOut pdu) {
  if (failed_) co_return error_;
  // RFC 7145 §8: an unexpected PDU needs a receive buffer the peer reserved for it.
  if (iser::classify(pdu.bhs, initiator_) == iser::PduClass::unexpected) {
    if (!co_await acquire_credit()) co_return error_;
  }
  // Per-command STags: the windows are bound (Bind MW work requests) before this SEND, in its chain.
  std::vector<ibv_send_wr> chain;
  if (pdu.task_data != nullptr)
    if (auto ec = co_await bind_stags(*pdu.task_data, iser_chain_enabled() ? &chain : nullptr)) co_return ec;
  std::vector<std::uint32_t> slots;
  if (!co_await reserve_sends(1, slots, false, 1)) co_return error_;
  SlotRelease guard{*this, slots};
  std::array<ibv_sge, 2> sge{};
  int num_sge = 1;
  PooledBuffer spill;
  if (auto ec = prepare_send(pdu, slots.front(), sge, num_sge, spill)) {
    --sq_in_use_;
    wake_one(sq_waiters_);
    co_return ec;
  }
  Op op;
  ibv_send_wr wr{};
  wr.wr_id = reinterpret_cast<std::uintptr_t>(&op);
  wr.sg_list = sge.data();
  wr.num_sge = num_sge;
  set_send_opcode(wr, pdu);
  wr.send_flags = IBV_SEND_SIGNALED;
  chain.push_back(wr);
  if (iser_chain_enabled()) take_invalidates(chain);  // queued Local Invalidates ride at its head
  for (std::size_t i = 0; i + 1 < chain.size(); ++i) chain[i].next = &chain[i + 1];
  ibv_send_wr* bad = nullptr;
  count_post_send(chain.size());
  const int rc = ibv_post_send(id_->qp, chain.data(), &bad);
  apply_window_rkeys();
  if (rc != 0) {
    --sq_in_use_;  // the SEND, last in the chain, was not posted
    log::info("iser {}: post send failed: {}", peer_, std::strerror(rc));
    abort_connection(make_error_code(errc::connection_closed));
    co_return error_;
  }
  if (initiator_ && static_cast<iscsi::Opcode>(iscsi::raw_opcode(pdu.bhs)) == iscsi::Opcode::scsi_command)
    count_scsi_command();
  pending_.insert(&op);
  co_await op.done.wait();
  co_return op.done.error();
}

namespace {
// Work requests a step needs: one per 1 MiB piece of a Put_Data (none when empty), one SEND per PDU.
std::uint32_t step_work_requests(const ChainStep& step) noexcept {
  if (const auto* put = std::get_if<PutDataStep>(&step))
    return static_cast<std::uint32_t>((put->source.bytes.size() + max_rdma_piece - 1) / max_rdma_piece);
  return 1;
}
}  // namespace

Awaitable<std::error_code> IserConnection::send_chain(std::vector<ChainStep> steps) {
  if (failed_) co_return error_;
  // Each chunk (all the steps unless they need more than the send queue) is one chain of work
  // requests handed to one ibv_post_send: nothing can be posted between them, and the RC QP
  // executes them in posting order (an RDMA Write before the SEND of its SCSI Response: the
  // initiator has the data before the status; a Bind MW before the SEND of its SCSI Command).
  // Steps that need more than the send queue go out in chunks with the gate closed
  // (batch_posting_), so no send() or other chain posts between its chunks either.
  const bool chained = iser_chain_enabled();
  std::size_t next = 0;
  bool gate_held = false;
  std::error_code result;
  while (next < steps.size()) {
    // This chunk: [next, end), at most send_depth work requests (at least one step).
    std::size_t end = next;
    std::uint32_t work_requests = 0;
    std::uint32_t pdus = 0;
    while (end < steps.size()) {
      const auto* put = std::get_if<PutDataStep>(&steps[end]);
      // Unchained (ISERKIT_ISER_CHAIN=off): a Put_Data is an rdma() of its own, as before.
      if (put != nullptr && !chained) break;
      const std::uint32_t w = step_work_requests(steps[end]);
      if (end > next && work_requests + w > options_.send_depth) break;
      work_requests += w;
      if (put == nullptr) ++pdus;
      ++end;
    }
    if (end == next || work_requests > options_.send_depth) {
      // A Put_Data unchained, or larger than the send queue: rdma() posts it in pieces that fit.
      auto& put = std::get<PutDataStep>(steps[next]);
      if (!gate_held && next + 1 < steps.size()) {
        batch_posting_ = true;
        gate_held = true;
      }
      result = co_await rdma(true, put.dest, put.offset, put.source);
      if (result) break;
      ++next;
      continue;
    }
    // Credits first (RFC 7145 §8), holding no slot or send-queue entry while waiting.
    for (std::size_t i = next; i < end && !failed_; ++i)
      if (const auto* pdu = std::get_if<PduOut>(&steps[i]);
          pdu != nullptr && iser::classify(pdu->bhs, initiator_) == iser::PduClass::unexpected)
        (void)co_await acquire_credit();
    // Per-command STags: each command's windows are bound before its SEND (at the chain's head).
    std::vector<ibv_send_wr> binds;
    for (std::size_t i = next; i < end && !result; ++i)
      if (const auto* pdu = std::get_if<PduOut>(&steps[i]); pdu != nullptr && pdu->task_data != nullptr)
        result = co_await bind_stags(*pdu->task_data, chained ? &binds : nullptr);
    if (result) {
      // The commands before the one that failed hold bound-to-be windows: their binds go out
      // (so their windows' ends — Local Invalidate — stay as the StagTable expects).
      if (!binds.empty() && !failed_) {
        take_invalidates(binds);
        for (std::size_t i = 0; i + 1 < binds.size(); ++i) binds[i].next = &binds[i + 1];
        ibv_send_wr* bad = nullptr;
        count_post_send(binds.size());
        if (ibv_post_send(id_->qp, binds.data(), &bad) != 0) abort_connection(make_error_code(errc::connection_closed));
      }
      apply_window_rkeys();
      break;
    }
    std::vector<std::uint32_t> slots;
    if (failed_ || !co_await reserve_sends(pdus, slots, gate_held, work_requests)) {
      result = error_;
      break;
    }
    SlotRelease guard{*this, slots};
    if (!gate_held && end < steps.size()) {
      batch_posting_ = true;
      gate_held = true;
    }
    // The Local Invalidates the pass queued go at the chain's head (nothing suspends from here to
    // the post): the chain is Local Invalidates, Bind MWs, then the steps' work requests.
    if (chained) take_invalidates(binds);
    const std::size_t first = binds.size();  // window work requests, then the steps' ones
    std::vector<ibv_send_wr> wrs(first + work_requests);
    std::copy(binds.begin(), binds.end(), wrs.begin());
    std::vector<std::array<ibv_sge, 2>> sges(work_requests);
    std::vector<PooledBuffer> spills(pdus);
    Op op;
    op.remaining = 0;
    std::size_t built = 0;  // work requests of the steps filled in
    std::size_t pdu_index = 0;
    for (std::size_t i = next; i < end && !result; ++i) {
      if (auto* put = std::get_if<PutDataStep>(&steps[i])) {
        Buffer local = put->source;
        if (local.lkey == 0) {
          if (auto reg = lookup(local.bytes)) {
            local.lkey = reg->lkey;
          } else {
            result = make_error_code(errc::invalid_argument);  // not registered memory
            break;
          }
        }
        for (std::size_t done = 0; done < local.bytes.size(); ++built) {
          const auto n = static_cast<std::uint32_t>(std::min<std::size_t>(local.bytes.size() - done, max_rdma_piece));
          ibv_sge& sge = sges[built][0];
          sge.addr = reinterpret_cast<std::uintptr_t>(local.bytes.data() + done);
          sge.length = n;
          sge.lkey = local.lkey;
          ibv_send_wr& wr = wrs[first + built];
          wr.wr_id = reinterpret_cast<std::uintptr_t>(&op);
          wr.sg_list = &sge;
          wr.num_sge = 1;
          wr.opcode = IBV_WR_RDMA_WRITE;
          wr.send_flags = IBV_SEND_SIGNALED;
          wr.wr.rdma.remote_addr = put->dest.address() + put->offset + done;
          wr.wr.rdma.rkey = put->dest.key();
          done += n;
        }
        continue;
      }
      const auto& pdu = std::get<PduOut>(steps[i]);
      if (initiator_ && static_cast<iscsi::Opcode>(iscsi::raw_opcode(pdu.bhs)) == iscsi::Opcode::scsi_command)
        count_scsi_command();
      int num_sge = 1;
      if (auto ec = prepare_send(pdu, slots[pdu_index], sges[built], num_sge, spills[pdu_index])) {
        result = ec;  // a PDU that cannot be described (AHS too long) ends the chain before it
        break;
      }
      ++pdu_index;
      ibv_send_wr& wr = wrs[first + built];
      wr.wr_id = reinterpret_cast<std::uintptr_t>(&op);
      wr.sg_list = sges[built].data();
      wr.num_sge = num_sge;
      set_send_opcode(wr, pdu);
      wr.send_flags = IBV_SEND_SIGNALED;
      ++built;
    }
    // What was not built gives its send-queue entries back.
    if (built < work_requests) {
      sq_in_use_ -= static_cast<std::uint32_t>(work_requests - built);
      for (std::size_t i = built; i < work_requests; ++i) wake_one(sq_waiters_);
    }
    const std::size_t total = first + built;
    for (std::size_t i = 0; i + 1 < total; ++i) wrs[i].next = &wrs[i + 1];
    std::size_t posted = total;
    if (total > 0) {
      ibv_send_wr* bad = nullptr;
      count_post_send(total);
      const int rc = ibv_post_send(id_->qp, wrs.data(), &bad);
      apply_window_rkeys();
      if (rc != 0) {
        // Work requests before `bad` were posted and will complete; the rest were not.
        posted = bad != nullptr ? static_cast<std::size_t>(bad - wrs.data()) : 0;
        const std::size_t unposted_steps = total - std::max(posted, first);
        sq_in_use_ -= static_cast<std::uint32_t>(unposted_steps);
        log::info("iser {}: post send failed: {}", peer_, std::strerror(rc));
        abort_connection(make_error_code(errc::connection_closed));
      }
    }
    if (posted > first) {
      op.remaining = static_cast<std::uint32_t>(posted - first);
      pending_.insert(&op);
      // The chunk's slots (and the Put_Data sources) are reused once it completes: wait here.
      co_await op.done.wait();
      if (auto ec = op.done.error(); ec && !result) result = ec;
    }
    if (failed_ && !result) result = error_;
    if (result) break;
    next = end;
  }
  if (gate_held) {
    batch_posting_ = false;
    auto waiters = std::move(gate_waiters_);
    gate_waiters_.clear();
    for (Completion* c : waiters) c->complete();
  }
  co_return result;
}

Awaitable<bool> IserConnection::acquire_credit() {
  while (!failed_ && !credits_.try_acquire()) {
    Completion c;
    credit_waiters_.push_back(&c);
    co_await c.wait();
  }
  co_return !failed_;
}

Awaitable<bool> IserConnection::reserve_sends(std::uint32_t n, std::vector<std::uint32_t>& slots, bool gate_owner,
                                              std::uint32_t sq_entries) {
  while (true) {
    while (!failed_ && batch_posting_ && !gate_owner) {
      Completion c;
      gate_waiters_.push_back(&c);
      co_await c.wait();
    }
    while (!failed_ && free_send_slots_.size() < n) {
      Completion c;
      slot_waiters_.push_back(&c);
      co_await c.wait();
    }
    if (failed_) co_return false;
    if (batch_posting_ && !gate_owner) continue;  // a batch started while we waited
    for (std::uint32_t i = 0; i < n; ++i) {
      slots.push_back(free_send_slots_.back());
      free_send_slots_.pop_back();
    }
    if (!co_await acquire_sq(sq_entries)) {
      release_slots(slots);
      co_return false;
    }
    if (batch_posting_ && !gate_owner) {
      // A batch closed the gate while we waited for the send queue: give everything back, so the
      // batch (which may need these entries and slots) can go on, and wait for it to finish.
      sq_in_use_ -= sq_entries;
      for (std::uint32_t i = 0; i < sq_entries; ++i) wake_one(sq_waiters_);
      release_slots(slots);
      continue;
    }
    co_return true;
  }
}

void IserConnection::release_slots(std::vector<std::uint32_t>& slots) noexcept {
  for (auto slot : slots) {
    free_send_slots_.push_back(slot);
    wake_one(slot_waiters_);
  }
  slots.clear();
}

// ---------------------------------------------------------------------------------------------
// Control receive
// ---------------------------------------------------------------------------------------------

void IserConnection::set_send_pass(SendPass* pass) noexcept {
  // The target's connection and unchained posting (ISERKIT_ISER_CHAIN=off: the old way, for
  // comparison) do not join: their sends and invalidates go out as before.
  if (!initiator_ || !iser_chain_enabled()) return;
  if (holding_) end_burst();
  pass_ = pass;
  invalidates_.set_pass(pass);
}

void IserConnection::end_burst() {
  if (!holding_) return;
  holding_ = false;
  pass_->release_later(ex_);
}

Awaitable<Result<PduIn>> IserConnection::receive(DataPlacement* placement) {
  if (repost_) {
    // The previous PDU's data is no longer referenced (PduIn::data is valid until this call).
    if (!failed_) (void)post_receive(*repost_);
    repost_.reset();
  }
  // Nothing received is waiting: the burst ends before this receive waits (or fails), so what its
  // PDUs' handling queued in the send pass goes out (common/send_pass.hpp).
  if (ready_.empty()) end_burst();
  while (ready_.empty()) {
    if (failed_) {
      // A PDU that arrived before the failure is still delivered (its completion precedes the
      // flush in the CQ): only an empty CQ ends the receiving.
      drain();
      if (ready_.empty()) co_return fail(error_);
      break;
    }
    Completion c;
    receive_waiter_ = &c;
    co_await c.wait();
  }
  const auto [slot, length] = ready_.front();
  ready_.pop_front();
  repost_ = slot;
  // More PDUs were received already (one drain() of the CQ reaps up to the receive depth): hold
  // the send pass while they are handled, so the output of the burst — the sends of new commands,
  // the Local Invalidates of the answered ones — leaves together. The burst is bounded by what was
  // received before it began: drain() runs in the poll loop, never while these are handled.
  if (pass_ != nullptr && !holding_ && !ready_.empty()) {
    pass_->hold();
    holding_ = true;
  }
  std::byte* p = recv_region_.data() + std::size_t{slot} * recv_slot_size_;
  const ConstByteSpan message(p, length);
  auto opcode = iser::peek_opcode(message);
  if (!opcode || *opcode != iser::Opcode::iscsi_control || length < iser::headers_size) {
    // Hello/HelloReply belong to iWARP setup, which iserkit does not use; anything else is garbage.
    log::info("iser {}: unexpected iSER message: bytes={} first=0x{:02x}", peer_, length,
              length > 0 ? load_u8(p) : 0);
    abort_connection(make_error_code(errc::protocol_error));
    end_burst();  // the receive loop stops here: it must not leave the pass held
    co_return fail(errc::protocol_error);
  }
  auto header = iser::decode_header(message);
  PduIn in;
  std::memcpy(in.bhs.data(), p + iser::header_size, in.bhs.size());
  const std::size_t ahs_bytes = std::size_t{iscsi::total_ahs_length_words(in.bhs)} * 4;
  const std::uint32_t dsl = iscsi::data_segment_length_bytes(in.bhs);
  // RFC 7145 §7.2: one SEND carries exactly one control-type PDU (no padding is required).
  if (iser::headers_size + ahs_bytes + dsl > length) {
    log::info("iser {}: PDU longer than its SEND: bytes={} ahs={} data={}", peer_, length, ahs_bytes, dsl);
    abort_connection(make_error_code(errc::protocol_error));
    end_burst();  // the receive loop stops here: it must not leave the pass held
    co_return fail(errc::protocol_error);
  }
  in.ahs.assign(p + iser::headers_size, p + iser::headers_size + ahs_bytes);
  if (header->read_valid) in.peer_read = PeerBuffer{header->read_stag, header->read_base_offset};
  if (header->write_valid) in.peer_write = PeerBuffer{header->write_stag, header->write_base_offset};
  if (!initiator_ && send_with_invalidate_) note_command_stag(in);
  if (!initiator_ && static_cast<iscsi::Opcode>(iscsi::raw_opcode(in.bhs)) == iscsi::Opcode::scsi_command)
    count_scsi_command();
  if (iser::classify(in.bhs, !initiator_) == iser::PduClass::answer) {
    credits_.release();
    wake_one(credit_waiters_);
  }
  if (dsl == 0) co_return in;
  if (dsl > max_recv_) {
    in.pdu_error = make_error_code(errc::pdu_too_large);  // the caller Rejects; framing is intact
    co_return in;
  }
  std::byte* data = p + iser::headers_size + ahs_bytes;
  std::span<std::byte> dest = placement != nullptr ? placement->place(in.bhs, dsl) : std::span<std::byte>{};
  if (dest.size() == dsl) {
    // Immediate (or unsolicited) write data arrives inside the receive descriptor: one counted copy
    // into the task's buffer. iserkit's initiator sends none over iSER; the Linux initiator may.
    copy_payload(dest.data(), data, dsl);
    in.data = dest;
  } else {
    in.data = std::span<std::byte>(data, dsl);
  }
  co_return in;
}

}  // namespace rdma
}  // namespace iserkit::datamover

#endif  // ISERKIT_WITH_ISER
