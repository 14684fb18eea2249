#include "autograd/random.h"

namespace stepformer {

Generator& default_generator() {
  static Generator gen(0);
  return gen;
}
void manual_seed(std::uint64_t seed) { default_generator() = Generator(seed); }

}  // namespace stepformer
