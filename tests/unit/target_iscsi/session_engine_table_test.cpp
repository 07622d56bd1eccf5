// The task state tables of the target SessionEngine (task_transitions, budget_transitions and the
// combinations task_lives in target/src/session_engine.hpp) checked against the engine: every row
// is taken by driving it, no move is refused, and each table lists its moves once
// (tests/unit/engine_harness/table_coverage.hpp).
#include "session_engine.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "iserkit/common/errors.hpp"
#include "session_engine_fixture.hpp"
#include "table_coverage.hpp"

namespace iserkit::target {
namespace {

using namespace engine_test;
using iscsi::Itt;
using iscsi::Ttt;

// ---- The task state table (task_transitions in session_engine.hpp) against the engine ----

// Every row of task_transitions is taken by driving the engine (TCP and iSER data phases, budgets
// granted at once or later, TMF aborts, digest errors, a closed connection), and no state change
// was ever refused for want of a row.
class TaskTables : public SessionEngineTest {
 protected:
  // Takes the rows the current engine recorded (before a test replaces it) and checks it refused
  // no move.
  void harvest() {
    if (!engine) return;
    task_rows.take(engine->task_rows_taken());
    budget_rows.take(engine->budget_rows_taken());
    life_rows |= engine->life_rows_taken();
    EXPECT_EQ(engine->task_moves_refused(), 0u) << "a move without a row in task_transitions, budget_transitions "
                                                   "or task_lives";
  }
  // A fresh engine (the rows of the last one taken) and nothing collected yet.
  void restart() {
    harvest();
    sent.clear();
    executes.clear();
    released.clear();
    gets.clear();
    closes.clear();
    requested.clear();
    start();
  }
  // The R2T just sent asks for the rest of an 8-block write from byte 2048; the Data-Out that
  // answers it completes the write, and the backend runs it on exactly `data`.
  void finish_write_after_r2t(std::uint32_t itt, std::span<const std::byte> data) {
    ASSERT_FALSE(sent.empty());
    ASSERT_TRUE(sent.back().is<iscsi::R2t>());
    const auto r2t = sent.back().as<iscsi::R2t>();
    EXPECT_EQ(r2t.buffer_offset, 2048u);
    const std::size_t runs = executes.size();
    deliver(iscsi::DataOut{.final = true, .lun = scsi::Lun::from_index(0), .itt = Itt{itt}, .ttt = r2t.ttt,
                           .buffer_offset = 2048},
            data.subspan(2048));
    ASSERT_EQ(executes.size(), runs + 1);
    auto buf = engine->task_data(Itt{itt});
    EXPECT_TRUE(std::equal(buf.begin(), buf.end(), data.begin(), data.end()));
    execute(Itt{itt}, ScsiOutcome::good());
  }
  void drive_task_rows();
  void drive_budget_rows();
  void drive_transient_lives();

  engine_tables::TableCoverage<task_transitions> task_rows;
  engine_tables::TableCoverage<budget_transitions> budget_rows;
  RowsTaken life_rows;
};

void TaskTables::drive_task_rows() {
  auto fresh = [&](bool iser, bool grant) {
    rdma = iser;
    grant_budget_now = true;
    restart();
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
  ASSERT_EQ(engine->task(Itt{2})->life.state, TaskState::waiting_budget);
  deliver(iscsi::DataOut{.final = true, .lun = scsi::Lun::from_index(0), .itt = Itt{2}, .ttt = Ttt{1}},
          pattern(block, 0), make_error_code(errc::data_digest_error));  // waiting_budget → done (answered)
  EXPECT_EQ(engine->task(Itt{2}), nullptr);
  deliver(command(3, 3, cdb10(0x28, 2), 2 * block, true, false));
  ASSERT_EQ(engine->task(Itt{3})->life.state, TaskState::waiting_budget);
  abort(50, 3, 4);  // waiting_budget → done (aborted)
  EXPECT_EQ(engine->task(Itt{3}), nullptr);

  // iSER.
  fresh(true, true);
  iser_write(1, 1);  // receiving → fetching_write_data
  ASSERT_EQ(engine->task(Itt{1})->life.state, TaskState::fetching_write_data);
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
  ASSERT_EQ(engine->task(Itt{3})->life.state, TaskState::aborted_fetching);
  engine->on_write_data(Itt{3}, {});     // → done (completion)
  collect();
  EXPECT_EQ(engine->task(Itt{3}), nullptr);
  iser_write(4, 4);
  engine->on_write_data(Itt{4}, make_error_code(std::errc::io_error));  // → receiving → done by the close
  collect();
  EXPECT_EQ(closes.size(), 1u);
  EXPECT_EQ(engine->task(Itt{4}), nullptr);
  harvest();
}

TEST_F(TaskTables, TaskTableEveryRowIsTakenAndNoMoveIsRefused) {
  drive_task_rows();
  harvest();
  task_rows.expect_every_row_taken();
}

constexpr TaskState all_task_states[] = {
    TaskState::placed,          TaskState::receiving_data, TaskState::waiting_budget,    TaskState::fetching_write_data,
    TaskState::write_data_fetched, TaskState::executing,   TaskState::sending_data_in,   TaskState::done,
    TaskState::aborted_executing,  TaskState::aborted_fetching};
constexpr TaskEvent all_task_events[] = {
    TaskEvent::payload_received, TaskEvent::refused,         TaskEvent::budget_short,  TaskEvent::budget_granted,
    TaskEvent::get_data_started, TaskEvent::get_data_done,   TaskEvent::get_data_failed, TaskEvent::ready,
    TaskEvent::executed_read,    TaskEvent::answered,        TaskEvent::aborted,       TaskEvent::completion_arrived};
constexpr TaskBudget all_budgets[] = {TaskBudget::none, TaskBudget::queued, TaskBudget::queued_staging,
                                      TaskBudget::granted_staging, TaskBudget::granted};
constexpr BudgetEvent all_budget_events[] = {BudgetEvent::requested, BudgetEvent::granted, BudgetEvent::staged_moved};

// The table lists each move once, a move always changes the state, nothing leaves `done`, and the
// compile-time lookup answers exactly its rows.
TEST(TaskTable, RowsAreDistinctAndTheLookupAnswersExactlyThem) {
  engine_tables::expect_well_formed<task_transitions>(all_task_states, all_task_events);
  for (const TaskTransition& t : task_transitions) EXPECT_NE(t.from, TaskState::done);
}

// ---- The budget table (budget_transitions in session_engine.hpp) against the engine ----

// Every row of budget_transitions is taken by driving the engine (reads and writes, budgets granted
// at once or later, unsolicited data staged and granted before or after it ended), no budget
// change was refused, and the ReleaseBudget that ends a task says `granted` exactly when it was.
void TaskTables::drive_budget_rows() {
  grant_budget_now = true;
  rdma = false;
  config.params.initial_r2t = false;
  config.params.immediate_data = true;
  config.params.first_burst_length = 2048;
  restart();
  // none → granted: a read granted at once.
  deliver(command(1, 1, cdb10(0x28, 2), 2 * block, true, false));
  ASSERT_EQ(executes.size(), 1u);
  EXPECT_EQ(engine->task(Itt{1})->life.budget, TaskBudget::granted);
  execute(Itt{1}, ScsiOutcome::good(2 * block));
  ASSERT_EQ(released.size(), 1u);
  EXPECT_TRUE(released[0].granted);

  grant_budget_now = false;
  // none → queued → granted: a read granted later.
  deliver(command(2, 2, cdb10(0x28, 2), 2 * block, true, false));
  EXPECT_EQ(engine->task(Itt{2})->life.budget, TaskBudget::queued);
  EXPECT_EQ(engine->task(Itt{2})->life.state, TaskState::waiting_budget);
  engine->on_budget_granted(Itt{2});
  collect();
  EXPECT_EQ(engine->task(Itt{2})->life.budget, TaskBudget::granted);
  ASSERT_EQ(executes.size(), 2u);
  execute(Itt{2}, ScsiOutcome::good(2 * block));

  // none → queued_staging → granted_staging → granted: the grant comes while unsolicited data
  // still lands in the staging buffer; the staged bytes move once it ended.
  const auto data = pattern(8 * block, 4);
  auto c = command(3, 3, cdb10(0x2a, 8), 8 * block, false, true);
  c.final = false;  // unsolicited Data-Out follows
  deliver(c, std::span(data).first(1024));
  EXPECT_EQ(engine->task(Itt{3})->life.budget, TaskBudget::queued_staging);
  EXPECT_EQ(engine->task(Itt{3})->life.state, TaskState::receiving_data);
  engine->on_budget_granted(Itt{3});
  collect();
  EXPECT_EQ(engine->task(Itt{3})->life.budget, TaskBudget::granted_staging);
  EXPECT_EQ(engine->task(Itt{3})->life.state, TaskState::receiving_data);
  const std::size_t before = sent.size();
  deliver(iscsi::DataOut{.final = true, .lun = scsi::Lun::from_index(0), .itt = Itt{3}, .ttt = iscsi::reserved_ttt,
                         .data_sn = 0, .buffer_offset = 1024},
          std::span(data).subspan(1024, 1024));
  EXPECT_EQ(engine->task(Itt{3})->life.budget, TaskBudget::granted);
  ASSERT_EQ(sent.size(), before + 1);
  finish_write_after_r2t(3, data);
  ASSERT_EQ(executes.size(), 3u);

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

  harvest();
}

TEST_F(TaskTables, BudgetTableEveryRowIsTakenAndNoMoveIsRefused) {
  drive_budget_rows();
  harvest();
  budget_rows.expect_every_row_taken();
}

// The budget table lists each move once, a move always changes the budget, none is never entered
// again, and the lookup answers exactly its rows.
TEST(BudgetTable, RowsAreDistinctAndTheLookupAnswersExactlyThem) {
  engine_tables::expect_well_formed<budget_transitions>(all_budgets, all_budget_events);
  for (const BudgetTransition& t : budget_transitions) EXPECT_NE(t.to, TaskBudget::none);
  // A granted budget is given back, a queued one cancelled; only the staging values stage.
  EXPECT_FALSE(budget_granted(TaskBudget::queued_staging));
  EXPECT_TRUE(budget_granted(TaskBudget::granted_staging));
  EXPECT_TRUE(budget_staging(TaskBudget::granted_staging));
  EXPECT_FALSE(budget_staging(TaskBudget::granted));
}


// ---- The combinations (task_lives in session_engine.hpp) against the engine ----

// The lives the two drives above do not reach: the grant arriving between a command's header and
// the end of its payload phase, after its unsolicited data ended, and the abort of a command on the
// backend that has no data buffer.
void TaskTables::drive_transient_lives() {
  rdma = false;
  config.params.initial_r2t = false;
  config.params.immediate_data = true;
  config.params.first_burst_length = 2048;
  grant_budget_now = false;
  restart();
  const auto data = pattern(8 * block, 2);
  // placed / granted_staging: the grant comes between place() and on_pdu() of the command that
  // carries immediate data.
  {
    auto c = command(1, 1, cdb10(0x2a, 8), 8 * block, false, true);
    datamover::PduIn in;
    in.bhs = iscsi::encode_bhs(c);
    iscsi::set_lengths(in.bhs, 0, 2048);  // FirstBurstLength of immediate data
    auto dest = engine->place(in.bhs, 2048);
    ASSERT_NE(engine->task(Itt{1}), nullptr);
    EXPECT_EQ(engine->task(Itt{1})->life, (TaskLife{TaskState::placed, TaskBudget::queued_staging}));
    engine->on_budget_granted(Itt{1});
    EXPECT_EQ(engine->task(Itt{1})->life, (TaskLife{TaskState::placed, TaskBudget::granted_staging}));
    ASSERT_EQ(dest.size(), std::size_t{2048});  // it lands in the staging buffer
    std::memcpy(dest.data(), data.data(), dest.size());
    in.data = dest;
    engine->on_pdu(in, t0);
    collect();
    ASSERT_EQ(sent.size(), 1u);  // the staged bytes moved; an R2T asks for the rest
    finish_write_after_r2t(1, data);
    ASSERT_EQ(executes.size(), 1u);
  }
  // waiting_budget / queued_staging → granted_staging: the unsolicited data ended before the grant.
  {
    auto c = command(2, 2, cdb10(0x2a, 8), 8 * block, false, true);
    c.final = false;
    deliver(c, std::span(data).first(1024));
    deliver(iscsi::DataOut{.final = true, .lun = scsi::Lun::from_index(0), .itt = Itt{2}, .ttt = iscsi::reserved_ttt,
                           .data_sn = 0, .buffer_offset = 1024},
            std::span(data).subspan(1024, 1024));
    ASSERT_NE(engine->task(Itt{2}), nullptr);
    EXPECT_EQ(engine->task(Itt{2})->life, (TaskLife{TaskState::waiting_budget, TaskBudget::queued_staging}));
    engine->on_budget_granted(Itt{2});
    collect();
    EXPECT_EQ(engine->task(Itt{2})->life, (TaskLife{TaskState::receiving_data, TaskBudget::granted}));
    finish_write_after_r2t(2, data);
    ASSERT_EQ(executes.size(), 2u);
  }
  // aborted_executing / none: a TEST UNIT READY aborted on the backend.
  deliver(tur(3, 3));
  ASSERT_EQ(executes.size(), 3u);
  deliver(iscsi::TaskManagementRequest{.immediate = true, .function = iscsi::TaskManagementFunction::abort_task,
                                       .lun = scsi::Lun::from_index(0), .itt = Itt{50},
                                       .referenced_task_tag = Itt{3}, .cmd_sn = SerialNumber(4)});
  ASSERT_NE(engine->task(Itt{3}), nullptr);
  EXPECT_EQ(engine->task(Itt{3})->life, (TaskLife{TaskState::aborted_executing, TaskBudget::none}));
  execute(Itt{3}, ScsiOutcome::good());
  EXPECT_EQ(engine->task_count(), 0u);
  harvest();
}

// Every combination of task_lives is reached by driving the engine (the two drives above and the
// transient lives), and no move of either half ever left the table.
TEST_F(TaskTables, TaskLivesEveryRowIsReachedAndNoMoveLeavesThem) {
  drive_task_rows();
  drive_budget_rows();
  drive_transient_lives();
  harvest();
  for (std::size_t k = 0; k < std::size(task_lives); ++k)
    EXPECT_TRUE(life_rows.contains(k)) << "never reached by driving the engine: " << to_string(task_lives[k].state)
                                       << " / " << to_string(task_lives[k].budget) << " (" << task_lives[k].meaning
                                       << ")";
}

// task_lives lists each pair once with its meaning, the lookup answers exactly its rows, a new
// task's life is a row, and each row of the two move tables joins two rows of task_lives (so every
// move can be taken): the tables agree with each other.
TEST(TaskLivesTable, RowsAreDistinctTheLookupAnswersExactlyThemAndTheMoveTablesFit) {
  std::size_t allowed = 0;
  for (TaskState st : all_task_states)
    for (TaskBudget b : all_budgets) {
      const std::size_t row = task_life_row(TaskLife{st, b});
      if (row == 0) continue;
      ++allowed;
      EXPECT_EQ(task_lives[row - 1].state, st);
      EXPECT_EQ(task_lives[row - 1].budget, b);
      ASSERT_NE(task_lives[row - 1].meaning, nullptr);
      EXPECT_FALSE(std::string(task_lives[row - 1].meaning).empty());
    }
  EXPECT_EQ(allowed, std::size(task_lives)) << "a pair listed twice";
  EXPECT_NE(task_life_row(TaskLife{}), 0u) << "a new task (placed, no budget) is a row";
  // Each TaskState is somewhere, and a task waits for its budget only while it has asked for it.
  for (TaskState st : all_task_states) {
    bool some = false;
    for (TaskBudget b : all_budgets) some = some || task_life_row(TaskLife{st, b}) != 0;
    EXPECT_TRUE(some) << to_string(st);
  }
  EXPECT_EQ(task_life_row(TaskLife{TaskState::waiting_budget, TaskBudget::none}), 0u);
  for (TaskState st : {TaskState::fetching_write_data, TaskState::write_data_fetched, TaskState::sending_data_in,
                       TaskState::aborted_fetching})
    for (TaskBudget b : all_budgets)
      EXPECT_EQ(task_life_row(TaskLife{st, b}) != 0, b == TaskBudget::granted)
          << to_string(st) << " holds a granted buffer only: " << to_string(b);
  for (const TaskTransition& t : task_transitions) {
    bool fits = false;
    for (TaskBudget b : all_budgets)
      fits = fits || (task_life_row(TaskLife{t.from, b}) != 0 && task_life_row(TaskLife{t.to, b}) != 0);
    EXPECT_TRUE(fits) << "no budget lets the task take " << engine_tables::describe(t);
  }
  for (const BudgetTransition& t : budget_transitions) {
    bool fits = false;
    for (TaskState st : all_task_states)
      fits = fits || (task_life_row(TaskLife{st, t.from}) != 0 && task_life_row(TaskLife{st, t.to}) != 0);
    EXPECT_TRUE(fits) << "no task state lets the budget take " << engine_tables::describe(t);
  }
}

}  // namespace
}  // namespace iserkit::target
