// The one check of an engine against its state table (iserkit::TransitionTable,
// common/include/iserkit/common/transition_table.hpp): the table is well formed (each move listed
// once, every row changes the state and names its rule, the lookup answers exactly its rows), no
// move the engine makes falls outside it, and every row is reachable by driving the engine. Used by
// the initiator session phase, multipath path/device and target task tests.
//
// Each enum needs a to_string() found by argument-dependent lookup (the engines define them).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <iterator>
#include <set>
#include <string>
#include <tuple>

#include "iserkit/common/transition_table.hpp"

namespace iserkit::engine_tables {

/// "from --input--> to (rule)" for failure messages.
template <class Row>
std::string describe(const Row& r) {
  return std::string(to_string(r.from)) + " --" + to_string(r.input) + "--> " + to_string(r.to) + " (" +
         (r.rule != nullptr ? r.rule : "no rule") + ")";
}

/// Checks the table `Rows` against itself: each (from, input, to) once, from != to, a non-empty
/// rule, and TransitionTable::find() returns exactly its rows for every (from, input, to) of
/// `states` × `inputs` × `states` (pass every enumerator).
template <const auto& Rows, class States, class Inputs>
void expect_well_formed(const States& states, const Inputs& inputs) {
  using Table = TransitionTable<Rows>;
  using State = typename Table::State;
  using Input = typename Table::Input;
  std::set<std::tuple<State, Input, State>> seen;
  for (const auto& r : Table::rows()) {
    EXPECT_TRUE(seen.insert({r.from, r.input, r.to}).second) << "listed twice: " << describe(r);
    EXPECT_NE(r.from, r.to) << "a row changes the state: " << describe(r);
    ASSERT_NE(r.rule, nullptr);
    EXPECT_FALSE(std::string(r.rule).empty()) << describe(r);
    EXPECT_EQ(Table::find(r.from, r.input, r.to), &r) << describe(r);
  }
  std::size_t allowed = 0;
  for (State f : states)
    for (Input i : inputs)
      for (State t : states)
        if (Table::find(f, i, t) != nullptr) ++allowed;
  EXPECT_EQ(allowed, Table::size) << "the lookup answers a move that is not a row";
}

/// Collects the rows an engine takes while a test drives it, checks each driven step against the
/// table, and at the end that every row was taken.
template <const auto& Rows>
class TableCoverage {
 public:
  using Table = TransitionTable<Rows>;
  using Row = typename Table::Row;
  using State = typename Table::State;
  using Input = typename Table::Input;

  /// One input was applied to a machine in state `from`: it made `moves` state changes (its own
  /// counter, before and after), `last` is the row of its last change and `now` its state after.
  /// No change: the state must be `from`. One change: `last` is a row of the table from `from` to
  /// `now`, for `input` (or, when `other_input_ok`, for another input: a clock passing several
  /// deadlines at once). More than one change per input fails.
  void step(State from, Input input, std::uint64_t moves, const Row* last, State now, bool other_input_ok = false) {
    ASSERT_LE(moves, 1u) << "one input makes at most one move";
    if (moves == 0) {
      EXPECT_EQ(now, from) << "the state moved outside the table: " << to_string(from) << " -> " << to_string(now);
      return;
    }
    ASSERT_NE(last, nullptr);
    const std::size_t row = Table::row(last->from, last->input, last->to);
    ASSERT_NE(row, 0u) << "a move that is not a row of the table";
    EXPECT_EQ(&Rows[row - 1], last) << describe(*last);
    EXPECT_EQ(last->from, from) << describe(*last);
    EXPECT_EQ(now, last->to) << describe(*last);
    if (last->input == input) {
      taken_.take(row);
    } else {
      EXPECT_TRUE(other_input_ok) << "took " << to_string(last->input) << " instead of " << to_string(input);
    }
  }
  /// Adds the rows an engine recorded itself.
  void take(const RowsTaken& rows) { taken_ |= rows; }
  /// Every row of the table was taken.
  void expect_every_row_taken() const {
    for (std::size_t k = 0; k < Table::size; ++k)
      EXPECT_TRUE(taken_.contains(k)) << "row never taken by driving the engine: " << describe(Rows[k]);
  }

 private:
  RowsTaken taken_;
};

}  // namespace iserkit::engine_tables
