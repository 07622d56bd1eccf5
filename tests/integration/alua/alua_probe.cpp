// alua_probe: REPORT TARGET PORT GROUPS and SET TARGET PORT GROUPS through one iSCSI session, for
// the ALUA failover test (alua_failover_test.sh). sg_rtpg/sg_stpg need a kernel SCSI device, and
// iserkit's CLI opens a LUN with READ CAPACITY, which a standby port refuses (SPC-5 §5.16.2.4.4):
// this logs in and sends only what a standby port answers.
//
//   iserkit-alua-probe URL STEP...
//   rtpg                 → one line per group: "group=N state=STATE"
//   stpg:N=STATE[,...]   SET TARGET PORT GROUPS (SPC-4 §6.45) → "stpg status=0x.. [sense=K/ASC/ASCQ]"
//   tur                  TEST UNIT READY → "tur status=0x.. [sense=K/ASC/ASCQ]"
// Unit attentions (the new nexus's POWER ON, ASYMMETRIC ACCESS STATE CHANGED) are taken and the
// command sent again (at most 8 times), except by tur, which reports what it got.
// Exit: 0, 1 on a failed step (transport error or a status other than GOOD for rtpg), 2 on a
// usage or connection error.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "iserkit/common/asio.hpp"
#include "iserkit/common/log.hpp"
#include "iserkit/initiator/session.hpp"
#include "iserkit/initiator/url.hpp"
#include "iserkit/scsi/alua.hpp"
#include "iserkit/scsi/cdb.hpp"

namespace ik = iserkit::initiator;
namespace scsi = iserkit::scsi;
using iserkit::Awaitable;
using iserkit::Result;

namespace {

std::string describe(const scsi::ScsiResult& r) {
  char line[96];
  std::snprintf(line, sizeof line, "status=0x%02x", static_cast<unsigned>(r.status));
  std::string s = line;
  if (r.sense) {
    std::snprintf(line, sizeof line, " sense=%x/%02x/%02x", static_cast<unsigned>(r.sense->key), r.sense->asc,
                  r.sense->ascq);
    s += line;
  }
  return s;
}

bool is_unit_attention(const scsi::ScsiResult& r) {
  return r.status == scsi::Status::check_condition && r.sense && r.sense->key == scsi::SenseKey::unit_attention;
}

Awaitable<Result<scsi::ScsiResult>> send(ik::Session& s, const ik::CommandRequest& request, bool retry_attention) {
  for (int i = 0;; ++i) {
    auto r = co_await s.execute(request);
    if (!r || !retry_attention || !is_unit_attention(*r) || i == 8) co_return r;
  }
}

Awaitable<int> run(const ik::Url& url, std::vector<std::string> steps) {
  ik::SessionOptions options;
  options.initiator_name = "iqn.2026-11.org.iserkit:alua-probe";
  auto session = co_await ik::Session::connect(co_await iserkit::asio::this_coro::executor, url, options);
  if (!session) {
    std::fprintf(stderr, "alua_probe: cannot log in: %s\n", session.error().message().c_str());
    co_return 2;
  }
  ik::Session& s = **session;
  const auto lun = scsi::Lun::from_index(url.lun.value_or(0));
  int rc = 0;
  for (const auto& step : steps) {
    if (step == "rtpg") {
      std::vector<std::byte> data(4096);
      const auto r = co_await send(
          s, ik::CommandRequest{.lun = lun, .cdb = scsi::report_target_port_groups({.allocation_length = 4096}), .data_in = data},
          true);
      if (!r || r->status != scsi::Status::good) {
        std::printf("rtpg %s\n", r ? describe(*r).c_str() : r.error().message().c_str());
        rc = 1;
        continue;
      }
      const auto groups = scsi::parse_report_target_port_groups(data);
      if (!groups) {
        std::printf("rtpg unparsable\n");
        rc = 1;
        continue;
      }
      for (const auto& g : *groups) std::printf("group=%u state=%s\n", g.id, std::string(scsi::to_string(g.state)).c_str());
    } else if (step.rfind("stpg:", 0) == 0) {
      std::vector<scsi::SetTargetPortGroup> groups;
      std::size_t at = 5;
      while (at < step.size()) {
        const auto comma = step.find(',', at);
        const std::string item = step.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
        const auto eq = item.find('=');
        std::optional<scsi::AccessState> state;
        for (auto st : {scsi::AccessState::active_optimized, scsi::AccessState::active_non_optimized,
                        scsi::AccessState::standby, scsi::AccessState::unavailable})
          if (eq != std::string::npos && scsi::to_string(st) == item.substr(eq + 1)) state = st;
        if (!state) {
          std::fprintf(stderr, "alua_probe: %s: expected stpg:GROUP=STATE[,...]\n", step.c_str());
          co_return 2;
        }
        groups.push_back({.id = static_cast<std::uint16_t>(std::atoi(item.substr(0, eq).c_str())), .state = *state});
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
      const auto list = scsi::encode_set_target_port_groups(groups);
      const auto r = co_await send(
          s,
          ik::CommandRequest{.lun = lun, .cdb = scsi::set_target_port_groups(static_cast<std::uint32_t>(list.size())),
                             .data_out = list},
          true);
      if (!r) {
        std::printf("stpg %s\n", r.error().message().c_str());
        rc = 1;
        continue;
      }
      std::printf("stpg %s\n", describe(*r).c_str());
    } else if (step == "tur") {
      const auto r = co_await send(s, ik::CommandRequest{.lun = lun, .cdb = scsi::test_unit_ready()}, false);
      if (!r) {
        std::printf("tur %s\n", r.error().message().c_str());
        rc = 1;
        continue;
      }
      std::printf("tur %s\n", describe(*r).c_str());
    } else {
      std::fprintf(stderr, "alua_probe: unknown step %s\n", step.c_str());
      co_return 2;
    }
    std::fflush(stdout);
  }
  s.close();
  co_return rc;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: iserkit-alua-probe URL rtpg|tur|stpg:GROUP=STATE[,...]...\n");
    return 2;
  }
  auto url = ik::parse_url(argv[1]);
  if (!url) {
    std::fprintf(stderr, "alua_probe: bad URL %s\n", argv[1]);
    return 2;
  }
  iserkit::log::set_level("error");  // stdout is for the steps' lines (closing the session warns)
  iserkit::asio::io_context io;
  int rc = 2;
  iserkit::asio::co_spawn(io, run(*url, std::vector<std::string>(argv + 2, argv + argc)),
                          [&](std::exception_ptr e, int v) { rc = e ? 2 : v; });
  io.run();
  return rc;
}
