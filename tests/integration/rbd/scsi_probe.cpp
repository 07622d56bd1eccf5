// scsi_probe: sends the raw SCSI commands the RBD integration test needs and prints what came
// back, one line per step, for the script to check (iserkit's CLI and libiscsi's tools have no
// COMPARE AND WRITE or WRITE SAME with data, and LunHandle absorbs unit attentions).
//
//   iserkit-scsi-probe [--sessions N] URL STEP...
//
// Steps (run in order on session 0 unless said otherwise):
//   tur                          TEST UNIT READY            → "tur status=0x.. [sense=K/ASC/ASCQ]"
//   readcap16                    READ CAPACITY (16)         → "readcap16 blocks=N block_size=B lbpme=0|1 lbprz=0|1"
//   caw:LBA:VERIFY:WRITE         COMPARE AND WRITE (SBC-4 §5.3) of the two files (same size, whole blocks)
//                                                           → "caw status=0x.. [sense=… information=N]"
//   writesame:LBA:BLOCKS:FILE    WRITE SAME (16) of FILE's one block → "writesame status=0x.. [sense=…]"
//   await-ua:ASC:ASCQ:SECONDS    on every session: TEST UNIT READY every 100 ms until it reports the
//                                unit attention (hex ASC/ASCQ) → "ua session=I seen" or exit 1
//   exec:COMMAND                 runs COMMAND with /bin/sh; exit 1 if it fails
// Exit: 0, 1 on a failed step, 2 on a usage or connection error.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "iserkit/initiator/client.hpp"
#include "iserkit/initiator/url.hpp"
#include "iserkit/scsi/cdb.hpp"
#include "iserkit/scsi/inquiry.hpp"

namespace ik = iserkit::initiator;
namespace scsi = iserkit::scsi;

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t at = 0;
  for (;;) {
    const auto next = s.find(sep, at);
    out.push_back(s.substr(at, next - at));
    if (next == std::string::npos) return out;
    at = next + 1;
  }
}

std::vector<std::byte> slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(c.size());
  for (std::size_t i = 0; i < c.size(); ++i) out[i] = static_cast<std::byte>(c[i]);
  return out;
}

struct Answer {
  bool ok = false;
  scsi::ScsiResult result;
};

Answer send(ik::BlockingClient& client, const scsi::Cdb& cdb, std::span<std::byte> in, std::span<const std::byte> out) {
  ik::CommandRequest request{.lun = client.lun().info().lun, .cdb = cdb, .data_in = in, .data_out = out};
  auto r = client.run(client.session().execute(request));
  if (!r) {
    std::fprintf(stderr, "scsi_probe: transport error: %s\n", r.error().message().c_str());
    return {};
  }
  return {true, *r};
}

std::string describe(const scsi::ScsiResult& r) {
  char line[160];
  std::snprintf(line, sizeof line, "status=0x%02x", static_cast<unsigned>(r.status));
  std::string s = line;
  if (r.sense) {
    std::snprintf(line, sizeof line, " sense=%x/%02x/%02x", static_cast<unsigned>(r.sense->key), r.sense->asc, r.sense->ascq);
    s += line;
    if (r.sense->information) s += " information=" + std::to_string(*r.sense->information);
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int first = 1;
  int sessions = 1;
  if (argc > 2 && std::string(argv[1]) == "--sessions") {
    sessions = std::atoi(argv[2]);
    first = 3;
  }
  if (argc - first < 2 || sessions < 1) {
    std::fprintf(stderr, "usage: iserkit-scsi-probe [--sessions N] URL STEP...\n");
    return 2;
  }
  auto url = ik::parse_url(argv[first]);
  if (!url) {
    std::fprintf(stderr, "scsi_probe: bad URL\n");
    return 2;
  }
  std::vector<std::unique_ptr<ik::BlockingClient>> clients;
  for (int i = 0; i < sessions; ++i) {
    ik::SessionOptions options;
    options.initiator_name = "iqn.2026-11.org.iserkit:probe-" + std::to_string(i);
    auto c = ik::BlockingClient::open(*url, options);
    if (!c) {
      std::fprintf(stderr, "scsi_probe: cannot open %s: %s\n", argv[first], c.error().message().c_str());
      return 2;
    }
    clients.push_back(std::move(*c));
  }
  ik::BlockingClient& client = *clients.front();
  for (int i = first + 1; i < argc; ++i) {
    const std::string step = argv[i];
    const auto f = split(step, ':');
    if (f[0] == "tur") {
      const auto a = send(client, scsi::test_unit_ready(), {}, {});
      if (!a.ok) return 1;
      std::printf("tur %s\n", describe(a.result).c_str());
    } else if (f[0] == "readcap16") {
      std::vector<std::byte> data(scsi::read_capacity16_size_bytes);
      const auto a = send(client, scsi::read_capacity16(), data, {});
      if (!a.ok) return 1;
      const auto d = scsi::parse_read_capacity16(data);
      if (a.result.status != scsi::Status::good || !d) {
        std::printf("readcap16 %s\n", describe(a.result).c_str());
        continue;
      }
      std::printf("readcap16 blocks=%llu block_size=%u lbpme=%d lbprz=%d\n",
                  static_cast<unsigned long long>(d->last_lba + 1), d->block_length_bytes, d->lbpme ? 1 : 0,
                  d->lbprz ? 1 : 0);
    } else if (f[0] == "caw" && f.size() == 4) {
      auto verify = slurp(f[2]);
      const auto write = slurp(f[3]);
      const std::uint32_t bs = client.lun().info().capacity.block_size_bytes;
      if (verify.empty() || verify.size() != write.size() || verify.size() % bs != 0) {
        std::fprintf(stderr, "scsi_probe: %s: the files must be the same whole number of blocks\n", step.c_str());
        return 2;
      }
      verify.insert(verify.end(), write.begin(), write.end());
      scsi::Cdb cdb;
      cdb.bytes[0] = std::byte{0x89};
      iserkit::store_be64(cdb.bytes.data() + 2, std::stoull(f[1]));
      cdb.bytes[13] = static_cast<std::byte>(write.size() / bs);
      cdb.length = 16;
      const auto a = send(client, cdb, {}, verify);
      if (!a.ok) return 1;
      std::printf("caw %s\n", describe(a.result).c_str());
    } else if (f[0] == "writesame" && f.size() == 4) {
      const auto block = slurp(f[3]);
      const auto a = send(client,
                          scsi::write_same16({.lba = std::stoull(f[1]), .blocks = static_cast<std::uint32_t>(std::stoul(f[2]))}),
                          {}, block);
      if (!a.ok) return 1;
      std::printf("writesame %s\n", describe(a.result).c_str());
    } else if (f[0] == "await-ua" && f.size() == 4) {
      const auto asc = static_cast<std::uint8_t>(std::stoul(f[1], nullptr, 16));
      const auto ascq = static_cast<std::uint8_t>(std::stoul(f[2], nullptr, 16));
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(std::stoul(f[3]));
      for (std::size_t s = 0; s < clients.size(); ++s) {
        for (;;) {
          const auto a = send(*clients[s], scsi::test_unit_ready(), {}, {});
          if (!a.ok) return 1;
          if (a.result.sense && a.result.sense->key == scsi::SenseKey::unit_attention && a.result.sense->asc == asc &&
              a.result.sense->ascq == ascq) {
            std::printf("ua session=%zu seen\n", s);
            break;
          }
          if (std::chrono::steady_clock::now() > deadline) {
            std::printf("ua session=%zu not seen (last %s)\n", s, describe(a.result).c_str());
            return 1;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
      }
    } else if (f[0] == "exec" && step.size() > 5) {
      std::fflush(stdout);
      if (std::system(step.substr(5).c_str()) != 0) {
        std::fprintf(stderr, "scsi_probe: %s failed\n", step.c_str());
        return 1;
      }
    } else {
      std::fprintf(stderr, "scsi_probe: unknown step %s\n", step.c_str());
      return 2;
    }
    std::fflush(stdout);
  }
  return 0;
}
