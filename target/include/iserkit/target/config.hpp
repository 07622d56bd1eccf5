// Target configuration (layer 6 front end): what iserkit-target's flags and its TOML file describe —
// portals, target nodes, LUNs, ACLs of initiator names, CHAP credentials (RFC 7143 §12.1.3), the
// discovery session's authentication, negotiation limits — and the parsers for the flag syntaxes
// and the file. Portals are TCP (RFC 7143 §4.2.6 network portals); names follow RFC 7143 §4.2.7.
// Secrets live only in ChapCredential::secret; nothing here logs or formats them.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "iserkit/common/result.hpp"
#include "iserkit/iscsi/chap.hpp"
#include "iserkit/target/lu_identity.hpp"
#include "iserkit/target/scsi_dispatcher.hpp"

namespace iserkit::target {

/// A TCP address to listen on.
struct ListenAddress {
  std::string host;          ///< numeric IPv4/IPv6 address or host name, without brackets
  std::uint16_t port = 3260; ///< 0 = any free port
  /// Target portal group tag (RFC 7143 §4.2.6, §13.9) of this portal, 1..65535. Each portal group
  /// is one target port and one ALUA target port group (id = tag).
  std::uint16_t portal_group = 1;
};

/// Parses "HOST:PORT", "[V6]:PORT", "HOST" or "[V6]" (port 3260 when absent; 0 allowed), each
/// optionally followed by ",tpgt=N" (the portal group tag, 1..65535; default 1).
/// Errors: errc::invalid_argument for an empty host, a bad port, a bad tag or unbalanced brackets.
Result<ListenAddress> parse_listen_address(std::string_view text);

/// Parses a comma-separated list of CHAP algorithm names ("SHA-256,MD5"; names as in
/// iscsi::parse_chap_algorithm). Errors: errc::invalid_argument for an unknown or empty name.
Result<std::vector<iscsi::ChapAlgorithm>> parse_chap_algorithm_list(std::string_view text);

/// An O_PATH descriptor of a file --export-dir checked (regular file or block device, not a
/// symlink); closed with the last LunSource that holds it.
struct PinnedFile {
  explicit PinnedFile(int descriptor) noexcept : fd(descriptor) {}
  PinnedFile(const PinnedFile&) = delete;
  PinnedFile& operator=(const PinnedFile&) = delete;
  ~PinnedFile();
  int fd = -1;
};

/// A Ceph RBD image named by "rbd:POOL/IMAGE".
struct RbdImageName {
  std::string pool;   ///< RADOS pool
  std::string image;  ///< image in that pool
};

/// A LUN's identity as configured (`,uuid=`, `,serial=`, `,naa=` after its source; docs/lu-identity.md).
/// Whatever is given wins over what the target would derive.
struct LuIdentityOverride {
  std::optional<Uuid> uuid;        ///< the LU's name, from which serial and NAA derive
  std::string serial;              ///< VPD 0x80 serial (check_unit_serial); empty = from the UUID
  std::vector<std::uint8_t> naa;   ///< NAA designator bytes (parse_naa_designator); empty = from the UUID
  [[nodiscard]] bool empty() const noexcept { return !uuid && serial.empty() && naa.empty(); }
  friend bool operator==(const LuIdentityOverride&, const LuIdentityOverride&) = default;
};

/// One LUN's source as given to --lun.
struct LunSource {
  bool memory = false;           ///< "mem:SIZE": a sparse in-memory LUN
  std::optional<RbdImageName> rbd;  ///< "rbd:POOL/IMAGE": a Ceph RBD image (librbd)
  std::uint64_t size_bytes = 0;  ///< memory LUNs only
  std::filesystem::path path;    ///< a regular file or block device (must exist); shown in logs
  /// Set by --export-dir: the inode that was checked. The LUN is opened through it, never by
  /// `path` again, so a swap of `path` for a symlink after the check cannot redirect the open.
  std::shared_ptr<const PinnedFile> pinned;
  /// Identity given with the source (",uuid=…,serial=…,naa=…"); empty = derived (docs/lu-identity.md).
  LuIdentityOverride identity;
  /// What to open: "/proc/self/fd/N" of `pinned` (that very inode), else `path`.
  [[nodiscard]] std::filesystem::path open_path() const;
  /// How logs name the source: "mem", "rbd:POOL/IMAGE" or the path, followed by the configured
  /// identity options as parse_lun_source() reads them (",uuid=…", ",serial=…", ",naa=…").
  [[nodiscard]] std::string display() const;
};

/// Parses a --lun value: "mem:SIZE", "rbd:POOL/IMAGE" or a path, optionally followed by identity
/// options, each at most once: ",uuid=UUID" (parse_uuid), ",serial=TEXT" (check_unit_serial),
/// ",naa=HEX" (parse_naa_designator). Only these three keys are taken off the end, so a path that
/// holds a comma otherwise stays whole.
/// Errors: errc::invalid_argument for a bad size, a pool or image name that is empty, holds '/',
/// '@' or a control character, an empty source, a bad or repeated identity option.
Result<LunSource> parse_lun_source(std::string_view text);

/// A CHAP name and secret (RFC 7143 §12.1.3, CHAP_N and the shared secret).
struct ChapCredential {
  std::string user;    ///< CHAP_N
  std::string secret;  ///< the shared secret, 1..255 bytes; never logged
};

/// How logins to one target (or to discovery sessions) authenticate.
struct AuthConfig {
  /// Initiator credentials the target accepts. Non-empty = AuthMethod=CHAP is required and
  /// AuthMethod=None refused (login status 0x0201); empty = no authentication.
  std::vector<ChapCredential> users;
  /// The target's own credential for mutual CHAP: answered when the initiator sends CHAP_I/CHAP_C.
  /// Without it an initiator asking for mutual CHAP fails authentication.
  std::optional<ChapCredential> mutual;
  /// CHAP_A values accepted; the initiator's order of preference picks among them. The default
  /// leaves MD5 (CHAP_A=5) out: it is accepted only where a configuration lists it
  /// (`chap_algorithms = [..., "MD5"]` in the TOML file, `--chap-algorithms` on the command line),
  /// e.g. for libiscsi/QEMU, whose CHAP speaks MD5 only. RFC 7143 §12.1.3 makes MD5 mandatory to
  /// implement, not to accept.
  std::vector<iscsi::ChapAlgorithm> algorithms{std::begin(default_chap_algorithms), std::end(default_chap_algorithms)};
  /// SHA-256, SHA3-256, SHA-1 (RFC 7143 §12.1.3 with RFC 7842's SHA algorithm numbers 6..8).
  static constexpr iscsi::ChapAlgorithm default_chap_algorithms[] = {
      iscsi::ChapAlgorithm::sha256, iscsi::ChapAlgorithm::sha3_256, iscsi::ChapAlgorithm::sha1};
  [[nodiscard]] bool required() const noexcept { return !users.empty(); }
};

/// Throttling of failed logins per source address (policy in target/README.md, "Failed logins").
struct LoginThrottleOptions {
  /// Failed authentications (status 0x0201) from one address that cost nothing.
  unsigned free_failures = 10;
  /// Block after the first failure beyond free_failures; doubles with each further failure.
  /// 0 turns throttling off.
  std::chrono::milliseconds base_delay{1000};
  std::chrono::milliseconds max_delay{60000};  ///< cap on one block
  /// An address with no failure for this long (and not blocked) is forgotten.
  std::chrono::milliseconds forget_after{600000};
  /// Addresses tracked at most; beyond it the least recently failed one is dropped. 0 = off.
  std::size_t max_addresses = 4096;
};

/// One target node as the configuration file describes it.
struct TargetDefinition {
  std::string iqn;                 ///< the target name (RFC 7143 §4.2.7)
  std::string alias;               ///< TargetAlias; may be empty
  std::vector<LunSource> luns;     ///< lun0, lun1, … in order; at least one
  /// Initiator names (RFC 7143 §13.6 InitiatorName, compared case-insensitively) allowed to log
  /// in; empty = any. Others get login status 0x0202 (authorization failure).
  std::vector<std::string> allowed_initiators;
  AuthConfig auth;
  /// The tenant (TenantDefinition::name) whose portals serve this target; empty = the target is
  /// served on the portals of no tenant (`listen`), as without tenants. A target is never served on
  /// another tenant's portals: logins there get 0x0203 and SendTargets does not list it.
  std::string tenant;
};

/// Bounds on what one tenant's initiators can make the target hold (target/README.md "Tenants").
struct TenantLimits {
  /// Sessions (logged-in connections, normal and discovery) on the tenant's portals at once; a
  /// login beyond it is refused with 0x0302 (Out of resources, RFC 7143 §11.13.5). 0 = no cap.
  std::uint32_t max_sessions = 0;
  /// Payload bytes (task buffers) held for all the tenant's connections together. The tenant's
  /// connections take their buffers from this budget instead of the target-wide one
  /// (ConnectionLimits::global_payload_bytes), so no tenant can starve another's I/O. 0 = the
  /// size of the target-wide budget.
  std::uint64_t payload_bytes = 0;
  /// Connections (logging in or logged in) open on the tenant's portals at once; at the cap a new
  /// connection closes the tenant's oldest one still logging in, or is closed at once when all
  /// are sessions. Under the target-wide descriptor cap (ConnectionLimits::fd_reserve). 0 = only
  /// the target-wide cap.
  std::uint32_t max_connections = 0;
  /// Of those, connections in the login phase; at the cap a new one closes the tenant's oldest
  /// one logging in. Under ConnectionLimits::max_logging_in (at that target-wide cap, the tenant,
  /// or the untenanted portals, with the most connections logging in loses its oldest). 0 = only
  /// the target-wide cap.
  std::uint32_t max_logging_in = 0;
};

/// One tenant: a set of portals, inside a network namespace, serving only the tenant's targets
/// (target/README.md "Tenants", docs/architecture.md "Tenants").
struct TenantDefinition {
  std::string name;   ///< 1..64 bytes of a-z, A-Z, 0-9, '-', '_', '.'
  /// Network namespace (/run/netns/NAME, as `ip netns add` makes it) in which the tenant's portals
  /// are created; empty = the target process's own namespace.
  std::string netns;
  std::vector<ListenAddress> listen;  ///< the tenant's portals; at least one
  TenantLimits limits;
};

/// What any peer can make the target hold, bounded (target/README.md "Limits"). Flags
/// `--login-timeout` … and TOML table `[limits]` set them; the defaults keep one connection under a
/// few hundred MiB and silent connections from locking out a legitimate initiator.
/// How a connection's socket I/O is driven (--socket-io, config key socket_io; issue 23 item 3).
enum class SocketIo {
  automatic,  ///< "auto": what docs/performance.md measured best where the kernel allows it
  uring,      ///< sends on the I/O thread's io_uring ring (epoll when the kernel probe says no)
  epoll,      ///< Asio's reactor (epoll) and the datamover's own sendmsg
};

/// "auto", "uring" or "epoll" (any case) as a SocketIo. Errors: errc::invalid_argument otherwise.
Result<SocketIo> parse_socket_io(std::string_view text);
/// The option's spelling ("auto", "uring", "epoll").
std::string_view to_string(SocketIo mode) noexcept;

struct ConnectionLimits {
  /// A connection that has not completed login within this time is closed (LIO: 15 s).
  std::chrono::milliseconds login_timeout{15000};
  /// Session reinstatement (RFC 7143 §6.3.5): how long a login that ends a live session with its
  /// InitiatorName + ISID waits for that session to end (a command still on the backend holds
  /// it). When the time passes the login is answered 0x0301 (Target Error, Service Unavailable:
  /// the initiator retries later) and closed; the old session keeps being waited for by the next
  /// login. > 0.
  std::chrono::milliseconds reinstate_timeout{10000};
  /// Full-feature phase: after this long without a PDU from the initiator the target sends a
  /// NOP-In ping (RFC 7143 §11.19, ITT 0xffffffff, TTT ≠ 0xffffffff). 0 = never ping.
  std::chrono::milliseconds idle_interval{15000};
  /// The connection is closed when nothing (the NOP-Out answer or any PDU) arrives within this
  /// time after a ping.
  std::chrono::milliseconds ping_timeout{30000};
  /// Connections still in the login phase, all portals together; at the cap the oldest one is
  /// closed to make room for a new one (count, >= 1).
  std::uint32_t max_logging_in = 64;
  /// File descriptors kept free for the target itself (backends, io_uring, listeners): new
  /// connections are refused when open connections would reach RLIMIT_NOFILE minus this; if some
  /// are still logging in, the oldest of those is closed instead (count).
  std::uint32_t fd_reserve = 64;
  /// Immediate SCSI commands (I bit; they bypass the CmdSN window, RFC 7143 §3.2.2.1) a connection
  /// may have outstanding; more get Reject reason 0x06 "Immediate command reject - too many
  /// immediate commands" (RFC 7143 §11.17.1) until some finish (count, >= 1: RFC 7143 §3.2.2.1
  /// asks for at least one). The same cap applies to task management requests in progress.
  std::uint32_t max_immediate_commands = 16;
  /// Payload bytes (task buffers for reads and writes) held for one connection's commands. A
  /// command whose buffer does not fit waits, in order, until buffers are freed. One buffer larger
  /// than the budget runs alone.
  std::uint64_t connection_payload_bytes = std::uint64_t{64} << 20;
  /// Payload bytes held for all connections together (same rules).
  std::uint64_t global_payload_bytes = std::uint64_t{512} << 20;
  /// Idle memory the task buffer pool keeps for reuse after buffers are returned (bytes).
  std::uint64_t pool_idle_bytes = std::uint64_t{64} << 20;
  /// SIGTERM/SIGINT (TargetServer::stop()): the time sessions get to drain — commands already
  /// received run and are answered, initiators are asked to log out (RFC 7143 §11.9.1) — before
  /// every connection still open is closed. 0 = close at once.
  std::chrono::milliseconds shutdown_timeout{10000};
  /// How TCP connections' socket I/O is driven (SocketIo; resolved against the kernel's io_uring
  /// features per connection, target/src/backend/uring_socket.hpp).
  SocketIo socket_io = SocketIo::automatic;
};

/// Everything iserkit-target needs to start.
struct TargetConfig {
  std::string iqn = "iqn.2026-11.org.iserkit:target";  ///< target name, or the base name with export_dir
  std::string alias = "iserkit";                       ///< TargetAlias (RFC 7143 §13.6)
  std::vector<ListenAddress> listen;                   ///< empty = 0.0.0.0:3260
  /// ALUA state of each portal group (by tag); groups not listed are active/optimized. A tag no
  /// listen address uses is a configuration error (TargetServer::create).
  std::map<std::uint16_t, AluaState> alua_states;
  /// Target port groups of peer gateways (by tag) that serve the same logical units from other
  /// processes (target/README.md "Two gateways, one RBD image"): this target does not listen for
  /// them but lists them, in the given state, in REPORT TARGET PORT GROUPS, each with one target
  /// port whose relative target port identifier is the tag (as the peer's own portal group). A tag
  /// that a listen address also uses is a configuration error (make_port_groups).
  std::map<std::uint16_t, AluaState> alua_peers;
  /// ALUA failover (target/README.md "ALUA failover"): the file every gateway of these logical
  /// units locks (OFD locks, created if missing; may be the backing file itself). The holder's
  /// portal groups are active/optimized, every other gateway's standby; the lock moves when its
  /// holder dies or hands over (SET TARGET PORT GROUPS). The states of `alua_peers` are then
  /// only where they start; `alua_states` must be empty.
  std::optional<std::filesystem::path> alua_lock;
  std::vector<LunSource> luns;                         ///< LUNs of target `iqn`, lun0, lun1, … in order
  /// Each subdirectory is a target "<iqn>:<name>"; each regular file or block device in it a LUN,
  /// sorted by name (lun0, lun1, …). Symlinks are never followed and folder names must make valid
  /// iSCSI names (rules in target/src/export_dir.hpp and target/README.md).
  std::optional<std::filesystem::path> export_dir;
  bool read_only = false;
  std::uint32_t block_size_bytes = 512;  ///< 512 or 4096
  /// Pace of sanitize operations on every LUN, bytes per second; 0 = unpaced
  /// (LogicalUnitOptions::sanitize_bytes_per_second; --sanitize-rate).
  std::uint64_t sanitize_bytes_per_second = 0;
  /// Ceph client configuration for rbd: LUNs: the cluster's ceph.conf and the client id whose
  /// key the keyring it names holds (client.<id>).
  std::filesystem::path ceph_conf = "/etc/ceph/ceph.conf";
  std::string ceph_id = "admin";
  /// Every image of this RADOS pool is a target "<iqn>:<image>" with the image as LUN 0 (names
  /// that do not make valid iSCSI names are skipped with a warning, as with export_dir). The pool
  /// is listed again on SIGHUP and every rbd_rescan_interval: new images become targets, targets
  /// of images no longer listed are dropped (sessions already logged in keep them).
  std::optional<std::string> export_rbd;
  std::chrono::seconds rbd_rescan_interval{30};  ///< 0 = only on SIGHUP
  unsigned threads = 1;                  ///< I/O threads, each with its own io_context
  // Negotiation (RFC 7143 §13): what the target offers or accepts. Bytes unless noted.
  std::uint32_t max_recv_data_segment_length = 262144;
  std::uint32_t first_burst_length = 262144;
  std::uint32_t max_burst_length = 4u << 20;
  std::uint32_t max_outstanding_r2t = 8;  ///< count
  std::uint32_t cmd_window_depth = 128;   ///< commands outstanding per session
  /// Targets from the configuration file, served besides `luns`/`export_dir` ones.
  std::vector<TargetDefinition> targets;
  /// Tenants ([[tenants]] in the TOML file): each has its own portals and serves only the targets
  /// that name it. Quick-mode, --export-dir and --export-rbd targets belong to no tenant.
  std::vector<TenantDefinition> tenants;
  /// ACL and authentication of the quick-mode targets (`luns`, `export_dir`).
  std::vector<std::string> allowed_initiators;
  AuthConfig auth;
  /// Authentication of discovery sessions (SessionType=Discovery).
  AuthConfig discovery_auth;
  /// Failed-login throttling per source address ([login_throttle] in the TOML file).
  LoginThrottleOptions login_throttle;
  /// Also serve iSER (RFC 7145) on every listen address (an RDMA CM listener on the same address
  /// and port) when iserkit was built with iSER and the host has an RDMA device.
  bool iser = true;
  /// Bounds on what peers can make the target hold (timeouts, connection caps, payload budgets).
  ConnectionLimits limits;
  /// Unix socket answering status queries with JSON (--status-socket, `status_socket` in the file).
  std::optional<std::string> status_socket;
  /// HOST:PORT of the Prometheus endpoint (--metrics, `metrics` in the file).
  std::optional<std::string> metrics;
};

/// An error in the configuration file: where and what, never a secret's value.
struct ConfigError {
  std::string message;  ///< "FILE:LINE:COLUMN: what" or "FILE: what"
};

/// Parses a TOML configuration (toml++) into `base` (the values of the quick flags, which the
/// file extends: its targets are added, its listen addresses appended, its scalar settings
/// override). `source` names the text in error messages. The format is documented in
/// target/README.md. Relative `secret_file` and LUN paths are taken from `base_dir`.
/// Errors: a ConfigError for a syntax error, an unknown key, a wrong type, a bad size/address, a
/// target without LUNs or name, a duplicate target, a tenant without name or portals, a duplicate
/// tenant, a target naming an undefined tenant, a credential without user or secret, a secret
/// longer than 255 bytes, or the same secret used for an initiator and a target
/// (RFC 7143 §12.1.3: a secret MUST NOT serve both directions).
tl::expected<TargetConfig, ConfigError> parse_config_toml(std::string_view text, std::string_view source,
                                                          TargetConfig base = {},
                                                          const std::filesystem::path& base_dir = ".");
/// Reads `path` and parses it with parse_config_toml() (relative paths resolved from its folder).
tl::expected<TargetConfig, ConfigError> load_config_file(const std::filesystem::path& path, TargetConfig base = {});

/// Reads a secret from a file: its first line without the line end, of which at most
/// chap_max_secret_bytes + 2 bytes are read (so /dev/zero or a huge file cannot exhaust memory; a
/// longer line comes back longer than a secret may be). Errors: ConfigError for an unreadable or
/// empty file. A file readable by group or others draws a warning (`warnings`).
tl::expected<std::string, ConfigError> read_secret_file(const std::filesystem::path& path,
                                                        std::vector<std::string>* warnings = nullptr);

/// Warnings about a configuration that works but is weak: secrets shorter than 12 bytes
/// (RFC 7143 §12.1.3: 96 bits without IPsec), the same secret shared by several users. Names
/// users, never secrets.
std::vector<std::string> config_warnings(const TargetConfig& config);

/// The ALUA target port groups a target reports (SPC-5 §5.16, implicit ALUA): one per portal group
/// of `listen` (id = relative target port = tag, in `alua_states`' state, default
/// active/optimized), then one per `alua_peers` entry (a peer gateway's group). Ordered by tag.
/// Errors: errc::invalid_argument (after logging why) for an `alua_states` tag that no listen
/// address uses, or an `alua_peers` tag that a listen address uses.
Result<std::vector<TargetPortGroup>> make_port_groups(const std::vector<ListenAddress>& listen,
                                                      const std::map<std::uint16_t, AluaState>& alua_states,
                                                      const std::map<std::uint16_t, AluaState>& alua_peers);

}  // namespace iserkit::target
