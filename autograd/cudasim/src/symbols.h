#pragma once
// Names for addresses, so that a report says `gemm_v2<float>+0x1c4` and `shared a_tile`, not 0x55d0c3a1b2c4:
// the program's own ELF symbol table (local symbols too: a __shared__ array is a function's static local).
#include <cstdint>
#include <string>
#include <vector>

namespace cudasim::detail {

struct SymbolName {
  std::string name;        // short: namespaces and the argument list dropped ("gemm_v2<float>", "a_tile")
  std::size_t offset = 0;  // of the address in the symbol
  bool found = false;
};

SymbolName symbol_at(const void* address);

struct Symbol {
  std::uintptr_t start = 0;
  std::size_t size = 0;
  std::string name;  // short, as SymbolName's
};

// The symbols lying wholly in [begin, end), in address order: the static __shared__ variables of the checking
// build's section, for memcheck's bounds.
std::vector<Symbol> symbols_within(std::uintptr_t begin, std::uintptr_t end);

// "gemm_v2<float>+0x1c4, gemm.cu:212" (the source line where the program has line tables, source_line), or the
// bare address when the program has no symbol for it.
std::string code_site(const void* address);

// Where the program is loaded: a runtime address minus this is the address in the ELF file.
std::uintptr_t program_load_bias();

// "gemm.cu:212": the source line of the call that returns to `return_address` (an access hook's caller), from
// the program's line tables through binutils' addr2line (source_lines.cpp); "" when it cannot tell.
std::string source_line(const void* return_address);

}  // namespace cudasim::detail
