// exercises prove: the CI's proof on a --bank workspace's build (see verbs.h).
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "files/atomic_write.h"
#include "verbs.h"

namespace exercises {

namespace fs = std::filesystem;

namespace {
std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

// The CI's proof. 1: with only `k` and what it needs restored, `k` passes; with all but `k` restored, `k` fails
// at its stub. 2: each bank entry, with every other exercise at its reference: a wrong one scores 0 and its first
// failure contains its `expect` words and names no other mistake or seed; an alternative scores full points.
// 3: every exercise has at least two wrong entries, and every mistake a graded check names is planted by an entry
// expecting it.
int prove(const fs::path& root, const std::vector<Exercise>& all, const std::vector<exercises::BankEntry>& bank,
          const Builds& build, const fs::path& table_file) {
  // Each problem is printed where it is found and again at the end, where a log cut to its tail still shows it.
  std::vector<std::string> problems;
  auto problem = [&problems](std::string line) {
    fmt::print("{}\n", line);
    problems.push_back(std::move(line));
  };
  for (const auto& [slug, file] : exercises::named_mistakes(root)) {
    const std::string expect = "mistake " + slug;  // (clang 14 cannot capture a structured binding)
    const bool planted = std::any_of(bank.begin(), bank.end(), [&expect](const exercises::BankEntry& e) {
      return e.wrong && lowercase(e.expect) == expect;
    });
    if (!planted) {
      problem(fmt::format("{} names mistake '{}', and no WRONG entry of the bank plants it (expect: mistake {})",
                          file.string(), slug, slug));
    }
  }
  std::map<std::string, const Exercise*> by_number;
  for (const Exercise& ex : all) by_number[ex.number] = &ex;
  // Two grades per exercise, side by side: (a) with it and the exercises it needs (through theirs) at their
  // reference and every other a stub, it passes: its tests need nothing its `needs` leave out; (b) with every
  // other exercise at its reference and it a stub, it fails at its own stub: its tests reach its code. (b) stands
  // for "every other exercise still fails while one is restored" (docs/exercises.md): a stubbed exercise that
  // fails with all the others solved fails sooner with fewer solved, since a stub only throws.
  struct Restore {
    std::string list, bodies;
    Result alone, others;
  };
  std::vector<Restore> restores(all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    std::set<std::string> restored{all[i].number};
    std::vector<std::string> todo = all[i].needs;
    while (!todo.empty()) {
      const std::string n = todo.back();
      todo.pop_back();
      if (restored.insert(n).second && by_number.count(n))
        for (const auto& m : by_number[n]->needs) todo.push_back(m);
    }
    for (const auto& n : restored)
      restores[i].list += (restores[i].list.empty() ? "" : ",") + n, restores[i].bodies += n + "=reference,";
  }
  side_by_side(2 * all.size(), [&](std::size_t j) {
    const Exercise& ex = all[j / 2];
    Restore& r = restores[j / 2];
    if (j % 2 == 0)
      r.alone = grade(all, build, -1, ex.number, false, r.bodies).front();
    else
      r.others = grade(all, build, -1, ex.number, false, "*=reference," + ex.number + "=stub").front();
  });
  for (std::size_t i = 0; i < all.size(); ++i) {
    const std::string& number = all[i].number;
    const Restore& r = restores[i];
    const bool own_stub = r.others.message.find("exercise " + number + ":") != std::string::npos;
    if (!r.alone.passed)
      problem(fmt::format("restoring {}: exercise {} still fails ({})", r.list, number, r.alone.message));
    if (r.others.passed)
      problem(fmt::format("every exercise but {} restored: it passes without its solution", number));
    else if (!own_stub)
      problem(fmt::format("every exercise but {} restored: it fails, but not at its own stub ({})", number,
                          r.others.message));
    fmt::print("{} restoring {:<12} -> {} {}; every other restored -> {} {}\n",
               r.alone.passed && own_stub ? "ok  " : "BAD ", r.list, number, r.alone.passed ? "passes" : "fails",
               number, r.others.passed ? "passes" : "fails");
  }
  struct Row {
    int wrong = 0, caught = 0, alternatives = 0, passing = 0;
  };
  std::map<std::string, Row> rows;
  // Each entry grades one exercise, mostly in one test program: grade_jobs() entries side by side.
  std::vector<Result> graded(bank.size());
  side_by_side(bank.size(), [&](std::size_t i) {
    graded[i] =
        grade(all, build, -1, bank[i].number, false, "*=reference," + bank[i].number + "=" + bank[i].name).front();
  });
  for (std::size_t i = 0; i < bank.size(); ++i) {
    const exercises::BankEntry& e = bank[i];
    const Result& r = graded[i];
    Row& row = rows[e.number];
    bool ok = false;
    std::string wrong_name;
    if (e.wrong) {
      ++row.wrong;
      wrong_name = r.passed ? "" : exercises::misnamed(e, r.message);
      ok = !r.passed && lowercase(r.message).find(lowercase(e.expect)) != std::string::npos && wrong_name.empty();
      row.caught += ok;
    } else {
      ++row.alternatives;
      ok = r.passed;
      row.passing += ok;
    }
    fmt::print("{} {:<5} {:<28} {}\n", ok ? "ok  " : "BAD ", e.number, e.name,
               r.passed ? std::string("passes") : "fails: " + r.message);
    if (!ok)
      problem(fmt::format("     {}:{}: {} ({}) {}", e.file.string(), e.line, e.wrong ? "wrong" : "alternative", e.what,
                          e.wrong
                              ? (r.passed              ? "passes: the tests do not catch this mistake"
                                 : !wrong_name.empty() ? "fails, but " + wrong_name
                                                       : "fails, but the first failure does not say '" + e.expect + "'")
                              : "fails: the tests grade the reference's spelling, not its behaviour"));
  }
  std::string table =
      "| exercise | wrong solutions caught / kept | alternative solutions passing / kept |\n|---|---|---|\n";
  for (const Exercise& ex : all) {
    const Row row = rows[ex.number];
    if (row.wrong < 2)
      problem(fmt::format("exercise {}: {} wrong solutions in the bank, at least 2 wanted", ex.number, row.wrong));
    table += fmt::format("| {} | {} / {} | {} |\n", ex.number, row.caught, row.wrong,
                         row.alternatives ? fmt::format("{} / {}", row.passing, row.alternatives) : "-");
  }
  fmt::print("\n{}", table);
  if (!table_file.empty()) stepformer::files::write_atomically(table_file, table);
  if (problems.empty()) {
    fmt::print(
        "every exercise's tests pass exactly when it is restored, fail every wrong solution in the bank with a "
        "message naming it, and pass every alternative\n");
    return 0;
  }
  fmt::print("{} problems:\n{}\n", problems.size(), fmt::join(problems, "\n"));
  return 1;
}

}  // namespace exercises
