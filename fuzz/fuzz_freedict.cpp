// libFuzzer target: the FreeDict example reader and the split on arbitrary dictionary text. Every pair
// has a German and an English side without line breaks; the split never invents or duplicates pairs.
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string_view>

#include "transformer/freedict.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace stepformer::transformer;
  const auto pairs = freedict_examples(std::string_view(reinterpret_cast<const char*>(data), size));
  for (const auto& p : pairs)
    if (p.src.empty() || p.tgt.empty() || p.src.find('\n') != std::string::npos ||
        p.tgt.find('\n') != std::string::npos)
      std::abort();
  const Splits s = split_pairs(pairs, 16);
  if (s.train.size() + s.valid.size() + s.test.size() > pairs.size()) std::abort();
  std::set<std::vector<std::string>> sources;
  for (const auto* split : {&s.train, &s.valid, &s.test})
    for (const auto& p : *split)
      if (p.src.empty() || p.tgt.empty() || p.src.size() > 16 || !sources.insert(p.src).second) std::abort();
  return 0;
}
