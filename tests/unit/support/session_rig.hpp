// SessionRig: a real initiator Session (the driver in initiator/src/session.cpp) over a
// FakeDatamover on a private io_context, for unit tests of the session driver: start it, run a
// coroutine body on its executor, close it and check that every loop ended. Also the small
// builders those tests share (a fresh login's numbering, a READ (10), a GOOD SCSI Response).
// Header-only: for test targets that also link iserkit::initiator_internal (session_start.hpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <system_error>
#include <utility>
#include <vector>

#include "fake_datamover.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/initiator/command_channel.hpp"
#include "session_start.hpp"

namespace iserkit::test {

/// The numbering at the end of a fresh login (RFC 7143 §11.12.8): CmdSN 1, ExpCmdSN 1, MaxCmdSN 64
/// (a window of 64 commands), ExpStatSN `exp_stat_sn`.
inline initiator::EngineStart fresh_login(std::uint32_t exp_stat_sn = 1) {
  return initiator::EngineStart{.cmd_sn = SerialNumber(1),
                                .exp_cmd_sn = SerialNumber(1),
                                .max_cmd_sn = SerialNumber(64),
                                .exp_stat_sn = SerialNumber(exp_stat_sn)};
}

/// A READ (10) of LUN 0 whose Data-In lands in `buffer` (its size in bytes is the expected data
/// transfer length; the CDB's LBA and block count stay 0: the scripted targets do not read them).
inline initiator::CommandRequest read10(std::span<std::byte> buffer) {
  initiator::CommandRequest r;
  r.lun = scsi::Lun::from_index(0);
  r.cdb.length = 10;
  r.cdb.bytes[0] = std::byte{0x28};
  r.data_in = buffer;
  return r;
}

/// A SCSI Response with status GOOD for `c` (RFC 7143 §11.4): StatSN = the command's ExpStatSN,
/// ExpCmdSN = its CmdSN + 1, MaxCmdSN = its CmdSN + 64.
inline iscsi::ScsiResponse response_for(const iscsi::ScsiCommand& c) {
  iscsi::ScsiResponse r;
  r.itt = c.itt;
  r.stat_sn = c.exp_stat_sn;
  r.exp_cmd_sn = c.cmd_sn + 1;
  r.max_cmd_sn = c.cmd_sn + 64;
  return r;
}

/// Plays a target answering a READ command `p` (any other PDU: nothing): its expected data transfer
/// length in Data-In PDUs of `piece_bytes` each (all in one when 0), PDU k (DataSN k) filled with
/// `first_byte` + k, the last one carrying GOOD status (StatSN = the command's ExpStatSN,
/// ExpCmdSN = its CmdSN + 1, MaxCmdSN = its CmdSN + 64).
inline void answer_read(FakeDatamover& d, const CapturedPdu& p, std::uint32_t piece_bytes, std::uint8_t first_byte) {
  const auto* c = p.as<iscsi::ScsiCommand>();
  if (c == nullptr || !c->read) return;
  const std::uint32_t total = c->expected_data_transfer_length;
  const std::uint32_t piece = piece_bytes == 0 ? total : piece_bytes;
  std::uint32_t sn = 0;
  std::uint32_t offset = 0;
  do {
    const std::uint32_t bytes = std::min(piece, total - offset);
    iscsi::DataIn in;
    in.itt = c->itt;
    in.data_sn = sn;
    in.buffer_offset = offset;
    in.exp_cmd_sn = c->cmd_sn + 1;
    in.max_cmd_sn = c->cmd_sn + 64;
    if (offset + bytes == total) {
      in.final = in.status_present = true;
      in.stat_sn = c->exp_stat_sn;
    }
    d.push(in, std::vector<std::byte>(bytes, static_cast<std::byte>(first_byte + sn)));
    offset += bytes;
    ++sn;
  } while (offset < total);
}

/// Checks (non-fatally) that an execute() result is a success with SCSI status GOOD.
inline void expect_good(const Result<scsi::ScsiResult>& r) {
  EXPECT_TRUE(r) << (r ? "" : r.error().message());
  if (r) {
    EXPECT_EQ(r->status, scsi::Status::good);
  }
}

/// Checks (non-fatally) that an execute() result failed with exactly `ec`.
inline void expect_error(const Result<scsi::ScsiResult>& r, std::error_code ec) {
  EXPECT_FALSE(r);
  if (!r) {
    EXPECT_EQ(r.error(), ec) << r.error().message();
  }
}

/// A Session in full feature phase over a FakeDatamover (the "target" is the fake's responder).
/// Single-threaded: everything runs on `io` inside run().
class SessionRig {
 public:
  /// Tag of the constructor that starts nothing: the caller calls start() itself.
  struct Deferred {};

  /// Starts a session over a new FakeDatamover with `caps`, negotiated `params` and `options`,
  /// numbered as fresh_login(); no Reconnector (a lost connection ends the session).
  explicit SessionRig(initiator::SessionOptions options = {}, iscsi::OperationalParameters params = {},
                      datamover::Capabilities caps = {}) {
    start(std::make_unique<FakeDatamover>(io.get_executor(), caps), std::move(options), params);
  }
  explicit SessionRig(Deferred) {}
  SessionRig(const SessionRig&) = delete;
  SessionRig& operator=(const SessionRig&) = delete;

  /// Starts the session over `fake` (created on `io`'s executor); sets `dm` and `session`.
  /// `reconnect`: see start_session() (empty: no recovery).
  void start(std::unique_ptr<FakeDatamover> fake, initiator::SessionOptions options,
             const iscsi::OperationalParameters& params = {}, initiator::Reconnector reconnect = {},
             initiator::EngineStart numbering = fresh_login()) {
    dm = fake.get();
    session = initiator::start_session(io.get_executor(), std::move(fake), std::move(options), params,
                                       "iqn.2026-01.test:t", numbering, std::move(reconnect));
  }

  /// Runs `body` (a callable returning Awaitable<void>) on the session's executor, then closes the
  /// session; fails the test when the body did not finish within 20 s or a loop outlived close().
  template <class Body>
  void run(Body body) {
    bool finished = false;
    asio::co_spawn(
        io,
        [&]() -> Awaitable<void> {
          co_await body();
          finished = true;
          session->close();
        },
        asio::detached);
    io.run_for(std::chrono::seconds(20));
    EXPECT_TRUE(finished) << "the test body did not finish";
    EXPECT_TRUE(io.stopped()) << "a session loop is still running after close()";
  }

  asio::io_context io;
  /// The session's (first) datamover. With a Reconnector, valid only until the session replaced
  /// it: the session frees a lost connection's datamover once its loop has returned.
  FakeDatamover* dm = nullptr;
  std::shared_ptr<initiator::Session> session;  // declared after io: destroyed first
};

/// Waits on the rig's executor (polling every millisecond, at most `limit`) until `done()`.
template <class Pred>
Awaitable<void> wait_until(asio::io_context& io, Pred done,
                           std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
  asio::steady_timer t(io);
  for (auto waited = std::chrono::milliseconds(0); !done() && waited < limit; waited += std::chrono::milliseconds(1)) {
    t.expires_after(std::chrono::milliseconds(1));
    co_await t.async_wait(asio::use_awaitable);
  }
}

/// A command of Session::start(): counts command_done() calls and keeps the last result.
struct CountingCallback final : initiator::CommandCallback {
  int calls = 0;
  Result<scsi::ScsiResult> got = fail(errc::session_closed);
  void command_done(Result<scsi::ScsiResult> r) noexcept override {
    ++calls;
    got = std::move(r);
  }
};

}  // namespace iserkit::test
