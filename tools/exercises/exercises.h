#pragma once
// Exercises in the reference sources (docs/exercises.md): parsing the markers, writing a workspace,
// grading a build.
//
//   // EXERCISE 2.3 (4 points, needs 2.1 2.2): scores = Q K^T / sqrt(d_k); blocked keys get -inf
//   ... the reference solution ...
//   // END EXERCISE
//
// An exercise may have several regions (e.g. the two gradients of mul); the first region's header carries
// the points and hint, later ones repeat the number: `// EXERCISE 0.1 (continued)`.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace exercises {

struct Region {
  std::filesystem::path file;  // relative to the root
  int first_line = 0;          // of the EXERCISE marker (1-based)
  int last_line = 0;           // of the END EXERCISE marker
};

struct Exercise {
  std::string number;  // "2.3"
  int chapter = 0;
  int points = 0;
  std::vector<std::string> needs;  // exercises whose solutions this one's tests use
  std::string hint;
  std::vector<Region> regions;
};

// Every exercise under root's library folders (autograd, nn, transformer), in number order.
// Throws std::runtime_error naming the file and line for a malformed, nested or unterminated marker.
std::vector<Exercise> find_exercises(const std::filesystem::path& root);

enum class StubKind { stub, proof };
// Rewrites one file's marked regions of the given exercises (all when `only` is empty). stub: the region's
// code is replaced by a throw of NotImplemented (a kernel stub in .cu files). proof: the code stays, behind
// a check that throws unless STEPFORMER_RESTORED_EXERCISES names the exercise (the CI's per-exercise proof).
std::string rewrite(const std::string& text, const std::filesystem::path& file, StubKind kind,
                    const std::vector<std::string>& only);

}  // namespace exercises
