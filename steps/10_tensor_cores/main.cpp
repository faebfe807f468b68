// Step 10 as a program: the kernel in the emulator and (where a GPU is present) on the GPU,
// both compared with the oracle, side by side. `--help` lists the flags; `--fragments` prints
// the fragment layouts the kernel relies on (the tables of the step's page), from the code the
// emulator's mma and ldmatrix use.
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>

#include "common/error.h"
#include "harness/harness.h"
#include "kernels/portable/portable.h"

namespace {

namespace layout = pa::kernels_emu::mma_layout;

/// A Markdown table of \p rows x \p cols cells, `cell(row, col)` each, rows and columns named by
/// \p row_name and \p col_name.
void table(std::ostream& out, const char* corner, int rows, int cols, const std::function<std::string(int)>& row_name,
           const std::function<std::string(int)>& col_name, const std::function<std::string(int, int)>& cell) {
  out << "| " << corner << " |";
  for (int c = 0; c < cols; ++c) out << ' ' << col_name(c) << " |";
  out << "\n|---|";
  for (int c = 0; c < cols; ++c) out << ":-:|";
  out << '\n';
  for (int r = 0; r < rows; ++r) {
    out << "| **" << row_name(r) << "** |";
    for (int c = 0; c < cols; ++c) out << ' ' << cell(r, c) << " |";
    out << '\n';
  }
  out << '\n';
}

/// Which lane (L) and which of its registers (r) or accumulators (e) holds each element. A
/// 32-bit register holds two neighbouring 16-bit elements, so A and the ldmatrix tables show
/// column pairs; B's register holds two neighbouring rows (k), so its table shows row pairs.
void print_fragment_layouts(std::ostream& out) {
  auto pair = [](int c) { return pa::cat(2 * c, "-", 2 * c + 1); };
  auto plain = [](int c) { return std::to_string(c); };
  // The label of the (lane, register) pair for which `holds(lane, register)` is true.
  auto holder = [](int registers, const char* kind, auto holds) {
    for (int lane = 0; lane < 32; ++lane)
      for (int r = 0; r < registers; ++r)
        if (holds(lane, r)) return pa::cat("L", lane, " ", kind, r);
    return std::string("?");
  };
  out << "**A** (16 x 16, the queries: row = head, column = channel): lane and register\n\n";
  table(out, "row", 16, 8, plain, pair, [&](int row, int col_pair) {
    return holder(4, "r", [&](int lane, int r) { return layout::a_row(lane, r) == row && layout::a_col(lane, r) == 2 * col_pair; });
  });
  out << "**B** (16 x 8, k x n; for q·Kᵀ k = channel and n = token): lane and register, rows in pairs\n\n";
  table(out, "k", 8, 8, pair, plain, [&](int k_pair, int n) {
    return holder(2, "r", [&](int lane, int r) { return layout::b_row(lane, r) == 2 * k_pair && layout::b_col(lane) == n; });
  });
  out << "**C and D** (16 x 8 floats; for q·Kᵀ row = head, column = token): lane and accumulator\n\n";
  table(out, "row", 16, 8, plain, plain, [&](int row, int col) {
    return holder(4, "e", [&](int lane, int e) { return layout::c_row(lane, e) == row && layout::c_col(lane, e) == col; });
  });
  for (const bool trans : {false, true}) {
    out << "**ldmatrix" << (trans ? " .trans" : "") << "**, one 8 x 8 matrix of 16-bit elements (a row is the 16 bytes "
        << "one lane's address names): the lane that receives each element\n\n";
    table(out, "row", 8, 8, plain, plain, [trans](int row, int col) {
      for (int lane = 0; lane < 32; ++lane) {  // lane gets (ld_row, ld_col), (ld_row, ld_col + 1), or their transposes
        const int r = trans ? col : row, c = trans ? row : col;
        if (layout::ld_row(lane) == r && layout::ld_col(lane) == c - c % 2) return pa::cat("L", lane);
      }
      return std::string("?");
    });
  }
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--fragments") == 0) {
      if (argc != 2) {
        std::fprintf(stderr, "%s: --fragments takes no other flag\n(see --help)\n", argv[0]);
        return pa::exit_bad_argument;
      }
      print_fragment_layouts(std::cout);
      return pa::exit_ok;
    }
  return pa::kernel_step_main(10, argc, argv,
                              "  --fragments          print the mma m16n8k16 fragment layouts: which lane holds which row\n"
                              "                       and column of A, B and C\n");
}
