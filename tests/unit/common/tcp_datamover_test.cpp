// TcpDatamover over a real loopback TCP connection: framing, padding, digests, placement,
// concurrent sends, oversized segments, digest errors and the reset of a failed connection.
#include "iserkit/datamover/tcp_datamover.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <numeric>

#include "iserkit/common/copy_counter.hpp"
#include "iserkit/common/crc32c.hpp"
#include "iserkit/common/errors.hpp"
#include "iserkit/datamover/socket_sender.hpp"
#include "datamover_pair.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cerrno>

namespace iserkit::datamover {
namespace {

using asio::ip::tcp;

using test::IntoBuffer;
using test::nop_batch;
using test::Pair;
using test::pattern;
using test::pause;

TEST(TcpDatamover, DataLandsInPlacedBufferWithDigests) {
  Pair p;
  p.client->set_digests(true, true);
  p.server->set_digests(true, true);
  p.server->set_max_recv_data_segment_length(1 << 20);
  const auto payload = pattern(10001);  // odd length: 3 bytes of padding
  std::vector<std::byte> landing(20000);
  IntoBuffer placement;
  placement.target = landing;
  p.run([&]() -> Awaitable<void> {
    auto ec = co_await p.client->send(make_pdu(iscsi::DataOut{.final = true, .itt = iscsi::Itt{42}}, payload));
    EXPECT_FALSE(ec);
    auto in = co_await p.server->receive(&placement);
    EXPECT_TRUE(in);
    if (!in) co_return;
    EXPECT_FALSE(in->pdu_error);
    EXPECT_EQ(in->data.data(), landing.data());  // placed, not copied
    EXPECT_EQ(in->data.size(), payload.size());
    EXPECT_TRUE(std::equal(payload.begin(), payload.end(), landing.begin()));
    EXPECT_EQ(to_u32(iscsi::itt_of(in->bhs)), 42u);
  });
}

TEST(TcpDatamover, ConcurrentSendsArriveWholeAndInOrder) {
  Pair p;
  constexpr int n = 200;
  std::vector<std::vector<std::byte>> payloads;
  for (int i = 0; i < n; ++i) payloads.push_back(pattern(static_cast<std::size_t>(1 + i * 37)));
  int sent = 0;
  for (int i = 0; i < n; ++i) {
    asio::co_spawn(p.io, [&, i]() -> Awaitable<void> {
      auto ec = co_await p.client->send(make_pdu(iscsi::NopOut{.itt = iscsi::Itt{static_cast<std::uint32_t>(i)}},
                                                 payloads[static_cast<std::size_t>(i)]));
      EXPECT_FALSE(ec);
      ++sent;
    }, asio::detached);
  }
  p.run([&]() -> Awaitable<void> {
    for (int i = 0; i < n; ++i) {
      auto in = co_await p.server->receive(nullptr);
      EXPECT_TRUE(in);
      if (!in) co_return;
      EXPECT_EQ(to_u32(iscsi::itt_of(in->bhs)), static_cast<std::uint32_t>(i));
      const auto& want = payloads[static_cast<std::size_t>(i)];
      EXPECT_TRUE(std::equal(want.begin(), want.end(), in->data.begin(), in->data.end()));
    }
  });
  EXPECT_EQ(sent, n);
}

TEST(TcpDatamover, BatchGoesOutWholeInOrderWithNothingBetween) {
  Pair p;
  p.server->set_max_recv_data_segment_length(1 << 20);
  // A batch of 100 PDUs and, started while the batch is being written, a single send: the single
  // one may come before or after the batch, never inside it.
  std::vector<std::vector<std::byte>> payloads;
  for (int i = 0; i < 100; ++i) payloads.push_back(pattern(static_cast<std::size_t>(4096 + i)));
  std::vector<PduOut> batch;
  for (int i = 0; i < 100; ++i)
    batch.push_back(make_pdu(iscsi::DataOut{.itt = iscsi::Itt{1}, .data_sn = static_cast<std::uint32_t>(i)},
                             payloads[static_cast<std::size_t>(i)]));
  std::error_code batch_ec = make_error_code(errc::timeout), single_ec = make_error_code(errc::timeout);
  asio::co_spawn(p.io, [&]() -> Awaitable<void> { batch_ec = co_await p.client->send_batch(std::move(batch)); },
                 asio::detached);
  asio::co_spawn(p.io, [&]() -> Awaitable<void> {
    single_ec = co_await p.client->send(make_pdu(iscsi::NopOut{.itt = iscsi::Itt{2}}));
  }, asio::detached);
  p.run([&]() -> Awaitable<void> {
    std::uint32_t next_data_sn = 0;
    bool single_seen = false;
    for (int i = 0; i < 101; ++i) {
      auto in = co_await p.server->receive(nullptr);
      EXPECT_TRUE(in);
      if (!in) co_return;
      if (to_u32(iscsi::itt_of(in->bhs)) == 2) {
        EXPECT_TRUE(next_data_sn == 0 || next_data_sn == 100) << "a send came between PDUs of a batch";
        single_seen = true;
        continue;
      }
      auto d = iscsi::decode_bhs_as<iscsi::DataOut>(in->bhs);
      EXPECT_TRUE(d);
      if (!d) co_return;
      EXPECT_EQ(d->data_sn, next_data_sn);
      const auto& want = payloads[next_data_sn];
      EXPECT_TRUE(std::equal(want.begin(), want.end(), in->data.begin(), in->data.end()));
      ++next_data_sn;
    }
    EXPECT_TRUE(single_seen);
    EXPECT_EQ(next_data_sn, 100u);
  });
  EXPECT_FALSE(batch_ec);
  EXPECT_FALSE(single_ec);
}

// The first write of a batch is a non-blocking one on the sender's thread (write_now); what the
// socket does not take then goes out through async_write. With a small send buffer and a receiver
// that starts late, a 1 MiB PDU is cut there: it must still arrive whole and in order.
TEST(TcpDatamover, PduLargerThanTheSocketBufferArrivesWholeAfterAPartialFirstWrite) {
  Pair p(16 * 1024);
  p.server->set_max_recv_data_segment_length(2 << 20);
  const auto big = pattern(1 << 20);
  std::vector<std::byte> landing(big.size());
  IntoBuffer placement;
  placement.target = landing;
  std::error_code ec = make_error_code(errc::timeout);
  bool sent = false;
  p.run([&]() -> Awaitable<void> {
    asio::co_spawn(p.io, [&]() -> Awaitable<void> {
      std::vector<PduOut> batch;
      batch.push_back(make_pdu(iscsi::DataOut{.itt = iscsi::Itt{7}}, big));
      batch.push_back(make_pdu(iscsi::NopOut{.itt = iscsi::Itt{8}}));
      ec = co_await p.client->send_batch(std::move(batch));
      sent = true;
    }, asio::detached);
    co_await pause(p.io, std::chrono::milliseconds(50));
    EXPECT_FALSE(sent) << "1 MiB fit the socket buffers at once: the partial path was not taken";
    auto in = co_await p.server->receive(&placement);
    EXPECT_TRUE(in);
    if (!in) co_return;
    EXPECT_EQ(to_u32(iscsi::itt_of(in->bhs)), 7u);
    EXPECT_TRUE(std::equal(big.begin(), big.end(), landing.begin(), landing.end()));
    auto nop = co_await p.server->receive(nullptr);
    EXPECT_TRUE(nop);
    if (nop) {
      EXPECT_EQ(to_u32(iscsi::itt_of(nop->bhs)), 8u);
    }
  });
  EXPECT_TRUE(sent);
  EXPECT_FALSE(ec);
}

TEST(TcpDatamover, TrySendNowWritesAtOnceOrHandsTheRestToFinishSend) {
  Pair p(16 * 1024);
  p.server->set_max_recv_data_segment_length(2 << 20);
  const auto small = pattern(4096);
  const auto big = pattern(1 << 20);
  std::vector<std::byte> landing(big.size());
  IntoBuffer placement;
  placement.target = landing;
  p.run([&]() -> Awaitable<void> {
    // Small: written on this thread, nothing left to wait for.
    std::vector<PduOut> one;
    one.push_back(make_pdu(iscsi::DataOut{.itt = iscsi::Itt{1}}, small));
    EXPECT_EQ(p.client->try_send_now(one), Datamover::SendNow::sent);
    auto in = co_await p.server->receive(&placement);
    EXPECT_TRUE(in && to_u32(iscsi::itt_of(in->bhs)) == 1u);
    EXPECT_TRUE(std::equal(small.begin(), small.end(), landing.begin()));

    // Larger than the socket buffers: part written, the PDUs taken, the rest left to finish_send().
    std::vector<PduOut> two;
    two.push_back(make_pdu(iscsi::DataOut{.itt = iscsi::Itt{2}}, big));
    two.push_back(make_pdu(iscsi::NopOut{.itt = iscsi::Itt{3}}));
    EXPECT_EQ(p.client->try_send_now(two), Datamover::SendNow::queued);
    EXPECT_TRUE(two.empty());
    // Meanwhile nothing may overtake the rest: try_send_now refuses, send() queues behind it.
    auto three = nop_batch(4);
    EXPECT_EQ(p.client->try_send_now(three), Datamover::SendNow::refused);
    test::Spawned queued, finish;
    test::spawn_send(p.io, queued, [&] { return p.client->send(std::move(three.front())); });
    test::spawn_send(p.io, finish, [&] { return p.client->finish_send(); });
    auto data = co_await p.server->receive(&placement);
    EXPECT_TRUE(data && to_u32(iscsi::itt_of(data->bhs)) == 2u);
    EXPECT_TRUE(std::equal(big.begin(), big.end(), landing.begin(), landing.end()));
    for (std::uint32_t want : {3u, 4u}) {
      auto nop = co_await p.server->receive(nullptr);
      EXPECT_TRUE(nop);
      if (nop) {
        EXPECT_EQ(to_u32(iscsi::itt_of(nop->bhs)), want);
      }
    }
    co_await pause(p.io, std::chrono::milliseconds(20));
    EXPECT_TRUE(finish.done);
    EXPECT_FALSE(finish.ec);
    EXPECT_TRUE(queued.done);
    EXPECT_FALSE(queued.ec);
    // Idle again: the next small batch goes out at once.
    co_await test::expect_nop_sent_at_once(p, 5);
  });
}

TEST(TcpDatamover, TrySendNowToAGonePeerIsRefusedAndSendBatchSaysWhy) {
  Pair p;
  p.server.reset();
  p.run([&]() -> Awaitable<void> {
    // The first writes may still be accepted by the kernel; the error shows within a few.
    Datamover::SendNow r = Datamover::SendNow::sent;
    for (int i = 0; i < 100 && r != Datamover::SendNow::refused; ++i) {
      auto one = nop_batch(static_cast<std::uint32_t>(i));
      r = p.client->try_send_now(one);
      if (r == Datamover::SendNow::queued) (void)co_await p.client->finish_send();
      co_await pause(p.io, std::chrono::milliseconds(2));
    }
    EXPECT_EQ(r, Datamover::SendNow::refused);
    auto again = nop_batch(1000);
    EXPECT_TRUE(co_await p.client->send_batch(std::move(again)));
  });
}

TEST(TcpDatamover, OversizedSegmentIsDiscardedAndFramingKept) {
  Pair p;
  p.server->set_max_recv_data_segment_length(8192);
  const auto big = pattern(9000);
  const auto small = pattern(100);
  p.run([&]() -> Awaitable<void> {
    co_await p.client->send(make_pdu(iscsi::NopOut{.itt = iscsi::Itt{1}}, big));
    co_await p.client->send(make_pdu(iscsi::NopOut{.itt = iscsi::Itt{2}}, small));
    auto first = co_await p.server->receive(nullptr);
    EXPECT_TRUE(first);
    if (!first) co_return;
    EXPECT_EQ(first->pdu_error, make_error_code(errc::pdu_too_large));
    EXPECT_EQ(iscsi::data_segment_length_bytes(first->bhs), 9000u);
    auto second = co_await p.server->receive(nullptr);
    EXPECT_TRUE(second);
    if (!second) co_return;
    EXPECT_FALSE(second->pdu_error);
    EXPECT_EQ(to_u32(iscsi::itt_of(second->bhs)), 2u);
    EXPECT_EQ(second->data.size(), 100u);
  });
}

TEST(TcpDatamover, DataDigestMismatchIsReportedPerPdu) {
  Pair p;
  p.client->set_digests(false, false);  // sender adds no digest…
  p.server->set_digests(false, true);   // …receiver expects one: 4 payload bytes become the "digest"
  const auto payload = pattern(8);
  p.run([&]() -> Awaitable<void> {
    // The 4 bytes after the data segment (the next PDU's BHS) are taken as the data digest.
    co_await p.client->send(make_pdu(iscsi::NopOut{.itt = iscsi::Itt{1}}, payload));
    co_await p.client->send(make_pdu_owned(iscsi::NopOut{.itt = iscsi::Itt{2}}, {}));
    auto in = co_await p.server->receive(nullptr);
    EXPECT_TRUE(in);
    if (!in) co_return;
    EXPECT_EQ(in->pdu_error, make_error_code(errc::data_digest_error));
  });
}

// A raw socket connected on 127.0.0.1 to a TcpDatamover: for feeding or draining exact bytes.
struct RawConnection {
  tcp::acceptor acceptor;
  tcp::socket raw;
  TcpDatamover dm;
  explicit RawConnection(asio::io_context& io)
      : acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)), raw(io), dm(connect(acceptor, raw)) {}

 private:
  static tcp::socket connect(tcp::acceptor& a, tcp::socket& s) {
    s.connect(a.local_endpoint());
    return a.accept();
  }
};

// Writes `wire` raw into a connection whose receiving TcpDatamover has header digests on, and
// returns what one receive() makes of it.
Result<PduIn> receive_raw_with_header_digest(std::span<const std::byte> wire) {
  asio::io_context io;
  RawConnection c(io);
  TcpDatamover& server = c.dm;
  server.set_digests(true, false);
  asio::write(c.raw, asio::buffer(wire.data(), wire.size()));
  std::optional<Result<PduIn>> got;
  asio::co_spawn(io, [&]() -> Awaitable<void> { got = co_await server.receive(nullptr); }, asio::detached);
  io.run_for(std::chrono::seconds(10));
  if (!got) return fail(errc::timeout);
  return std::move(*got);
}

std::array<std::byte, 52> nop_out_with_digest(std::uint32_t itt, std::uint32_t digest_xor) {
  const auto bhs = iscsi::encode_bhs(iscsi::NopOut{.itt = iscsi::Itt{itt}});
  std::array<std::byte, 52> wire{};
  std::copy(bhs.begin(), bhs.end(), wire.begin());
  store_digest(&wire[48], crc32c(bhs) ^ digest_xor);
  return wire;
}

TEST(TcpDatamover, HeaderDigestMismatchIsFatal) {
  auto in = receive_raw_with_header_digest(nop_out_with_digest(1, 1));  // one bit off
  ASSERT_FALSE(in);
  EXPECT_EQ(in.error(), make_error_code(errc::header_digest_error));
  EXPECT_TRUE(is_fatal(in.error()));
}

TEST(TcpDatamover, CorrectHeaderDigestIsAccepted) {
  auto in = receive_raw_with_header_digest(nop_out_with_digest(5, 0));
  ASSERT_TRUE(in);
  EXPECT_EQ(to_u32(iscsi::itt_of(in->bhs)), 5u);
}

// A batch is waited for through its last PDU only (one completion per batch): a write that fails
// must still fail the batch, whichever of its PDUs it hit, and every call must return. The peer is
// gone, so batches of 16 x 64 KiB are sent until one fails (the first few may still fit the
// socket buffers); after that, each batch fails at once.
TEST(TcpDatamover, BatchToAGonePeerFailsAndReturns) {
  Pair p;
  p.server.reset();
  const auto payload = pattern(64 * 1024);
  int calls = 0, returned = 0, failed = 0;
  p.run([&]() -> Awaitable<void> {
    for (int round = 0; round < 200 && failed < 3; ++round) {
      std::vector<PduOut> batch;
      for (std::uint32_t i = 0; i < 16; ++i)
        batch.push_back(make_pdu(iscsi::DataOut{.itt = iscsi::Itt{1}, .data_sn = i}, payload));
      ++calls;
      const auto ec = co_await p.client->send_batch(std::move(batch));
      ++returned;
      if (ec) ++failed;
    }
  });
  EXPECT_EQ(returned, calls);
  EXPECT_EQ(failed, 3) << "writes to a closed peer never failed a batch";
}

TEST(TcpDatamover, PeerCloseIsConnectionClosed) {
  Pair p;
  p.run([&]() -> Awaitable<void> {
    p.client->close();
    auto in = co_await p.server->receive(nullptr);
    EXPECT_FALSE(in);
    if (!in) {
      EXPECT_EQ(in.error(), make_error_code(errc::connection_closed));
    }
  });
}

// A connection given up as failed is reset (Datamover::abort, SO_LINGER 0): a send still waiting
// on a full socket fails at once, and the peer sees an RST (ECONNRESET), not an orderly FIN after
// the rest of the queue — the queued bytes are dropped, never delivered later.
TEST(TcpDatamover, AbortResetsTheConnectionAndDropsQueuedBytes) {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  tcp::socket c(io);
  c.connect(acceptor.local_endpoint());
  tcp::socket peer = acceptor.accept();
  auto dm = std::make_unique<TcpDatamover>(std::move(c));
  const auto payload = pattern(256 * 1024);
  constexpr std::size_t pdus = 64;  // 16 MiB: more than both socket buffers take
  bool sent = false;
  std::error_code send_error;
  asio::co_spawn(io, [&]() -> Awaitable<void> {
    std::vector<PduOut> batch;
    for (std::uint32_t i = 0; i < pdus; ++i)
      batch.push_back(make_pdu(iscsi::DataOut{.itt = iscsi::Itt{1}, .data_sn = i}, payload));
    send_error = co_await dm->send_batch(std::move(batch));
    sent = true;
  }, asio::detached);
  io.run_for(std::chrono::milliseconds(300));  // the peer reads nothing: the queue fills up
  ASSERT_FALSE(sent) << "the socket took 16 MiB without the peer reading";
  dm->abort();
  io.restart();
  for (int i = 0; i < 100 && !sent; ++i) io.run_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(sent);
  EXPECT_TRUE(send_error);
  std::vector<std::byte> buffer(1 << 20);
  std::size_t received = 0;
  boost::system::error_code ec;
  while (!ec) received += peer.read_some(asio::buffer(buffer.data(), buffer.size()), ec);
  EXPECT_EQ(ec, asio::error::connection_reset) << ec.message();
  EXPECT_LT(received, pdus * payload.size());
}

// The receive lookahead (one BHS read together with the previous data segment) must keep framing
// and zero copy whatever the segmentation: a stream of PDUs with and without data, odd lengths and
// both digests, delivered by a raw socket in chunks of 1 to 5000 bytes, arrives whole, in order,
// and every data segment lands in the placed buffer (never in the datamover's scratch).
TEST(TcpDatamover, LookaheadKeepsFramingAndPlacementUnderAnySegmentation) {
  // at_once: the whole stream is there before the receiver starts (every read finds more than it
  // asks for); otherwise it trickles in uneven chunks.
  for (const auto& config : {std::pair{false, false}, std::pair{true, false}, std::pair{false, true},
                             std::pair{true, true}}) {
    const bool digests = config.first;
    const bool at_once = config.second;
    asio::io_context io;
    RawConnection receiving(io);
    tcp::socket& raw = receiving.raw;
    TcpDatamover& server = receiving.dm;
    server.set_digests(digests, digests);
    server.set_max_recv_data_segment_length(1 << 20);

    // Encode the PDUs with a second datamover into a byte string first.
    std::vector<std::byte> wire;
    constexpr int n = 60;
    std::vector<std::vector<std::byte>> payloads;
    {
      RawConnection encoding(io);
      tcp::socket& sink = encoding.raw;
      TcpDatamover& encoder = encoding.dm;
      encoder.set_digests(digests, digests);
      for (int i = 0; i < n; ++i) payloads.push_back(pattern(i % 3 == 0 ? 0 : static_cast<std::size_t>(1 + i * 211)));
      bool sent = false;
      asio::co_spawn(io, [&]() -> Awaitable<void> {
        for (int i = 0; i < n; ++i) {
          const auto& d = payloads[static_cast<std::size_t>(i)];
          EXPECT_FALSE(co_await encoder.send(make_pdu(iscsi::DataOut{.final = true, .itt = iscsi::Itt{static_cast<std::uint32_t>(i)}}, d)));
        }
        sent = true;
      }, asio::detached);
      io.run_for(std::chrono::seconds(5));
      io.restart();
      ASSERT_TRUE(sent);
      encoder.close();
      boost::system::error_code ec;
      std::array<std::byte, 65536> chunk{};
      for (;;) {
        const std::size_t got = sink.read_some(asio::buffer(chunk), ec);
        if (ec) break;
        wire.insert(wire.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(got));
      }
    }

    // Trickle it in uneven chunks while the receiver runs.
    std::size_t at = 0;
    std::size_t step = 1;
    std::function<void()> trickle = [&] {
      if (at >= wire.size()) return;
      step = at_once ? wire.size() : step * 7 % 5000 + 1;
      const std::size_t len = std::min(step, wire.size() - at);
      asio::write(raw, asio::buffer(wire.data() + at, len));
      at += len;
      asio::post(io, trickle);
    };
    if (at_once) {
      trickle();  // all of it, before the receiver runs
    } else {
      asio::post(io, trickle);
    }
    const std::uint64_t copied_before = copied_payload_bytes();

    std::vector<std::byte> landing(1 << 16);
    IntoBuffer placement;
    placement.target = landing;
    int received = 0;
    int polled_pdus = 0;
    asio::co_spawn(io, [&]() -> Awaitable<void> {
      for (int i = 0; i < n; ++i) {
        // Every other PDU through try_receive() first (the receive loops' way): the same framing.
        auto polled = i % 2 == 1 ? server.try_receive(&placement) : std::nullopt;
        if (polled) ++polled_pdus;
        if (!polled) polled.emplace(co_await server.receive(&placement));
        auto& in = *polled;
        EXPECT_TRUE(in);
        if (!in) co_return;
        EXPECT_FALSE(in->pdu_error);
        EXPECT_EQ(to_u32(iscsi::itt_of(in->bhs)), static_cast<std::uint32_t>(i));
        const auto& want = payloads[static_cast<std::size_t>(i)];
        EXPECT_EQ(in->data.size(), want.size());
        if (!want.empty()) {
          EXPECT_EQ(in->data.data(), landing.data()) << "PDU " << i << " was not placed";
        }
        EXPECT_TRUE(std::equal(want.begin(), want.end(), in->data.begin(), in->data.end())) << "PDU " << i;
        ++received;
      }
    }, asio::detached);
    io.run_for(std::chrono::seconds(10));
    EXPECT_EQ(received, n) << "digests=" << digests << " at_once=" << at_once;
    // All of it was there before the receiver started: try_receive() found every one it was asked
    // for, but for those asked while the first PDUs still looked like queue depth 1 (EmptySocketGuess
    // skips at most probe_every - 1 own reads before one finds the burst).
    if (at_once) {
      EXPECT_GE(polled_pdus, n / 2 - static_cast<int>(EmptySocketGuess::probe_every - 1));
      EXPECT_LE(polled_pdus, n / 2);
    }
    EXPECT_EQ(at, wire.size());
    // Zero copy: no payload byte went through the lookahead.
    EXPECT_EQ(copied_payload_bytes() - copied_before, 0u);
  }
}

}  // namespace
}  // namespace iserkit::datamover

namespace iserkit::datamover {
namespace {

// The send pass (common/send_pass.hpp): receive() holds it from the second PDU that was already
// there, keeps it while PDUs keep coming without a wait, and releases it (posted) just before it
// waits for the socket, so a flusher deferred during the burst runs once, after it.
TEST(TcpDatamover, ABurstOfArrivedPdusHoldsTheSendPassUntilTheSocketRunsDry) {
  Pair p;
  SendPass& pass = SendPass::of(p.io.get_executor());
  p.server->set_send_pass(&pass);
  p.server->set_max_recv_data_segment_length(1 << 20);
  const auto payload = pattern(4096);
  std::vector<PduOut> burst;
  for (int i = 0; i < 10; ++i) {
    // Every other one with a data segment: both read paths (BHS alone; segment + lookahead).
    if (i % 2 == 0) {
      burst.push_back(make_pdu(iscsi::DataOut{.itt = iscsi::Itt{static_cast<std::uint32_t>(i)}}, payload));
    } else {
      burst.push_back(make_pdu(iscsi::NopOut{.itt = iscsi::Itt{static_cast<std::uint32_t>(i)}}));
    }
  }
  p.run([&]() -> Awaitable<void> { EXPECT_FALSE(co_await p.client->send_batch(std::move(burst))); });

  struct Flush : SendPass::Flusher {
    int flushes = 0;
    void flush_pass() override { ++flushes; }
  } flush;
  std::vector<bool> held;
  int flushes_before_last = -1;
  bool held_after_wait = true;
  std::vector<std::byte> buffer(4096);
  IntoBuffer placement;
  placement.target = buffer;
  asio::steady_timer later(p.io);
  p.run([&]() -> Awaitable<void> {
    for (int i = 0; i < 10; ++i) {
      auto in = co_await p.server->receive(&placement);
      EXPECT_TRUE(in);
      if (!in) co_return;
      EXPECT_EQ(to_u32(iscsi::itt_of(in->bhs)), static_cast<std::uint32_t>(i));
      held.push_back(pass.held());
      pass.defer(flush);  // what a reaction to this PDU would queue
    }
    // The socket is empty now: the next receive releases the pass before it waits. A PDU sent
    // 50 ms later ends the wait.
    later.expires_after(std::chrono::milliseconds(50));
    later.async_wait([&](const boost::system::error_code&) {
      asio::co_spawn(p.io, [&]() -> Awaitable<void> {
        EXPECT_FALSE(co_await p.client->send(make_pdu(iscsi::NopOut{.itt = iscsi::Itt{99}})));
      }, asio::detached);
    });
    auto last = co_await p.server->receive(&placement);
    EXPECT_TRUE(last);
    flushes_before_last = flush.flushes;
    held_after_wait = pass.held();
  });
  const std::vector<bool> want{false, true, true, true, true, true, true, true, true, true};
  EXPECT_EQ(held, want) << "held from the second PDU of the burst on";
  EXPECT_EQ(flushes_before_last, 1) << "one flush for the whole burst, before the wait ended";
  EXPECT_FALSE(held_after_wait) << "a PDU after a wait starts a new burst: not held";
}

// A peer whose PDUs never stop coming: after a bounded number of PDUs received back to back the
// receive yields the thread (other handlers run) and ends the burst (the pass is flushed), so one
// connection can neither starve the others on its loop nor hold their output back.
TEST(TcpDatamover, AnEndlessBurstYieldsTheThreadAndFlushesThePassOnTheWay) {
  Pair p;
  SendPass& pass = SendPass::of(p.io.get_executor());
  p.server->set_send_pass(&pass);
  constexpr int count = 200;
  std::vector<PduOut> burst;
  for (int i = 0; i < count; ++i) burst.push_back(make_pdu(iscsi::NopOut{.itt = iscsi::Itt{static_cast<std::uint32_t>(i)}}));
  p.run([&]() -> Awaitable<void> { EXPECT_FALSE(co_await p.client->send_batch(std::move(burst))); });
  struct Flush : SendPass::Flusher {
    int flushes = 0;
    void flush_pass() override { ++flushes; }
  } flush;
  int received = 0;
  int probe_ran_at = -1;
  int flushes_during_burst = 0;
  p.run([&]() -> Awaitable<void> {
    for (int i = 0; i < count; ++i) {
      auto in = co_await p.server->receive(nullptr);
      EXPECT_TRUE(in);
      if (!in) co_return;
      ++received;
      if (i == 0) asio::post(p.io, [&] { probe_ran_at = received; });
      pass.defer(flush);
    }
    flushes_during_burst = flush.flushes;
  });
  EXPECT_EQ(received, count);
  EXPECT_GT(probe_ran_at, 0);
  EXPECT_LT(probe_ran_at, count) << "the receive never yielded the thread during the burst";
  EXPECT_GE(flushes_during_burst, 2) << "the pass was held for the whole endless burst";
}

// At queue depth 1 (each PDU arrives alone, the receiver waits for each) the pass is never held:
// nothing waits for the end of a burst and nothing is posted for it.
TEST(TcpDatamover, PdusThatArriveOneAtATimeNeverHoldTheSendPass) {
  Pair p;
  SendPass& pass = SendPass::of(p.io.get_executor());
  p.server->set_send_pass(&pass);
  bool ever_held = false;
  int received = 0;
  asio::co_spawn(p.io, [&]() -> Awaitable<void> {
    asio::steady_timer gap(p.io);
    for (int i = 0; i < 5; ++i) {
      gap.expires_after(std::chrono::milliseconds(20));
      co_await gap.async_wait(asio::use_awaitable);
      EXPECT_FALSE(co_await p.client->send(make_pdu(iscsi::NopOut{.itt = iscsi::Itt{static_cast<std::uint32_t>(i)}})));
    }
  }, asio::detached);
  p.run([&]() -> Awaitable<void> {
    for (int i = 0; i < 5; ++i) {
      auto in = co_await p.server->receive(nullptr);
      EXPECT_TRUE(in);
      if (!in) co_return;
      ever_held = ever_held || pass.held();
      ++received;
    }
  });
  EXPECT_EQ(received, 5);
  EXPECT_FALSE(ever_held);
}

// A SocketSender that sends at most `limit` bytes itself (writev, non-blocking) and completes from
// a posted handler, as a ring's CQE would: what TcpDatamover must do with whatever comes back.
struct FakeSender : SocketSender {
  asio::io_context& io;
  std::size_t limit = SIZE_MAX;
  int fail_errno = 0;     // > 0: complete with -fail_errno and send nothing
  bool refuse = false;    // start() returns false
  int starts = 0;
  int cancels = 0;
  explicit FakeSender(asio::io_context& context) : io(context) {}
  bool start(int fd, const iovec* iov, std::size_t count, Completion& done, int& result) override {
    if (refuse) return false;
    ++starts;
    std::vector<iovec> cut(iov, iov + count);
    std::size_t left = limit;
    std::size_t n = 0;
    while (n < cut.size() && left > 0) {
      cut[n].iov_len = std::min(cut[n].iov_len, left);
      left -= cut[n].iov_len;
      ++n;
    }
    int r = 0;
    if (fail_errno > 0) {
      r = -fail_errno;
    } else {
      msghdr msg{};
      msg.msg_iov = cut.data();
      msg.msg_iovlen = n;
      const ssize_t sent = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      r = sent < 0 ? -errno : static_cast<int>(sent);
    }
    asio::post(io, [&done, &result, r] {
      result = r;
      done.complete();
    });
    return true;
  }
  void cancel() noexcept override { ++cancels; }
};

TEST(TcpDatamoverSocketSender, CarriesTheWholeBatchInOrderWithoutCopies) {
  Pair p;
  auto owned = std::make_unique<FakeSender>(p.io);
  FakeSender& sender = *owned;
  p.client->set_socket_sender(std::move(owned));
  EXPECT_EQ(p.client->socket_sender(), &sender);
  p.server->set_max_recv_data_segment_length(1 << 20);
  const auto payload = pattern(8191);  // padding too
  std::vector<std::byte> landing(payload.size());
  IntoBuffer placement;
  placement.target = landing;
  const std::uint64_t copied_before = copied_payload_bytes();
  p.run([&]() -> Awaitable<void> {
    std::vector<PduOut> batch;
    for (std::uint32_t i = 1; i <= 3; ++i) batch.push_back(make_pdu(iscsi::NopOut{.itt = iscsi::Itt{i}}));
    batch.push_back(make_pdu(iscsi::DataOut{.itt = iscsi::Itt{4}}, payload));
    EXPECT_EQ(p.client->try_send_now(batch), Datamover::SendNow::queued);
    EXPECT_TRUE(batch.empty());
    // Nothing overtakes a send on the sender.
    auto later = nop_batch(5);
    EXPECT_EQ(p.client->try_send_now(later), Datamover::SendNow::refused);
    EXPECT_FALSE(co_await p.client->finish_send());
    EXPECT_FALSE(co_await p.client->send_batch(std::move(later)));
    for (std::uint32_t want = 1; want <= 5; ++want) {
      auto in = co_await p.server->receive(want == 4 ? &placement : nullptr);
      EXPECT_TRUE(in);
      if (!in) co_return;
      EXPECT_EQ(to_u32(iscsi::itt_of(in->bhs)), want);
      if (want == 4) {
        EXPECT_EQ(in->data.data(), landing.data());
        EXPECT_TRUE(std::equal(payload.begin(), payload.end(), landing.begin(), landing.end()));
      }
    }
  });
  EXPECT_EQ(sender.starts, 1);
  EXPECT_EQ(copied_payload_bytes() - copied_before, 0u);
}

TEST(TcpDatamoverSocketSender, AShortSendIsCompletedByTheDatamover) {
  Pair p;
  auto owned = std::make_unique<FakeSender>(p.io);
  owned->limit = 100;  // inside the first PDU's payload
  p.client->set_socket_sender(std::move(owned));
  p.server->set_max_recv_data_segment_length(1 << 20);
  const auto payload = pattern(300000);
  p.run([&]() -> Awaitable<void> { co_await test::expect_queued_data_then_nop(p, payload); });
}

TEST(TcpDatamoverSocketSender, AFailedSendClosesTheWayOutAsSendmsgWould) {
  Pair p;
  auto owned = std::make_unique<FakeSender>(p.io);
  owned->fail_errno = EPIPE;
  FakeSender& sender = *owned;
  p.client->set_socket_sender(std::move(owned));
  p.run([&]() -> Awaitable<void> {
    auto batch = nop_batch(1);
    EXPECT_EQ(p.client->try_send_now(batch), Datamover::SendNow::queued);
    EXPECT_EQ(co_await p.client->finish_send(), make_error_code(errc::connection_closed));
    // Later sends fail with the same error, without reaching the sender.
    auto again = nop_batch(2);
    EXPECT_EQ(p.client->try_send_now(again), Datamover::SendNow::refused);
    EXPECT_EQ(co_await p.client->send_batch(std::move(again)), make_error_code(errc::connection_closed));
  });
  EXPECT_EQ(sender.starts, 1);
}

TEST(TcpDatamoverSocketSender, ARefusingSenderFallsBackToSendmsg) {
  Pair p;
  auto owned = std::make_unique<FakeSender>(p.io);
  owned->refuse = true;
  p.client->set_socket_sender(std::move(owned));
  p.run([&]() -> Awaitable<void> {
    co_await test::expect_nop_sent_at_once(p, 9);
  });
}

TEST(TcpDatamoverSocketSender, CloseWithASendInFlightCancelsIt) {
  Pair p;
  auto owned = std::make_unique<FakeSender>(p.io);
  FakeSender& sender = *owned;
  p.client->set_socket_sender(std::move(owned));
  p.run([&]() -> Awaitable<void> {
    auto batch = nop_batch(1);
    EXPECT_EQ(p.client->try_send_now(batch), Datamover::SendNow::queued);
    p.client->close();
    EXPECT_EQ(sender.cancels, 1);
    (void)co_await p.client->finish_send();
  });
}

}  // namespace
}  // namespace iserkit::datamover

namespace iserkit::datamover {
namespace {

// A pipe (both ends) filled with `bytes`, closed at the end of the test.
struct FilledPipe {
  int fds[2]{-1, -1};
  explicit FilledPipe(std::span<const std::byte> bytes) {
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
    EXPECT_GT(::fcntl(fds[1], F_SETPIPE_SZ, 1 << 20), 0);
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(fds[1], bytes.data() + done, bytes.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    EXPECT_EQ(done, bytes.size());
  }
  ~FilledPipe() {
    ::close(fds[0]);
    ::close(fds[1]);
  }
};

// The target's zero-copy READ Data-In (PduOut::splice_from): the segment comes from the pipe, not
// from `data` (filled with other bytes here), with its padding, through a socket buffer much
// smaller than it (the splice waits for room), and the PDUs around it stay in order.
TEST(TcpDatamoverSplice, ASegmentInAPipeLeavesWholeWithItsPaddingBetweenThePdusAroundIt) {
  Pair p(16 * 1024);
  p.client->set_digests(true, false);  // a header digest still goes with the spliced PDU
  p.server->set_digests(true, false);
  p.server->set_max_recv_data_segment_length(2 << 20);
  const auto payload = pattern((1 << 20) - 2);  // 2 bytes of padding
  const std::vector<std::byte> wrong(payload.size(), std::byte{0xee});
  FilledPipe pipe(payload);
  std::vector<std::byte> landing(payload.size());
  IntoBuffer placement;
  placement.target = landing;
  std::error_code ec = make_error_code(errc::timeout);
  p.run([&]() -> Awaitable<void> {
    asio::co_spawn(p.io, [&]() -> Awaitable<void> {
      std::vector<PduOut> batch;
      batch.push_back(make_pdu(iscsi::NopIn{.itt = iscsi::Itt{1}}));
      batch.push_back(make_pdu(iscsi::DataIn{.itt = iscsi::Itt{2}}, wrong));
      batch.back().splice_from = pipe.fds[0];
      batch.push_back(make_pdu(iscsi::NopIn{.itt = iscsi::Itt{3}}));
      // try_send_now() leaves a spliced segment to send_batch().
      EXPECT_EQ(p.client->try_send_now(batch), Datamover::SendNow::refused);
      ec = co_await p.client->send_batch(std::move(batch));
    }, asio::detached);
    for (const std::uint32_t itt : {1u, 2u, 3u}) {
      auto in = co_await p.server->receive(itt == 2 ? &placement : nullptr);
      EXPECT_TRUE(in);
      if (!in) co_return;
      EXPECT_FALSE(in->pdu_error);
      EXPECT_EQ(to_u32(iscsi::itt_of(in->bhs)), itt);
      if (itt == 2) {
        EXPECT_TRUE(std::equal(payload.begin(), payload.end(), landing.begin(), landing.end()));
      }
    }
  });
  EXPECT_FALSE(ec);
  EXPECT_EQ(p.client->spliced_pdus(), 1u);
  int left = -1;
  EXPECT_EQ(::ioctl(pipe.fds[0], FIONREAD, &left), 0);
  EXPECT_EQ(left, 0);
}

// A pipe that holds fewer bytes than the PDU says fails the send (it would wait forever or send a
// short segment); with a data digest the bytes cannot be spliced at all.
TEST(TcpDatamoverSplice, AShortPipeOrADataDigestFailsTheSendInsteadOfSendingWrongBytes) {
  for (const bool digest : {false, true}) {
    Pair p;
    p.client->set_digests(false, digest);
    const auto payload = pattern(128 * 1024);
    FilledPipe pipe(digest ? std::span<const std::byte>(payload) : std::span<const std::byte>(payload).first(1000));
    std::error_code ec;
    p.run([&]() -> Awaitable<void> {
      std::vector<PduOut> batch;
      batch.push_back(make_pdu(iscsi::DataIn{.itt = iscsi::Itt{2}}, payload));
      batch.back().splice_from = pipe.fds[0];
      ec = co_await p.client->send_batch(std::move(batch));
    });
    EXPECT_TRUE(ec) << "digest=" << digest;
    EXPECT_EQ(p.client->spliced_pdus(), 0u);
  }
}

}  // namespace
}  // namespace iserkit::datamover
