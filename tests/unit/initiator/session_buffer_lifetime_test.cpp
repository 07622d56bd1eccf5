// The Session driver's buffer lifetime rule, whatever ends a task: execute() must not return (and
// so give the caller its buffer back) while a PDU that carries the buffer's bytes (immediate data,
// unsolicited or solicited Data-Out) is still being sent. FakeDatamover::hold_sends() keeps every
// PDU "on the wire" — its bytes are read only when released, as a socket write reads them when the
// socket takes them — so each test ends the task while its Data-Out is still waiting: a command
// timeout, a lost connection (with and without recovery), close(), the target answering early
// (CHECK CONDITION before the Data-Out left), a Reject, a LUN reset. The caller overwrites its
// buffer as soon as execute() returns (as a reused buffer would be): any PDU read after that
// carries the marker byte and fails the test.
#include <gtest/gtest.h>

#include <utility>

#include "fake_datamover.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/datamover/tcp_datamover.hpp"
#include "session_start.hpp"

using namespace iserkit;
using namespace iserkit::initiator;
using namespace std::chrono_literals;
using test::CapturedPdu;
using test::FakeDatamover;

namespace {

constexpr std::byte reused{0xee};  // what the caller writes into its buffer once execute() returned

iscsi::OperationalParameters unsolicited_writes() {
  iscsi::OperationalParameters p;
  p.immediate_data = true;   // the SCSI Command carries the first 4 KiB
  p.initial_r2t = false;     // unsolicited Data-Out for the rest of the first burst
  p.first_burst_length = 65536;
  p.target_max_recv_data_segment_length = 4096;
  return p;
}

CommandRequest write10(std::span<const std::byte> payload) {
  CommandRequest w;
  w.lun = scsi::Lun::from_index(0);
  w.cdb.length = 10;
  w.cdb.bytes[0] = std::byte{0x2a};
  w.data_out = payload;
  return w;
}

struct LifetimeRig {
  explicit LifetimeRig(SessionOptions options = {}, Reconnector reconnect = {}) {
    auto fake = std::make_unique<FakeDatamover>(io.get_executor());
    dm = fake.get();
    dm->hold_sends(true);
    session = start_session(io.get_executor(), std::move(fake), std::move(options), unsolicited_writes(),
                            "iqn.2026-01.test:t",
                            EngineStart{.cmd_sn = SerialNumber(1),
                                        .exp_cmd_sn = SerialNumber(1),
                                        .max_cmd_sn = SerialNumber(64),
                                        .exp_stat_sn = SerialNumber(1)},
                            std::move(reconnect));
    for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i % 200);  // never the marker
  }

  /// Runs a 16 KiB WRITE (SCSI Command with immediate data + three unsolicited Data-Out) while
  /// `trigger` ends it; `trigger` runs once the command's PDUs wait in the datamover. Returns the
  /// command's result. Releases what is still held after `release_after`.
  template <class Trigger>
  Result<scsi::ScsiResult> write_while(Trigger trigger, std::chrono::milliseconds release_after = 300ms) {
    Result<scsi::ScsiResult> out = fail(errc::protocol_error);
    bool finished = false;
    asio::co_spawn(
        io,
        [&]() -> Awaitable<void> {
          out = co_await session->execute(write10(payload));
          // The caller has its buffer back: nothing may still be about to read it.
          still_sending_at_return = dm_alive && dm->sending_from(payload);
          std::fill(payload.begin(), payload.end(), reused);
          finished = true;
          io.stop();  // what is still held is released (or failed) by finish()
        },
        asio::detached);
    asio::co_spawn(
        io,
        [&]() -> Awaitable<void> {
          // Until the command's four PDUs are on their way (the sender hands them over one by one).
          asio::steady_timer t(io);
          for (int i = 0; i < 200 && dm->sends_waiting() == 0; ++i) {
            t.expires_after(1ms);
            co_await t.async_wait(asio::use_awaitable);
          }
          trigger();
          t.expires_after(release_after);
          co_await t.async_wait(asio::use_awaitable);
          if (dm_alive) {
            dm->hold_sends(false);  // the socket takes everything from now on
            dm->release_sends();
          }
        },
        asio::detached);
    io.run_for(5s);
    io.restart();
    EXPECT_TRUE(finished) << "execute() did not return";
    return out;
  }

  /// Every PDU that reached the wire carried the caller's bytes, none the marker.
  void expect_no_reused_bytes_sent() const {
    if (!dm_alive) return;
    for (const CapturedPdu& p : dm->sent())
      for (std::byte b : p.data) {
        ASSERT_NE(b, reused) << "a PDU was sent from the caller's buffer after execute() returned";
      }
  }

  /// The target answers every SCSI Command as soon as it has it: `answer(datamover, command, pdu)`.
  template <class Answer>
  void answer_commands(Answer answer) {
    dm->respond_with([answer](FakeDatamover& d, const CapturedPdu& p) {
      if (const auto* c = p.as<iscsi::ScsiCommand>()) answer(d, *c, p);
    });
  }

  /// execute() returned with nothing still sending from the caller's buffer, and no PDU carried
  /// the bytes written into it afterwards; then the session is closed (finish()).
  void expect_buffer_let_go_then_finish() {
    EXPECT_FALSE(still_sending_at_return);
    expect_no_reused_bytes_sent();
    finish();
  }

  void finish() {
    session->close();
    if (dm_alive) {
      dm->hold_sends(false);
      dm->release_sends();
    }
    io.run_for(2s);
  }

  asio::io_context io;
  FakeDatamover* dm = nullptr;
  bool dm_alive = true;  // false once a recovering session may have freed the first datamover
  std::shared_ptr<Session> session;
  std::vector<std::byte> payload = std::vector<std::byte>(16384);
  bool still_sending_at_return = false;
};

}  // namespace

TEST(SessionBufferLifetime, CommandTimeoutWaitsForTheDataOutBeingSent) {
  SessionOptions o;
  o.command_timeout = 30ms;
  LifetimeRig rig(o);
  auto r = rig.write_while([] {});  // nothing answers: the command times out
  EXPECT_FALSE(r);
  if (!r) {
    EXPECT_EQ(r.error(), make_error_code(errc::timeout));
  }
  rig.expect_buffer_let_go_then_finish();
}

TEST(SessionBufferLifetime, LostConnectionWaitsForTheDataOutBeingSent) {
  LifetimeRig rig;
  auto r = rig.write_while([&] { rig.dm->push_error(make_error_code(errc::connection_closed)); });
  EXPECT_FALSE(r);
  rig.expect_buffer_let_go_then_finish();
}

TEST(SessionBufferLifetime, CloseWaitsForTheDataOutBeingSent) {
  LifetimeRig rig;
  auto r = rig.write_while([&] { rig.session->close(); });
  EXPECT_FALSE(r);
  rig.expect_buffer_let_go_then_finish();
}

// The target answers (CHECK CONDITION) as soon as it has the SCSI Command, while the unsolicited
// Data-Out is still on its way: the response may not hand the buffer back before those left.
TEST(SessionBufferLifetime, EarlyResponseWaitsForTheDataOutBeingSent) {
  LifetimeRig rig;
  rig.answer_commands([](FakeDatamover& d, const iscsi::ScsiCommand& c, const CapturedPdu&) {
    iscsi::ScsiResponse r;
    r.itt = c.itt;
    r.status = static_cast<std::uint8_t>(scsi::Status::check_condition);
    r.stat_sn = c.exp_stat_sn;
    r.exp_cmd_sn = c.cmd_sn + 1;
    r.max_cmd_sn = c.cmd_sn + 64;
    d.push(r);
  });
  auto r = rig.write_while([&] { rig.dm->release_sends(1); });  // only the SCSI Command leaves
  EXPECT_TRUE(r) << (r ? "" : r.error().message());
  if (r) {
    EXPECT_EQ(r->status, scsi::Status::check_condition);
  }
  rig.expect_buffer_let_go_then_finish();
}

// A Reject of the SCSI Command (RFC 7143 §11.17) ends the task while its Data-Out waits.
TEST(SessionBufferLifetime, RejectWaitsForTheDataOutBeingSent) {
  LifetimeRig rig;
  rig.answer_commands([](FakeDatamover& d, const iscsi::ScsiCommand& c, const CapturedPdu& p) {
    iscsi::Reject r;
    r.reason = iscsi::RejectReason::protocol_error;
    r.exp_cmd_sn = c.cmd_sn;
    r.max_cmd_sn = c.cmd_sn + 64;
    std::vector<std::byte> rejected(p.bhs.begin(), p.bhs.end());
    d.push(r, std::move(rejected));
  });
  auto r = rig.write_while([&] { rig.dm->release_sends(1); });
  EXPECT_FALSE(r);
  rig.expect_buffer_let_go_then_finish();
}

// With recovery: the connection is lost while the Data-Out waits; the command is sent again on a
// new connection and completes there. The first connection's held PDUs fail unread when it closes.
TEST(SessionBufferLifetime, RecoveryWaitsForTheDataOutBeingSentOnTheLostConnection) {
  SessionOptions o;
  o.replacement_timeout = 5s;
  o.reconnect_delay_min = 1ms;
  o.reconnect_delay_max = 2ms;
  FakeDatamover* second = nullptr;
  asio::io_context* io = nullptr;
  Reconnector reconnect = [&]() -> Awaitable<Result<Reconnected>> {
    auto f = std::make_unique<FakeDatamover>(io->get_executor());
    second = f.get();
    second->respond_with([](FakeDatamover& d, const CapturedPdu& p) {
      const auto* o = p.as<iscsi::DataOut>();
      if (o == nullptr || !o->final) return;
      iscsi::ScsiResponse r;
      r.itt = o->itt;
      r.stat_sn = o->exp_stat_sn;
      r.exp_cmd_sn = SerialNumber(2);
      r.max_cmd_sn = SerialNumber(65);
      d.push(r);
    });
    co_return Reconnected{.datamover = std::move(f),
                          .parameters = unsolicited_writes(),
                          .start = EngineStart{.cmd_sn = SerialNumber(1),
                                               .exp_cmd_sn = SerialNumber(1),
                                               .max_cmd_sn = SerialNumber(64),
                                               .exp_stat_sn = SerialNumber(1)}};
  };
  LifetimeRig rig(o, std::move(reconnect));
  io = &rig.io;
  auto r = rig.write_while([&] {
    rig.dm->push_error(make_error_code(errc::connection_closed));
    rig.dm_alive = false;  // the session frees it once its loops let go
  });
  EXPECT_TRUE(r) << (r ? "" : r.error().message());
  EXPECT_FALSE(rig.still_sending_at_return);
  ASSERT_NE(second, nullptr);
  for (const CapturedPdu& p : second->sent())
    for (std::byte b : p.data) ASSERT_NE(b, reused);
  rig.finish();
}

// The same rule over the real TcpDatamover: the target stops reading, so a 4 MiB WRITE's
// Data-Out is stuck in a full socket; then the task ends (close(), or its timeout while the
// target reads again later). Whatever the peer receives must be the caller's bytes: nothing may be
// written from the buffer after execute() returned (the marker would show; under ASan a freed
// buffer would abort in the sendmsg interceptor).
namespace {

struct SocketRig {
  explicit SocketRig(SessionOptions options) {
    using asio::ip::tcp;
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    acceptor.set_option(asio::socket_base::receive_buffer_size(16 * 1024));
    tcp::socket c(io);
    c.open(tcp::v4());
    c.set_option(asio::socket_base::send_buffer_size(16 * 1024));
    c.connect(acceptor.local_endpoint());
    peer = acceptor.accept();
    iscsi::OperationalParameters p = unsolicited_writes();
    p.first_burst_length = 4u << 20;  // all of it unsolicited: the Data-Out sequence fills the socket
    p.max_burst_length = 4u << 20;
    p.target_max_recv_data_segment_length = 256 * 1024;
    session = start_session(io.get_executor(), std::make_unique<datamover::TcpDatamover>(std::move(c)),
                            std::move(options), p, "iqn.2026-01.test:t",
                            EngineStart{.cmd_sn = SerialNumber(1),
                                        .exp_cmd_sn = SerialNumber(1),
                                        .max_cmd_sn = SerialNumber(64),
                                        .exp_stat_sn = SerialNumber(1)});
    for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<std::byte>(i % 200);  // never 0xee
  }

  /// Spawns the 4 MiB WRITE, which must fail; once execute() returned, the caller writes the marker
  /// over its buffer and `returned` is set; with `close_after`, the session is closed then.
  void spawn_failing_write(bool close_after) {
    asio::co_spawn(
        io,
        [this, close_after]() -> Awaitable<void> {
          auto r = co_await session->execute(write10(payload));
          EXPECT_FALSE(r);
          std::fill(payload.begin(), payload.end(), reused);
          returned = true;
          if (close_after) session->close();
        },
        asio::detached);
  }

  /// Reads everything the initiator sends until it closes (or `limit` passes); counts marker bytes.
  Awaitable<void> drain(std::chrono::milliseconds start_after) {
    asio::steady_timer t(io);
    t.expires_after(start_after);
    co_await t.async_wait(asio::use_awaitable);
    std::vector<std::byte> chunk(64 * 1024);
    while (true) {
      boost::system::error_code ec;
      const std::size_t n = co_await peer.async_read_some(asio::buffer(chunk), use_awaitable_ec(ec));
      for (std::size_t i = 0; i < n; ++i) marker_bytes += chunk[i] == reused;
      received += n;
      if (ec) break;
    }
  }

  asio::io_context io;
  asio::ip::tcp::socket peer{io};
  std::shared_ptr<Session> session;
  std::vector<std::byte> payload = std::vector<std::byte>(4u << 20);
  std::size_t marker_bytes = 0;
  std::size_t received = 0;
  bool returned = false;  // execute() returned
};

}  // namespace

TEST(SessionBufferLifetime, RealSocketCloseWhileTheDataOutIsStuck) {
  SocketRig rig({});
  rig.spawn_failing_write(false);
  asio::co_spawn(
      rig.io,
      [&]() -> Awaitable<void> {
        asio::steady_timer t(rig.io);
        t.expires_after(100ms);
        co_await t.async_wait(asio::use_awaitable);
        rig.session->close();
      },
      asio::detached);
  asio::co_spawn(rig.io, rig.drain(300ms), asio::detached);
  rig.io.run_for(10s);
  EXPECT_TRUE(rig.returned);
  EXPECT_GT(rig.received, 0u);
  EXPECT_LT(rig.received, rig.payload.size()) << "the socket never filled: the test proves nothing";
  EXPECT_EQ(rig.marker_bytes, 0u) << "bytes were sent from the caller's buffer after execute() returned";
}

TEST(SessionBufferLifetime, RealSocketTimeoutWhileTheDataOutIsStuck) {
  SessionOptions o;
  o.command_timeout = 50ms;
  SocketRig rig(o);
  rig.spawn_failing_write(true);
  asio::co_spawn(rig.io, rig.drain(300ms), asio::detached);  // the target reads again, late
  rig.io.run_for(10s);
  EXPECT_TRUE(rig.returned);
  EXPECT_GE(rig.received, rig.payload.size());
  EXPECT_EQ(rig.marker_bytes, 0u) << "bytes were sent from the caller's buffer after execute() returned";
}
