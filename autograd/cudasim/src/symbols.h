#pragma once
// Names for addresses, so that a report says `gemm_v2<float>+0x1c4` and `shared a_tile`, not 0x55d0c3a1b2c4:
// the program's own ELF symbol table (local symbols too: a __shared__ array is a function's static local).
#include <string>

namespace cudasim::detail {

struct SymbolName {
  std::string name;        // short: namespaces and the argument list dropped ("gemm_v2<float>", "a_tile")
  std::size_t offset = 0;  // of the address in the symbol
  bool found = false;
};

SymbolName symbol_at(const void* address);

// "gemm_v2<float>+0x1c4", or the bare address when the program has no symbol for it.
std::string code_site(const void* address);

}  // namespace cudasim::detail
