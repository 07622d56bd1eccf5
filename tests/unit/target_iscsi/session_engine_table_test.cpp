// The task state table of the target SessionEngine (task_transitions in
// target/src/session_engine.hpp) checked against the engine: every row is taken by driving it, no
// move is refused, and the table lists its moves once.
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
    datamover::PduIn in;
    in.bhs = iscsi::encode_bhs(command(itt, cmd_sn, cdb10(0x2a, 8), 8 * block, false, true));
    in.peer_write = datamover::PeerBuffer{0x99, 0x2000};
    engine->place(in.bhs, 0);
    engine->on_pdu(in, t0);
    collect();
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

}  // namespace
}  // namespace iserkit::target
