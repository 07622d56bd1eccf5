#include "fake_datamover.hpp"

#include <cstring>

#include "iserkit/common/errors.hpp"

namespace iserkit::test {

void FakeDatamover::push(const iscsi::PduHeader& header, std::vector<std::byte> data, std::error_code pdu_error) {
  Inbound in;
  in.bhs = iscsi::encode_bhs(header);
  iscsi::set_lengths(in.bhs, 0, static_cast<std::uint32_t>(data.size()));
  in.data = std::move(data);
  in.pdu_error = pdu_error;
  inbound_.push_back(std::move(in));
  inbound_ready_.set();
}

void FakeDatamover::push_with_peer_buffers(const iscsi::PduHeader& header, std::optional<datamover::PeerBuffer> read,
                                           std::optional<datamover::PeerBuffer> write) {
  push(header);
  inbound_.back().peer_read = read;
  inbound_.back().peer_write = write;
}

Awaitable<std::error_code> FakeDatamover::send_chain(std::vector<datamover::ChainStep> steps) {
  if (closed_) co_return make_error_code(errc::connection_closed);
  auto& chain = chains_.emplace_back();
  for (auto& step : steps) {
    if (const auto* put = std::get_if<datamover::PutDataStep>(&step)) {
      chain.push_back({.put = true, .key = put->dest.key(), .bytes = put->source.bytes.size()});
      continue;
    }
    const auto& pdu = std::get<datamover::PduOut>(step);
    if (!iscsi::decode_bhs(pdu.bhs)) co_return make_error_code(errc::malformed_pdu);
    chain.push_back({.pdu = sent_.size()});
    put_on_wire(pdu);
  }
  if (hold_) {
    Completion done;
    held_chains_.push_back(&done);
    co_await done.wait();
    co_return done.error();
  }
  co_return std::error_code{};
}

Awaitable<std::error_code> FakeDatamover::put_data(datamover::PeerBuffer, std::uint64_t, Buffer) {
  ++put_data_calls_;
  co_return closed_ ? make_error_code(errc::connection_closed) : std::error_code{};
}

void FakeDatamover::push_error(std::error_code ec) {
  Inbound in;
  in.fatal = ec;
  inbound_.push_back(std::move(in));
  inbound_ready_.set();
}

Awaitable<std::error_code> FakeDatamover::send(datamover::PduOut pdu) {
  if (closed_) co_return make_error_code(errc::connection_closed);
  if (!iscsi::decode_bhs(pdu.bhs)) co_return make_error_code(errc::malformed_pdu);
  if (stag_owner_ && pdu.task_data != nullptr && !pdu.task_data->stags_bound()) {
    for (const bool read : {true, false}) {
      if (!(read ? pdu.task_data->read_region() : pdu.task_data->write_region())) continue;
      const std::uint32_t slot = next_stag_slot_++;
      pdu.task_data->bind_stag(read, 0x5000u + slot, datamover::StagLease(stag_owner_, slot));
    }
  }
  if (hold_) {
    Completion done;
    waiting_.push_back({&pdu, &done});
    co_await done.wait();
    co_return done.error();
  }
  put_on_wire(pdu);
  co_return std::error_code{};
}

datamover::Datamover::SendNow FakeDatamover::try_send_now(std::vector<datamover::PduOut>& pdus) {
  if (!at_once_ || hold_ || closed_ || stag_owner_ || pdus.empty()) return SendNow::refused;
  for (const auto& pdu : pdus)
    if (!iscsi::decode_bhs(pdu.bhs)) return SendNow::refused;  // send_batch() reports it
  for (const auto& pdu : pdus) put_on_wire(pdu);
  ++sent_at_once_;
  return SendNow::sent;
}

void FakeDatamover::put_on_wire(const datamover::PduOut& pdu) {
  CapturedPdu c;
  c.bhs = pdu.bhs;
  c.header = *iscsi::decode_bhs(pdu.bhs);
  // Read now, as a socket write reads the bytes: a freed buffer shows here (ASan), a reused one as
  // wrong bytes.
  c.data.assign(pdu.data.begin(), pdu.data.end());
  if (pdu.task_data != nullptr) {
    c.read_region = pdu.task_data->read_region();
    c.write_region = pdu.task_data->write_region();
  }
  sent_.push_back(std::move(c));
  if (responder_) responder_(*this, sent_.back());
}

void FakeDatamover::release_sends(std::size_t max) {
  for (auto held = std::move(held_chains_); Completion* c : held)
    c->complete(closed_ ? make_error_code(errc::connection_closed) : std::error_code{});
  held_chains_.clear();
  for (; max > 0 && !waiting_.empty(); --max) {
    Waiting w = waiting_.front();
    waiting_.pop_front();
    if (closed_) {
      w.done->complete(make_error_code(errc::connection_closed));
      continue;
    }
    put_on_wire(*w.pdu);
    w.done->complete();
  }
}

bool FakeDatamover::sending_from(std::span<const std::byte> bytes) const noexcept {
  const auto* lo = bytes.data();
  const auto* hi = bytes.data() + bytes.size();
  for (const Waiting& w : waiting_) {
    const auto& d = w.pdu->data;
    if (!d.empty() && d.data() < hi && d.data() + d.size() > lo) return true;
  }
  return false;
}

Awaitable<Result<datamover::PduIn>> FakeDatamover::receive(datamover::DataPlacement* placement) {
  while (true) {
    if (closed_) co_return fail(close_error_ ? close_error_ : make_error_code(errc::connection_closed));
    if (!inbound_.empty()) break;
    inbound_ready_.reset();
    co_await inbound_ready_.wait();
  }
  Inbound next = std::move(inbound_.front());
  inbound_.pop_front();
  if (next.fatal) {
    closed_ = true;
    close_error_ = next.fatal;
    co_return fail(next.fatal);
  }
  datamover::PduIn in;
  in.bhs = next.bhs;
  in.pdu_error = next.pdu_error;
  in.peer_read = next.peer_read;
  in.peer_write = next.peer_write;
  if (!next.data.empty()) {
    const auto length = static_cast<std::uint32_t>(next.data.size());
    std::span<std::byte> where = placement != nullptr ? placement->place(in.bhs, length) : std::span<std::byte>{};
    if (where.size() != length) {
      scratch_.assign(length, std::byte{0});
      where = scratch_;
    }
    std::memcpy(where.data(), next.data.data(), length);
    in.data = where;
  }
  co_return in;
}

void FakeDatamover::close() noexcept {
  closed_ = true;
  inbound_ready_.set();
  // A closed socket fails the writes still queued on it without reading their bytes.
  while (!waiting_.empty()) {
    Waiting w = waiting_.front();
    waiting_.pop_front();
    w.done->complete(make_error_code(errc::connection_closed));
  }
  for (auto held = std::move(held_chains_); Completion* c : held) c->complete(make_error_code(errc::connection_closed));
  held_chains_.clear();
}

}  // namespace iserkit::test
