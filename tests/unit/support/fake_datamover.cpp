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

void FakeDatamover::push_error(std::error_code ec) {
  Inbound in;
  in.fatal = ec;
  inbound_.push_back(std::move(in));
  inbound_ready_.set();
}

Awaitable<std::error_code> FakeDatamover::send(datamover::PduOut pdu) {
  if (closed_) co_return make_error_code(errc::connection_closed);
  CapturedPdu c;
  c.bhs = pdu.bhs;
  auto h = iscsi::decode_bhs(pdu.bhs);
  if (!h) co_return make_error_code(errc::malformed_pdu);
  c.header = *h;
  c.data.assign(pdu.data.begin(), pdu.data.end());
  if (pdu.task_data != nullptr) {
    c.read_region = pdu.task_data->read_region();
    c.write_region = pdu.task_data->write_region();
  }
  sent_.push_back(std::move(c));
  if (responder_) responder_(*this, sent_.back());
  co_return std::error_code{};
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
}

}  // namespace iserkit::test
