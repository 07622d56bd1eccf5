// connect_and_login never answers a failed login by offering fewer CHAP algorithms (no MD5-only
// retry after status 0x0200): a scripted target behind a fake Datamover counts the connections
// and records every CHAP_A offered.
#include <gtest/gtest.h>

#include <utility>

#include "iserkit/common/asio.hpp"
#include "iserkit/datamover/datamover.hpp"
#include "iserkit/initiator/errors.hpp"
#include "login_io.hpp"

using namespace iserkit;
using namespace iserkit::initiator;

namespace {

struct Script {
  int connections = 0;
  std::vector<std::string> chap_a_offered;
};

// Plays a target that accepts AuthMethod=CHAP, then answers the CHAP_A request with 0x0200 (as
// tgtd does after picking an algorithm it cannot check, or as a forger in the path would).
class ScriptedTarget final : public datamover::Datamover {
 public:
  ScriptedTarget(asio::any_io_executor ex, Script& script) : ex_(std::move(ex)), script_(script) {}

  Awaitable<std::error_code> send(datamover::PduOut pdu) override {
    auto req = iscsi::decode_bhs_as<iscsi::LoginRequest>(pdu.bhs);
    if (!req) co_return make_error_code(std::errc::protocol_error);
    auto pairs = iscsi::decode_text(pdu.data).value_or(iscsi::TextPairs{});
    iscsi::LoginResponse r;
    r.isid = req->isid;
    r.itt = req->itt;
    r.csg = req->csg;
    r.stat_sn = SerialNumber(1);
    r.exp_cmd_sn = req->cmd_sn;
    r.max_cmd_sn = req->cmd_sn;
    iscsi::TextPairs answer;
    if (const auto* a = iscsi::find_value(pairs, "CHAP_A")) {
      script_.chap_a_offered.push_back(*a);
      r.status_class = 2;  // initiator error 0x0200
      r.status_detail = 0;
    } else if (iscsi::find_value(pairs, "AuthMethod")) {
      answer.push_back({"AuthMethod", "CHAP"});
    }
    reply_ = datamover::make_pdu_owned(r, iscsi::encode_text(answer));
    co_return std::error_code{};
  }
  Awaitable<Result<datamover::PduIn>> receive(datamover::DataPlacement*) override {
    datamover::PduIn in;
    in.bhs = reply_.bhs;
    data_ = reply_.owned_data;
    in.data = data_;
    co_return in;
  }
  void set_digests(bool, bool) noexcept override {}
  void set_max_recv_data_segment_length(std::uint32_t) noexcept override {}
  void close() noexcept override {}
  [[nodiscard]] std::string peer() const override { return "scripted:3260"; }
  [[nodiscard]] std::string local() const override { return "local:1"; }
  [[nodiscard]] datamover::Transport transport() const noexcept override { return datamover::Transport::tcp; }
  [[nodiscard]] asio::any_io_executor executor() const override { return ex_; }

 private:
  asio::any_io_executor ex_;
  Script& script_;
  datamover::PduOut reply_;
  std::vector<std::byte> data_;
};

TEST(LoginNoDowngrade, StatusInitiatorErrorAfterChapAIsNotRetriedWithMd5Only) {
  asio::io_context io;
  Script script;
  LoginConfig config;
  config.initiator_name = "iqn.2026-11.org.iserkit:test";
  config.target_name = "iqn.2026-11.org.example:vol1";
  config.isid = {std::byte{0x80}, std::byte{1}, std::byte{2}, std::byte{3}, std::byte{0}, std::byte{1}};
  config.itt = iscsi::Itt{7};
  config.options.chap.user = "alice";
  config.options.chap.secret = "alice-secret-1234";
  config.options.chap.algorithms = {iscsi::ChapAlgorithm::sha256, iscsi::ChapAlgorithm::sha3_256,
                                    iscsi::ChapAlgorithm::md5};
  Connector connect = [&](const std::string&, std::uint16_t) -> Awaitable<Result<std::unique_ptr<datamover::Datamover>>> {
    ++script.connections;
    co_return std::unique_ptr<datamover::Datamover>(std::make_unique<ScriptedTarget>(io.get_executor(), script));
  };
  std::optional<Result<LoggedIn>> result;
  asio::co_spawn(io, connect_and_login("h", 3260, config, std::chrono::seconds(5), 2, connect),
                 [&](std::exception_ptr e, Result<LoggedIn> r) {
                   ASSERT_FALSE(e);
                   result.emplace(std::move(r));
                 });
  io.run();
  ASSERT_TRUE(result.has_value());
  ASSERT_FALSE(*result);
  EXPECT_EQ(result->error(), make_login_error(2, 0));
  EXPECT_EQ(script.connections, 1);  // no second login
  ASSERT_EQ(script.chap_a_offered.size(), 1u);
  EXPECT_EQ(script.chap_a_offered[0], "7,8,5");  // the configured list, never MD5 alone
}

}  // namespace
