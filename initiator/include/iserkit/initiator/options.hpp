// Session options for the initiator: identity, CHAP credentials (RFC 7143 §12.1.3), the
// operational keys it offers at login (RFC 7143 §13), timeouts, NOP-Out pings, redirects and queue
// depth. Layer 6 (public API). Every field has a default that
// works against tgtd, LIO and iserkit-target; set fields with designated initializers.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <system_error>
#include <string>
#include <string_view>
#include <vector>

#include "iserkit/datamover/iser_datamover.hpp"
#include "iserkit/iscsi/chap.hpp"

namespace iserkit::initiator {

/// Header/data digest choice (RFC 7143 §13.1).
enum class Digest { none, crc32c };

/// CHAP credentials (RFC 7143 §12.1.3, RFC 1994). Secrets are never logged or formatted.
struct ChapOptions {
  /// CHAP_N we send; empty = no authentication (AuthMethod=None). Session::connect() fills it
  /// from the URL's user when empty.
  std::string user;
  /// Our secret (1..255 bytes); from the URL's password when empty. See secret_from_environment().
  std::string secret;
  /// Mutual CHAP: a non-empty secret makes the initiator challenge the target, which must answer
  /// with a CHAP_R computed from it, or the login fails with errc::authentication_failed.
  std::string target_secret;
  /// The CHAP_N the target must answer with in mutual CHAP; empty = any name.
  std::string target_user;
  /// CHAP_A values offered, in order of preference (RFC 7143 §12.1.3: MD5 must be among them).
  std::vector<iscsi::ChapAlgorithm> algorithms{std::begin(iscsi::all_chap_algorithms),
                                               std::end(iscsi::all_chap_algorithms)};
  [[nodiscard]] bool enabled() const noexcept { return !user.empty(); }
  [[nodiscard]] bool mutual() const noexcept { return !target_secret.empty(); }
};

/// How Session::connect picks the wire (select_transports() in session.hpp).
enum class TransportPolicy {
  from_url,  ///< iscsi:// → TCP, iser:// → iSER (RFC 7145), no fallback
  tcp,       ///< TCP whatever the URL says
  iser,      ///< iSER whatever the URL says
  automatic, ///< try iSER, fall back to TCP when the RDMA connection or the iSER login fails
};

/// Something that happened to a session's connection (SessionOptions::on_event).
struct SessionEvent {
  enum class Kind {
    connection_lost,  ///< the connection failed; the session is logging in again, commands wait
    recovered,        ///< a new connection is logged in (same ISID); waiting commands went out
    /// No new connection within replacement_timeout: the waiting commands failed with
    /// errc::session_lost and new ones fail at once. With reconnect_after_give_up the session
    /// keeps logging in again (a later `recovered` ends that); without, it has ended.
    gave_up,
  };
  Kind kind = Kind::connection_lost;
  std::error_code error;  ///< connection_lost: why; gave_up: errc::session_lost
  unsigned attempts = 0;  ///< recovered / gave_up: logins tried since the connection was lost
};

/// "connection lost", "recovered", "gave up".
const char* to_string(SessionEvent::Kind kind) noexcept;

/// Options for a session (normal or discovery). All lengths are in bytes.
struct SessionOptions {
  /// InitiatorName (RFC 7143 §13.6); empty = default_initiator_name().
  std::string initiator_name;
  /// InitiatorAlias (RFC 7143 §13.7); empty = not sent.
  std::string initiator_alias;
  /// The ISID (RFC 7143 §11.12.5); nullopt = a random ISID of type 2 ("random", 0x80 prefix).
  std::optional<std::array<std::byte, 6>> isid;
  Digest header_digest = Digest::none;  ///< offered HeaderDigest (CRC32C also offers None as fallback)
  Digest data_digest = Digest::none;    ///< offered DataDigest
  /// Our MaxRecvDataSegmentLength: the largest data segment the target may send us (RFC 7143 §13.12).
  std::uint32_t max_recv_data_segment_length = 1048576;
  std::uint32_t max_burst_length = 1048576;   ///< offered MaxBurstLength (RFC 7143 §13.13)
  std::uint32_t first_burst_length = 262144;  ///< offered FirstBurstLength (RFC 7143 §13.14)
  std::uint32_t max_outstanding_r2t = 8;      ///< offered MaxOutstandingR2T (RFC 7143 §13.17)
  bool immediate_data = true;                 ///< offered ImmediateData (RFC 7143 §13.11)
  bool initial_r2t = false;                   ///< offered InitialR2T (RFC 7143 §13.10)
  /// Start the login in the security stage with AuthMethod=None (true), or go straight to the
  /// operational stage (false). RFC 7143 §6.3.
  bool security_stage = true;
  /// CHAP (one-way, or mutual with target_secret). Requires security_stage.
  ChapOptions chap;
  std::chrono::milliseconds connect_timeout{10000};  ///< TCP connect
  std::chrono::milliseconds login_timeout{15000};    ///< the whole login phase
  /// Default per-command timeout; 0 = none. A timed-out command fails with errc::timeout; its ITT
  /// is retired so late data is dropped, and an ABORT TASK (RFC 7143 §11.5) tells the target.
  std::chrono::milliseconds command_timeout{0};
  /// Send a NOP-Out ping (RFC 7143 §11.18) after this long without any PDU from the target;
  /// 0 = never.
  std::chrono::milliseconds nop_interval{0};
  /// A ping unanswered for this long declares the connection dead: the session fails with
  /// errc::timeout and every command in flight with it.
  std::chrono::milliseconds nop_timeout{10000};
  /// Login redirects (status 0x0101/0x0102 with TargetAddress, RFC 7143 §11.13.5) followed at
  /// most this many times per connect; 0 = report them as login errors.
  unsigned max_redirects = 4;
  /// Cap on commands in flight in this session (on top of the target's CmdSN window); also the ITT
  /// table size. 1..65535.
  std::uint32_t max_commands_in_flight = 128;
  /// Batch sends per event-loop pass (common/send_pass.hpp): while the connection's receive
  /// returns PDUs that had already arrived, the commands and PDUs queued meanwhile wait and leave
  /// in one gather write when the burst ends (at queue depth 1 nothing waits). Only for an
  /// executor whose execution context one thread runs (iserkit-nbd's loops); off by default.
  bool batch_sends = false;
  /// Transport choice; see TransportPolicy.
  TransportPolicy transport = TransportPolicy::from_url;
  /// Network namespace (/run/netns/NAME) in which every connection of the session is opened (TCP
  /// socket or RDMA CM id, created by a thread inside it); empty = the process's own. For a front
  /// end that serves the host (an NBD socket, a FUSE mount) while its iSCSI connections live in a
  /// tenant's network (docs/architecture.md "Tenants"). Needs CAP_SYS_ADMIN.
  std::string netns;
  /// On iSER: our InitiatorRecvDataSegmentLength (RFC 7145 §6.5), the data part of each posted
  /// receive buffer. Responses carry at most sense data and text, so 8192 (the default) suffices.
  std::uint32_t iser_recv_data_segment_length = 8192;
  /// On iSER: the most bytes one READ/WRITE command moves (LunHandle splits larger transfers), like
  /// Linux ib_iser's max_sectors; 0 = only the target's Block Limits VPD and 8 MiB. 8 MiB by
  /// default (ib_iser's ceiling); the target's MAXIMUM TRANSFER LENGTH lowers it.
  std::uint32_t iser_max_transfer_bytes = 8u << 20;
  /// On iSER: the per-command cap for a LUN whose Block Limits VPD states no MAXIMUM TRANSFER
  /// LENGTH (0 = iser_max_transfer_bytes alone). 512 KiB, ib_iser's default max_sectors
  /// (ISER_DEF_MAX_SECTORS): tgtd's iSER refuses commands above its 512 KiB RDMA buffers and
  /// reports no limit.
  std::uint32_t iser_unstated_max_transfer_bytes = 512 * 1024;
  /// On iSER: how command buffers are exposed to the target (datamover::IserStags). automatic
  /// (default) / per_command = a memory window per command (bound when the command is sent,
  /// invalidated when it ends; a timed-out command is aborted with ABORT TASK, the connection
  /// stays, and its caller hears the timeout once the target ended the task), as the Linux iSER
  /// initiator exposes each command alone; automatic falls back to the whole slab on a device
  /// without type 2 memory windows. whole_slab = the registered pool's rkey for the connection's
  /// life: every buffer of the device's pool (other sessions' too) is reachable by the target.
  datamover::IserStags iser_stags = datamover::IserStags::automatic;
  /// On iSER with per-command STags: offer Send with Invalidate in the CM REQ (the target's SCSI
  /// Response then invalidates the command's window). Off by default: see
  /// datamover::IserOptions::send_with_invalidate (Debian 12's rxe panics on a second invalidation).
  bool iser_send_with_invalidate = false;
  /// Recovery (RFC 7143 §6.3.5 session reinstatement at ErrorRecoveryLevel 0): when the connection
  /// fails (I/O error, the target closes it, an unanswered NOP-Out ping, an Async Message that
  /// drops it or asks for a logout), the session logs in again with the same ISID and TSIH 0,
  /// backing off from reconnect_delay_min to reconnect_delay_max (doubling, jittered), and sends
  /// again every command that had not completed. Callers see only delay for this long; after it
  /// waiting and new commands fail with errc::session_lost (see reconnect_after_give_up for what
  /// happens next). 0 = fail at once (connection_closed), no recovery.
  /// Default 120 s, as open-iscsi's node.session.timeo.replacement_timeout.
  std::chrono::milliseconds replacement_timeout{120000};
  std::chrono::milliseconds reconnect_delay_min{100};   ///< first wait before logging in again
  /// The longest wait between attempts, also after the replacement timeout (the bound of the
  /// background retries: one login every reconnect_delay_max / 2 .. reconnect_delay_max).
  std::chrono::milliseconds reconnect_delay_max{5000};
  /// Past replacement_timeout: true = the session stays open in SessionState::failed — commands
  /// fail at once with errc::session_lost (never queued) while logins go on in the background with
  /// the same back-off; once one succeeds the session is logged in again (SessionEvent recovered)
  /// and serves commands, as open-iscsi's iscsid keeps logging in after the replacement timeout.
  /// false = the session ends with errc::session_lost (Multipath sets this for its paths: it
  /// reinstates a failed path itself). Ignored when replacement_timeout is 0.
  bool reconnect_after_give_up = true;
  /// Called on the session's executor when the connection is lost, recovered, or given up on.
  /// Must not block; may be empty.
  std::function<void(const SessionEvent&)> on_event;
};

/// Parses a --transport value: "url", "tcp", "iser" or "auto"; nullopt for anything else.
std::optional<TransportPolicy> parse_transport_policy(std::string_view text) noexcept;

/// "iqn.2026-11.org.iserkit:initiator-<hostname>" (RFC 7143 §4.2.7.2 iqn. format), host name
/// lowercased with characters outside [a-z0-9.-] replaced by '-'.
std::string default_initiator_name();

/// The CHAP secrets from the environment, for callers that must not put them on a command line:
/// LIBISCSI_CHAP_PASSWORD (else ISERKIT_CHAP_SECRET) fills chap.secret and
/// LIBISCSI_CHAP_TARGET_PASSWORD (else ISERKIT_CHAP_TARGET_SECRET) chap.target_secret when they are
/// empty. Returns the options updated. Front ends use resolve_chap() (chap_credentials.hpp), which
/// also takes user names and a --chap-file.
SessionOptions secret_from_environment(SessionOptions options);

}  // namespace iserkit::initiator
