// libFuzzer target: the safetensors parser on arbitrary bytes. It must either throw one of our typed
// errors or return tensors that survive a round trip (serialize, parse again, same names, shapes, bytes).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "nn/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace stepformer;
  nn::Safetensors parsed;
  try {
    parsed = nn::parse_safetensors(std::span(reinterpret_cast<const std::byte*>(data), size), "fuzz");
  } catch (const Error&) {
    return 0;  // rejected with a typed error naming the problem: what we want
  }
  const auto again = nn::parse_safetensors(nn::serialize_safetensors(parsed.tensors, parsed.metadata));
  if (again.metadata != parsed.metadata || again.tensors.size() != parsed.tensors.size()) std::abort();
  for (const auto& [name, t] : parsed.tensors) {
    const Tensor& u = again.tensors.at(name);
    if (u.shape() != t.shape() || u.dtype() != t.dtype()) std::abort();
    const auto a = t.to_vector<double>(), b = u.to_vector<double>();  // bitwise: NaN payloads too
    if (a.size() != b.size() || (!a.empty() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double))))
      std::abort();
  }
  return 0;
}
