#pragma once
// The verbs of the exercises tool (main.cpp parses the command line): grade.cpp runs a build's tagged tests per
// exercise, workspace.cpp writes a learner's copy with the solutions stubbed, prove.cpp is the CI's proof that
// the tests catch every mistake in the bug bank, leaks.cpp finds answers left in a workspace.
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exercises.h"

namespace exercises {

// Where the test programs are: chapter 09's kernel exercises are graded on cuda-sim's counters, which only
// the checking build has (clang, STEPFORMER_CUDASIM_CHECK=ON): its cuda_tests is taken from `kernels`.
struct Builds {
  std::filesystem::path tests, kernels;
  std::filesystem::path program(const std::string& name) const {
    return (name == "cuda_tests" && !kernels.empty() ? kernels : tests) / "bin" / name;
  }
};

struct Result {
  const Exercise* ex = nullptr;
  bool passed = false;
  std::string message;
  std::string blocked_by;
};

// Every exercise of `chapter` (all when negative), or only exercise `number` when it is given. `with_needs`:
// the exercises they need are graded too (not returned), so that blocked_by names unsolved ones of any chapter.
// How many test programs run side by side: one per core (STEPFORMER_GRADE_JOBS overrides).
int grade_jobs();
// work(0) .. work(n - 1) on grade_jobs() threads, each taking the next index as it finishes one.
void side_by_side(std::size_t n, const std::function<void(std::size_t)>& work);
// `bodies`, when given, is the test programs' STEPFORMER_EXERCISE_BODIES (else they inherit this process's).
std::vector<Result> grade(const std::vector<Exercise>& all, const Builds& build, int chapter,
                          const std::string& number = "", bool with_needs = true, const std::string& bodies = "");
int total_points(const std::vector<Result>& results, bool only_passed);
// The table, its failure column cut to fit `width` characters (the terminal's), then each cut failure whole.
void print(const std::vector<Result>& results, std::size_t width);
// "blocked by 0.4, 0.5: <the first failure>", or the first failure alone.
std::string failure_line(const Result& r);
nlohmann::json to_json(const std::vector<Result>& results);

// Where a learner writes an exercise, by name (a workspace's stubs move lines): "`split_heads`, `merge_heads`",
// a region in another file than the first with that file after it: "`cross_entropy` (in autograd/src/ops/loss.cpp)".
std::string where_to_write(const Exercise& ex);
// Copies the project at `root` to a new `dest` with every exercise of `chapter` (all when negative) stubbed;
// `bank`: every body chosen at run time (STEPFORMER_EXERCISE_BODIES); `marked_only`: rewrite only marked files.
void make_workspace(const std::filesystem::path& root, const std::filesystem::path& dest, int chapter, bool bank,
                    bool marked_only, const std::vector<Exercise>& all);
// The CI's proof. 1: with only `k` and what it needs restored, `k` passes; with every other exercise restored
// (`k`'s body named "stub"), `k` fails at its stub. 2: each bank entry, with every other exercise at its
// reference: a wrong one scores 0 and its first failure contains its `expect` words and names no other mistake
// or seed; an alternative scores full points. 3: every exercise has at least two wrong entries, and every
// mistake a graded check names is planted by an entry expecting it.
int prove(const std::filesystem::path& root, const std::vector<Exercise>& all,
          const std::vector<exercises::BankEntry>& bank, const Builds& build, const std::filesystem::path& table_file);

// An answer a workspace must not hold: a region's reference body or an ALTERNATIVE body of the bank, with its
// whitespace squeezed to single spaces.
struct Answer {
  std::string number;  // the exercise
  std::string source;  // "the reference's region 2 (transformer/src/attention.cpp)"
  std::string body;
};
// The answers to the exercises in `all` (those a workspace stubs), the reference's read from `root`.
std::vector<Answer> answers(const std::filesystem::path& root, const std::vector<Exercise>& all,
                            const std::vector<BankEntry>& bank);
// Every text file of `workspace` (its build trees and .git aside) that holds one of `answers`, whitespace
// ignored: "docs/00_autograd.md: exercise 0.3: the reference's region 1 (autograd/src/ops/reduce.cpp)".
std::vector<std::string> leaks(const std::filesystem::path& workspace, const std::vector<Answer>& answers);

}  // namespace exercises
