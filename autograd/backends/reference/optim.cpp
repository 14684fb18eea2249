// One Adam / AdamW step: ../elementwise_math.h's adam_element on each element, in index order, through the
// descriptors' own strides.
#include "../elementwise_math.h"
#include "reference_backend.h"
#include "strided.h"

namespace stepformer::reference {

void ReferenceBackend::adam_update(const TensorDesc& param, const TensorDesc& grad, const TensorDesc& m,
                                   const TensorDesc& v, const AdamConfig& cfg) {
  const AdamStep s = at_step_values(adam_step(cfg), static_cast<const double*>(cfg.step_values.data));
  dispatch_floating(param.dtype, "adam_update", [&](auto t) {
    using T = decltype(t);
    for (std::int64_t i = 0; i < param.numel(); ++i)
      adam_element(flat<T>(param, i), flat<T>(grad, i), flat<T>(m, i), flat<T>(v, i), s);
  });
}

}  // namespace stepformer::reference
