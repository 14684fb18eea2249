#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "exercises.h"

namespace exercises {

namespace fs = std::filesystem;

namespace {

const std::regex kBegin(R"(^(\s*)// EXERCISE (\d+)\.(\d+): (.+)$)");
const std::regex kContinued(R"(^(\s*)// EXERCISE (\d+)\.(\d+) \(continued\)\s*$)");
const std::regex kEnd(R"(^\s*// END EXERCISE\s*$)");
const std::regex kAnyMarker(R"(//\s*(END )?EXERCISE\b)");

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

bool is_source(const fs::path& p) {
  const auto e = p.extension();
  return e == ".cpp" || e == ".h" || e == ".cu" || e == ".cuh";
}

// "0.10" sorts after "0.9".
bool number_less(const std::string& a, const std::string& b) {
  const auto split = [](const std::string& s) {
    const auto dot = s.find('.');
    return std::pair{std::stoi(s.substr(0, dot)), std::stoi(s.substr(dot + 1))};
  };
  return split(a) < split(b);
}

std::string c_string(const std::string& s) {  // as a C++ string literal's contents
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

[[noreturn]] void fail_at(const fs::path& file, int line, const std::string& what) {
  throw std::runtime_error(file.string() + ":" + std::to_string(line) + ": " + what);
}

std::string enclosing_function(const std::vector<std::string>& lines, int index) {
  // A definition's first line at the left margin: not a brace, comment, preprocessor line, label or namespace.
  static const std::regex signature(
      R"(^(?![\s}#/]|namespace\b|template\b|public:|private:)[^(;=]*?([A-Za-z_][\w:~]*)\s*\()");
  for (int i = index; i >= 0; --i) {
    std::smatch m;
    if (!std::regex_search(lines[static_cast<std::size_t>(i)], m, signature)) continue;
    const std::string name = m[1].str();
    return name.ends_with("operator") ? name + "()" : name;  // NoamSchedule::operator()(...)
  }
  throw std::runtime_error("no function definition above line " + std::to_string(index + 1));
}

namespace {

// One row of the exercise table: "2.5  4  2.3 2.4" (number, points, needs), '#' lines comments.
struct TableRow {
  int points = 0;
  std::vector<std::string> needs;
  int line = 0;
};

std::map<std::string, TableRow> read_table(const fs::path& file) {
  if (!fs::exists(file)) throw std::runtime_error(file.string() + ": the exercise table is missing");
  static const std::regex number_form(R"(\d+\.\d+)");
  std::map<std::string, TableRow> rows;
  const auto lines = lines_of(read_text(file));
  for (int i = 0; i < static_cast<int>(lines.size()); ++i) {
    std::istringstream in(lines[static_cast<std::size_t>(i)]);
    std::string number, points;
    if (!(in >> number) || number.front() == '#') continue;
    if (!std::regex_match(number, number_form) || !(in >> points) ||
        points.find_first_not_of("0123456789") != std::string::npos || std::stoi(points) < 1)
      fail_at(file, i + 1, "expected `number points [needs ...]`, e.g. `2.5 4 2.3 2.4`");
    TableRow row{std::stoi(points), {}, i + 1};
    for (std::string need; in >> need;) row.needs.push_back(need);
    if (!rows.emplace(number, std::move(row)).second) fail_at(file, i + 1, "exercise " + number + " has two rows");
  }
  return rows;
}

}  // namespace

std::vector<Exercise> find_exercises(const fs::path& root) {
  std::map<std::string, Exercise> found;
  std::vector<fs::path> files;
  for (const char* dir : {"autograd", "nn", "transformer", "distributed"})
    if (fs::exists(root / dir))
      for (const auto& entry : fs::recursive_directory_iterator(root / dir))
        if (entry.is_regular_file() && is_source(entry.path())) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& path : files) {
    const fs::path rel = fs::relative(path, root);
    const auto lines = lines_of(read_text(path));
    Exercise* open = nullptr;
    int open_line = 0;
    for (int i = 0; i < static_cast<int>(lines.size()); ++i) {
      const std::string& line = lines[static_cast<std::size_t>(i)];
      if (!std::regex_search(line, kAnyMarker)) continue;
      std::smatch m;
      const bool begin = std::regex_match(line, m, kBegin), continued = !begin && std::regex_match(line, m, kContinued);
      if (begin || continued) {
        if (open) fail_at(rel, i + 1, "an EXERCISE marker inside exercise " + open->number + " (markers never nest)");
        const std::string number = m[2].str() + "." + m[3].str();
        Exercise& ex = found[number];
        if (begin) {
          if (!ex.hint.empty())
            fail_at(rel, i + 1, "exercise " + number + " is declared twice; later regions say (continued)");
          ex.number = number;
          ex.chapter = std::stoi(m[2].str());
          ex.hint = m[4].str();
        }
        try {
          ex.regions.push_back({rel, i + 1, 0, enclosing_function(lines, i)});
        } catch (const std::runtime_error& e) {
          fail_at(rel, i + 1, std::string("exercise ") + number + ": " + e.what());
        }
        open = &ex;
        open_line = i + 1;
      } else if (std::regex_match(line, kEnd)) {
        if (!open) fail_at(rel, i + 1, "END EXERCISE without an EXERCISE marker");
        open->regions.back().last_line = i + 1;
        open = nullptr;
      } else {
        fail_at(rel, i + 1, "malformed exercise marker: " + line);
      }
    }
    if (open) fail_at(rel, open_line, "exercise " + open->number + " is not closed by // END EXERCISE");
  }
  // Points and needs from the table; every marked exercise has a row and every row a marker.
  const fs::path table_file = root / kTable;
  std::map<std::string, TableRow> table = read_table(table_file);
  std::vector<Exercise> out;
  for (auto& [number, ex] : found) {
    if (ex.hint.empty())
      fail_at(ex.regions.front().file, ex.regions.front().first_line, number + ": only (continued) regions");
    const auto row = table.find(number);
    if (row == table.end())
      fail_at(ex.regions.front().file, ex.regions.front().first_line,
              "exercise " + number + " has no row in " + kTable + " (its points and needs)");
    ex.points = row->second.points;
    ex.needs = row->second.needs;
    out.push_back(std::move(ex));
  }
  for (const auto& [number, row] : table) {
    if (!found.count(number))
      fail_at(table_file, row.line, "exercise " + number + ": no // EXERCISE marker in the sources");
    for (const std::string& need : row.needs)
      if (!found.count(need))
        fail_at(table_file, row.line, "exercise " + number + " needs " + need + ", which is no exercise");
  }
  std::sort(out.begin(), out.end(),
            [](const Exercise& a, const Exercise& b) { return number_less(a.number, b.number); });
  return out;
}

namespace {

// What a rewritten file needs: NotImplemented for the stubs and, in a bank workspace, the body chooser.
std::string preamble(StubKind kind) {
  std::string p = "// tools/exercises rewrote this file's exercise regions (docs/exercises.md).\n";
  p += "#include \"autograd/errors.h\"\n";
  if (kind == StubKind::bank)
    p += "#include <cstdlib>\n#include <string>\n"
         "#ifndef STEPFORMER_EXERCISE_BODY  // once per translation unit: a rewritten header may come first\n"
         "#define STEPFORMER_EXERCISE_BODY\n"
         "namespace {\n"
         "// True when STEPFORMER_EXERCISE_BODIES (\"2.3=no-scale,*=reference\") chooses this body for the exercise.\n"
         "[[maybe_unused]] bool exercise_body(const char* number, const char* body) {\n"
         "  const char* env = std::getenv(\"STEPFORMER_EXERCISE_BODIES\");\n"
         "  if (env == nullptr) return false;\n"
         "  const std::string list = std::string(\",\") + env + \",\";\n"
         "  const auto chosen = [&list](const std::string& who) {\n"
         "    const auto at = list.find(\",\" + who + \"=\");\n"
         "    if (at == std::string::npos) return std::string();\n"
         "    const auto from = at + who.size() + 2;\n"
         "    return list.substr(from, list.find(',', from) - from);\n"
         "  };\n"
         "  std::string c = chosen(number);\n"
         "  if (c.empty()) c = chosen(\"*\");\n"
         "  return c == body;\n"
         "}\n"
         "}  // namespace\n"
         "#endif\n";
  return p;
}

std::string stub_line(const std::string& indent, bool kernel, const std::string& message) {
  const std::string thrown = "throw ::stepformer::NotImplemented(\"" + message + "\");";
  if (!kernel) return indent + thrown + "\n";
  // A GPU kernel cannot throw: it traps. cuda-sim runs kernels on the CPU and carries the throw to the host.
  return "#if defined(__CUDA_ARCH__)\n" + indent + "__trap();\n#else\n" + indent + thrown + "\n#endif\n";
}

}  // namespace

std::string rewrite(const std::string& text, const fs::path& file, StubKind kind, const std::vector<std::string>& only,
                    const std::vector<BankEntry>& bank, const std::vector<Exercise>& all) {
  // The region that starts at this line of this file, numbered as find_exercises numbers an exercise's regions.
  const auto region_at = [&all, &file](const std::string& number, int line) {
    for (const Exercise& ex : all)
      if (ex.number == number)
        for (std::size_t k = 0; k < ex.regions.size(); ++k)
          if (ex.regions[k].file == file && ex.regions[k].first_line == line) return static_cast<int>(k) + 1;
    return 0;
  };
  const bool kernel = file.extension() == ".cu" || file.extension() == ".cuh";
  const auto lines = lines_of(text);
  std::string out, body;  // body: the reference lines of the region being read
  std::string number, hint, indent;
  std::map<std::string, std::string> hints;  // for (continued) regions
  bool inside = false, replacing = false, touched = false;
  int region = 0, line_number = 0;
  for (const std::string& line : lines) {
    ++line_number;
    std::smatch m;
    const bool begin = std::regex_match(line, m, kBegin), continued = !begin && std::regex_match(line, m, kContinued);
    if (begin || continued) {
      number = m[2].str() + "." + m[3].str();
      if (begin) hints[number] = m[4].str();
      for (const Exercise& ex : all)  // a (continued) region in another file than the first: its hint from there
        if (ex.number == number && !hints.count(number)) hints[number] = ex.hint;
      hint = hints.count(number) ? hints[number] : "see the first region of this exercise";
      region = region_at(number, line_number);
      indent = m[1].str();
      inside = true;
      replacing = only.empty() || std::find(only.begin(), only.end(), number) != only.end();
      touched |= replacing;
      body.clear();
      out += line + "\n";
      continue;
    }
    if (std::regex_match(line, kEnd)) {
      if (inside && replacing) {
        const std::string stub = stub_line(indent, kernel, "exercise " + number + ": " + c_string(hint));
        if (kind == StubKind::stub) {
          out += stub;
        } else {  // reference first; each bank entry's own body; otherwise the stub
          std::string uses_reference = "exercise_body(\"" + number + "\", \"reference\")";
          std::string others;
          for (const BankEntry& e : bank) {
            if (e.number != number) continue;
            const std::string test = "exercise_body(\"" + number + "\", \"" + e.name + "\")";
            const auto r = e.regions.find(region);
            if (r == e.regions.end()) {
              uses_reference += " || " + test;
              continue;
            }
            others +=
                indent + "} else if (" + test + ") {  // " + (e.wrong ? "wrong: " : "alternative: ") + e.what + "\n";
            for (const std::string& l : r->second) others += l + "\n";
          }
          out += indent + "if (" + uses_reference + ") {\n" + body + others + indent + "} else {\n" + stub + indent +
                 "}\n";
        }
      }
      inside = false;
      out += line + "\n";
      continue;
    }
    if (inside && replacing) {
      body += line + "\n";
      continue;
    }
    out += line + "\n";
  }
  if (!touched) return out;
  // After a header's `#pragma once`, so that the added includes are read once too.
  static const std::regex pragma_once(R"((^|\n)#pragma once[^\n]*\n)");
  std::smatch once;
  if (!std::regex_search(out, once, pragma_once)) return preamble(kind) + out;
  const auto after = static_cast<std::size_t>(once.position(0) + once.length(0));
  return out.substr(0, after) + preamble(kind) + out.substr(after);
}

}  // namespace exercises
