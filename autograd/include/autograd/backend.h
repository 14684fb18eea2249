#pragma once
// The Backend interface: the small set of kernels a device provides. This is the seam between the
// autograd engine (above) and the memory of one device (below).
//
// A backend sees device pointers, shapes and strides (a TensorDesc), never a Tensor, a graph or a
// gradient. Ops in autograd/src/ops never touch element memory themselves; they call these kernels.
// Pointers may be device-resident (cuda): only the backend that allocated them may dereference them.
//
// Conventions for every kernel:
// - Strides are in elements; a stride of 0 repeats an element (how broadcasting reaches a kernel).
// - `out` never aliases an input unless a kernel says it may, and is written, not accumulated into,
//   unless it says so.
// - Kernels that take rows (softmax, layer_norm, cross-entropy, gather) want contiguous operands;
//   the op makes them contiguous first.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autograd/device.h"
#include "autograd/dtype.h"

namespace stepformer {

inline constexpr int kMaxDims = 8;

// A strided view of device memory: data points at the view's first element (offset already applied).
struct TensorDesc {
  void* data = nullptr;
  DType dtype = DType::float32;
  int ndim = 0;
  std::int64_t shape[kMaxDims] = {};
  std::int64_t strides[kMaxDims] = {};

  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= shape[d];
    return n;
  }
};

// Which coordinates of a row are rotated together by rotate_pairs (rotary position embeddings):
// `half` pairs (x_i, x_{i+D/2}), as GPT-NeoX and Hugging Face's Llama; `adjacent` pairs (x_{2i}, x_{2i+1}), as
// RoFormer (Su et al. 2021, equation 34) and Meta's Llama. The two are different functions of the same weights.
enum class RopePairing { half, adjacent };

// Elementwise functions of one operand. `alpha` is the exponent of pow and the number of scale (x * alpha),
// add_scalar (x + alpha) and div_scalar (x / alpha).
// `copy` also converts between dtypes (out.dtype may differ from in.dtype). The formulas of these and of
// BinaryOp are written once, for every backend, in autograd/backends/elementwise_math.h.
#define STEPFORMER_UNARY_OPS(X)                                                                                     \
  X(copy)                                                                                                           \
  X(neg) X(exp) X(log) X(sqrt) X(rsqrt) X(tanh) X(relu) X(gelu) X(silu) X(pow) X(scale) X(add_scalar) X(div_scalar) \
      X(logical_not)

// Elementwise functions of two operands (broadcast by stride 0). The comparisons write booleans;
// gelu_backward(g, x) = g * gelu'(x); silu_backward(g, x) = g * silu'(x);
// tanh_backward(g, y) = g*(1-y^2); silu_mul(x, y) = silu(x) * y (SwiGLU's product in one pass, silu(x) rounded to
// the dtype first, as the two ops would).
// clang-format off
#define STEPFORMER_BINARY_OPS(X)                                                          \
  X(add) X(sub) X(mul) X(div) X(eq) X(ne) X(lt) X(gt) X(gelu_backward)                  \
  X(silu_backward) X(tanh_backward) X(silu_mul)
// clang-format on

#define STEPFORMER_ENUM_VALUE(name) name,
enum class UnaryOp : std::uint8_t { STEPFORMER_UNARY_OPS(STEPFORMER_ENUM_VALUE) };
enum class BinaryOp : std::uint8_t { STEPFORMER_BINARY_OPS(STEPFORMER_ENUM_VALUE) };
#undef STEPFORMER_ENUM_VALUE

// Reductions: `out` has the input's ndim with size 1 in every reduced dimension.
enum class ReduceOp : std::uint8_t { sum, max };

// Random fills from the counter-based generator (autograd/random.h): element i of the fill depends only
// on (seed, offset, i), so the result is the same for any thread count and on every device.
// uniform: U[a, b); normal: N(a, b^2); dropout: 0 with probability a, else 1/(1-a). `out` is contiguous.
enum class Distribution : std::uint8_t { uniform, normal, dropout };

// The message of the IndexError for a bad index a kernel found: the op's words for the first bad position (counted
// in the flattened operand) and the value found there.
using DescribeBadIndex = std::function<std::string(std::int64_t position, std::int64_t value)>;

struct AdamConfig {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  bool decoupled = false;  // AdamW (Loshchilov & Hutter): decay the weights, not the gradient
  std::int64_t step = 1;   // 1-based, for bias correction
  // Where data is not null: float64 [3] on the device, this step's lr, 1 - beta1^step and 1 - beta2^step, read
  // there in place of lr and step's: a step recorded once as a device graph then updates with each replay's
  // values (LMTrainer's schedule).
  TensorDesc step_values;
};
// One parameter's tensors for adam_update_many: contiguous param, grad, m, v of one numel and dtype.
struct AdamTensors {
  TensorDesc param, grad, m, v;
};

// The attention kernels' settings. Scores are s_ij = scale * q_i . k_j; `causal` blocks key j > query i
// (both counted from the start, as PyTorch's is_causal); `dropout` zeroes weight (b, h, i, j) where
// random_fill's dropout fill of [B, H, Tq, Tk] at (seed, offset) is 0, and scales the rest by 1 / (1 - dropout):
// the same mask as the composite softmax-dropout-matmul of chapter 02 draws.
struct AttentionConfig {
  double scale = 1.0;
  bool causal = false;
  double dropout = 0.0;
  std::uint64_t seed = 0, offset = 0;
};

// How a token is drawn from logits (chapter 12): softmax(logits / temperature), cut to the top_k likeliest and
// then to the nucleus top_p of what top-k kept, renormalised. transformer::SamplingOptions is this struct.
struct SamplingConfig {
  double temperature = 1.0;  // 0: greedy (argmax); < 1 sharpens the distribution, > 1 flattens it
  std::int64_t top_k = 0;    // keep the k most likely tokens (Fan et al. 2018); 0 keeps all
  double top_p = 1.0;  // keep the fewest most likely tokens whose probabilities sum to >= p (Holtzman et al. 2020)
};

// The uniform in [0, 1) a sample_token draws at: `u`, or, where `counter` is defined (data not null), the u of draw
// n = counter[0] - counter_base of a run of Generator::take(1)s that starts at `offset` (token_uniform,
// backends/sampling_math.h), n read on the device from an int64 [1]: a kernel recorded once in a device graph
// (device_graph.h) then draws the next number at each replay, as the counter advances there.
struct TokenDraw {
  double u = 0;
  TensorDesc counter;
  std::uint64_t seed = 0, offset = 0;
  std::int64_t counter_base = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;

  // --- memory -------------------------------------------------------------------------------------
  virtual void* allocate(std::size_t bytes) = 0;  // throws ResourceError when it cannot
  virtual void deallocate(void* ptr, std::size_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* host_src, std::size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, std::size_t bytes) = 0;
  virtual std::size_t bytes_in_use() const = 0;  // live allocations, for leak tests
  // How often the host has waited for this device: a GPU runs queued kernels while the host goes ahead, until
  // a copy between host and device memory (cudaMemcpy from ordinary host memory) makes the host wait for the
  // queue to drain. Zero where the device's memory is the host's.
  virtual std::size_t host_waits() const { return 0; }
  // Kernels queued on this device so far: each costs the host microseconds to queue and the device some to start,
  // which for a small model's many small kernels is most of a step. Zero where kernels are function calls.
  virtual std::size_t kernel_launches() const { return 0; }
  // Blocks asked of the device's driver (cudaMalloc) because no freed block of the size was kept: each one makes
  // the host wait for the device as a copy does. Zero where there is no such cache.
  virtual std::size_t driver_allocations() const { return 0; }

  // --- graphs (CUDA graphs) -------------------------------------------------------------------------
  // Between begin_graph and end_graph the kernels this device is given are recorded into graph `id`, not run, and
  // the memory allocated is the graph's own until release_graph (a replay writes it again, so no other allocation
  // may be handed it, even after its tensor dies). A copy between host and device while recording throws
  // DeviceError: a replay runs without the host. replay_graph queues the recorded kernels again, in order, on the
  // same memory, as one launch. The defaults throw DeviceError: only the CUDA devices record.
  virtual std::uint64_t begin_graph();
  virtual void end_graph(std::uint64_t id);
  virtual void replay_graph(std::uint64_t id);
  virtual void release_graph(std::uint64_t id);

  // --- elementwise --------------------------------------------------------------------------------
  virtual void fill(const TensorDesc& out, double value) = 0;
  virtual void unary(UnaryOp op, const TensorDesc& out, const TensorDesc& in, double alpha) = 0;
  // `out` may be `a` itself (the same data and strides: mul_): each element of a is read before out's is written.
  virtual void binary(BinaryOp op, const TensorDesc& out, const TensorDesc& a, const TensorDesc& b) = 0;
  // out = cond ? a : b (cond is boolean).
  virtual void where(const TensorDesc& out, const TensorDesc& cond, const TensorDesc& a, const TensorDesc& b) = 0;
  // out += in * alpha (same shape; out may be any strided view). Gradient accumulation and optimizers.
  virtual void accumulate(const TensorDesc& out, const TensorDesc& in, double alpha) = 0;

  // --- reductions ---------------------------------------------------------------------------------
  virtual void reduce(ReduceOp op, const TensorDesc& out, const TensorDesc& in) = 0;

  // --- matrix multiply ----------------------------------------------------------------------------
  // c[..., M, N] = alpha * a[..., M, K] @ b[..., K, N] + beta * c. All three have the same ndim and
  // batch sizes (a broadcast batch dim has stride 0 in a or b); any strides, so a transposed operand
  // is a stride swap, never a copy. c's batch strides are never 0. a and b have one dtype; c has it too,
  // or, for bfloat16 a and b, is float32 (accumulation is float32 either way; a bfloat16 c is rounded once).
  virtual void gemm(const TensorDesc& c, const TensorDesc& a, const TensorDesc& b, double alpha, double beta) = 0;

  // --- rows (contiguous, last dim is the row) -----------------------------------------------------
  virtual void softmax_forward(const TensorDesc& out, const TensorDesc& in, bool log) = 0;
  // grad_in from grad_out and the forward's output.
  virtual void softmax_backward(const TensorDesc& grad_in, const TensorDesc& grad_out, const TensorDesc& out,
                                bool log) = 0;
  // y = (x - mean) * rstd * gamma + beta over each row; saves mean and rstd ([rows]).
  // gamma and beta may be null (data == nullptr): no affine transform.
  virtual void layer_norm_forward(const TensorDesc& y, const TensorDesc& mean, const TensorDesc& rstd,
                                  const TensorDesc& x, const TensorDesc& gamma, const TensorDesc& beta, double eps) = 0;
  // dx is written; dgamma and dbeta (may be null) are written, not accumulated.
  virtual void layer_norm_backward(const TensorDesc& dx, const TensorDesc& dgamma, const TensorDesc& dbeta,
                                   const TensorDesc& dy, const TensorDesc& x, const TensorDesc& mean,
                                   const TensorDesc& rstd, const TensorDesc& gamma) = 0;
  // y = x * rstd * gamma over each row, rstd = 1 / sqrt(mean(x^2) + eps): layer norm without the mean; saves rstd
  // ([rows]). gamma may be null: no gain. The formulas are elementwise_math.h's rms_norm_*. With a residual (not
  // null, x's shape), the rows normalised are x + residual, written into sum in the same pass (a pre-norm block's
  // h = x + f(...) and the next norm of h: one kernel where an add and a norm took two); sum and residual are null
  // together.
  virtual void rms_norm_forward(const TensorDesc& y, const TensorDesc& rstd, const TensorDesc& sum, const TensorDesc& x,
                                const TensorDesc& residual, const TensorDesc& gamma, double eps) = 0;
  // dx is written; dgamma (may be null) is written, not accumulated.
  virtual void rms_norm_backward(const TensorDesc& dx, const TensorDesc& dgamma, const TensorDesc& dy,
                                 const TensorDesc& x, const TensorDesc& rstd, const TensorDesc& gamma) = 0;

  // --- rotary position embedding ------------------------------------------------------------------
  // Row t of x [..., T, D]: coordinate pair i rotated by the angle whose cosine and sine are cos[t, i] and
  // sin[t, i] (sin negated when `inverse`: the backward). x may be strided, with a last-dim stride of 1; y is
  // contiguous; cos and sin are contiguous [T, D/2]. The rotation is elementwise_math.h's rotate_pair.
  virtual void rotate_pairs(const TensorDesc& y, const TensorDesc& x, const TensorDesc& cos, const TensorDesc& sin,
                            RopePairing pairing, bool inverse) = 0;

  // --- indexing -----------------------------------------------------------------------------------
  // out[i, :] = table[ids[i], :]. Returns the position of the first id outside [0, V), or -1. A backend whose check
  // would make the host wait for the device (a GPU: the ids live there) returns -1 at once and reports a bad id at
  // its next copy to the host instead, throwing IndexError(describe(position, id)) there; until then a bad id's row
  // reads as zeros (docs/09_cuda.md, "Where the host waits").
  virtual std::int64_t gather_rows(const TensorDesc& out, const TensorDesc& table, const TensorDesc& ids,
                                   const DescribeBadIndex& describe) = 0;
  // table_grad[ids[i], :] += grad[i, :] for every i with ids[i] != skip_id (repeated ids accumulate).
  virtual void scatter_add_rows(const TensorDesc& table_grad, const TensorDesc& grad, const TensorDesc& ids,
                                std::int64_t skip_id) = 0;
  // table[p, ids[i], :] = rows[p, i, :] for table [P, N, E] and rows [P, n, E], both contiguous, and ids [n]; where an
  // id repeats, its last row is the one written. Returns the position of the first id outside [0, N), or -1, having
  // written nothing then; a GPU reports it later, as gather_rows does (until then a bad id's rows are not written).
  virtual std::int64_t write_rows(const TensorDesc& table, const TensorDesc& rows, const TensorDesc& ids,
                                  const DescribeBadIndex& describe) = 0;

  // --- fused cross-entropy (log-softmax + NLL with label smoothing) --------------------------------
  // loss[i] = -(1-s) log p[i, t_i] - s/C sum_c log p[i, c]; 0 where t_i == ignore_index. Also writes
  // lse[i] = log sum_c exp(logits[i, c]) for every row (ignored ones too), which backward takes back, so
  // that it exponentiates each logit once instead of twice (the step's profile: docs/performance.md).
  // Returns the position of the first target outside [0, C) (and not ignore_index), or -1; a GPU reports it later,
  // as gather_rows does (its row's loss reads as NaN until then).
  virtual std::int64_t cross_entropy_forward(const TensorDesc& loss, const TensorDesc& lse, const TensorDesc& logits,
                                             const TensorDesc& targets, std::int64_t ignore_index, double smoothing,
                                             const DescribeBadIndex& describe) = 0;
  // dlogits[i, :] = grad_loss[i] * (exp(logits[i] - lse[i]) - (1-s) onehot(t_i) - s/C); 0 for ignored rows.
  virtual void cross_entropy_backward(const TensorDesc& dlogits, const TensorDesc& logits, const TensorDesc& lse,
                                      const TensorDesc& targets, const TensorDesc& grad_loss, std::int64_t ignore_index,
                                      double smoothing) = 0;

  // --- attention without the [Tq, Tk] matrix (FlashAttention: Dao et al. 2022; Dao 2023) -------------
  // q [B, H, Tq, Dh], k [B, Hkv, Tk, Dh], v [B, Hkv, Tk, Dv], out [B, H, Tq, Dv], lse [B, H, Tq]: query head h
  // reads key/value head h / (H / Hkv). All contiguous but k and v, whose rows are packed and whose batch and head
  // strides are free (a KV cache's first Tk rows); dk, dv are [B, H, Tk, *], one per query head (the op sums them).
  // `blocked` is boolean [B, H, Tq, Tk] by strides (0 broadcasts), or data == nullptr for none.
  // out_i = sum_j softmax_j(s_ij) drop_ij v_j over the keys j not blocked; lse_i = log sum_j exp(s_ij) over them,
  // which backward takes back. A query that may see no key gets out NaN and lse -inf (as a softmax of -infs).
  virtual void attention_forward(const TensorDesc& out, const TensorDesc& lse, const TensorDesc& q, const TensorDesc& k,
                                 const TensorDesc& v, const TensorDesc& blocked, const AttentionConfig& cfg) = 0;
  // dq, dk, dv (written) from dout and the forward's out and lse; the weights are recomputed, never stored.
  virtual void attention_backward(const TensorDesc& dq, const TensorDesc& dk, const TensorDesc& dv,
                                  const TensorDesc& dout, const TensorDesc& q, const TensorDesc& k, const TensorDesc& v,
                                  const TensorDesc& out, const TensorDesc& lse, const TensorDesc& blocked,
                                  const AttentionConfig& cfg) = 0;

  // --- random and optimizers ----------------------------------------------------------------------
  virtual void random_fill(const TensorDesc& out, Distribution dist, double a, double b, std::uint64_t seed,
                           std::uint64_t offset) = 0;
  // One token drawn from contiguous float32 or float64 logits [V] at `draw`'s uniform u in [0, 1): writes the
  // distribution drawn from into probs (float64 [V]) and the token into token (int64 [1], any stride), by the steps of
  // backends/sampling_math.h in float64, so that every backend draws the same token for the same u. Nothing is
  // read back to the host.
  virtual void sample_token(const TensorDesc& token, const TensorDesc& probs, const TensorDesc& logits,
                            const SamplingConfig& cfg, const TokenDraw& draw) = 0;
  // One Adam/AdamW step on contiguous param, grad, m, v (all the same numel), in place.
  virtual void adam_update(const TensorDesc& param, const TensorDesc& grad, const TensorDesc& m, const TensorDesc& v,
                           const AdamConfig& cfg) = 0;
  // The same step on several parameters of one dtype (an optimizer's step: PyTorch's foreach Adam), each exactly
  // as adam_update would. Here one adam_update each; the CUDA backend launches one kernel per 16 parameters.
  virtual void adam_update_many(const std::vector<AdamTensors>& group, const AdamConfig& cfg) {
    for (const AdamTensors& t : group) adam_update(t.param, t.grad, t.m, t.v, cfg);
  }
  // out[i] = the sum of the squares of tensors[i]'s elements, added in float64 (clip_grad_norm_'s sums: PyTorch's
  // foreach norm), for contiguous tensors of one floating dtype; out is a contiguous float64 [tensors.size()].
  // Returns false, having done nothing, where the backend has no such kernel: the op then takes sum(x * x) of each.
  // The CUDA backend launches twice per 16 tensors where that takes two or three launches per tensor.
  virtual bool sum_squares_many(const TensorDesc& out, const std::vector<TensorDesc>& tensors) {
    (void)out, (void)tensors;
    return false;
  }
  // Each of several contiguous float32 or float64 tensors of one dtype times `factor`, one value of that dtype on the
  // device, in place (clip_grad_norm_'s scaling: PyTorch's foreach mul_): the bits of mul_ on each. Returns false,
  // having done nothing, where the backend has no such kernel (the op then runs mul_ on each); the CUDA backend
  // launches once per 16 tensors.
  virtual bool scale_many(const std::vector<TensorDesc>& tensors, const TensorDesc& factor) {
    (void)tensors, (void)factor;
    return false;
  }
};

// The overrides of every kernel above, declared once for all backends: a backend's class names
// STEPFORMER_BACKEND_KERNELS (and device(), bytes_in_use()) and defines each kernel in the file of its
// section (memory, elementwise, reduce, gemm, softmax, norm, embedding, loss, attention, random, optim), the same file
// names in backends/cpu, backends/cuda and backends/reference. The documentation is the interface above.
#define STEPFORMER_BACKEND_KERNELS                                                                                    \
  void* allocate(std::size_t bytes) override;                                                                         \
  void deallocate(void* ptr, std::size_t bytes) override;                                                             \
  void copy_from_host(void* dst, const void* host_src, std::size_t bytes) override;                                   \
  void copy_to_host(void* host_dst, const void* src, std::size_t bytes) override;                                     \
  void fill(const TensorDesc& out, double value) override;                                                            \
  void unary(UnaryOp op, const TensorDesc& out, const TensorDesc& in, double alpha) override;                         \
  void binary(BinaryOp op, const TensorDesc& out, const TensorDesc& a, const TensorDesc& b) override;                 \
  void where(const TensorDesc& out, const TensorDesc& cond, const TensorDesc& a, const TensorDesc& b) override;       \
  void accumulate(const TensorDesc& out, const TensorDesc& in, double alpha) override;                                \
  void reduce(ReduceOp op, const TensorDesc& out, const TensorDesc& in) override;                                     \
  void gemm(const TensorDesc& c, const TensorDesc& a, const TensorDesc& b, double alpha, double beta) override;       \
  void softmax_forward(const TensorDesc& out, const TensorDesc& in, bool log) override;                               \
  void softmax_backward(const TensorDesc& grad_in, const TensorDesc& grad_out, const TensorDesc& out, bool log)       \
      override;                                                                                                       \
  void layer_norm_forward(const TensorDesc& y, const TensorDesc& mean, const TensorDesc& rstd, const TensorDesc& x,   \
                          const TensorDesc& gamma, const TensorDesc& beta, double eps) override;                      \
  void layer_norm_backward(const TensorDesc& dx, const TensorDesc& dgamma, const TensorDesc& dbeta,                   \
                           const TensorDesc& dy, const TensorDesc& x, const TensorDesc& mean, const TensorDesc& rstd, \
                           const TensorDesc& gamma) override;                                                         \
  void rms_norm_forward(const TensorDesc& y, const TensorDesc& rstd, const TensorDesc& sum, const TensorDesc& x,      \
                        const TensorDesc& residual, const TensorDesc& gamma, double eps) override;                    \
  void rms_norm_backward(const TensorDesc& dx, const TensorDesc& dgamma, const TensorDesc& dy, const TensorDesc& x,   \
                         const TensorDesc& rstd, const TensorDesc& gamma) override;                                   \
  void rotate_pairs(const TensorDesc& y, const TensorDesc& x, const TensorDesc& cos, const TensorDesc& sin,           \
                    RopePairing pairing, bool inverse) override;                                                      \
  std::int64_t gather_rows(const TensorDesc& out, const TensorDesc& table, const TensorDesc& ids,                     \
                           const DescribeBadIndex& describe) override;                                                \
  void scatter_add_rows(const TensorDesc& table_grad, const TensorDesc& grad, const TensorDesc& ids,                  \
                        std::int64_t skip_id) override;                                                               \
  std::int64_t write_rows(const TensorDesc& table, const TensorDesc& rows, const TensorDesc& ids,                     \
                          const DescribeBadIndex& describe) override;                                                 \
  std::int64_t cross_entropy_forward(const TensorDesc& loss, const TensorDesc& lse, const TensorDesc& logits,         \
                                     const TensorDesc& targets, std::int64_t ignore_index, double smoothing,          \
                                     const DescribeBadIndex& describe) override;                                      \
  void cross_entropy_backward(const TensorDesc& dlogits, const TensorDesc& logits, const TensorDesc& lse,             \
                              const TensorDesc& targets, const TensorDesc& grad_loss, std::int64_t ignore_index,      \
                              double smoothing) override;                                                             \
  void attention_forward(const TensorDesc& out, const TensorDesc& lse, const TensorDesc& q, const TensorDesc& k,      \
                         const TensorDesc& v, const TensorDesc& blocked, const AttentionConfig& cfg) override;        \
  void attention_backward(const TensorDesc& dq, const TensorDesc& dk, const TensorDesc& dv, const TensorDesc& dout,   \
                          const TensorDesc& q, const TensorDesc& k, const TensorDesc& v, const TensorDesc& out,       \
                          const TensorDesc& lse, const TensorDesc& blocked, const AttentionConfig& cfg) override;     \
  void random_fill(const TensorDesc& out, Distribution dist, double a, double b, std::uint64_t seed,                  \
                   std::uint64_t offset) override;                                                                    \
  void sample_token(const TensorDesc& token, const TensorDesc& probs, const TensorDesc& logits,                       \
                    const SamplingConfig& cfg, const TokenDraw& draw) override;                                       \
  void adam_update(const TensorDesc& param, const TensorDesc& grad, const TensorDesc& m, const TensorDesc& v,         \
                   const AdamConfig& cfg) override;

// The backend of a device; throws DeviceError when that device is not built into this library.
Backend& backend_for(Device device);

}  // namespace stepformer
