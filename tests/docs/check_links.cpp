// check_links ROOT: every relative link and image in ROOT/README.md and ROOT/docs/*.md must name a file
// that exists. The docs point readers at exact files; a rename must not break them silently.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <vector>

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: check_links ROOT\n";
    return 2;
  }
  const fs::path root = argv[1];
  std::vector<fs::path> docs{root / "README.md"};
  for (const auto& e : fs::directory_iterator(root / "docs"))
    if (e.path().extension() == ".md") docs.push_back(e.path());

  const std::regex fenced("```[^`]*```"), inline_code("`[^`\n]*`"), link(R"(\]\(([^)#\s]+)[^)]*\))");
  int checked = 0, broken = 0;
  for (const fs::path& doc : docs) {
    std::ifstream in(doc);
    std::stringstream buffer;
    buffer << in.rdbuf();
    // Code is not prose: a C++ lambda "[a](const Tensor& g)" is not a link.
    const std::string text = std::regex_replace(std::regex_replace(buffer.str(), fenced, ""), inline_code, "x");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), link); it != std::sregex_iterator(); ++it) {
      const std::string target = (*it)[1];
      if (target.find("://") != std::string::npos) continue;
      ++checked;
      if (!fs::exists(doc.parent_path() / target)) {
        std::cout << "broken link in " << doc.string() << ": " << target << "\n";
        ++broken;
      }
    }
  }
  std::cout << checked << " relative links checked, " << broken << " broken\n";
  return broken == 0 && checked > 0 ? 0 : 1;
}
