// iSCSI BHS/AHS encode and decode (RFC 7143 §11). Every byte offset of the BHS lives in this file.
#include "iserkit/iscsi/pdu.hpp"

#include "iserkit/common/errors.hpp"

namespace iserkit::iscsi {
namespace {

constexpr std::byte bit(std::uint8_t v, bool on) noexcept { return static_cast<std::byte>(on ? v : 0); }
bool has(const Bhs& b, std::size_t i, std::uint8_t mask) noexcept { return (static_cast<std::uint8_t>(b[i]) & mask) != 0; }
std::uint8_t u8(const Bhs& b, std::size_t i) noexcept { return static_cast<std::uint8_t>(b[i]); }

void put_opcode(Bhs& b, Opcode op, bool immediate) noexcept {
  b[0] = static_cast<std::byte>(static_cast<std::uint8_t>(op) | (immediate ? 0x40 : 0));
}
void put32(Bhs& b, std::size_t at, std::uint32_t v) noexcept { store_be32(&b[at], v); }
void put_sn(Bhs& b, std::size_t at, SerialNumber v) noexcept { store_be32(&b[at], v.value()); }
std::uint32_t get32(const Bhs& b, std::size_t at) noexcept { return load_be32(&b[at]); }
SerialNumber get_sn(const Bhs& b, std::size_t at) noexcept { return SerialNumber(load_be32(&b[at])); }
scsi::Lun get_lun(const Bhs& b) noexcept { return scsi::Lun::load(&b[8]); }
void put_lun(Bhs& b, const scsi::Lun& lun) noexcept { lun.store(&b[8]); }

// Bytes 1 of Login Request/Response: T C . . CSG(2) NSG(2) (RFC 7143 §11.12).
std::byte login_flags(bool t, bool c, LoginStage csg, LoginStage nsg) noexcept {
  return bit(0x80, t) | bit(0x40, c) | static_cast<std::byte>((static_cast<std::uint8_t>(csg) & 3) << 2) |
         static_cast<std::byte>(t ? (static_cast<std::uint8_t>(nsg) & 3) : 0);
}

// ---- encoders: one per PDU type ----
void encode(Bhs& b, const NopOut& p) {
  put_opcode(b, Opcode::nop_out, p.immediate);
  b[1] = std::byte{0x80};
  put_lun(b, p.lun);
  put32(b, 16, to_u32(p.itt));
  put32(b, 20, to_u32(p.ttt));
  put_sn(b, 24, p.cmd_sn);
  put_sn(b, 28, p.exp_stat_sn);
}
void encode(Bhs& b, const ScsiCommand& p) {
  put_opcode(b, Opcode::scsi_command, p.immediate);
  b[1] = bit(0x80, p.final) | bit(0x40, p.read) | bit(0x20, p.write) |
         static_cast<std::byte>(static_cast<std::uint8_t>(p.attribute) & 7);
  put_lun(b, p.lun);
  put32(b, 16, to_u32(p.itt));
  put32(b, 20, p.expected_data_transfer_length);
  put_sn(b, 24, p.cmd_sn);
  put_sn(b, 28, p.exp_stat_sn);
  for (std::size_t i = 0; i < 16; ++i) b[32 + i] = p.cdb[i];
}
void encode(Bhs& b, const TaskManagementRequest& p) {
  put_opcode(b, Opcode::task_management_request, p.immediate);
  b[1] = std::byte{0x80} | static_cast<std::byte>(static_cast<std::uint8_t>(p.function) & 0x7f);
  put_lun(b, p.lun);
  put32(b, 16, to_u32(p.itt));
  put32(b, 20, to_u32(p.referenced_task_tag));
  put_sn(b, 24, p.cmd_sn);
  put_sn(b, 28, p.exp_stat_sn);
  put_sn(b, 32, p.ref_cmd_sn);
  put32(b, 36, p.exp_data_sn);
}
void encode(Bhs& b, const LoginRequest& p) {
  put_opcode(b, Opcode::login_request, true);  // RFC 7143 §11.12: the I bit is always 1
  b[1] = login_flags(p.transit, p.continue_, p.csg, p.nsg);
  b[2] = static_cast<std::byte>(p.version_max);
  b[3] = static_cast<std::byte>(p.version_min);
  for (std::size_t i = 0; i < 6; ++i) b[8 + i] = p.isid[i];
  store_be16(&b[14], p.tsih);
  put32(b, 16, to_u32(p.itt));
  store_be16(&b[20], p.cid);
  put_sn(b, 24, p.cmd_sn);
  put_sn(b, 28, p.exp_stat_sn);
}
void encode(Bhs& b, const TextRequest& p) {
  put_opcode(b, Opcode::text_request, p.immediate);
  b[1] = bit(0x80, p.final) | bit(0x40, p.continue_);
  put_lun(b, p.lun);
  put32(b, 16, to_u32(p.itt));
  put32(b, 20, to_u32(p.ttt));
  put_sn(b, 24, p.cmd_sn);
  put_sn(b, 28, p.exp_stat_sn);
}
void encode(Bhs& b, const DataOut& p) {
  put_opcode(b, Opcode::data_out, false);
  b[1] = bit(0x80, p.final);
  put_lun(b, p.lun);
  put32(b, 16, to_u32(p.itt));
  put32(b, 20, to_u32(p.ttt));
  put_sn(b, 28, p.exp_stat_sn);
  put32(b, 36, p.data_sn);
  put32(b, 40, p.buffer_offset);
}
void encode(Bhs& b, const LogoutRequest& p) {
  put_opcode(b, Opcode::logout_request, p.immediate);
  b[1] = std::byte{0x80} | static_cast<std::byte>(static_cast<std::uint8_t>(p.reason) & 0x7f);
  put32(b, 16, to_u32(p.itt));
  store_be16(&b[20], p.cid);
  put_sn(b, 24, p.cmd_sn);
  put_sn(b, 28, p.exp_stat_sn);
}
void encode(Bhs& b, const SnackRequest& p) {
  put_opcode(b, Opcode::snack_request, false);
  b[1] = std::byte{0x80} | static_cast<std::byte>(p.type & 0x0f);
  put_lun(b, p.lun);
  put32(b, 16, to_u32(p.itt));
  put32(b, 20, to_u32(p.ttt));
  put_sn(b, 28, p.exp_stat_sn);
  put32(b, 40, p.beg_run);
  put32(b, 44, p.run_length);
}
void encode(Bhs& b, const NopIn& p) {
  put_opcode(b, Opcode::nop_in, false);
  b[1] = std::byte{0x80};
  put_lun(b, p.lun);
  put32(b, 16, to_u32(p.itt));
  put32(b, 20, to_u32(p.ttt));
  put_sn(b, 24, p.stat_sn);
  put_sn(b, 28, p.exp_cmd_sn);
  put_sn(b, 32, p.max_cmd_sn);
}
void encode(Bhs& b, const ScsiResponse& p) {
  put_opcode(b, Opcode::scsi_response, false);
  b[1] = std::byte{0x80} | bit(0x10, p.bidi_read_residual_overflow) | bit(0x08, p.bidi_read_residual_underflow) |
         bit(0x04, p.residual_overflow) | bit(0x02, p.residual_underflow);
  b[2] = static_cast<std::byte>(p.response);
  b[3] = static_cast<std::byte>(p.status);
  put32(b, 16, to_u32(p.itt));
  put32(b, 20, p.snack_tag);
  put_sn(b, 24, p.stat_sn);
  put_sn(b, 28, p.exp_cmd_sn);
  put_sn(b, 32, p.max_cmd_sn);
  put32(b, 36, p.exp_data_sn);
  put32(b, 40, p.bidi_read_residual_count);
  put32(b, 44, p.residual_count);
}
void encode(Bhs& b, const TaskManagementResponse& p) {
  put_opcode(b, Opcode::task_management_response, false);
  b[1] = std::byte{0x80};
  b[2] = static_cast<std::byte>(p.response);
  put32(b, 16, to_u32(p.itt));
  put_sn(b, 24, p.stat_sn);
  put_sn(b, 28, p.exp_cmd_sn);
  put_sn(b, 32, p.max_cmd_sn);
}
void encode(Bhs& b, const LoginResponse& p) {
  put_opcode(b, Opcode::login_response, false);
  b[1] = login_flags(p.transit, p.continue_, p.csg, p.nsg);
  b[2] = static_cast<std::byte>(p.version_max);
  b[3] = static_cast<std::byte>(p.version_active);
  for (std::size_t i = 0; i < 6; ++i) b[8 + i] = p.isid[i];
  store_be16(&b[14], p.tsih);
  put32(b, 16, to_u32(p.itt));
  put_sn(b, 24, p.stat_sn);
  put_sn(b, 28, p.exp_cmd_sn);
  put_sn(b, 32, p.max_cmd_sn);
  b[36] = static_cast<std::byte>(p.status_class);
  b[37] = static_cast<std::byte>(p.status_detail);
}
void encode(Bhs& b, const TextResponse& p) {
  put_opcode(b, Opcode::text_response, false);
  b[1] = bit(0x80, p.final) | bit(0x40, p.continue_);
  put_lun(b, p.lun);
  put32(b, 16, to_u32(p.itt));
  put32(b, 20, to_u32(p.ttt));
  put_sn(b, 24, p.stat_sn);
  put_sn(b, 28, p.exp_cmd_sn);
  put_sn(b, 32, p.max_cmd_sn);
}
void encode(Bhs& b, const DataIn& p) {
  put_opcode(b, Opcode::data_in, false);
  b[1] = bit(0x80, p.final) | bit(0x40, p.acknowledge) | bit(0x04, p.residual_overflow) |
         bit(0x02, p.residual_underflow) | bit(0x01, p.status_present);
  b[3] = static_cast<std::byte>(p.status_present ? p.status : 0);
  put_lun(b, p.lun);
  put32(b, 16, to_u32(p.itt));
  put32(b, 20, to_u32(p.ttt));
  // RFC 7143 §11.7.5: StatSN is meaningful only when the S bit is set; zero otherwise.
  put_sn(b, 24, p.status_present ? p.stat_sn : SerialNumber{});
  put_sn(b, 28, p.exp_cmd_sn);
  put_sn(b, 32, p.max_cmd_sn);
  put32(b, 36, p.data_sn);
  put32(b, 40, p.buffer_offset);
  put32(b, 44, p.residual_count);
}
void encode(Bhs& b, const LogoutResponse& p) {
  put_opcode(b, Opcode::logout_response, false);
  b[1] = std::byte{0x80};
  b[2] = static_cast<std::byte>(p.response);
  put32(b, 16, to_u32(p.itt));
  put_sn(b, 24, p.stat_sn);
  put_sn(b, 28, p.exp_cmd_sn);
  put_sn(b, 32, p.max_cmd_sn);
  store_be16(&b[40], p.time2wait);
  store_be16(&b[42], p.time2retain);
}
void encode(Bhs& b, const R2t& p) {
  put_opcode(b, Opcode::r2t, false);
  b[1] = std::byte{0x80};
  put_lun(b, p.lun);
  put32(b, 16, to_u32(p.itt));
  put32(b, 20, to_u32(p.ttt));
  put_sn(b, 24, p.stat_sn);
  put_sn(b, 28, p.exp_cmd_sn);
  put_sn(b, 32, p.max_cmd_sn);
  put32(b, 36, p.r2t_sn);
  put32(b, 40, p.buffer_offset);
  put32(b, 44, p.desired_data_transfer_length);
}
void encode(Bhs& b, const AsyncMessage& p) {
  put_opcode(b, Opcode::async_message, false);
  b[1] = std::byte{0x80};
  put_lun(b, p.lun);
  put32(b, 16, to_u32(reserved_itt));
  put_sn(b, 24, p.stat_sn);
  put_sn(b, 28, p.exp_cmd_sn);
  put_sn(b, 32, p.max_cmd_sn);
  b[36] = static_cast<std::byte>(p.event);
  b[37] = static_cast<std::byte>(p.vcode);
  store_be16(&b[38], p.parameter1);
  store_be16(&b[40], p.parameter2);
  store_be16(&b[42], p.parameter3);
}
void encode(Bhs& b, const Reject& p) {
  put_opcode(b, Opcode::reject, false);
  b[1] = std::byte{0x80};
  b[2] = static_cast<std::byte>(p.reason);
  put32(b, 16, to_u32(reserved_itt));
  put_sn(b, 24, p.stat_sn);
  put_sn(b, 28, p.exp_cmd_sn);
  put_sn(b, 32, p.max_cmd_sn);
  put32(b, 36, p.data_sn_or_r2t_sn);
}

// ---- decoders ----
LoginStage stage(std::uint8_t v) noexcept { return static_cast<LoginStage>(v & 3); }

PduHeader decode_known(const Bhs& b, Opcode op) noexcept {
  switch (op) {
    case Opcode::nop_out:
      return NopOut{.immediate = immediate_bit(b), .lun = get_lun(b), .itt = itt_of(b), .ttt = Ttt{get32(b, 20)},
                    .cmd_sn = get_sn(b, 24), .exp_stat_sn = get_sn(b, 28)};
    case Opcode::scsi_command: {
      ScsiCommand c{.immediate = immediate_bit(b), .final = has(b, 1, 0x80), .read = has(b, 1, 0x40),
                    .write = has(b, 1, 0x20), .attribute = static_cast<TaskAttribute>(u8(b, 1) & 7),
                    .lun = get_lun(b), .itt = itt_of(b), .expected_data_transfer_length = get32(b, 20),
                    .cmd_sn = get_sn(b, 24), .exp_stat_sn = get_sn(b, 28)};
      for (std::size_t i = 0; i < 16; ++i) c.cdb[i] = b[32 + i];
      return c;
    }
    case Opcode::task_management_request:
      return TaskManagementRequest{.immediate = immediate_bit(b),
                                   .function = static_cast<TaskManagementFunction>(u8(b, 1) & 0x7f),
                                   .lun = get_lun(b), .itt = itt_of(b), .referenced_task_tag = Itt{get32(b, 20)},
                                   .cmd_sn = get_sn(b, 24), .exp_stat_sn = get_sn(b, 28),
                                   .ref_cmd_sn = get_sn(b, 32), .exp_data_sn = get32(b, 36)};
    case Opcode::login_request: {
      LoginRequest r{.transit = has(b, 1, 0x80), .continue_ = has(b, 1, 0x40), .csg = stage(u8(b, 1) >> 2),
                     .nsg = stage(u8(b, 1)), .version_max = u8(b, 2), .version_min = u8(b, 3),
                     .tsih = load_be16(&b[14]), .itt = itt_of(b), .cid = load_be16(&b[20]),
                     .cmd_sn = get_sn(b, 24), .exp_stat_sn = get_sn(b, 28)};
      for (std::size_t i = 0; i < 6; ++i) r.isid[i] = b[8 + i];
      return r;
    }
    case Opcode::text_request:
      return TextRequest{.immediate = immediate_bit(b), .final = has(b, 1, 0x80), .continue_ = has(b, 1, 0x40),
                         .lun = get_lun(b), .itt = itt_of(b), .ttt = Ttt{get32(b, 20)}, .cmd_sn = get_sn(b, 24),
                         .exp_stat_sn = get_sn(b, 28)};
    case Opcode::data_out:
      return DataOut{.final = has(b, 1, 0x80), .lun = get_lun(b), .itt = itt_of(b), .ttt = Ttt{get32(b, 20)},
                     .exp_stat_sn = get_sn(b, 28), .data_sn = get32(b, 36), .buffer_offset = get32(b, 40)};
    case Opcode::logout_request:
      return LogoutRequest{.immediate = immediate_bit(b), .reason = static_cast<LogoutReason>(u8(b, 1) & 0x7f),
                           .itt = itt_of(b), .cid = load_be16(&b[20]), .cmd_sn = get_sn(b, 24),
                           .exp_stat_sn = get_sn(b, 28)};
    case Opcode::snack_request:
      return SnackRequest{.type = static_cast<std::uint8_t>(u8(b, 1) & 0x0f), .lun = get_lun(b), .itt = itt_of(b),
                          .ttt = Ttt{get32(b, 20)}, .exp_stat_sn = get_sn(b, 28), .beg_run = get32(b, 40),
                          .run_length = get32(b, 44)};
    case Opcode::nop_in:
      return NopIn{.lun = get_lun(b), .itt = itt_of(b), .ttt = Ttt{get32(b, 20)}, .stat_sn = get_sn(b, 24),
                   .exp_cmd_sn = get_sn(b, 28), .max_cmd_sn = get_sn(b, 32)};
    case Opcode::scsi_response:
      return ScsiResponse{.bidi_read_residual_overflow = has(b, 1, 0x10),
                          .bidi_read_residual_underflow = has(b, 1, 0x08), .residual_overflow = has(b, 1, 0x04),
                          .residual_underflow = has(b, 1, 0x02), .response = u8(b, 2), .status = u8(b, 3),
                          .itt = itt_of(b), .snack_tag = get32(b, 20), .stat_sn = get_sn(b, 24),
                          .exp_cmd_sn = get_sn(b, 28), .max_cmd_sn = get_sn(b, 32), .exp_data_sn = get32(b, 36),
                          .bidi_read_residual_count = get32(b, 40), .residual_count = get32(b, 44)};
    case Opcode::task_management_response:
      return TaskManagementResponse{.response = u8(b, 2), .itt = itt_of(b), .stat_sn = get_sn(b, 24),
                                    .exp_cmd_sn = get_sn(b, 28), .max_cmd_sn = get_sn(b, 32)};
    case Opcode::login_response: {
      LoginResponse r{.transit = has(b, 1, 0x80), .continue_ = has(b, 1, 0x40), .csg = stage(u8(b, 1) >> 2),
                      .nsg = stage(u8(b, 1)), .version_max = u8(b, 2), .version_active = u8(b, 3),
                      .tsih = load_be16(&b[14]), .itt = itt_of(b), .stat_sn = get_sn(b, 24),
                      .exp_cmd_sn = get_sn(b, 28), .max_cmd_sn = get_sn(b, 32), .status_class = u8(b, 36),
                      .status_detail = u8(b, 37)};
      for (std::size_t i = 0; i < 6; ++i) r.isid[i] = b[8 + i];
      return r;
    }
    case Opcode::text_response:
      return TextResponse{.final = has(b, 1, 0x80), .continue_ = has(b, 1, 0x40), .lun = get_lun(b),
                          .itt = itt_of(b), .ttt = Ttt{get32(b, 20)}, .stat_sn = get_sn(b, 24),
                          .exp_cmd_sn = get_sn(b, 28), .max_cmd_sn = get_sn(b, 32)};
    case Opcode::data_in:
      return DataIn{.final = has(b, 1, 0x80), .acknowledge = has(b, 1, 0x40), .residual_overflow = has(b, 1, 0x04),
                    .residual_underflow = has(b, 1, 0x02), .status_present = has(b, 1, 0x01), .status = u8(b, 3),
                    .lun = get_lun(b), .itt = itt_of(b), .ttt = Ttt{get32(b, 20)}, .stat_sn = get_sn(b, 24),
                    .exp_cmd_sn = get_sn(b, 28), .max_cmd_sn = get_sn(b, 32), .data_sn = get32(b, 36),
                    .buffer_offset = get32(b, 40), .residual_count = get32(b, 44)};
    case Opcode::logout_response:
      return LogoutResponse{.response = u8(b, 2), .itt = itt_of(b), .stat_sn = get_sn(b, 24),
                            .exp_cmd_sn = get_sn(b, 28), .max_cmd_sn = get_sn(b, 32),
                            .time2wait = load_be16(&b[40]), .time2retain = load_be16(&b[42])};
    case Opcode::r2t:
      return R2t{.lun = get_lun(b), .itt = itt_of(b), .ttt = Ttt{get32(b, 20)}, .stat_sn = get_sn(b, 24),
                 .exp_cmd_sn = get_sn(b, 28), .max_cmd_sn = get_sn(b, 32), .r2t_sn = get32(b, 36),
                 .buffer_offset = get32(b, 40), .desired_data_transfer_length = get32(b, 44)};
    case Opcode::async_message:
      return AsyncMessage{.lun = get_lun(b), .stat_sn = get_sn(b, 24), .exp_cmd_sn = get_sn(b, 28),
                          .max_cmd_sn = get_sn(b, 32), .event = static_cast<AsyncEvent>(u8(b, 36)),
                          .vcode = u8(b, 37), .parameter1 = load_be16(&b[38]), .parameter2 = load_be16(&b[40]),
                          .parameter3 = load_be16(&b[42])};
    case Opcode::reject:
      return Reject{.reason = static_cast<RejectReason>(u8(b, 2)), .stat_sn = get_sn(b, 24),
                    .exp_cmd_sn = get_sn(b, 28), .max_cmd_sn = get_sn(b, 32), .data_sn_or_r2t_sn = get32(b, 36)};
  }
  return NopOut{};  // unreachable: callers check the opcode first
}

bool known_opcode(std::uint8_t op) noexcept {
  switch (static_cast<Opcode>(op)) {
    case Opcode::nop_out: case Opcode::scsi_command: case Opcode::task_management_request:
    case Opcode::login_request: case Opcode::text_request: case Opcode::data_out: case Opcode::logout_request:
    case Opcode::snack_request: case Opcode::nop_in: case Opcode::scsi_response:
    case Opcode::task_management_response: case Opcode::login_response: case Opcode::text_response:
    case Opcode::data_in: case Opcode::logout_response: case Opcode::r2t: case Opcode::async_message:
    case Opcode::reject:
      return true;
  }
  return false;
}

}  // namespace

std::string_view opcode_name(std::uint8_t op) noexcept {
  switch (static_cast<Opcode>(op)) {
    case Opcode::nop_out: return "nop_out";
    case Opcode::scsi_command: return "scsi_command";
    case Opcode::task_management_request: return "task_management_request";
    case Opcode::login_request: return "login_request";
    case Opcode::text_request: return "text_request";
    case Opcode::data_out: return "data_out";
    case Opcode::logout_request: return "logout_request";
    case Opcode::snack_request: return "snack_request";
    case Opcode::nop_in: return "nop_in";
    case Opcode::scsi_response: return "scsi_response";
    case Opcode::task_management_response: return "task_management_response";
    case Opcode::login_response: return "login_response";
    case Opcode::text_response: return "text_response";
    case Opcode::data_in: return "data_in";
    case Opcode::logout_response: return "logout_response";
    case Opcode::r2t: return "r2t";
    case Opcode::async_message: return "async_message";
    case Opcode::reject: return "reject";
  }
  return "unknown";
}

Bhs encode_bhs(const PduHeader& header) noexcept {
  Bhs b{};
  std::visit([&b](const auto& h) { encode(b, h); }, header);
  return b;
}

Result<PduHeader> decode_bhs(const Bhs& bhs) noexcept {
  const auto op = raw_opcode(bhs);
  if (!known_opcode(op)) return fail(errc::malformed_pdu);
  return decode_known(bhs, static_cast<Opcode>(op));
}

// ---- AHS ----

std::vector<std::byte> encode_ahs(std::span<const Ahs> segments) {
  std::vector<std::byte> out;
  for (const auto& s : segments) {
    // RFC 7143 §11.2.2.1: AHSLength counts the bytes after AHSType, padding excluded; for both
    // defined types that is one reserved byte plus the type-specific bytes.
    const auto ahs_length = static_cast<std::uint16_t>(s.specific.size() + 1);
    const std::size_t at = out.size();
    out.resize(at + 4 + s.specific.size());
    store_be16(&out[at], ahs_length);
    out[at + 2] = static_cast<std::byte>(s.type);
    out[at + 3] = std::byte{0};
    std::copy(s.specific.begin(), s.specific.end(), out.begin() + static_cast<std::ptrdiff_t>(at + 4));
    out.resize(out.size() + padding_for(static_cast<std::uint32_t>(out.size())));
  }
  return out;
}

Result<std::vector<Ahs>> decode_ahs(ConstByteSpan area) {
  std::vector<Ahs> out;
  std::size_t at = 0;
  while (at < area.size()) {
    if (area.size() - at < 4) return fail(errc::malformed_pdu);
    const std::uint16_t ahs_length = load_be16(&area[at]);
    if (ahs_length == 0) return fail(errc::malformed_pdu);
    const std::size_t specific = ahs_length - 1u;  // the reserved byte is counted in AHSLength
    if (area.size() - at - 4 < specific) return fail(errc::malformed_pdu);
    Ahs a{.type = static_cast<AhsType>(area[at + 2]),
          .specific = std::vector<std::byte>(area.begin() + static_cast<std::ptrdiff_t>(at + 4),
                                             area.begin() + static_cast<std::ptrdiff_t>(at + 4 + specific))};
    out.push_back(std::move(a));
    at += 4 + specific;
    at += padding_for(static_cast<std::uint32_t>(at));
  }
  return out;
}

Ahs extended_cdb_ahs(ConstByteSpan cdb_tail) {
  return Ahs{.type = AhsType::extended_cdb, .specific = std::vector<std::byte>(cdb_tail.begin(), cdb_tail.end())};
}

}  // namespace iserkit::iscsi
