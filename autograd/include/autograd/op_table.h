#pragma once
#include <vector>
// The one table of differentiable ops: the index of the engine (after PyTorch's derivatives.yaml).
// Each row: the op, the file that holds its forward and backward side by side, and the backward formula
// in math. `g` is the gradient of the output; sum_to(x, shape) sums broadcast dimensions away. The code of
// each formula is the backward function its record(Op::name, ...) call passes, and what it saves is that
// call's list, which the function receives as its parameters (engine.h).
// Grepping an op's name finds its row, its implementation and its tests.
#define STEPFORMER_OPS(X)                                                                                    \
  X(add, "elementwise", "ga = sum_to(g, a); gb = sum_to(g, b)")                                              \
  X(sub, "elementwise", "ga = sum_to(g, a); gb = -sum_to(g, b)")                                             \
  X(mul, "elementwise", "ga = sum_to(g * b, a); gb = sum_to(g * a, b)")                                      \
  X(scale, "elementwise", "ga = g * alpha   (a * alpha for a number alpha: nothing kept)")                   \
  X(div, "elementwise", "ga = sum_to(g / b, a); gb = -sum_to(g * a / b^2, b)")                               \
  X(add_scalar, "elementwise", "ga = g   (a + alpha, a - alpha for a number alpha: nothing kept)")           \
  X(div_scalar, "elementwise", "ga = g / alpha   (a / alpha for a number alpha: nothing kept)")              \
  X(neg, "elementwise", "ga = -g")                                                                           \
  X(pow, "elementwise", "ga = g * p * a^(p-1)")                                                              \
  X(exp, "elementwise", "ga = g * y")                                                                        \
  X(log, "elementwise", "ga = g / a")                                                                        \
  X(sqrt, "elementwise", "ga = g / (2 y)")                                                                   \
  X(rsqrt, "elementwise", "ga = -g y^3 / 2")                                                                 \
  X(tanh, "elementwise", "ga = g (1 - y^2)")                                                                 \
  X(relu, "elementwise", "ga = g * (a > 0)   (kept: out > 0, one byte an element)")                          \
  X(gelu, "elementwise", "ga = g * (Phi(a) + a phi(a))   (exact, erf form)")                                 \
  X(silu, "elementwise", "ga = g * s (1 + a (1 - s)),  s = sigmoid(a)")                                      \
  X(swiglu, "elementwise", "ggate = g * value * silu'(gate); gvalue = g * silu(gate)")                       \
  X(where, "elementwise", "ga = sum_to(cond ? g : 0, a); gb = sum_to(cond ? 0 : g, b)")                      \
  X(to_dtype, "elementwise", "ga = g converted back to a's dtype")                                           \
  X(to_device, "elementwise", "ga = g moved back to a's device")                                             \
  X(sum, "reduce", "ga = expand(g, a)")                                                                      \
  X(mean, "reduce", "ga = expand(g, a) / n")                                                                 \
  X(max, "reduce", "ga = expand(g, a) * (a == y) / count(a == y)   (ties share, as amax)")                   \
  X(view, "view", "ga = view(g, a.shape)")                                                                   \
  X(permute, "view", "ga = permute(g, inverse)")                                                             \
  X(narrow, "view", "ga = zeros(a.shape) with g written into the narrowed window")                           \
  X(expand, "view", "ga = sum_to(g, a.shape)")                                                               \
  X(contiguous, "view", "ga = g")                                                                            \
  X(cat, "view", "ga_i = narrow(g, dim, start_i, len_i)")                                                    \
  X(matmul, "matmul", "ga = sum_to(g @ b^T, a); gb = sum_to(a^T @ g, b)")                                    \
  X(softmax, "softmax", "ga = y * (g - sum(g * y))")                                                         \
  X(log_softmax, "softmax", "ga = g - exp(y) * sum(g)")                                                      \
  X(layer_norm, "norm", "ga = rstd * (gx - mean(gx) - xhat * mean(gx * xhat)); gx = g * gamma")              \
  X(rms_norm, "norm", "ga = rstd * (gx - xhat * mean(gx * xhat)); gx = g * gamma; xhat = a * rstd")          \
  X(rotate_pairs, "rotary", "ga = rotate_pairs(g, cos, -sin)   (the opposite angle; cos and sin take none)") \
  X(embedding, "embedding", "gweight = scatter_add(ids, g)   (repeated ids accumulate)")                     \
  X(dropout, "random", "ga = g * mask / (1 - p)   (the mask drawn again from its counters)")                 \
  X(cross_entropy, "loss", "glogits = g * (softmax(logits) - (1-s) onehot - s/C) / n")                       \
  X(flash_attention, "attention",                                                                            \
    "w = exp(s - lse); ds = w (drop dout.v - dout.out); gq = scale ds k; gk = scale ds^T q; gv = (w drop)^T dout")

namespace stepformer {

enum class Op {
#define STEPFORMER_OP_ENUM(name, family, backward) name,
  STEPFORMER_OPS(STEPFORMER_OP_ENUM)
#undef STEPFORMER_OP_ENUM
};

struct OpInfo {
  const char* name;
  const char* family;  // autograd/src/ops/<family>.cpp
  const char* backward;
};

const OpInfo& op_info(Op op);
const std::vector<OpInfo>& all_ops();

}  // namespace stepformer
