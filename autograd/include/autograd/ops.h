#pragma once
// Every op on tensors, as free functions (the table of differentiable ones is op_table.h).
// Binary ops broadcast by NumPy/PyTorch rules; both operands must share dtype and device.
// Dims may be negative (-1 is the last). Errors are typed (errors.h) and name the op and shapes.
#include <cstdint>
#include <optional>
#include <vector>

#include "autograd/random.h"
#include "autograd/tensor.h"

namespace stepformer {

// --- elementwise (ops/elementwise.cpp) ---------------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& a);
Tensor pow(const Tensor& a, double exponent);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor relu(const Tensor& a);
Tensor gelu(const Tensor& a);  // exact: x * Phi(x), PyTorch's default (approximate='none')
Tensor silu(const Tensor& a);  // x * sigmoid(x), torch.nn.functional.silu
// silu(gate) * value, same shapes: SwiGLU's product (chapter 12) as one op, which keeps only its two inputs for
// backward (the composite would keep silu(gate) too).
Tensor swiglu(const Tensor& gate, const Tensor& value);
// Comparisons: boolean results, never differentiable.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& mask);
Tensor logical_or(const Tensor& a, const Tensor& b);                 // boolean masks, broadcast
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);  // cond ? a : b, all broadcast
// x with `value` wherever mask is true (mask broadcasts to x). Not in place: use the result.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// A scalar operand becomes a 0-dim tensor of the other operand's dtype and device, except that a floating
// tensor times a number is one `scale` kernel that keeps nothing for backward, as PyTorch's mul by a Python
// number. The factor is in the compute type, float32 for float32 and bfloat16 (not rounded to bfloat16 first), as
// PyTorch 2's CPU mul kernel reads it; Debian's PyTorch 1.13 rounds it to bfloat16 first.
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);

// --- reductions (ops/reduce.cpp) ---------------------------------------------------------------------
// Over `dims` (all dims when empty); keepdim leaves them as size 1.
Tensor sum(const Tensor& a, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& a, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
Tensor max(const Tensor& a, const std::vector<std::int64_t>& dims = {}, bool keepdim = false);
// Sums broadcast dimensions away so that `g` gets `shape` (the backward of broadcasting).
Tensor sum_to(const Tensor& g, const Shape& shape);
// float64 [n]: the sum of the squares of each of n floating tensors of one device, each as sum(x * x) in its dtype
// (PyTorch's foreach norm, squared; clip_grad_norm_). Not differentiable. Where the backend sums many tensors in one
// kernel (Backend::sum_squares_many) it does, adding in float64.
Tensor sum_of_squares(const std::vector<Tensor>& tensors);

// --- views and copies (ops/view.cpp) -----------------------------------------------------------------
// view: no copy; throws ShapeError when the strides make that impossible. reshape: a view when
// possible, else a copy. One size may be -1 (inferred).
Tensor view(const Tensor& a, const Shape& shape);
Tensor reshape(const Tensor& a, const Shape& shape);
Tensor transpose(const Tensor& a, std::int64_t dim0, std::int64_t dim1);
Tensor permute(const Tensor& a, const std::vector<std::int64_t>& dims);
Tensor narrow(const Tensor& a, std::int64_t dim, std::int64_t start, std::int64_t length);
// Python's a[start:end:step] along dim; start/end are clamped, negative ones count from the end.
Tensor slice(const Tensor& a, std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step = 1);
Tensor squeeze(const Tensor& a, std::int64_t dim);
Tensor unsqueeze(const Tensor& a, std::int64_t dim);
Tensor expand(const Tensor& a, const Shape& shape);  // size-1 dims repeat with stride 0; -1 keeps
Tensor contiguous(const Tensor& a);                  // `a` itself when already contiguous
Tensor cat(const std::vector<Tensor>& tensors, std::int64_t dim);
Tensor stack(const std::vector<Tensor>& tensors, std::int64_t dim);

// --- matmul (ops/matmul.cpp) -------------------------------------------------------------------------
// torch.matmul: 1-D operands are promoted and the added dim removed; batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);

// --- softmax (ops/softmax.cpp) ------------------------------------------------------------------------
Tensor softmax(const Tensor& a, std::int64_t dim = -1);  // max-subtracted: stable for large inputs
Tensor log_softmax(const Tensor& a, std::int64_t dim = -1);

// --- normalisation (ops/norm.cpp) --------------------------------------------------------------------
// Over the last dim, biased variance, eps inside the sqrt (as torch.nn.functional.layer_norm).
// weight and bias ([D]) may be undefined tensors.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
// Over the last dim: x / sqrt(mean(x^2) + eps) * weight, no mean subtracted (as torch.nn.functional.rms_norm;
// Zhang & Sennrich 2019). weight ([D]) may be an undefined tensor.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps = 1e-5);
// sum = x + residual and normed = rms_norm(sum, weight, eps) in one pass over the rows, where add then rms_norm make
// two (a pre-norm block's h = x + f(...) and the next norm of h). Same shapes and dtypes, no broadcasting; the
// values and gradients are those of the two ops, bit for bit.
struct SumAndNorm {
  Tensor sum, normed;
};
SumAndNorm add_rms_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, double eps = 1e-5);

// --- rotary position embedding (ops/rotary.cpp) -------------------------------------------------------
// x [..., T, D] (D even), cos and sin [T, D/2]: coordinate pair i of row t, (a, b), becomes
// (a cos - b sin, b cos + a sin) with cos[t, i] and sin[t, i], a rotation in the pair's plane; `pairing` says which
// coordinates are pairs (backend.h). Chapter 12's rope() builds the tables; they take no gradient.
Tensor rotate_pairs(const Tensor& x, const Tensor& cos, const Tensor& sin, RopePairing pairing);

// --- embedding (ops/embedding.cpp) -------------------------------------------------------------------
// weight [V, D], ids int64 [...] -> [..., D]. An id outside [0, V) is an IndexError naming it.
// Rows at padding_idx receive no gradient (torch.nn.functional.embedding).
Tensor embedding(const Tensor& weight, const Tensor& ids, std::optional<std::int64_t> padding_idx = std::nullopt);

// --- random (ops/random.cpp) -------------------------------------------------------------------------
Tensor rand(const Shape& shape, Generator& gen, Options o = {});   // U[0, 1)
Tensor randn(const Shape& shape, Generator& gen, Options o = {});  // N(0, 1)
Tensor uniform(const Shape& shape, double low, double high, Generator& gen, Options o = {});
Tensor normal(const Shape& shape, double mean, double std, Generator& gen, Options o = {});
// Inverted dropout: in training, zero each element with probability p and scale the rest by 1/(1-p);
// the identity when !training or p == 0. The mask depends only on (generator seed, offset, index).
Tensor dropout(const Tensor& a, double p, bool training, Generator& gen = default_generator());
// One token drawn from logits [V] (any float dtype and device) as chapter 12 samples (SamplingConfig, backend.h):
// the distribution drawn from (float64 [V]) and the token (int64 [1]), both on the logits' device, so a GPU's
// decoding loop does not wait for them. One uniform draw from gen: the same logits, seed and offset give the same
// token on every backend (backends/sampling_math.h). `into`, when given, is an int64 [1] tensor on that device (a view
// of a longer one: the tokens of a generation) that receives the token and is returned as it. `counter`, when given,
// is an int64 [1] on that device: the draw is then number counter - counter_base of a run of gen.take(1)s from this
// one (TokenDraw, backend.h), read on the device, so that a decode step recorded once as a device graph draws the
// next number at each replay as the counter advances. Not differentiable.
struct SampledToken {
  Tensor token, probs;
};
SampledToken sample_token(const Tensor& logits, const SamplingConfig& cfg, Generator& gen, const Tensor& into = {},
                          const Tensor& counter = {}, std::int64_t counter_base = 0);

// --- attention (ops/attention.cpp) -----------------------------------------------------------------
// softmax(scale Q K^T, blocked keys at -inf) V with dropout on the weights, as chapter 02's composite computes
// it, but in tiles with an online softmax (FlashAttention, Dao et al. 2022): the [Tq, Tk] weights are never
// stored, and backward recomputes them. q [B, H, Tq, Dh], k [B, Hkv, Tk, Dh], v [B, Hkv, Tk, Dv] -> [B, H, Tq, Dv]:
// query head h reads key/value head h / (H / Hkv), as repeat_kv would lay them out (grouped-query attention;
// PyTorch's scaled_dot_product_attention with enable_gqa), and k, v may be views of a longer cache; blocked: boolean,
// broadcastable to [B, H, Tq, Tk], or undefined; causal blocks key j > query i. The dropout mask is the one dropout()
// would draw for the [B, H, Tq, Tk] weights from the same generator state. bfloat16 q, k, v give a bfloat16 output
// (float32 sums); under autocast float32 ones are multiplied as bfloat16 copies and the output is float32 (docs/11).
Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& blocked, double scale,
                       bool causal = false, double dropout = 0.0, bool training = false,
                       Generator& gen = default_generator());

// --- losses (ops/loss.cpp) ---------------------------------------------------------------------------
enum class Reduction { mean, sum, none };
// logits [..., C] (classes last; deviation: torch wants [N, C, ...]), targets int64 [...].
// mean divides by the number of targets that are not ignore_index (torch.nn.CrossEntropyLoss).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t ignore_index = -100,
                     double label_smoothing = 0.0, Reduction reduction = Reduction::mean);

// --- in place (ops/inplace.cpp): not differentiable; for optimizers and initialisation -------------
// Each bumps the tensor's version. With grad mode on, a tensor that requires grad is refused.
Tensor& fill_(Tensor& a, double value);
Tensor& zero_(Tensor& a);
Tensor& copy_(Tensor& dst, const Tensor& src);                 // src broadcasts to dst; dtypes may differ
Tensor& add_(Tensor& a, const Tensor& b, double alpha = 1.0);  // a += alpha * b
Tensor& mul_(Tensor& a, const Tensor& b);                      // a *= b, b broadcast (one kernel: clip_grad_norm_)
// dst's slices index[i] along `dim` = source's slice i (torch.Tensor.index_copy_): index int64 [n] (or one value),
// source shaped as dst but n along dim, same dtype and device. Where an index repeats, its last slice is written
// (PyTorch leaves that undefined). A bad index writes nothing (on a GPU, reported at the next copy from it). A token's
// keys written into a KV cache at a position kept on the device, without the host reading it.
Tensor& index_copy_(Tensor& dst, std::int64_t dim, const Tensor& index, const Tensor& source);
// Each tensor *= factor, a one-value tensor of their device (PyTorch's foreach mul_): the bits of mul_ on each, in
// fewer launches on a GPU (Backend::scale_many).
void mul_(std::vector<Tensor>& tensors, const Tensor& factor);
void adam_update_(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamConfig& cfg);
// The same step on every params[i] with grads[i], ms[i], vs[i] (PyTorch's foreach Adam): the same numbers as one
// adam_update_ each, in fewer kernel launches on a GPU (Backend::adam_update_many). `step_values`, when given, is a
// float64 [3] on their device holding the step's lr, 1 - beta1^step and 1 - beta2^step, read there in place of cfg's
// (AdamConfig::step_values): a step recorded once as a device graph and replayed takes each replay's values.
void adam_update_(std::vector<Tensor>& params, const std::vector<Tensor>& grads, std::vector<Tensor>& ms,
                  std::vector<Tensor>& vs, const AdamConfig& cfg, const Tensor& step_values = {});

}  // namespace stepformer
