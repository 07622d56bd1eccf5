// The target's status document and Prometheus collector (target_status.hpp).
#include "target_status.hpp"

#include <limits>
#include <map>

#include <nlohmann/json.hpp>
#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include "backend/uring_socket.hpp"
#include "iserkit/common/copy_counter.hpp"
#include "iserkit/metrics/daemon_metrics.hpp"

namespace iserkit::target {

namespace {

using Json = nlohmann::ordered_json;

Json budget_json(const SharedPayloadBudget& b) { return {{"used_bytes", b.used()}, {"limit_bytes", b.limit()}}; }

Json by_kind(const std::array<std::atomic<std::uint64_t>, op_kind_count>& a) {
  Json j = Json::object();
  for (std::size_t k = 0; k < op_kind_count; ++k) j[op_kind_names[k]] = a[k].load(std::memory_order_relaxed);
  return j;
}

}  // namespace

std::string target_status_json(const StatusSources& sources) {
  Json doc = {{"program", "iserkit-target"}, {"since", sources.since}, {"portals", sources.portals}};
  doc["payload_budget"] = budget_json(*sources.global_budget);
  Json tenants = Json::array();
  for (const auto& t : sources.tenants)
    tenants.push_back({{"name", t.name},
                       {"netns", t.netns},
                       {"sessions", t.sessions->open()},
                       {"max_sessions", t.sessions->max()},
                       {"payload_budget", budget_json(*t.budget)}});
  doc["tenants"] = std::move(tenants);
  Json targets = Json::array();
  // The copy manager's bytes by path (target/README.md "EXTENDED COPY"), per LU and in all.
  std::uint64_t copy_in_kernel = 0;
  std::uint64_t copy_user_space = 0;
  for (const auto& node : *sources.registry->nodes()) {
    Json luns = Json::array();
    for (const auto& lun : node->dispatcher->luns()) {
      const LogicalUnit* unit = node->dispatcher->find(lun);
      if (unit == nullptr) continue;
      const auto& st = unit->stats();
      const std::uint64_t in_kernel = st.copy_bytes_in_kernel.load(std::memory_order_relaxed);
      const std::uint64_t user_space = st.copy_bytes_user_space.load(std::memory_order_relaxed);
      copy_in_kernel += in_kernel;
      copy_user_space += user_space;
      luns.push_back({{"lun", lun.index().value_or(0)},
                      {"block_size", unit->block_size_bytes()},
                      {"blocks", unit->block_count()},
                      {"copy_bytes", {{"in_kernel", in_kernel}, {"user_space", user_space}}}});
    }
    targets.push_back({{"name", node->name}, {"alias", node->alias}, {"tenant", node->tenant}, {"luns", std::move(luns)}});
  }
  doc["targets"] = std::move(targets);
  Json sessions = Json::array();
  std::uint64_t logging_in = 0;
  for (const auto& c : sources.connections()) {
    const auto id = c->snapshot();
    if (!id.logged_in) {
      ++logging_in;
      continue;
    }
    // MaxConnections=1: one connection per session.
    sessions.push_back({{"initiator", id.initiator},
                        {"isid", id.isid},
                        {"tsih", id.tsih},
                        {"type", id.discovery ? "discovery" : "normal"},
                        {"target", id.target},
                        {"tenant", c->tenant},
                        {"since", id.since},
                        {"connections", Json::array({Json{{"cid", id.cid},
                                                          {"peer", c->peer},
                                                          {"portal", c->portal},
                                                          {"transport", c->transport}}})},
                        {"commands", by_kind(c->commands)},
                        {"bytes", by_kind(c->bytes)},
                        {"errors", c->errors.load(std::memory_order_relaxed)},
                        {"unit_attentions", c->unit_attentions.load(std::memory_order_relaxed)},
                        {"payload_budget_bytes", c->payload_budget_bytes.load(std::memory_order_relaxed)}});
  }
  doc["sessions"] = std::move(sessions);
  doc["logging_in"] = logging_in;
  // ALUA (target/README.md "ALUA", "ALUA failover"): the states REPORT TARGET PORT GROUPS gives now.
  Json groups = Json::array();
  if (sources.port_groups)
    for (const auto& g : sources.port_groups->groups())
      groups.push_back({{"group", g.id}, {"state", std::string(scsi::to_string(g.state))}});
  doc["alua"] = {{"groups", std::move(groups)},
                 {"lock", sources.alua_lock.empty() ? Json(nullptr) : Json(sources.alua_lock)},
                 {"active", sources.alua_active ? Json(sources.alua_active()) : Json(nullptr)}};
  const auto& s = sources.registry->stats();
  // --socket-io and the kernel's io_uring socket features (issue 23 item 3).
  const auto& features = detail::socket_io_features();
  doc["socket_io"] = {{"requested", std::string(to_string(sources.socket_io))},
                      {"sends", std::string(detail::selected_socket_io(sources.socket_io))},
                      {"kernel",
                       {{"io_uring", features.ring},
                        {"sendmsg", features.sendmsg},
                        {"send", features.send},
                        {"send_zc", features.send_zc},
                        {"recv_multishot", features.recv_multishot},
                        {"buf_ring", features.buf_ring},
                        {"fast_poll", features.fast_poll},
                        {"error", features.error}}}};
  doc["totals"] = {{"logins", s.logins.load(std::memory_order_relaxed)},
                   {"commands", by_kind(s.commands)},
                   {"bytes", by_kind(s.bytes)},
                   {"unit_attentions", s.unit_attentions.load(std::memory_order_relaxed)},
                   {"copied_payload_bytes", copied_payload_bytes()},
                   {"spliced_data_in_bytes", s.spliced_data_in_bytes.load(std::memory_order_relaxed)},
                   {"copy_bytes", {{"in_kernel", copy_in_kernel}, {"user_space", copy_user_space}}}};
  return doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

// ---------------------------------------------------------------------------------------------
// Prometheus: one Collectable that reads the atomics at scrape time (no prometheus-cpp metric
// objects on the data path: their histograms take a lock per observation).
// ---------------------------------------------------------------------------------------------

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

ClientMetric counter(double v, std::vector<ClientMetric::Label> labels = {}) {
  ClientMetric m;
  m.label = std::move(labels);
  m.counter.value = v;
  return m;
}

ClientMetric gauge(double v, std::vector<ClientMetric::Label> labels = {}) {
  ClientMetric m;
  m.label = std::move(labels);
  m.gauge.value = v;
  return m;
}

constexpr std::array<const char*, 16> sense_key_names = {
    "no_sense",       "recovered_error", "not_ready",       "medium_error", "hardware_error", "illegal_request",
    "unit_attention", "data_protect",    "blank_check",     "vendor_specific", "copy_aborted", "aborted_command",
    "reserved_0c",    "volume_overflow", "miscompare",      "completed"};

const char* reject_name(std::size_t code) {
  switch (code) {
    case 0x02: return "data_digest_error";
    case 0x03: return "snack_reject";
    case 0x04: return "protocol_error";
    case 0x05: return "command_not_supported";
    case 0x06: return "immediate_command_reject";
    case 0x07: return "task_in_progress";
    case 0x08: return "invalid_data_ack";
    case 0x09: return "invalid_pdu_field";
    case 0x0a: return "long_operation_reject";
    case 0x0b: return "deprecated";
    case 0x0c: return "waiting_for_logout";
    default: return nullptr;
  }
}

constexpr std::array<const char*, 9> tmf_names = {nullptr,          "abort_task",        "abort_task_set",
                                                  "clear_aca",      "clear_task_set",    "logical_unit_reset",
                                                  "target_warm_reset", "target_cold_reset", "task_reassign"};

class Collector final : public prometheus::Collectable {
 public:
  explicit Collector(StatusSources sources) : sources_(std::move(sources)) {}

  std::vector<MetricFamily> Collect() const override {
    std::vector<MetricFamily> out;
    out.reserve(32);  // the references family() returns must survive the next family's push_back
    auto family = [&](const char* name, const char* help, MetricType type) -> MetricFamily& {
      out.push_back(MetricFamily{name, help, type, {}});
      return out.back();
    };
    const auto& s = sources_.registry->stats();
    auto load = [](const std::atomic<std::uint64_t>& a) { return static_cast<double>(a.load(std::memory_order_relaxed)); };
    {
      auto& f = family("iserkit_target_scsi_commands_total", "SCSI commands executed, by kind (read, write, other)",
                       MetricType::Counter);
      for (std::size_t k = 0; k < op_kind_count; ++k) f.metric.push_back(counter(load(s.commands[k]), {{"kind", op_kind_names[k]}}));
    }
    {
      auto& f = family("iserkit_target_scsi_bytes_total",
                       "payload bytes of SCSI commands that ended GOOD, by kind (read: Data-In, write: Data-Out)",
                       MetricType::Counter);
      for (std::size_t k = 0; k < op_kind_count; ++k) f.metric.push_back(counter(load(s.bytes[k]), {{"kind", op_kind_names[k]}}));
    }
    {
      auto& f = family("iserkit_target_scsi_command_duration_seconds",
                       "time from a command reaching the device server (its Data-Out received) to its outcome",
                       MetricType::Histogram);
      for (std::size_t k = 0; k < op_kind_count; ++k) {
        const auto& h = s.latency[k];
        ClientMetric m;
        m.label = {{"kind", op_kind_names[k]}};
        const auto buckets = h.buckets();
        std::uint64_t cumulative = 0;
        for (std::size_t i = 0; i < buckets.size(); ++i) {
          cumulative += buckets[i];
          m.histogram.bucket.push_back({cumulative, i < LatencyHistogram::bounds_seconds.size()
                                                        ? LatencyHistogram::bounds_seconds[i]
                                                        : std::numeric_limits<double>::infinity()});
        }
        m.histogram.sample_count = cumulative;  // the buckets' total: consistent within one scrape
        m.histogram.sample_sum = h.sum_seconds();
        f.metric.push_back(std::move(m));
      }
    }
    {
      auto& f = family("iserkit_target_scsi_errors_total",
                       "SCSI responses other than GOOD: CHECK CONDITION by sense key (UNIT ATTENTION apart), busy, "
                       "reservation_conflict",
                       MetricType::Counter);
      for (std::size_t k = 0; k < 16; ++k)
        if (k != static_cast<std::size_t>(scsi::SenseKey::unit_attention))
          f.metric.push_back(counter(load(s.sense_keys[k]), {{"status", "check_condition"}, {"sense_key", sense_key_names[k]}}));
      f.metric.push_back(counter(load(s.busy), {{"status", "busy"}, {"sense_key", ""}}));
      f.metric.push_back(counter(load(s.reservation_conflicts), {{"status", "reservation_conflict"}, {"sense_key", ""}}));
    }
    family("iserkit_target_scsi_unit_attentions_total",
           "CHECK CONDITION with UNIT ATTENTION (SAM-5 5.14): the unit's news, not counted as errors", MetricType::Counter)
        .metric.push_back(counter(load(s.unit_attentions)));
    collect_luns(out);
    {
      auto& f = family("iserkit_target_rejects_total", "Reject PDUs sent, by reason (RFC 7143 11.17.1)", MetricType::Counter);
      for (std::size_t r = 0; r < 16; ++r)
        if (const char* name = reject_name(r)) f.metric.push_back(counter(load(s.rejects[r]), {{"reason", name}}));
    }
    {
      auto& f = family("iserkit_target_task_management_total", "Task Management Function Requests received, by function",
                       MetricType::Counter);
      for (std::size_t i = 1; i < tmf_names.size(); ++i)
        f.metric.push_back(counter(load(s.task_management[i]), {{"function", tmf_names[i]}}));
    }
    {
      auto& f = family("iserkit_target_login_failures_total", "logins refused or abandoned, by reason", MetricType::Counter);
      for (std::size_t i = 0; i < login_failure_count; ++i)
        f.metric.push_back(counter(load(s.login_failures[i]), {{"reason", login_failure_names[i]}}));
    }
    family("iserkit_target_logins_total", "logins that reached the full-feature phase", MetricType::Counter)
        .metric.push_back(counter(load(s.logins)));
    {
      auto& f = family("iserkit_target_backend_errors_total", "backend errors answered with a SCSI error, by errno",
                       MetricType::Counter);
      for (const auto& e : backend_error_counts()) f.metric.push_back(counter(static_cast<double>(e.count), {{"error", e.error}}));
    }
    // Sessions and connections by tenant and transport, counted from the open connections now.
    std::map<std::pair<std::string, std::string>, std::pair<std::uint64_t, std::uint64_t>> open;  // sessions, connections
    for (const auto& t : std::array<const char*, 2>{"tcp", "iser"}) {
      open[{"", t}] = {0, 0};
      for (const auto& tenant : sources_.tenants) open[{tenant.name, t}] = {0, 0};
    }
    for (const auto& c : sources_.connections()) {
      auto& [sessions, connections] = open[{c->tenant, c->transport}];
      ++connections;
      if (c->snapshot().logged_in) ++sessions;
    }
    {
      auto& fs = family("iserkit_target_sessions", "sessions in the full-feature phase, by tenant and transport", MetricType::Gauge);
      auto& fc = family("iserkit_target_connections", "open connections (logging in or logged in), by tenant and transport",
                        MetricType::Gauge);
      for (const auto& [key, v] : open) {
        fs.metric.push_back(gauge(static_cast<double>(v.first), {{"tenant", key.first}, {"transport", key.second}}));
        fc.metric.push_back(gauge(static_cast<double>(v.second), {{"tenant", key.first}, {"transport", key.second}}));
      }
    }
    {
      auto& fu = family("iserkit_target_payload_budget_used_bytes",
                        "payload bytes held for commands now, target-wide (tenant=\"\") and per tenant", MetricType::Gauge);
      auto& fl = family("iserkit_target_payload_budget_limit_bytes", "payload budget limit, target-wide and per tenant",
                        MetricType::Gauge);
      fu.metric.push_back(gauge(static_cast<double>(sources_.global_budget->used()), {{"tenant", ""}}));
      fl.metric.push_back(gauge(static_cast<double>(sources_.global_budget->limit()), {{"tenant", ""}}));
      for (const auto& t : sources_.tenants) {
        fu.metric.push_back(gauge(static_cast<double>(t.budget->used()), {{"tenant", t.name}}));
        fl.metric.push_back(gauge(static_cast<double>(t.budget->limit()), {{"tenant", t.name}}));
      }
    }
    family("iserkit_target_copied_payload_bytes_total", "payload bytes copied in user space", MetricType::Counter)
        .metric.push_back(counter(static_cast<double>(copied_payload_bytes())));
    family("iserkit_target_spliced_data_in_bytes_total",
           "READ Data-In bytes spliced from the page cache to the socket (no user-space copy)", MetricType::Counter)
        .metric.push_back(counter(static_cast<double>(s.spliced_data_in_bytes.load(std::memory_order_relaxed))));
    return out;
  }

  // Per target and LU, labels target (the configured IQN) and lun (its number): bounded by the
  // configuration (--lun, the TOML file, --export-dir, --export-rbd; reloads and rescans change
  // it, a peer never does), and by max_labelled_luns. Sessions per target count only logged-in
  // sessions whose target is one of the configured nodes, so no peer-sent name becomes a label.
  void collect_luns(std::vector<MetricFamily>& out) const {
    out.reserve(out.size() + 7);  // the seven references below stay valid
    auto family = [&](const char* name, const char* help, MetricType type) -> MetricFamily& {
      out.push_back(MetricFamily{name, help, type, {}});
      return out.back();
    };
    auto& commands = family("iserkit_target_lun_commands_total", "SCSI commands executed on a logical unit, by kind",
                            MetricType::Counter);
    auto& bytes = family("iserkit_target_lun_bytes_total",
                         "payload bytes of a logical unit's commands that ended GOOD, by kind", MetricType::Counter);
    auto& errors = family("iserkit_target_lun_errors_total",
                          "a logical unit's responses other than GOOD and UNIT ATTENTION", MetricType::Counter);
    auto& attentions = family("iserkit_target_lun_unit_attentions_total",
                              "a logical unit's CHECK CONDITION responses with UNIT ATTENTION", MetricType::Counter);
    auto& capacity = family("iserkit_target_lun_capacity_bytes", "a logical unit's capacity in bytes", MetricType::Gauge);
    auto& copied = family("iserkit_target_lun_copy_bytes_total",
                          "bytes EXTENDED COPY and WRITE USING TOKEN wrote into a logical unit, by path (kernel: "
                          "in-kernel splice, no user-space buffer; user: through the copy's buffer)",
                          MetricType::Counter);
    auto& sessions = family("iserkit_target_node_sessions", "normal sessions logged in to a target", MetricType::Gauge);
    auto load = [](const std::atomic<std::uint64_t>& a) { return static_cast<double>(a.load(std::memory_order_relaxed)); };
    std::map<std::string, std::uint64_t> per_target;
    std::size_t labelled = 0;
    for (const auto& node : *sources_.registry->nodes()) {
      per_target.emplace(node->name, 0);
      for (const auto& lun : node->dispatcher->luns()) {
        const LogicalUnit* unit = node->dispatcher->find(lun);
        if (unit == nullptr || labelled == max_labelled_luns) continue;
        ++labelled;
        const std::string number = std::to_string(lun.index().value_or(0));
        auto labels = [&] { return std::vector<ClientMetric::Label>{{"target", node->name}, {"lun", number}}; };
        const auto& st = unit->stats();
        for (std::size_t k = 0; k < op_kind_count; ++k) {
          auto with_kind = labels();
          with_kind.push_back({"kind", op_kind_names[k]});
          commands.metric.push_back(counter(load(st.commands[k]), with_kind));
          bytes.metric.push_back(counter(load(st.bytes[k]), std::move(with_kind)));
        }
        errors.metric.push_back(counter(load(st.errors), labels()));
        attentions.metric.push_back(counter(load(st.unit_attentions), labels()));
        for (const auto& [path, value] : {std::pair{"kernel", &st.copy_bytes_in_kernel}, std::pair{"user", &st.copy_bytes_user_space}}) {
          auto with_path = labels();
          with_path.push_back({"path", path});
          copied.metric.push_back(counter(load(*value), std::move(with_path)));
        }
        capacity.metric.push_back(
            gauge(static_cast<double>(unit->block_count()) * static_cast<double>(unit->block_size_bytes()), labels()));
      }
    }
    for (const auto& c : sources_.connections()) {
      const auto id = c->snapshot();
      if (!id.logged_in || id.discovery) continue;
      if (auto it = per_target.find(id.target); it != per_target.end()) ++it->second;
    }
    for (const auto& [name, n] : per_target) sessions.metric.push_back(gauge(static_cast<double>(n), {{"target", name}}));
  }

 private:
  StatusSources sources_;
};

}  // namespace

struct TargetMetrics::Impl {
  std::unique_ptr<metrics::Endpoint> endpoint;
};

TargetMetrics::TargetMetrics(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TargetMetrics::~TargetMetrics() = default;

Result<std::unique_ptr<TargetMetrics>> TargetMetrics::open(const std::string& host_port, StatusSources sources,
                                                           int max_connections) {
  auto endpoint = metrics::Endpoint::open(host_port, max_connections);
  if (!endpoint) return fail(endpoint.error());
  auto impl = std::make_unique<Impl>();
  impl->endpoint = std::move(*endpoint);
  impl->endpoint->add(std::make_shared<Collector>(std::move(sources)));
  return std::unique_ptr<TargetMetrics>(new TargetMetrics(std::move(impl)));
}

int TargetMetrics::port() const { return impl_->endpoint->port(); }

}  // namespace iserkit::target
