// IserConnection: the state of one iSER RDMA connection (either role) behind IserDatamover —
// its CM id and event channel, CQ and completion channel, QP, registered receive and send
// descriptors, waiters and the unexpected-PDU credits (RFC 7145 §7, §8). Private to
// common/src/datamover; see iser_datamover.cpp for the thread model.
#pragma once

#include <array>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "iser_verbs.hpp"
#include "local_invalidates.hpp"
#include "iserkit/common/asio.hpp"
#include "iserkit/common/completion.hpp"
#include "iserkit/datamover/iser_datamover.hpp"
#include "iserkit/iser/credits.hpp"
#include "iserkit/iser/stag_table.hpp"

namespace iserkit::datamover::rdma {

std::error_code errno_error(int e);
std::string format_address(const sockaddr* sa);
bool set_nonblocking(int fd) noexcept;
const char* event_name(rdma_cm_event_type t) noexcept;

/// Is the RDMA port under `id` (its `verbs` and `port_num`, set once the address is resolved)
/// ACTIVE? True when it cannot be told (no device yet, the query fails).
///
/// Why it matters: a connection-manager MAD (CM REQ, DREQ) sent while the port is down can wedge
/// the device's connection manager for good. Seen with Soft-RoCE on Debian 12's Linux 6.1: one
/// rdma_connect() while the netdev under rdma_rxe was down, and no rdma_cm connection (rping
/// included) could be made on that device after it came back up (tests/lab scenario iser-faults).
bool port_active(rdma_cm_id* id) noexcept;

/// Hands a connected cm_id whose Disconnect Request could not be sent (its port was down) to a
/// process-wide list instead of destroying it, since rdma_destroy_id() would send that DREQ now;
/// `channel` is its event channel, which must outlive it. reap_parked_ids() destroys the parked
/// ids whose port is ACTIVE again (their DREQ then goes out). Thread-safe.
void park_cm_id(CmId id, EventChannel channel) noexcept;
void reap_parked_ids() noexcept;

/// Bytes reserved in each send/receive slot for the AHS: TotalAHSLength ≤ 255 words
/// (RFC 7143 §11.2.1.5).
inline constexpr std::size_t ahs_room = 1024;

/// Bytes per RDMA Read/Write work request (a larger Put_Data/Get_Data is several).
inline constexpr std::uint32_t max_rdma_piece = 1u << 20;

/// Counts one ibv_post_send() that posted `work_requests` work requests (iser_post_counts()).
void count_post_send(std::size_t work_requests) noexcept;
/// Counts one SCSI Command PDU sent or received over iSER (iser_post_counts()).
void count_scsi_command() noexcept;

/// A CM event, copied out before it is acknowledged.
struct CmEvent {
  rdma_cm_event_type type{};
  int status = 0;
  rdma_cm_id* id = nullptr;
  std::vector<std::byte> private_data;
  std::uint8_t responder_resources = 0;
  std::uint8_t initiator_depth = 0;
};

/// One posted work request (SEND, or the pieces of one RDMA Read/Write) a coroutine waits for.
struct Op {
  Completion done;
  std::error_code ec;
  std::uint32_t remaining = 1;  ///< completions still to come
};

class IserConnection final : public StagOwner, public std::enable_shared_from_this<IserConnection> {
 public:
  IserConnection(asio::any_io_executor ex, bool initiator, IserOptions options);
  ~IserConnection();
  IserConnection(const IserConnection&) = delete;
  IserConnection& operator=(const IserConnection&) = delete;

  /// Creates this connection's CM event channel (non-blocking, watched by the executor).
  std::error_code open_channel();
  [[nodiscard]] rdma_event_channel* channel() const noexcept { return channel_.get(); }
  void adopt_id(rdma_cm_id* id) noexcept { id_.reset(id); }
  /// Device, completion channel, CQ, QP and the registered descriptors; posts every receive.
  std::error_code create_resources();
  /// Starts the completion and CM event loops (they keep `self` alive until shutdown()).
  void start(std::shared_ptr<IserConnection> self);
  void describe();
  void set_established() noexcept { established_ = true; }

  /// The next CM event on this connection's channel, or errc::timeout at `deadline`.
  Awaitable<Result<CmEvent>> next_cm_event(std::chrono::steady_clock::time_point deadline);

  Awaitable<std::error_code> send(PduOut pdu);
  /// Datamover::send_chain() (and send_batch(), whose PDUs are steps too): the steps as one chain
  /// of work requests in one ibv_post_send — RDMA Writes (1 MiB pieces), the Bind MWs of the
  /// commands' per-command STags, then SENDs, in the steps' order — in chunks of the send queue's
  /// depth, with no other send between them, when the steps need more. A Put_Data larger than
  /// the send queue is posted on its own (rdma()), in its place. Returns the first error; steps
  /// after a failed one are not done. With iser_chain_enabled() false, each Put_Data is an rdma()
  /// of its own and Bind MWs are posted before the chain, as before.
  Awaitable<std::error_code> send_chain(std::vector<ChainStep> steps);
  Awaitable<Result<PduIn>> receive(DataPlacement* placement);
  /// RDMA Write (`write`) of `local` to remote+offset, or RDMA Read into `local` from remote+offset.
  Awaitable<std::error_code> rdma(bool write, PeerBuffer remote, std::uint64_t offset, Buffer local);

  /// Fails the connection: the QP goes to the error state (pending work flushed, waiters woken).
  /// The Disconnect Request goes out now (rdma_disconnect) unless `hold_dreq` or the port is down;
  /// then it waits for the cm_id's destruction, parked until the port is up (park_cm_id()).
  /// `hold_dreq`: a work request of ours failed locally or ran out of retries, which is what a
  /// link going down looks like before the port reports it.
  void abort_connection(std::error_code ec, bool hold_dreq = false) noexcept;
  /// The RDMA device is being removed (RDMA_CM_EVENT_DEVICE_REMOVAL): fails the connection without
  /// a DREQ, completes every pending work request with connection_closed, and destroys the QP, CQ
  /// and completion channel, deregisters the descriptors (their memory stays) and destroys the
  /// cm_id, so the kernel's removal, which waits for user space to let go, can finish; then
  /// release_gone_devices(). Memory windows (per-command STags) are deallocated with the QP. The
  /// event channel stays (it is not the device's).
  void release_device() noexcept;
  /// abort_connection() plus: stop the event loops and complete whatever is still pending. Called once the
  /// datamover is destroyed.
  void shutdown() noexcept;

  void set_max_recv(std::uint32_t bytes) noexcept {
    max_recv_ = std::min<std::uint32_t>(bytes, options_.recv_data_segment_length);
  }
  void set_unexpected_limit(std::uint32_t pdus) noexcept { credits_.set_limit(pdus); }

  // ---- per-command STags (initiator; RFC 7145 §9.2) ----
  /// True when this initiator connection exposes each command's buffers through a memory window of
  /// its own (decided in create_resources() from IserOptions::stags and the device).
  [[nodiscard]] bool per_command_stags() const noexcept { return stags_.has_value(); }
  /// Send path, before a SCSI Command's SEND is posted: binds a window over each region of `task`
  /// (a Bind MW work request, ahead of the SEND on the same send queue) and makes its STag the one
  /// the iSER header carries; waits while every window is in use. Nothing to do without
  /// per-command STags or when `task` is bound already.
  /// Errors: errc::invalid_argument (a region outside the window pool), errc::connection_closed.
  /// With `chain`, the Bind MW work requests are appended to it instead of being posted (the
  /// caller posts them at the head of its chain, ahead of the SEND); a chain collected so far is
  /// posted first when a window must be waited for (its commands hold windows).
  Awaitable<std::error_code> bind_stags(const TaskData& task, std::vector<ibv_send_wr>* chain = nullptr);
  /// After an ibv_post_send() that carried Bind MWs collected by bind_stags() into a chain: each
  /// window's ibv_mw::rkey becomes the rkey it was bound with (rxe's provider reads it at post
  /// time to name the window, so it must not change before the post).
  void apply_window_rkeys() noexcept;
  /// StagOwner: the command ended; its window is invalidated (Local Invalidate) unless the peer
  /// already did (Send with Invalidate). Answered commands' invalidates wait for the pass while it
  /// is held (LocalInvalidates).
  void release_stag(std::uint32_t slot, bool answered) noexcept override;
  /// Datamover::set_send_pass(): initiator with chaining on (iser_chain_enabled()) only. receive()
  /// then holds `pass` while it returns PDUs that were already received (a burst), and the Local
  /// Invalidates of commands answered meanwhile ride in one chain (LocalInvalidates).
  void set_send_pass(SendPass* pass) noexcept;
  /// Datamover::end_burst(): releases the pass if this connection holds it (posted).
  void end_burst();
  /// Whether the peer and we agreed on Send with Invalidate (CM private data): the initiator then
  /// accepts its windows invalidated by the target; the target ends a command whose SCSI Command
  /// carried one STag with a SEND_WITH_INV of that STag on the SCSI Response.
  void set_send_with_invalidate(bool on) noexcept { send_with_invalidate_ = on; }
  [[nodiscard]] bool send_with_invalidate() const noexcept { return send_with_invalidate_; }
  /// Windows invalidated so far: by us (Local Invalidate) and by the peer (Send with Invalidate).
  [[nodiscard]] std::uint64_t local_invalidations() const noexcept { return local_invalidations_; }
  [[nodiscard]] std::uint64_t remote_invalidations() const noexcept { return remote_invalidations_; }
  [[nodiscard]] BufferPool& pool() const noexcept;
  [[nodiscard]] const IserOptions& options() const noexcept { return options_; }
  [[nodiscard]] const Device& device() const noexcept { return *device_; }
  [[nodiscard]] const std::string& peer() const noexcept { return peer_; }
  [[nodiscard]] const std::string& local() const noexcept { return local_; }
  [[nodiscard]] asio::any_io_executor executor() const { return ex_; }

 private:
  struct Ready {
    std::uint32_t slot;
    std::uint32_t length;
  };
  std::error_code post_receive(std::uint32_t slot) noexcept;
  Awaitable<void> poll_loop(std::shared_ptr<IserConnection> self);
  Awaitable<void> cm_loop(std::shared_ptr<IserConnection> self);
  void drain();
  void on_completion(const ibv_wc& wc);
  void on_window_completion(const ibv_wc& wc);
  /// Acts on a StagTable answer for `slot`: posts (or queues, `answered`: see LocalInvalidates) its
  /// Local Invalidate, or wakes a sender waiting for a window.
  void after_release(std::uint32_t slot, iser::StagTable::Release release, bool answered) noexcept;
  /// LocalInvalidates' post: the Local Invalidates of `slots` as one chain, now.
  void post_invalidates(std::span<const std::uint32_t> slots) noexcept;
  /// Puts the queued Local Invalidates at the head of `chain` (a chain about to be posted, in
  /// which nothing refers to them); returns how many.
  std::size_t take_invalidates(std::vector<ibv_send_wr>& chain);
  /// The signaled Local Invalidate work request of window `slot` (its current rkey; `next` null).
  [[nodiscard]] ibv_send_wr local_invalidate_wr(std::uint32_t slot) const noexcept;
  /// SEND, or SEND_WITH_INV for a target's SCSI Response whose command carried one STag.
  void set_send_opcode(ibv_send_wr& wr, const PduOut& pdu) noexcept;
  void note_command_stag(const PduIn& in);
  Awaitable<bool> acquire_sq(std::uint32_t entries);
  Awaitable<bool> acquire_credit();
  /// Takes `n` send slots and `sq_entries` send-queue entries once no batch holds the gate (unless
  /// this caller is the batch that holds it). False when the connection failed.
  Awaitable<bool> reserve_sends(std::uint32_t n, std::vector<std::uint32_t>& slots, bool gate_owner,
                                std::uint32_t sq_entries);
  void release_slots(std::vector<std::uint32_t>& slots) noexcept;
  /// Writes the iSER header, BHS, AHS and (when it is not registered memory) the data segment into
  /// send descriptor `slot` and fills `sge`; `spill` holds a registered copy of a data segment too
  /// long for the descriptor. Errors: errc::invalid_argument (AHS longer than the descriptor's room).
  std::error_code prepare_send(const PduOut& pdu, std::uint32_t slot, std::array<ibv_sge, 2>& sge, int& num_sge,
                               PooledBuffer& spill);
  struct SlotRelease {
    IserConnection& c;
    std::vector<std::uint32_t>& slots;
    ~SlotRelease() { c.release_slots(slots); }
  };
  std::optional<Buffer> lookup(ConstByteSpan bytes) const noexcept;
  static void wake(Completion*& waiter) noexcept;
  static void wake_one(std::deque<Completion*>& waiters) noexcept;

  asio::any_io_executor ex_;
  bool initiator_;
  IserOptions options_;
  EventChannel channel_;
  CmId id_;
  Device* device_ = nullptr;
  CompChannel comp_;
  Cq cq_;
  RegisteredRegion recv_region_;
  RegisteredRegion send_region_;
  std::size_t recv_slot_size_ = 0;
  std::size_t send_slot_size_ = 0;
  std::optional<asio::posix::stream_descriptor> cm_fd_;
  std::optional<asio::posix::stream_descriptor> comp_fd_;
  std::string peer_ = "?";
  std::string local_ = "?";
  std::uint32_t max_recv_ = 8192;
  bool established_ = false;
  bool disconnect_skipped_ = false;  // aborted while the port was down: no DREQ was sent
  bool failed_ = false;
  bool stopped_ = false;
  bool released_ = false;  // release_device() ran: no verbs object left
  std::error_code error_;

  std::deque<Ready> ready_;            // received PDUs not yet handed out
  std::optional<std::uint32_t> repost_;  // the slot of the PDU handed out last
  Completion* receive_waiter_ = nullptr;
  std::vector<std::uint32_t> free_send_slots_;
  std::uint32_t sq_in_use_ = 0;
  std::deque<Completion*> sq_waiters_;
  std::deque<Completion*> slot_waiters_;
  std::deque<Completion*> credit_waiters_;
  bool batch_posting_ = false;             // a batch longer than the send queue is between chunks
  std::deque<Completion*> gate_waiters_;   // sends waiting for that batch to finish
  std::deque<Completion*> window_waiters_;  // sends waiting for a free memory window
  std::unordered_set<Op*> pending_;
  iser::UnexpectedPduCredits credits_;
  // per-command STags: windows_[slot] is the window StagTable slot `slot` describes
  std::vector<ibv_mw*> windows_;
  std::optional<iser::StagTable> stags_;
  std::uint32_t window_wrs_ = 0;  // send-queue entries reserved for Bind MW / Local Invalidate
  // Bind MWs collected into a chain and not yet posted: their windows' new rkeys (slot, rkey)
  std::vector<std::pair<std::uint32_t, std::uint32_t>> rkeys_after_post_;
  // Local Invalidates of answered commands queued during a held send pass (initiator)
  LocalInvalidates invalidates_{[this](std::span<const std::uint32_t> slots) { post_invalidates(slots); }};
  std::vector<std::uint32_t> invalidate_slots_;  // take_invalidates()' scratch (capacity kept)
  std::vector<ibv_send_wr> invalidate_wrs_;      // post_invalidates()' chain (capacity kept)
  SendPass* pass_ = nullptr;  // set_send_pass(): receive() holds it during a burst
  bool holding_ = false;      // receive() holds pass_
  bool send_with_invalidate_ = false;
  std::uint64_t local_invalidations_ = 0;
  std::uint64_t remote_invalidations_ = 0;
  // target: ITT → the one STag of a command in progress, invalidated by its SCSI Response (bounded)
  std::unordered_map<std::uint32_t, std::uint32_t> invalidate_on_response_;
};

}  // namespace iserkit::datamover::rdma
