// Reads /proc/self/exe's .symtab once (functions and objects with a size) and looks addresses up in it.
// Addresses in shared libraries are not named: stepformer links its libraries statically.
#include "symbols.h"

#include <cxxabi.h>
#include <elf.h>
#include <fmt/format.h>
#include <link.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <vector>

namespace cudasim::detail {

namespace {

struct Entry {
  std::uintptr_t start = 0;
  std::size_t size = 0;
  std::string mangled;
};

std::vector<char> read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<Entry> load_symbols() {
  std::vector<Entry> out;
  const std::vector<char> file = read_file("/proc/self/exe");
  if (file.size() < sizeof(Elf64_Ehdr)) return out;
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(file.data());
  if (std::string_view(reinterpret_cast<const char*>(eh->e_ident), 4) !=
          "\x7f"
          "ELF" ||
      eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_shoff + std::uint64_t{eh->e_shnum} * sizeof(Elf64_Shdr) > file.size())
    return out;
  const auto* sections = reinterpret_cast<const Elf64_Shdr*>(file.data() + eh->e_shoff);
  const std::uintptr_t bias = program_load_bias();
  for (int i = 0; i < eh->e_shnum; ++i) {
    const Elf64_Shdr& sh = sections[i];
    if (sh.sh_type != SHT_SYMTAB || sh.sh_link >= eh->e_shnum) continue;
    const Elf64_Shdr& strings = sections[sh.sh_link];
    if (sh.sh_offset + sh.sh_size > file.size() || strings.sh_offset + strings.sh_size > file.size()) continue;
    const auto* syms = reinterpret_cast<const Elf64_Sym*>(file.data() + sh.sh_offset);
    for (std::size_t k = 0; k < sh.sh_size / sizeof(Elf64_Sym); ++k) {
      const Elf64_Sym& s = syms[k];
      const int type = ELF64_ST_TYPE(s.st_info);
      if ((type != STT_FUNC && type != STT_OBJECT) || s.st_size == 0 || s.st_shndx == SHN_UNDEF ||
          s.st_name >= strings.sh_size)
        continue;
      out.push_back({bias + s.st_value, s.st_size, file.data() + strings.sh_offset + s.st_name});
    }
  }
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.start < b.start; });
  return out;
}

// "ns::(anonymous namespace)::gemm_v2<float>(ns::Problem, float, float)" -> "gemm_v2<float>";
// "ns::kernel(float*)::tile" -> "tile" (a function's static local: what follows the argument list).
std::string shorten(std::string s) {
  for (std::size_t at; (at = s.find("(anonymous namespace)::")) != std::string::npos;) s.erase(at, 23);
  int angle = 0;
  std::size_t args = std::string::npos, last_scope = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '<') ++angle;
    if (c == '>') --angle;
    if (angle == 0 && c == ':' && i + 1 < s.size() && s[i + 1] == ':') last_scope = i + 2;
    if (angle == 0 && c == '(') {
      args = i;
      break;
    }
  }
  if (args == std::string::npos) return s.substr(last_scope);
  int depth = 0;
  std::size_t close = args;
  for (; close < s.size(); ++close) {
    if (s[close] == '(') ++depth;
    if (s[close] == ')' && --depth == 0) break;
  }
  const std::size_t local = s.rfind("::");
  if (close < s.size() && local != std::string::npos && local > close) return s.substr(local + 2);
  return s.substr(last_scope, args - last_scope);
}

std::string demangle(const std::string& mangled) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> out(abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status),
                                                  &std::free);
  return status == 0 && out ? std::string(out.get()) : mangled;
}

const std::vector<Entry>& symbols() {
  static const std::vector<Entry> all = load_symbols();
  return all;
}

}  // namespace

std::uintptr_t program_load_bias() {
  std::uintptr_t bias = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        *static_cast<std::uintptr_t*>(out) = info->dlpi_addr;  // the first object is the program itself
        return 1;
      },
      &bias);
  return bias;
}

SymbolName symbol_at(const void* address) {
  const std::vector<Entry>& all = symbols();
  const auto a = reinterpret_cast<std::uintptr_t>(address);
  auto it = std::upper_bound(all.begin(), all.end(), a, [](std::uintptr_t v, const Entry& e) { return v < e.start; });
  if (it == all.begin()) return {};
  --it;
  if (a >= it->start + it->size) return {};
  return {shorten(demangle(it->mangled)), a - it->start, true};
}

std::vector<Symbol> symbols_within(std::uintptr_t begin, std::uintptr_t end) {
  std::vector<Symbol> out;
  for (const Entry& e : symbols())
    if (e.start >= begin && e.start + e.size <= end) out.push_back({e.start, e.size, shorten(demangle(e.mangled))});
  return out;
}

std::string code_site(const void* address) {
  const SymbolName s = symbol_at(address);
  const std::string at = s.found ? fmt::format("{}+{:#x}", s.name, s.offset) : fmt::format("{}", address);
  const std::string line = source_line(address);
  return line.empty() ? at : at + ", " + line;
}

}  // namespace cudasim::detail
