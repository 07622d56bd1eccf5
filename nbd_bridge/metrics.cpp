// BridgeMetrics and the metering Export decorator (metrics.hpp).
#include "nbd_bridge/metrics.hpp"

#include <array>
#include <chrono>
#include <map>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "iserkit/common/copy_counter.hpp"
#include "iserkit/metrics/daemon_metrics.hpp"

namespace iserkit::nbd {

namespace {

enum Kind : std::size_t { read_kind, write_kind, flush_kind, trim_kind, zero_kind, kind_count };
constexpr std::array<const char*, kind_count> kind_names = {"read", "write", "flush", "trim", "write_zeroes"};

}  // namespace

struct BridgeMetrics::Impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<metrics::Endpoint> endpoint;
  std::array<prometheus::Counter*, kind_count> requests{};
  std::array<prometheus::Counter*, kind_count> bytes{};
  std::array<prometheus::Counter*, kind_count> errors{};
  std::array<prometheus::Histogram*, kind_count> latency{};
  // Session counters (update_session) and the values they had at the last update.
  enum Session : std::size_t { lost, attempts, recovered, reissued, copied, unit_attentions, session_count };
  std::array<prometheus::Counter*, session_count> session{};
  std::array<std::uint64_t, session_count> last{};
  prometheus::Gauge* connected = nullptr;
  prometheus::Family<prometheus::Gauge>* export_info = nullptr;
  // update_reconnect()
  prometheus::Gauge* failed = nullptr;
  prometheus::Gauge* next_attempt = nullptr;
  prometheus::Counter* gave_up = nullptr;
  std::uint64_t last_gave_up = 0;
  // Multipath (update_paths): one child per path and counter, made at the first update.
  enum PathCounter : std::size_t { p_commands, p_in, p_out, p_failures, p_downs, p_reinstatements, path_counter_count };
  std::array<prometheus::Family<prometheus::Counter>*, path_counter_count> path_families{};
  prometheus::Family<prometheus::Gauge>* path_up_family = nullptr;
  struct PathMetrics {
    std::array<prometheus::Counter*, path_counter_count> counters{};
    std::array<std::uint64_t, path_counter_count> last{};
    prometheus::Gauge* up = nullptr;
  };
  std::vector<PathMetrics> paths;
  prometheus::Counter* failovers = nullptr;
  std::uint64_t last_failovers = 0;
  prometheus::Gauge* buffered = nullptr;
  prometheus::Gauge* buffer_limit = nullptr;

  Impl() {
    auto& req = prometheus::BuildCounter().Name("iserkit_nbd_requests_total").Help("NBD requests served, by kind").Register(*registry);
    auto& byt = prometheus::BuildCounter()
                    .Name("iserkit_nbd_request_bytes_total")
                    .Help("bytes the NBD requests covered, by kind (read/write: payload; trim/write_zeroes: range)")
                    .Register(*registry);
    auto& err = prometheus::BuildCounter()
                    .Name("iserkit_nbd_request_errors_total")
                    .Help("NBD requests answered with an error, by kind")
                    .Register(*registry);
    auto& lat = prometheus::BuildHistogram()
                    .Name("iserkit_nbd_request_duration_seconds")
                    .Help("time from the request reaching the export to its answer, by kind")
                    .Register(*registry);
    const prometheus::Histogram::BucketBoundaries buckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                             0.025,  0.05,    0.1,    0.25,  0.5,    1,     2.5, 10};
    for (std::size_t k = 0; k < kind_count; ++k) {
      requests[k] = &req.Add({{"kind", kind_names[k]}});
      bytes[k] = &byt.Add({{"kind", kind_names[k]}});
      errors[k] = &err.Add({{"kind", kind_names[k]}});
      latency[k] = &lat.Add({{"kind", kind_names[k]}}, buckets);
    }
    auto counter = [&](const char* name, const char* help) {
      return &prometheus::BuildCounter().Name(name).Help(help).Register(*registry).Add({});
    };
    session[lost] = counter("iserkit_nbd_connections_lost_total", "iSCSI connections lost while the session was open");
    session[attempts] = counter("iserkit_nbd_reconnect_attempts_total", "logins tried to replace lost connections");
    session[recovered] = counter("iserkit_nbd_recoveries_total", "lost connections replaced (session reinstated)");
    session[reissued] = counter("iserkit_nbd_commands_reissued_total", "SCSI commands sent again on a new connection");
    session[copied] = counter("iserkit_nbd_copied_payload_bytes_total", "payload bytes copied in user space (0 over TCP)");
    session[unit_attentions] =
        counter("iserkit_nbd_unit_attentions_total",
                "CHECK CONDITION with UNIT ATTENTION received (retried or not): the target's news, not request errors");
    export_info = &prometheus::BuildGauge()
                       .Name("iserkit_nbd_export_info")
                       .Help("always 1; labels: the target IQN and LUN the bridge serves (from its command line)")
                       .Register(*registry);
    auto path_family = [&](const char* name, const char* help) {
      return &prometheus::BuildCounter().Name(name).Help(help).Register(*registry);
    };
    path_families[p_commands] = path_family("iserkit_nbd_path_commands_total", "SCSI commands sent on a multipath path");
    path_families[p_in] = path_family("iserkit_nbd_path_data_in_bytes_total", "read bytes of commands completed on a path");
    path_families[p_out] = path_family("iserkit_nbd_path_data_out_bytes_total", "write bytes of commands completed on a path");
    path_families[p_failures] = path_family("iserkit_nbd_path_errors_total", "commands that failed on a path with a path error");
    path_families[p_downs] = path_family("iserkit_nbd_path_downs_total", "times a path went down");
    path_families[p_reinstatements] = path_family("iserkit_nbd_path_reinstatements_total", "times a path came back");
    path_up_family = &prometheus::BuildGauge()
                          .Name("iserkit_nbd_path_up")
                          .Help("1 while a multipath path is up (logged in, taking commands), else 0")
                          .Register(*registry);
    failovers = counter("iserkit_nbd_failovers_total", "commands sent again on another path after a path error");
    auto gauge = [&](const char* name, const char* help) {
      return &prometheus::BuildGauge().Name(name).Help(help).Register(*registry).Add({});
    };
    buffered = gauge("iserkit_nbd_buffer_budget_used_bytes", "NBD payload bytes held now by all client connections");
    buffer_limit = gauge("iserkit_nbd_buffer_budget_limit_bytes", "NBD payload bytes one client connection may hold");
    failed = gauge("iserkit_nbd_gave_up",
                   "1 while the replacement timeout has passed: requests fail with EIO, logins go on in the background");
    next_attempt = gauge("iserkit_nbd_reconnect_next_attempt_seconds",
                         "seconds until the next background login (0: logged in, or a login under way)");
    gave_up = counter("iserkit_nbd_gave_up_total", "times the replacement timeout passed without a new connection");
    connected = &prometheus::BuildGauge()
                     .Name("iserkit_nbd_connected")
                     .Help("1 while the bridge has a usable session, else 0")
                     .Register(*registry)
                     .Add({});
  }

  void record(Kind k, std::uint64_t length_bytes, std::chrono::steady_clock::time_point start, std::error_code ec) {
    requests[k]->Increment();
    if (ec) {
      errors[k]->Increment();
    } else {
      bytes[k]->Increment(static_cast<double>(length_bytes));
    }
    latency[k]->Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
};

namespace {

class MeteredExport final : public Export {
 public:
  MeteredExport(std::shared_ptr<Export> inner, BridgeMetrics::Impl& m) : inner_(std::move(inner)), m_(m) {}
  [[nodiscard]] ExportInfo info() const override { return inner_->info(); }
  [[nodiscard]] BufferPool* buffer_pool() const noexcept override { return inner_->buffer_pool(); }
  Awaitable<std::error_code> read(std::uint64_t offset_bytes, ByteSpan dest) override {
    const auto start = std::chrono::steady_clock::now();
    const auto ec = co_await inner_->read(offset_bytes, dest);
    m_.record(read_kind, dest.size(), start, ec);
    co_return ec;
  }
  Awaitable<std::error_code> write(std::uint64_t offset_bytes, ConstByteSpan src, bool fua) override {
    const auto start = std::chrono::steady_clock::now();
    const auto ec = co_await inner_->write(offset_bytes, src, fua);
    m_.record(write_kind, src.size(), start, ec);
    co_return ec;
  }
  Awaitable<std::error_code> flush() override {
    const auto start = std::chrono::steady_clock::now();
    const auto ec = co_await inner_->flush();
    m_.record(flush_kind, 0, start, ec);
    co_return ec;
  }
  Awaitable<std::error_code> trim(std::uint64_t offset_bytes, std::uint64_t length_bytes, bool fua) override {
    const auto start = std::chrono::steady_clock::now();
    const auto ec = co_await inner_->trim(offset_bytes, length_bytes, fua);
    m_.record(trim_kind, length_bytes, start, ec);
    co_return ec;
  }
  Awaitable<std::error_code> write_zeroes(std::uint64_t offset_bytes, std::uint64_t length_bytes, bool may_trim,
                                          bool fua) override {
    const auto start = std::chrono::steady_clock::now();
    const auto ec = co_await inner_->write_zeroes(offset_bytes, length_bytes, may_trim, fua);
    m_.record(zero_kind, length_bytes, start, ec);
    co_return ec;
  }
  // Not counted: a map query moves no payload. Forwarded, or the decorator would report every
  // range as data and clients such as nbdcopy would read the LUN's holes.
  Awaitable<std::error_code> block_status(std::uint64_t offset_bytes, std::uint32_t length_bytes, bool one,
                                          std::vector<BlockExtent>& extents) override {
    co_return co_await inner_->block_status(offset_bytes, length_bytes, one, extents);
  }

 private:
  std::shared_ptr<Export> inner_;
  BridgeMetrics::Impl& m_;
};

}  // namespace

BridgeMetrics::BridgeMetrics(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BridgeMetrics::~BridgeMetrics() = default;

Result<std::unique_ptr<BridgeMetrics>> BridgeMetrics::open(const std::string& host_port, int max_connections) {
  auto endpoint = metrics::Endpoint::open(host_port, max_connections);
  if (!endpoint) return fail(endpoint.error());
  auto impl = std::make_unique<Impl>();
  impl->endpoint = std::move(*endpoint);
  impl->endpoint->add(impl->registry);
  return std::unique_ptr<BridgeMetrics>(new BridgeMetrics(std::move(impl)));
}

int BridgeMetrics::port() const { return impl_->endpoint->port(); }

void BridgeMetrics::update_session(const initiator::SessionStats& totals, std::uint64_t copied_payload_bytes,
                                   bool connected) {
  const std::array<std::uint64_t, Impl::session_count> now = {totals.connections_lost, totals.reconnect_attempts,
                                                              totals.recoveries,       totals.commands_reissued,
                                                              copied_payload_bytes,    totals.unit_attentions};
  for (std::size_t i = 0; i < now.size(); ++i) {
    if (now[i] > impl_->last[i]) impl_->session[i]->Increment(static_cast<double>(now[i] - impl_->last[i]));
    impl_->last[i] = now[i];
  }
  impl_->connected->Set(connected ? 1 : 0);
}

void BridgeMetrics::describe_export(const std::string& target, std::uint32_t lun) {
  impl_->export_info->Add({{"target", target}, {"lun", std::to_string(lun)}}).Set(1);
}

void BridgeMetrics::update_reconnect(bool failed, std::uint64_t gave_up_total, double next_attempt_seconds) {
  auto& m = *impl_;
  m.failed->Set(failed ? 1 : 0);
  m.next_attempt->Set(next_attempt_seconds);
  if (gave_up_total > m.last_gave_up) m.gave_up->Increment(static_cast<double>(gave_up_total - m.last_gave_up));
  m.last_gave_up = gave_up_total;
}

void BridgeMetrics::update_paths(const std::vector<initiator::PathStatus>& paths, std::uint64_t failovers) {
  auto& m = *impl_;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    if (i == m.paths.size()) {
      Impl::PathMetrics pm;
      const std::map<std::string, std::string> labels = {{"path", std::to_string(i)}, {"url", paths[i].url}};
      for (std::size_t c = 0; c < Impl::path_counter_count; ++c) pm.counters[c] = &m.path_families[c]->Add(labels);
      pm.up = &m.path_up_family->Add(labels);
      m.paths.push_back(pm);
    }
    if (i >= m.paths.size()) break;
    auto& pm = m.paths[i];
    const auto& p = paths[i];
    const std::array<std::uint64_t, Impl::path_counter_count> now = {p.commands, p.data_in_bytes, p.data_out_bytes,
                                                                     p.failures, p.downs, p.reinstatements};
    for (std::size_t c = 0; c < now.size(); ++c) {
      if (now[c] > pm.last[c]) pm.counters[c]->Increment(static_cast<double>(now[c] - pm.last[c]));
      pm.last[c] = now[c];
    }
    pm.up->Set(p.state == initiator::PathStatus::State::up ? 1 : 0);
  }
  if (failovers > m.last_failovers) m.failovers->Increment(static_cast<double>(failovers - m.last_failovers));
  m.last_failovers = failovers;
}

void BridgeMetrics::update_buffers(std::uint64_t used_bytes, std::uint64_t limit_bytes_per_connection) {
  impl_->buffered->Set(static_cast<double>(used_bytes));
  impl_->buffer_limit->Set(static_cast<double>(limit_bytes_per_connection));
}

std::shared_ptr<Export> BridgeMetrics::meter(std::shared_ptr<Export> inner) {
  return std::make_shared<MeteredExport>(std::move(inner), *impl_);
}

}  // namespace iserkit::nbd
