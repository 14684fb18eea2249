#pragma once
// Autocast: inside an AutocastGuard(DType::bfloat16), matmul and flash_attention multiply bfloat16 copies of
// their float32 operands (float32 accumulation) and return float32; every other op runs in float32 as before.
// Per OS thread, like torch.autocast; scopes nest and restore the previous state.
//
// Which ops are in which list, and why (PyTorch's "CPU Ops that can autocast to bfloat16" and "CPU Ops
// that can autocast to float32", torch.amp docs): docs/11_mixed_precision.md. Deviation: PyTorch's
// matmul returns bfloat16 and the next op reads bfloat16; ours rounds only the operands, so the product
// keeps float32 and the ops after it (bias, GELU, softmax, layer norm, residual adds) read float32.
// The parameters stay float32 (the master copy) and so do their gradients: matmul's backward products
// return float32 sums, which the casts' backward passes on (PyTorch's return bfloat16, widened by the cast).
// matmul keeps a parameter's memory for backward, not its bfloat16 copy, and casts it again there (PyTorch keeps
// the copy; a parameter lives through the step anyway, so ours holds 2 bytes a parameter less at the peak).
//
// As torch.autocast's cache (cache_enabled), a conversion made with grad mode off inside a scope is kept until the
// outermost scope ends: decoding converts each weight once per generated sequence instead of once per token.
// A kept conversion is reused only for the same memory (storage, offset, shape, strides) at the same version, and
// only while nobody has written to it. With grad mode on nothing is kept: a step's forward reads each weight once,
// and a conversion's node must belong to one graph.
#include "autograd/dtype.h"

namespace stepformer {

// The dtype matmul's and flash_attention's operands are cast to, or float32 when autocast is off.
DType autocast_dtype();

class AutocastGuard {
 public:
  explicit AutocastGuard(DType dtype = DType::bfloat16, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DType previous_;
};

}  // namespace stepformer
