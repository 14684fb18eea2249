#pragma once
// Exercises in the reference sources (docs/exercises.md): parsing the markers, writing a workspace,
// grading a build.
//
//   // EXERCISE 2.3: scores = Q K^T / sqrt(d_k); blocked keys get -inf
//   ... the reference solution ...
//   // END EXERCISE
//
// An exercise may have several regions (e.g. the two gradients of mul); the first region's header carries
// the hint, later ones repeat the number: `// EXERCISE 0.1 (continued)`. Points and needs live in the table,
// tools/exercises/exercises.txt (kTable): the markers stay where the learner writes, the grading data here.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace exercises {

struct Region {
  std::filesystem::path file;  // relative to the root
  int first_line = 0;          // of the EXERCISE marker (1-based), in the reference file only: a workspace's
  int last_line = 0;           // of the END EXERCISE marker      stubs move lines, so learners get `function`
  std::string function;        // the definition the region sits in, "MultiHeadAttention::forward"
};

// The name of the function whose body holds line `index` (0-based) of `lines`: the nearest line above it that
// opens a definition at the left margin (a signature's first line: an identifier before '('), qualified as
// written there ("Decoder::step", "softmax_rows_kernel"). Throws std::runtime_error when none is found.
std::string enclosing_function(const std::vector<std::string>& lines, int index);

struct Exercise {
  std::string number;  // "2.3"
  int chapter = 0;
  int points = 0;
  std::vector<std::string> needs;  // exercises whose solutions this one's tests use
  std::string hint;
  std::vector<Region> regions;
};

// A whole file's text; and the error for a malformed input file, naming the file and line.
std::string read_text(const std::filesystem::path& p);
[[noreturn]] void fail_at(const std::filesystem::path& file, int line, const std::string& what);

inline constexpr const char* kTable = "tools/exercises/exercises.txt";  // relative to the root

// Every exercise under root's library folders (autograd, nn, transformer, distributed), in number order, with
// its points and needs from root's kTable. Throws std::runtime_error naming the file and line for a malformed,
// nested or unterminated marker, a marker without a table row, a row without a marker, an unknown need.
std::vector<Exercise> find_exercises(const std::filesystem::path& root);

// The bug bank (tools/exercises/bank/chNN.txt): per exercise, solutions known to be wrong, each with the
// words its first failure message must contain, and alternative correct solutions, which must pass.
//
//   == WRONG 2.3 no-scale: scores not divided by sqrt(d_k)
//   expect: sqrt(d_k)
//   ... the region's body ...
//   -- region 2
//   ... the body of the exercise's second region (regions not given keep the reference solution) ...
//   == ALTERNATIVE 2.3 where-fill: where(blocked, -inf, scores) instead of masked_fill
//   ...
// Lines starting with '#' before the first entry are comments.
struct BankEntry {
  std::string number;  // "2.3"
  std::string name;    // "no-scale": a C++-identifier-like slug, unique per exercise
  bool wrong = true;   // false: an alternative correct solution
  std::string what;    // the mistake, or the alternative, in words
  std::string expect;  // wrong only: what the first failure message must contain (case-insensitive)
  std::map<int, std::vector<std::string>> regions;  // region index (1-based) -> body lines
  std::filesystem::path file;
  int line = 0;
};

// Every entry of the bank folder's chNN.txt files, in file order. Throws std::runtime_error naming the file
// and line for a malformed entry, an unknown exercise or region, or a name used twice.
std::vector<BankEntry> read_bank(const std::filesystem::path& folder, const std::vector<Exercise>& all);

// Every mistake a graded check names with test::mistake("SLUG", ...) in root's tests (tests/helpers.h), and
// the file that names it; the proof requires a WRONG entry expecting "mistake SLUG" for each.
std::map<std::string, std::filesystem::path> named_mistakes(const std::filesystem::path& root);
// What is wrong with a WRONG entry's first failure besides its `expect` words: it names another mistake's
// slug, or a seed whose bug the entry does not plant (empty: nothing). A message names the mistake its check
// detected, and only that one.
std::string misnamed(const BankEntry& e, const std::string& message);
bool equal_ignoring_case(const std::string& a, const std::string& b);

enum class StubKind { stub, bank };
// Rewrites one file's marked regions of the given exercises (all when `only` is empty).
//  stub: the region's code is replaced by a throw of NotImplemented (in a kernel: a trap on a GPU, a throw
//        under cuda-sim, which carries it to the host).
//  bank: every body runs in one build, chosen at run time: the reference, each bank entry, or the stub,
//        by STEPFORMER_EXERCISE_BODIES ("2.3=no-scale,*=reference"; an exercise not named gets the stub).
//        The CI's proof and bug bank grade one build this way; a helper is written at the file's top. Such a
//        workspace builds without nvcc (as the grade build does): the helper is host code.
// `all` (bank only) numbers an exercise's regions as find_exercises does, across files.
std::string rewrite(const std::string& text, const std::filesystem::path& file, StubKind kind,
                    const std::vector<std::string>& only, const std::vector<BankEntry>& bank = {},
                    const std::vector<Exercise>& all = {});

}  // namespace exercises
