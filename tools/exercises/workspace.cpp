// exercises workspace: a copy of the project with the exercises' regions stubbed (or, with --bank, every body
// chosen at run time), and its WORKSPACE.md naming each region's file and function.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>
#include <string>

#include "files/atomic_write.h"
#include "verbs.h"

namespace exercises {

namespace fs = std::filesystem;

// Where a learner writes an exercise, by name (a workspace's stubs move lines): "`split_heads`, `merge_heads`",
// a region in another file than the first with that file after it: "`cross_entropy` (in autograd/src/ops/loss.cpp)".
std::string where_to_write(const Exercise& ex) {
  std::string out;
  for (const auto& r : ex.regions) {
    if (out.find("`" + r.function + "`") != std::string::npos) continue;
    out += (out.empty() ? "`" : ", `") + r.function + "`";
    if (r.file != ex.regions.front().file) out += " (in " + r.file.string() + ")";
  }
  return out;
}

void make_workspace(const fs::path& root, const fs::path& dest, int chapter, bool bank, bool marked_only,
                    const std::vector<Exercise>& all) {
  if (marked_only && !fs::exists(dest / "WORKSPACE.md"))
    throw std::runtime_error(dest.string() + " is not a workspace (no WORKSPACE.md)");
  if (!marked_only && fs::exists(dest) && !fs::is_empty(dest))
    throw std::runtime_error(dest.string() + " exists and is not empty");
  fs::create_directories(dest);
  for (auto it = fs::recursive_directory_iterator(root); !marked_only && it != fs::recursive_directory_iterator();
       ++it) {
    const fs::path rel = fs::relative(it->path(), root);
    const std::string top = rel.begin()->string();
    // The bug bank holds answers (its ALTERNATIVE entries) and near-answers: only the CI's --bank workspace,
    // whose regions it fills, gets it.
    const bool answers = rel == fs::path("tools/exercises/bank") && !bank;
    if (top == ".git" || top.rfind("build", 0) == 0 || top == "stepformer-out" || answers ||
        fs::equivalent(it->path(), dest)) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_directory())
      fs::create_directories(dest / rel);
    else if (it->is_regular_file())
      fs::copy_file(it->path(), dest / rel);
  }
  std::vector<std::string> only;
  for (const Exercise& ex : all)
    if (chapter < 0 || ex.chapter == chapter) only.push_back(ex.number);
  std::set<fs::path> files;
  for (const Exercise& ex : all)
    for (const auto& region : ex.regions) files.insert(region.file);
  const auto entries =
      bank ? exercises::read_bank(root / "tools/exercises/bank", all) : std::vector<exercises::BankEntry>{};
  for (const fs::path& f : files)
    stepformer::files::write_atomically(
        dest / f, exercises::rewrite(exercises::read_text(root / f), f,
                                     bank ? exercises::StubKind::bank : exercises::StubKind::stub, only, entries, all));
  if (marked_only) {
    fmt::print("rewrote the marked files of {} ({})\n", dest.string(),
               bank ? "every body, chosen at run time" : "stubs");
    return;
  }
  std::string guide = "# Your stepformer workspace\n\n";
  guide += chapter < 0 ? "Every exercise" : fmt::format("Every exercise of chapter {:02}", chapter);
  guide +=
      " below has its solution removed: the marked region now throws `NotImplemented`.\n"
      "Open the file, read the hint and the surrounding code, write the region, then grade:\n\n"
      "```sh\n"
      "./run grade        # every exercise\n"
      "./run grade 02     # chapter 02's exercises\n"
      "./run grade 2.3    # exercise 2.3 alone\n"
      "build/grade/bin/transformer_tests \"[ex2.3]\"   # 2.3's tests, every check's report (after one ./run grade)\n"
      "```\n\n"
      "What grading costs: the first `./run grade` installs the Debian packages it needs with `apt-get` (as root,\n"
      "or through `sudo`: a compiler, CMake, clang for the kernel exercises, OpenMPI for chapter 10) and builds two\n"
      "trees, `build/grade` (the tests, g++) and `build/grade-kernels` (chapter 09's kernels on cuda-sim, clang):\n"
      "about 6-7 minutes on two cores. Later runs rebuild only what you changed. The test programs of an\n"
      "exercise are `autograd_tests`, `nn_tests`, `transformer_tests`, `distributed_tests` (chapter 10, under\n"
      "`mpirun -np 2`) in `build/grade/bin`, and `cuda_tests` in `build/grade-kernels/bin`.\n\n"
      "The grader prints each exercise's points and its first failing check; `blocked by 0.4, 0.3` means\n"
      "exercises this one needs are not solved yet, in whichever chapter. A failure too long for the table is\n"
      "printed whole below it, and every result is in `build/grade/grade.json`. docs/exercises.md explains the\n"
      "rest; `./run book` builds the book from this workspace, so its annotated source shows your code.\n\n"
      "Find a region by its file, its function and its marker `// EXERCISE N.M`; an exercise with several\n"
      "regions has the others marked `// EXERCISE N.M (continued)`.\n\n"
      "`needs` lists the exercises whose code an exercise's tests run through: solve those first.\n\n"
      "| exercise | points | needs | file | function | hint |\n|---|---|---|---|---|---|\n";
  for (const Exercise& ex : all)
    if (chapter < 0 || ex.chapter == chapter)
      guide += fmt::format("| {} | {} | {} | `{}` | {} | {} |\n", ex.number, ex.points, fmt::join(ex.needs, " "),
                           ex.regions.front().file.string(), where_to_write(ex), ex.hint);
  stepformer::files::write_atomically(dest / "WORKSPACE.md", guide);
  fmt::print("workspace written to {} ({} exercises stubbed{}); read {}\n", dest.string(), only.size(),
             bank ? ", every body chosen at run time" : "", (dest / "WORKSPACE.md").string());
}

}  // namespace exercises
