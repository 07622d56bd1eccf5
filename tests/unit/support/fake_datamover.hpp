// FakeDatamover: a real datamover::Datamover with no wire. Tests script what the "peer" sends
// (push(): inbound PDUs, placed through the caller's DataPlacement exactly as TcpDatamover places
// them; push_error(): the connection drops) and read what was sent (sent(), decoded). A responder
// callback sees every sent PDU and may push answers, so a test can play the target (or, later,
// the initiator in front of the target's engine). Single-threaded, like every Datamover.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "iserkit/common/completion.hpp"
#include "iserkit/datamover/datamover.hpp"
#include "iserkit/iscsi/pdu.hpp"

namespace iserkit::test {

/// One PDU the code under test sent, decoded.
struct CapturedPdu {
  iscsi::Bhs bhs{};
  iscsi::PduHeader header;
  std::vector<std::byte> data;  ///< a copy of the data segment
  /// SCSI Commands: the STag regions of the PduOut's TaskData (what an iSER header would carry).
  std::optional<Buffer> read_region;
  std::optional<Buffer> write_region;
  template <class T>
  [[nodiscard]] const T* as() const noexcept {
    return std::get_if<T>(&header);
  }
};

class FakeDatamover final : public datamover::Datamover {
 public:
  using Responder = std::function<void(FakeDatamover&, const CapturedPdu&)>;

  explicit FakeDatamover(asio::any_io_executor ex, datamover::Capabilities caps = {}) : ex_(std::move(ex)), caps_(caps) {}

  /// Queues a PDU for receive(); `pdu_error` arrives as PduIn::pdu_error (e.g. a data digest error).
  void push(const iscsi::PduHeader& header, std::vector<std::byte> data = {}, std::error_code pdu_error = {});
  /// Queues a PDU for receive() as the iSER datamover hands over a SCSI Command: with the
  /// initiator's read and/or write buffer (PduIn::peer_read/peer_write).
  void push_with_peer_buffers(const iscsi::PduHeader& header, std::optional<datamover::PeerBuffer> read,
                              std::optional<datamover::PeerBuffer> write = std::nullopt);
  /// One step of a send_chain() call as the fake saw it: a Put_Data (to `key`, `bytes` long) or a PDU.
  struct ChainEntry {
    bool put = false;
    std::uint32_t key = 0;    ///< Put_Data: the destination's key (the test's choice, e.g. the ITT)
    std::size_t bytes = 0;    ///< Put_Data: the source's length
    std::size_t pdu = 0;      ///< PDU: its index in sent()
  };
  /// Every send_chain() call, its steps in order.
  [[nodiscard]] const std::vector<std::vector<ChainEntry>>& chains() const noexcept { return chains_; }
  /// put_data() calls made on their own (outside send_chain()).
  [[nodiscard]] std::size_t put_data_calls() const noexcept { return put_data_calls_; }
  /// The next receive() fails with `ec` (connection loss) and the connection is closed.
  void push_error(std::error_code ec);
  /// Called for every sent PDU, after it was captured.
  void respond_with(Responder r) { responder_ = std::move(r); }
  /// Everything sent so far, in order.
  [[nodiscard]] const std::vector<CapturedPdu>& sent() const noexcept { return sent_; }
  [[nodiscard]] bool closed() const noexcept { return closed_; }
  /// Each abort() (a reset, as opposed to close()) adds one to `*counter` (which must outlive this).
  void count_aborts_in(int* counter) noexcept { abort_counter_ = counter; }
  /// buffer_pool() answers `pool` (e.g. a registered-looking pool to play an RDMA transport).
  void use_pool(BufferPool& pool) noexcept { pool_ = &pool; }
  /// transport() answers `t` (default TCP), e.g. iSER with use_pool() and Capabilities::rdma_data.
  void play_transport(datamover::Transport t) noexcept { transport_ = t; }
  /// While on, each send() waits "on the wire" until release_sends() (or close(), which fails it
  /// unread, as a closed socket does): its data segment is read only when it is released, the way
  /// a socket write reads it when the socket takes it — so a test can end a task (timeout, lost
  /// connection, close, task management) while one of its PDUs is still being sent.
  void hold_sends(bool on) noexcept { hold_ = on; }
  /// While on, try_send_now() puts every PDU on the wire at once and answers SendNow::sent, as
  /// an idle socket does (default off: SendNow::refused, so the caller uses send_batch()). Not
  /// with hold_sends() or bind_stags_with(), nor after close(): refused then.
  void take_sends_at_once(bool on) noexcept { at_once_ = on; }
  /// try_send_now() calls that answered SendNow::sent.
  [[nodiscard]] std::size_t sent_at_once() const noexcept { return sent_at_once_; }
  /// Puts up to `max` waiting PDUs on the wire, in order (each captured, then shown to the
  /// responder); all of them by default.
  void release_sends(std::size_t max = static_cast<std::size_t>(-1));
  /// Plays the iSER datamover's per-command STags: each SCSI Command's TaskData gets a fresh STag
  /// per region when it is sent (TaskData::bind_stag()), leased from `owner` (slots 1, 2, …).
  void bind_stags_with(std::shared_ptr<datamover::StagOwner> owner) noexcept { stag_owner_ = std::move(owner); }
  /// PDUs waiting in send().
  [[nodiscard]] std::size_t sends_waiting() const noexcept { return waiting_.size(); }
  /// True when a waiting PDU's data segment lies (partly) inside `bytes`.
  [[nodiscard]] bool sending_from(std::span<const std::byte> bytes) const noexcept;

  // datamover::Datamover
  Awaitable<std::error_code> send(datamover::PduOut pdu) override;
  SendNow try_send_now(std::vector<datamover::PduOut>& pdus) override;
  /// Records the chain (chains()), puts its PDUs on the wire at once and completes, or with
  /// hold_sends() waits for release_sends() as a whole.
  Awaitable<std::error_code> send_chain(std::vector<datamover::ChainStep> steps) override;
  /// Counted (put_data_calls()); the data itself goes nowhere.
  Awaitable<std::error_code> put_data(datamover::PeerBuffer dest, std::uint64_t offset, Buffer source) override;
  Awaitable<Result<datamover::PduIn>> receive(datamover::DataPlacement* placement) override;
  void set_digests(bool, bool) noexcept override {}
  void set_max_recv_data_segment_length(std::uint32_t) noexcept override {}
  void close() noexcept override;
  void abort() noexcept override {
    if (abort_counter_ != nullptr) ++*abort_counter_;
    close();
  }
  [[nodiscard]] std::string peer() const override { return "fake-target:3260"; }
  [[nodiscard]] std::string local() const override { return "fake-initiator:0"; }
  [[nodiscard]] datamover::Transport transport() const noexcept override { return transport_; }
  [[nodiscard]] asio::any_io_executor executor() const override { return ex_; }
  [[nodiscard]] datamover::Capabilities capabilities() const noexcept override { return caps_; }
  [[nodiscard]] BufferPool& buffer_pool() noexcept override {
    return pool_ != nullptr ? *pool_ : Datamover::buffer_pool();
  }
  /// With Capabilities::rdma_data, what the iSER datamover does (TaskData::registered() over
  /// buffer_pool()); otherwise the TCP default (TaskData::direct()).
  Result<datamover::TaskData> prepare_task_data(std::span<std::byte> data_in,
                                                std::span<const std::byte> data_out) override {
    if (caps_.rdma_data) return datamover::TaskData::registered(buffer_pool(), data_in, data_out);
    return Datamover::prepare_task_data(data_in, data_out);
  }

 private:
  struct Inbound {
    iscsi::Bhs bhs{};
    std::vector<std::byte> data;
    std::error_code pdu_error;
    std::error_code fatal;
    std::optional<datamover::PeerBuffer> peer_read;
    std::optional<datamover::PeerBuffer> peer_write;
  };
  std::vector<std::vector<ChainEntry>> chains_;
  std::size_t put_data_calls_ = 0;
  std::deque<Completion*> held_chains_;
  asio::any_io_executor ex_;
  datamover::Capabilities caps_;
  datamover::Transport transport_ = datamover::Transport::tcp;
  std::deque<Inbound> inbound_;
  Event inbound_ready_;
  std::vector<std::byte> scratch_;
  std::vector<CapturedPdu> sent_;
  Responder responder_;
  struct Waiting {
    datamover::PduOut* pdu;
    Completion* done;
  };
  void put_on_wire(const datamover::PduOut& pdu);
  bool hold_ = false;
  bool at_once_ = false;
  std::size_t sent_at_once_ = 0;
  std::deque<Waiting> waiting_;
  bool closed_ = false;
  int* abort_counter_ = nullptr;
  std::error_code close_error_;
  BufferPool* pool_ = nullptr;
  std::shared_ptr<datamover::StagOwner> stag_owner_;
  std::uint32_t next_stag_slot_ = 1;
};

}  // namespace iserkit::test
