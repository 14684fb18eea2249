#pragma once
// What the benchmarks that time a device share: waiting for it. A one-element copy to the host returns only
// once the work queued before it is done (the CUDA runtime's copies are synchronous); on the CPU at once.
#include "autograd/ops.h"

namespace stepformer::bench {

inline void wait_for(const Tensor& t) { (void)narrow(view(t, {-1}), 0, 0, 1).item(); }

}  // namespace stepformer::bench
