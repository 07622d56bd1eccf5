// The task and budget state tables of the target SessionEngine (task_transitions,
// budget_transitions in target/src/session_engine.hpp) checked against the engine: every row is
// taken by driving it, no move is refused, and each table lists its moves once.
#include "session_engine.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "iserkit/common/errors.hpp"
#include "session_engine_fixture.hpp"

namespace iserkit::target {
namespace {

using namespace engine_test;
using iscsi::Itt;
using iscsi::Ttt;

// ---- The task state table (task_transitions in session_engine.hpp) against the engine ----

// Every row of task_transitions is taken by driving the engine (TCP and iSER data phases, budgets
// granted at once or later, TMF aborts, digest errors, a closed connection), and no state change
// was ever refused for want of a row.
TEST_F(SessionEngineTest, TaskTableEveryRowIsTakenAndNoMoveIsRefused) {
  std::uint64_t rows = 0;
  auto fresh = [&](bool iser, bool grant) {
    if (engine) {
      rows |= engine->task_rows_taken();
      EXPECT_EQ(engine->task_moves_refused(), 0u);
    }
    sent.clear();
    executes.clear();
    released.clear();
    gets.clear();
    closes.clear();
    rdma = iser;
    grant_budget_now = true;
    start();
    grant_budget_now = grant;
  };
  auto abort = [&](std::uint32_t tmf_itt, std::uint32_t victim, std::uint32_t cmd_sn) {
    deliver(iscsi::TaskManagementRequest{.immediate = true, .function = iscsi::TaskManagementFunction::abort_task,
                                         .lun = scsi::Lun::from_index(0), .itt = Itt{tmf_itt},
                                         .referenced_task_tag = Itt{victim}, .cmd_sn = SerialNumber(cmd_sn)});
  };
  auto iser_write = [&](std::uint32_t itt, std::uint32_t cmd_sn) {
    deliver_iser(command(itt, cmd_sn, cdb10(0x2a, 8), 8 * block, false, true),
                 std::nullopt, datamover::PeerBuffer{0x99, 0x2000});
  };

  // TCP, budget granted at once.
  fresh(false, true);
  deliver(command(1, 1, cdb10(0x28, 4), 4 * block, true, false));  // placed → receiving → executing
  execute(Itt{1}, ScsiOutcome::good(4 * block));                    // → sending_data_in → done
  deliver(tur(2, 2));
  execute(Itt{2}, ScsiOutcome::good());                          // executing → done (SCSI Response)
  deliver(command(3, 3, cdb10(0x99, 0), 0, false, false));       // receiving → done (answered early)
  deliver(command(4, 4, cdb10(0x2a, 4), 4 * block, false, true));  // waits for Data-Out
  abort(50, 4, 5);                                                 // receiving → done (aborted)
  deliver(command(5, 5, cdb10(0x28, 1), block, true, false));
  abort(51, 5, 6);                                                 // executing → aborted_executing
  execute(Itt{5}, ScsiOutcome::good(block));                       // → done (completion)
  ASSERT_EQ(engine->task_count(), 0u);
  // placed → done: the connection closes between the header and the payload phase.
  engine->place(iscsi::encode_bhs(tur(6, 6)), 0);
  engine->on_closed();
  collect();
  EXPECT_EQ(engine->task_count(), 0u);

  // placed → done (refused): a data digest error in the immediate data.
  config.params.immediate_data = true;
  fresh(false, true);
  deliver(command(1, 1, cdb10(0x2a, 1), block, false, true), pattern(block, 0), make_error_code(errc::data_digest_error));
  EXPECT_EQ(engine->task_count(), 0u);

  // TCP, budgets granted later.
  fresh(false, false);
  deliver(command(1, 1, cdb10(0x28, 2), 2 * block, true, false));  // receiving → waiting_budget
  engine->on_budget_granted(Itt{1});                               // → receiving → executing
  collect();
  ASSERT_EQ(executes.size(), 1u);
  deliver(command(2, 2, cdb10(0x2a, 4), 4 * block, false, true));  // waiting_budget
  ASSERT_EQ(engine->task(Itt{2})->state, TaskState::waiting_budget);
  deliver(iscsi::DataOut{.final = true, .lun = scsi::Lun::from_index(0), .itt = Itt{2}, .ttt = Ttt{1}},
          pattern(block, 0), make_error_code(errc::data_digest_error));  // waiting_budget → done (answered)
  EXPECT_EQ(engine->task(Itt{2}), nullptr);
  deliver(command(3, 3, cdb10(0x28, 2), 2 * block, true, false));
  ASSERT_EQ(engine->task(Itt{3})->state, TaskState::waiting_budget);
  abort(50, 3, 4);  // waiting_budget → done (aborted)
  EXPECT_EQ(engine->task(Itt{3}), nullptr);

  // iSER.
  fresh(true, true);
  iser_write(1, 1);  // receiving → fetching_write_data
  ASSERT_EQ(engine->task(Itt{1})->state, TaskState::fetching_write_data);
  engine->on_write_data(Itt{1}, {});  // → write_data_fetched → executing
  collect();
  ASSERT_EQ(executes.size(), 1u);
  execute(Itt{1}, ScsiOutcome::good());
  iser_write(2, 2);
  deliver(iscsi::DataOut{.final = true, .lun = scsi::Lun::from_index(0), .itt = Itt{2}, .ttt = iscsi::reserved_ttt},
          pattern(block, 1));            // a stray Data-Out fails it once the RDMA Read ended
  engine->on_write_data(Itt{2}, {});     // → write_data_fetched → done (answered)
  collect();
  EXPECT_EQ(engine->task(Itt{2}), nullptr);
  iser_write(3, 3);
  abort(50, 3, 4);                       // fetching_write_data → aborted_fetching
  ASSERT_EQ(engine->task(Itt{3})->state, TaskState::aborted_fetching);
  engine->on_write_data(Itt{3}, {});     // → done (completion)
  collect();
  EXPECT_EQ(engine->task(Itt{3}), nullptr);
  iser_write(4, 4);
  engine->on_write_data(Itt{4}, make_error_code(std::errc::io_error));  // → receiving → done by the close
  collect();
  EXPECT_EQ(closes.size(), 1u);
  EXPECT_EQ(engine->task(Itt{4}), nullptr);
  fresh(false, true);

  for (std::size_t i = 0; i < std::size(task_transitions); ++i) {
    const TaskTransition& t = task_transitions[i];
    EXPECT_TRUE(rows & (std::uint64_t{1} << i)) << "row never taken by driving the engine: " << to_string(t.from)
                                                << " --" << to_string(t.event) << "--> " << to_string(t.to) << " ("
                                                << t.rule << ")";
  }
}

// The table lists each move once, a move always changes the state, nothing leaves `done`, and the
// compile-time index answers exactly its rows.
TEST(TaskTable, RowsAreDistinctAndTheIndexAnswersExactlyThem) {
  for (std::size_t i = 0; i < std::size(task_transitions); ++i) {
    const TaskTransition& t = task_transitions[i];
    EXPECT_NE(t.from, t.to) << to_string(t.from);
    EXPECT_NE(t.from, TaskState::done);
    ASSERT_NE(t.rule, nullptr);
    EXPECT_EQ(task_transition_index.row(t.from, t.event, t.to), i + 1) << "listed twice: " << to_string(t.from)
                                                                         << " --" << to_string(t.event) << "--> "
                                                                         << to_string(t.to);
  }
  std::size_t allowed = 0;
  for (std::size_t f = 0; f < TaskTransitionIndex::states; ++f)
    for (std::size_t e = 0; e < TaskTransitionIndex::events; ++e)
      for (std::size_t to = 0; to < TaskTransitionIndex::states; ++to)
        if (task_transition_index.row(static_cast<TaskState>(f), static_cast<TaskEvent>(e), static_cast<TaskState>(to)))
          ++allowed;
  EXPECT_EQ(allowed, std::size(task_transitions));
}

// ---- The budget table (budget_transitions in session_engine.hpp) against the engine ----

// Every row of budget_transitions is taken by driving the engine (reads and writes, budgets granted
// at once or later, unsolicited data staged and granted before or after it ended), no budget
// change was refused, and the ReleaseBudget that ends a task says `granted` exactly when it was.
TEST_F(SessionEngineTest, BudgetTableEveryRowIsTakenAndNoMoveIsRefused) {
  config.params.initial_r2t = false;
  config.params.immediate_data = true;
  config.params.first_burst_length = 2048;
  start();
  // none → granted: a read granted at once.
  deliver(command(1, 1, cdb10(0x28, 2), 2 * block, true, false));
  ASSERT_EQ(executes.size(), 1u);
  EXPECT_EQ(engine->task(Itt{1})->budget, TaskBudget::granted);
  execute(Itt{1}, ScsiOutcome::good(2 * block));
  ASSERT_EQ(released.size(), 1u);
  EXPECT_TRUE(released[0].granted);

  grant_budget_now = false;
  // none → queued → granted: a read granted later.
  deliver(command(2, 2, cdb10(0x28, 2), 2 * block, true, false));
  EXPECT_EQ(engine->task(Itt{2})->budget, TaskBudget::queued);
  EXPECT_EQ(engine->task(Itt{2})->state, TaskState::waiting_budget);
  engine->on_budget_granted(Itt{2});
  collect();
  EXPECT_EQ(engine->task(Itt{2})->budget, TaskBudget::granted);
  ASSERT_EQ(executes.size(), 2u);
  execute(Itt{2}, ScsiOutcome::good(2 * block));

  // none → queued_staging → granted_staging → granted: the grant comes while unsolicited data
  // still lands in the staging buffer; the staged bytes move once it ended.
  const auto data = pattern(8 * block, 4);
  auto c = command(3, 3, cdb10(0x2a, 8), 8 * block, false, true);
  c.final = false;  // unsolicited Data-Out follows
  deliver(c, std::span(data).first(1024));
  EXPECT_EQ(engine->task(Itt{3})->budget, TaskBudget::queued_staging);
  EXPECT_EQ(engine->task(Itt{3})->state, TaskState::receiving_data);
  engine->on_budget_granted(Itt{3});
  collect();
  EXPECT_EQ(engine->task(Itt{3})->budget, TaskBudget::granted_staging);
  EXPECT_EQ(engine->task(Itt{3})->state, TaskState::receiving_data);
  const std::size_t before = sent.size();
  deliver(iscsi::DataOut{.final = true, .lun = scsi::Lun::from_index(0), .itt = Itt{3}, .ttt = iscsi::reserved_ttt,
                         .data_sn = 0, .buffer_offset = 1024},
          std::span(data).subspan(1024, 1024));
  EXPECT_EQ(engine->task(Itt{3})->budget, TaskBudget::granted);
  ASSERT_EQ(sent.size(), before + 1);
  const auto r2t = sent.back().as<iscsi::R2t>();
  EXPECT_EQ(r2t.buffer_offset, 2048u);
  deliver(iscsi::DataOut{.final = true, .lun = scsi::Lun::from_index(0), .itt = Itt{3}, .ttt = r2t.ttt,
                         .buffer_offset = 2048},
          std::span(data).subspan(2048));
  ASSERT_EQ(executes.size(), 3u);
  auto buf = engine->task_data(Itt{3});
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), data.begin(), data.end()));
  execute(Itt{3}, ScsiOutcome::good());

  // A staged task aborted before its grant cancels its request (granted = false); one aborted
  // after it gives the budget back (granted = true).
  released.clear();
  auto staged = [&](std::uint32_t itt, std::uint32_t cmd_sn) {
    auto w = command(itt, cmd_sn, cdb10(0x2a, 8), 8 * block, false, true);
    w.final = false;
    deliver(w, std::span(data).first(512));
  };
  auto abort = [&](std::uint32_t tmf_itt, std::uint32_t victim, std::uint32_t cmd_sn) {
    deliver(iscsi::TaskManagementRequest{.immediate = true, .function = iscsi::TaskManagementFunction::abort_task,
                                         .lun = scsi::Lun::from_index(0), .itt = Itt{tmf_itt},
                                         .referenced_task_tag = Itt{victim}, .cmd_sn = SerialNumber(cmd_sn)});
  };
  staged(4, 4);
  abort(50, 4, 5);
  staged(5, 5);
  engine->on_budget_granted(Itt{5});
  collect();
  abort(51, 5, 6);
  ASSERT_EQ(released.size(), 2u);
  EXPECT_EQ(released[0].itt, Itt{4});
  EXPECT_FALSE(released[0].granted);
  EXPECT_EQ(released[1].itt, Itt{5});
  EXPECT_TRUE(released[1].granted);
  EXPECT_EQ(released[1].bytes, 8u * block);

  EXPECT_EQ(engine->task_moves_refused(), 0u);
  const std::uint64_t rows = engine->budget_rows_taken();
  for (std::size_t i = 0; i < std::size(budget_transitions); ++i) {
    const BudgetTransition& t = budget_transitions[i];
    EXPECT_TRUE(rows & (std::uint64_t{1} << i)) << "row never taken by driving the engine: " << to_string(t.from)
                                                << " --" << to_string(t.event) << "--> " << to_string(t.to) << " ("
                                                << t.rule << ")";
  }
}

// The budget table lists each move once, a move always changes the budget, none is never entered
// again, and the lookup answers exactly its rows.
TEST(BudgetTable, RowsAreDistinctAndTheLookupAnswersExactlyThem) {
  constexpr std::size_t budgets = static_cast<std::size_t>(TaskBudget::granted) + 1;
  constexpr std::size_t events = static_cast<std::size_t>(BudgetEvent::staged_moved) + 1;
  for (std::size_t i = 0; i < std::size(budget_transitions); ++i) {
    const BudgetTransition& t = budget_transitions[i];
    EXPECT_NE(t.from, t.to) << to_string(t.from);
    EXPECT_NE(t.to, TaskBudget::none);
    ASSERT_NE(t.rule, nullptr);
    EXPECT_EQ(budget_transition_row(t.from, t.event, t.to), i + 1) << "listed twice: " << to_string(t.from) << " --"
                                                                   << to_string(t.event) << "--> " << to_string(t.to);
  }
  std::size_t allowed = 0;
  for (std::size_t f = 0; f < budgets; ++f)
    for (std::size_t e = 0; e < events; ++e)
      for (std::size_t to = 0; to < budgets; ++to)
        if (budget_transition_row(static_cast<TaskBudget>(f), static_cast<BudgetEvent>(e), static_cast<TaskBudget>(to)))
          ++allowed;
  EXPECT_EQ(allowed, std::size(budget_transitions));
  // A granted budget is given back, a queued one cancelled; only the staging values stage.
  EXPECT_FALSE(budget_granted(TaskBudget::queued_staging));
  EXPECT_TRUE(budget_granted(TaskBudget::granted_staging));
  EXPECT_TRUE(budget_staging(TaskBudget::granted_staging));
  EXPECT_FALSE(budget_staging(TaskBudget::granted));
}

}  // namespace
}  // namespace iserkit::target
