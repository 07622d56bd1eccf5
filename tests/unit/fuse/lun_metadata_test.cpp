// LUN xattrs (names, values), designator text (the form `iserkit inquiry` prints), the target
// "info" JSON, and the errno a FUSE reply carries for SCSI and transport errors.
#include "fuse_fs/lun_metadata.hpp"

#include <gtest/gtest.h>

#include <cerrno>

#include <nlohmann/json.hpp>

#include "iserkit/common/errors.hpp"
#include "iserkit/initiator/errors.hpp"

namespace iserkit::fuse_fs {
namespace {

scsi::Designator binary(scsi::DesignatorType type, std::vector<std::uint8_t> v,
                        scsi::Association a = scsi::Association::logical_unit) {
  scsi::Designator d;
  d.type = type;
  d.code_set = scsi::CodeSet::binary;
  d.association = a;
  for (auto b : v) d.value.push_back(static_cast<std::byte>(b));
  return d;
}

scsi::Designator ascii(scsi::DesignatorType type, std::string s) {
  scsi::Designator d;
  d.type = type;
  d.code_set = scsi::CodeSet::ascii;
  for (char c : s) d.value.push_back(static_cast<std::byte>(c));
  return d;
}

LunMetadata sample() {
  LunMetadata m;
  m.index = 3;
  m.vendor = "ISERKIT";
  m.product = "VIRTUAL-DISK";
  m.revision = "0001";
  m.serial = "abc123";
  m.designators = {binary(scsi::DesignatorType::naa, {0x60, 0x01, 0x40, 0x5f, 0xaa, 0xbb, 0xcc, 0xdd}),
                   ascii(scsi::DesignatorType::t10_vendor_id, std::string("ISERKIT abc123\0\0", 16))};
  m.block_size_bytes = 4096;
  m.blocks = 262144;
  m.thin = true;
  return m;
}

// The info of target `target` whose session is in `state`, nothing else filled in.
TargetInfo target_in(std::string target, std::string state) {
  TargetInfo info;
  info.target = std::move(target);
  info.session_state = std::move(state);
  return info;
}

TEST(LunXattrs, NamesInOrder) {
  EXPECT_EQ(xattr_names(sample()),
            (std::vector<std::string>{"user.iscsi.vendor", "user.iscsi.product", "user.iscsi.revision",
                                      "user.iscsi.serial", "user.iscsi.naa", "user.iscsi.designators",
                                      "user.iscsi.block_size", "user.iscsi.blocks", "user.iscsi.thin"}));
}

TEST(LunXattrs, Values) {
  const auto m = sample();
  EXPECT_EQ(xattr_value(m, "user.iscsi.vendor"), "ISERKIT");
  EXPECT_EQ(xattr_value(m, "user.iscsi.product"), "VIRTUAL-DISK");
  EXPECT_EQ(xattr_value(m, "user.iscsi.revision"), "0001");
  EXPECT_EQ(xattr_value(m, "user.iscsi.serial"), "abc123");
  EXPECT_EQ(xattr_value(m, "user.iscsi.naa"), "6001405faabbccdd");
  EXPECT_EQ(xattr_value(m, "user.iscsi.designators"), "naa 6001405faabbccdd\nt10 ISERKIT abc123");
  EXPECT_EQ(xattr_value(m, "user.iscsi.block_size"), "4096");
  EXPECT_EQ(xattr_value(m, "user.iscsi.blocks"), "262144");
  EXPECT_EQ(xattr_value(m, "user.iscsi.thin"), "1");
  EXPECT_EQ(xattr_value(m, "user.iscsi.nonsense"), std::nullopt);
  EXPECT_EQ(xattr_value(m, "trusted.iscsi.vendor"), std::nullopt);
  EXPECT_EQ(xattr_value(m, "user.iscsi."), std::nullopt);
}

TEST(LunXattrs, MissingVpdMeansNoAttribute) {
  auto m = sample();
  m.serial.reset();
  m.designators.clear();
  m.thin = false;
  const auto names = xattr_names(m);
  EXPECT_EQ(std::count(names.begin(), names.end(), "user.iscsi.serial"), 0);
  EXPECT_EQ(std::count(names.begin(), names.end(), "user.iscsi.naa"), 0);
  EXPECT_EQ(std::count(names.begin(), names.end(), "user.iscsi.designators"), 0);
  EXPECT_EQ(xattr_value(m, "user.iscsi.serial"), std::nullopt);
  EXPECT_EQ(xattr_value(m, "user.iscsi.naa"), std::nullopt);
  EXPECT_EQ(xattr_value(m, "user.iscsi.thin"), "0");
}

TEST(LunXattrs, NaaOnlyFromTheLogicalUnit) {
  // A target-port NAA is not the LUN's identity.
  std::vector<scsi::Designator> ds = {
      binary(scsi::DesignatorType::naa, {0x50, 0x01}, scsi::Association::target_port),
      binary(scsi::DesignatorType::eui64, {1, 2, 3, 4, 5, 6, 7, 8}),
  };
  EXPECT_EQ(naa_hex(ds), std::nullopt);
  ds.push_back(binary(scsi::DesignatorType::naa, {0x6a, 0xff}));
  EXPECT_EQ(naa_hex(ds), "6aff");
  EXPECT_EQ(scsi::designator_text(ds[1]), "eui64 0102030405060708");
}

TEST(JsonString, Escapes) {
  EXPECT_EQ(json_string("plain"), "\"plain\"");
  EXPECT_EQ(json_string("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(json_string("x\ny\t\x01"), "\"x\\ny\\t\\u0001\"");
  EXPECT_EQ(json_string("caf\xc3\xa9"), "\"caf\xc3\xa9\"");  // valid UTF-8 passes through
}

// A target's INQUIRY text may hold any byte: a lone continuation byte, a truncated sequence, 0xff,
// an overlong encoding. Each invalid byte becomes U+FFFD and the text stays valid JSON.
TEST(JsonString, InvalidUtf8BecomesReplacementCharacters) {
  EXPECT_EQ(json_string("a\x80z"), "\"a\xef\xbf\xbdz\"");
  EXPECT_EQ(json_string("\xff\xfe"), "\"\xef\xbf\xbd\xef\xbf\xbd\"");
  const std::string bad = "V\xc3(\xe2\x82\xc0\x80\xed\xa0\x80";
  const auto j = nlohmann::json::parse(json_string(bad));
  EXPECT_TRUE(j.is_string());
  EXPECT_NE(j.get<std::string>().find("\xef\xbf\xbd"), std::string::npos);
  EXPECT_EQ(j.get<std::string>().front(), 'V');
}

TEST(TargetInfoJson, CarriesTargetSessionAndLuns) {
  TargetInfo info;
  info.target = "iqn.2026-11.org.x:a";
  info.portal = "127.0.0.1:3260";
  info.url = "iscsi://127.0.0.1:3260/iqn.2026-11.org.x:a";
  info.session_state = "logged-in";
  iscsi::OperationalParameters p;
  p.max_burst_length = 1048576;
  p.header_digest_crc32c = true;
  p.initiator_name = "iqn.2026-11.org.iserkit:initiator-test";
  info.parameters = p;
  info.luns = {sample()};
  const auto text = target_info_json(info);
  ASSERT_EQ(text.back(), '\n');
  const auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["target"], "iqn.2026-11.org.x:a");
  EXPECT_EQ(j["portal"], "127.0.0.1:3260");
  EXPECT_EQ(j["url"], "iscsi://127.0.0.1:3260/iqn.2026-11.org.x:a");
  EXPECT_EQ(j["session"]["state"], "logged-in");
  EXPECT_EQ(j["session"]["parameters"]["MaxBurstLength"], 1048576);
  EXPECT_EQ(j["session"]["parameters"]["HeaderDigest"], "CRC32C");
  EXPECT_EQ(j["session"]["parameters"]["DataDigest"], "None");
  EXPECT_EQ(j["session"]["parameters"]["InitialR2T"], true);
  EXPECT_EQ(j["session"]["parameters"]["InitiatorName"], "iqn.2026-11.org.iserkit:initiator-test");
  ASSERT_EQ(j["luns"].size(), 1u);
  const auto& l = j["luns"][0];
  EXPECT_EQ(l["lun"], 3);
  EXPECT_EQ(l["file"], "lun3");
  EXPECT_EQ(l["size_bytes"], 1073741824u);
  EXPECT_EQ(l["thin"], true);
  EXPECT_EQ(l["vendor"], "ISERKIT");
  EXPECT_EQ(l["naa"], "6001405faabbccdd");
  EXPECT_EQ(l["designators"], nlohmann::json({"naa 6001405faabbccdd", "t10 ISERKIT abc123"}));
  EXPECT_FALSE(l.contains("paths"));
  // Keys in reading order: target first, LUNs last; pretty-printed with 2 spaces.
  EXPECT_EQ(text.rfind("{\n  \"target\": \"iqn.2026-11.org.x:a\",\n  \"portal\": ", 0), 0u) << text;
  EXPECT_LT(text.find("\"session\""), text.find("\"luns\"")) << text;
  EXPECT_NE(text.find("\"portal\": \"127.0.0.1:3260\""), std::string::npos) << text;
}

// The issue-26 case: a target whose INQUIRY strings and serial are not UTF-8 (Latin-1, stray
// 0xff) gave an info file no JSON parser took. Now it parses; the bad bytes are U+FFFD.
TEST(TargetInfoJson, StaysValidOnInvalidUtf8FromTheTarget) {
  TargetInfo info = target_in("iqn.2026-11.org.x:a", "logged-in");
  iscsi::OperationalParameters p;
  p.target_alias = "disk\xe9\x01";
  info.parameters = p;
  auto m = sample();
  m.vendor = "ACM\xc9";
  m.product = "\xff\xfe\x80 disk \"1\"";
  m.revision = "\xc3";
  m.serial = std::string("s\0n\x9f", 4);
  info.luns = {m};
  info.multipath_policy = "failover";
  info.paths = {PathInfo{.url = "iscsi://h/\xfe", .state = "up"}};
  const auto text = target_info_json(info);
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(text)) << text;
  const std::string r = "\xef\xbf\xbd";  // U+FFFD
  EXPECT_EQ(j["luns"][0]["vendor"], "ACM" + r);
  EXPECT_EQ(j["luns"][0]["product"], r + r + r + " disk \"1\"");
  EXPECT_EQ(j["luns"][0]["revision"], r);
  EXPECT_EQ(j["luns"][0]["serial"], std::string("s\0n", 3) + r);
  EXPECT_EQ(j["session"]["parameters"]["TargetAlias"], "disk" + r + "\x01");
  EXPECT_EQ(j["multipath"]["paths"][0]["url"], "iscsi://h/" + r);
  // Every byte of the text is valid UTF-8 (a strict parse of the whole text succeeded above) and
  // no raw control byte is left in it.
  for (char c : text) EXPECT_TRUE(static_cast<unsigned char>(c) >= 0x20 || c == '\n') << text;
}

TEST(TargetInfoJson, NotConnectedHasNoParametersAndNullSerial) {
  TargetInfo info = target_in("t", "failed: Connection refused");
  auto m = sample();
  m.serial.reset();
  m.designators.clear();
  info.luns = {m};
  const auto j = nlohmann::json::parse(target_info_json(info));
  EXPECT_FALSE(j["session"].contains("parameters"));
  EXPECT_TRUE(j["luns"][0]["serial"].is_null());
  EXPECT_TRUE(j["luns"][0]["naa"].is_null());
  EXPECT_EQ(j["luns"][0]["designators"], nlohmann::json::array());
  info.luns.clear();
  EXPECT_NE(target_info_json(info).find("\"luns\": []"), std::string::npos);
}

// A session past its replacement timeout, logging in again in the background (issue 24 item 6):
// the state says so and "reconnect" carries the attempts, the next one and the last error; no
// parameters (no connection).
TEST(TargetInfoJson, GaveUpSessionShowsItsBackgroundLogins) {
  TargetInfo info = target_in("t", "gave-up");
  info.reconnect = TargetInfo::Reconnect{.attempts = 7, .next_attempt_in_ms = 2500, .last_error = "Connection refused"};
  auto j = nlohmann::json::parse(target_info_json(info));
  EXPECT_EQ(j["session"]["state"], "gave-up");
  EXPECT_EQ(j["session"]["reconnect"],
            nlohmann::json({{"attempts", 7}, {"next_attempt_in_ms", 2500}, {"last_error", "Connection refused"}}));
  EXPECT_FALSE(j["session"].contains("parameters"));
  info.reconnect->next_attempt_in_ms.reset();  // a login under way
  j = nlohmann::json::parse(target_info_json(info));
  EXPECT_TRUE(j["session"]["reconnect"]["next_attempt_in_ms"].is_null());
  info.reconnect.reset();
  EXPECT_EQ(target_info_json(info).find("reconnect"), std::string::npos);
}

TEST(TargetInfoJson, MultipathShowsEveryPathAndItsStateForTheTargetAndEachLun) {
  TargetInfo info = target_in("iqn.2026-11.org.x:a", "logged-in");
  info.luns = {sample()};
  // Without a policy there is no multipath key, and LUN paths are not shown.
  info.lun_paths = {{PathInfo{.url = "iscsi://10.0.0.1/iqn.2026-11.org.x:a", .state = "up"}}};
  EXPECT_EQ(target_info_json(info).find("multipath"), std::string::npos);
  info.multipath_policy = "failover";
  info.paths = {PathInfo{.url = "iscsi://10.0.0.1/iqn.2026-11.org.x:a", .peer = "10.0.0.1:3260", .state = "up",
                         .alua = "active/optimized", .target_port_group = 1, .commands = 12, .downs = 1,
                         .reinstatements = 1},
                PathInfo{.url = "iscsi://10.0.0.2/iqn.2026-11.org.x:a", .state = "down", .alua = "active/optimized",
                         .failures = 3, .downs = 2}};
  info.lun_paths = {info.paths};
  info.lun_paths[0][1].state = "recovering";
  const auto text = target_info_json(info);
  const auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["multipath"]["policy"], "failover");
  EXPECT_EQ(j["multipath"]["paths"][0],
            nlohmann::json({{"url", "iscsi://10.0.0.1/iqn.2026-11.org.x:a"}, {"peer", "10.0.0.1:3260"},
                            {"state", "up"}, {"alua", "active/optimized"}, {"target_port_group", 1},
                            {"commands", 12}, {"failures", 0}, {"downs", 1}, {"reinstatements", 1}}));
  const auto& down = j["multipath"]["paths"][1];
  EXPECT_EQ(down["peer"], "");
  EXPECT_EQ(down["state"], "down");
  EXPECT_TRUE(down["target_port_group"].is_null());
  EXPECT_EQ(down["failures"], 3);
  EXPECT_EQ(down["downs"], 2);
  // The LUN's own device: the second path recovering there, and only there.
  EXPECT_EQ(j["luns"][0]["paths"][1]["state"], "recovering");
  EXPECT_EQ(j["luns"][0]["paths"][0]["state"], "up");
  EXPECT_EQ(text.find("\"recovering\""), text.rfind("\"recovering\"")) << text;
  EXPECT_EQ(text.back(), '\n');
}

std::error_code scsi_error(scsi::SenseKey key, scsi::AscPair pair) {
  scsi::ScsiResult r;
  r.status = scsi::Status::check_condition;
  r.sense = scsi::SenseData::make(key, pair);
  return initiator::make_scsi_error(r);
}

TEST(FuseErrno, SenseGoesThroughTheSharedTable) {
  EXPECT_EQ(fuse_errno(scsi_error(scsi::SenseKey::data_protect, scsi::asc::write_protected)), EROFS);
  EXPECT_EQ(fuse_errno(scsi_error(scsi::SenseKey::data_protect, scsi::asc::space_allocation_failed_write_protect)),
            ENOSPC);
  EXPECT_EQ(fuse_errno(scsi_error(scsi::SenseKey::illegal_request, scsi::asc::invalid_field_in_cdb)), EINVAL);
  EXPECT_EQ(fuse_errno(scsi_error(scsi::SenseKey::medium_error, scsi::asc::unrecovered_read_error)), EIO);
  // Whatever the table says, the FUSE reply says the same.
  const auto ec = scsi_error(scsi::SenseKey::illegal_request, scsi::asc::lba_out_of_range);
  EXPECT_EQ(fuse_errno(ec), initiator::to_errno(ec));
}

TEST(FuseErrno, VanishedTargetIsEio) {
  EXPECT_EQ(fuse_errno(make_error_code(errc::connection_closed)), EIO);
  EXPECT_EQ(fuse_errno(make_error_code(errc::session_closed)), EIO);
  EXPECT_EQ(fuse_errno(make_error_code(errc::timeout)), EIO);
  EXPECT_EQ(fuse_errno(std::make_error_code(std::errc::connection_refused)), EIO);
  EXPECT_EQ(fuse_errno(std::make_error_code(std::errc::connection_reset)), EIO);
  EXPECT_EQ(fuse_errno(std::error_code{}), EIO);  // never "success" for a failure
  EXPECT_EQ(fuse_errno(std::make_error_code(std::errc::no_space_on_device)), ENOSPC);
  EXPECT_EQ(fuse_errno(make_error_code(errc::not_supported)), EOPNOTSUPP);
}

}  // namespace
}  // namespace iserkit::fuse_fs
