// TransitionTable: the one lookup over the state tables of the sans-I/O engines (the initiator
// session's phase, a target task's state, a multipath path and device; issue 27 item 1). Each
// engine lists its allowed moves as a constexpr array of Transition rows (from, input, to, the rule
// with its RFC section; libnbd's generator table is the model) and changes its state only through
// a row it finds here. The lookup is an index built at compile time from the rows: one bounds check
// and one load per move, no allocation, no Asio (the engines' libraries force-include
// cmake/engine_no_asio.hpp). tests/unit/engine_harness/table_coverage.hpp checks an engine against
// its table (every row taken, no move outside it).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <type_traits>

namespace iserkit {

/// One allowed move of a state machine: on `input` in state `from` it goes to `to`; `rule` says
/// when and why (with its RFC / SAM / SPC section where there is one). State and Input are enums.
template <class State, class Input>
struct Transition {
  State from;
  Input input;
  State to;
  const char* rule;
};

/// The rows of `Rows` (a namespace-scope constexpr array of Transition) as a lookup: row(from,
/// input, to) is the row's index + 1, or 0 when the move is not in the table. At most 255 rows
/// (static_assert); a state or input beyond every row's is simply not found.
template <const auto& Rows>
class TransitionTable {
 public:
  using Row = std::remove_cvref_t<decltype(Rows[0])>;
  using State = decltype(Row::from);
  using Input = decltype(Row::input);
  /// The number of rows.
  static constexpr std::size_t size = std::size(Rows);
  static_assert(size > 0 && size < 256, "a table has 1..255 rows (row numbers are one byte)");

  /// Index + 1 of the row (from, input, to); 0 when that move is not allowed.
  [[nodiscard]] static constexpr std::size_t row(State from, Input input, State to) noexcept {
    const auto f = static_cast<std::size_t>(from);
    const auto i = static_cast<std::size_t>(input);
    const auto t = static_cast<std::size_t>(to);
    if (f >= states || i >= inputs || t >= states) return 0;
    return index_[(f * inputs + i) * states + t];
  }
  /// The row (from, input, to), or nullptr when that move is not allowed.
  [[nodiscard]] static constexpr const Row* find(State from, Input input, State to) noexcept {
    const std::size_t r = row(from, input, to);
    return r == 0 ? nullptr : &Rows[r - 1];
  }
  /// True when some row leaves `from` on `input` (whatever its `to`).
  [[nodiscard]] static constexpr bool has(State from, Input input) noexcept {
    return std::any_of(std::begin(Rows), std::end(Rows),
                       [&](const Row& r) { return r.from == from && r.input == input; });
  }
  /// Every row, in table order.
  [[nodiscard]] static constexpr std::span<const Row> rows() noexcept { return std::span<const Row>(Rows); }

 private:
  static constexpr std::size_t count_states() noexcept {
    std::size_t n = 0;
    for (const Row& r : Rows)
      n = std::max({n, static_cast<std::size_t>(r.from) + 1, static_cast<std::size_t>(r.to) + 1});
    return n;
  }
  static constexpr std::size_t count_inputs() noexcept {
    std::size_t n = 0;
    for (const Row& r : Rows) n = std::max(n, static_cast<std::size_t>(r.input) + 1);
    return n;
  }
  static constexpr std::size_t states = count_states();
  static constexpr std::size_t inputs = count_inputs();
  static constexpr std::array<std::uint8_t, states * inputs * states> build() noexcept {
    std::array<std::uint8_t, states * inputs * states> index{};
    for (std::size_t k = 0; k < size; ++k) {
      const Row& r = Rows[k];
      auto& slot = index[(static_cast<std::size_t>(r.from) * inputs + static_cast<std::size_t>(r.input)) * states +
                         static_cast<std::size_t>(r.to)];
      if (slot == 0) slot = static_cast<std::uint8_t>(k + 1);  // a row listed twice: the first answers
    }
    return index;
  }
  static constexpr std::array<std::uint8_t, states * inputs * states> index_ = build();
};

/// Which rows of a table (at most 64) a machine took: bit k = row index k. Engines keep one per
/// table so tests can check every row is reachable (table_coverage.hpp).
class RowsTaken {
 public:
  /// Records row number `row` (index + 1, as TransitionTable::row returns; 0 is ignored).
  constexpr void take(std::size_t row) noexcept {
    if (row > 0 && row <= 64) bits_ |= std::uint64_t{1} << (row - 1);
  }
  /// True when the row with index `k` (0-based) was taken.
  [[nodiscard]] constexpr bool contains(std::size_t k) const noexcept { return k < 64 && ((bits_ >> k) & 1u) != 0; }
  /// Adds the rows another machine took.
  constexpr RowsTaken& operator|=(const RowsTaken& other) noexcept {
    bits_ |= other.bits_;
    return *this;
  }
  /// The rows as a bit mask (bit k = index k).
  [[nodiscard]] constexpr std::uint64_t bits() const noexcept { return bits_; }

 private:
  std::uint64_t bits_ = 0;
};

}  // namespace iserkit
