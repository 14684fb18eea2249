// FlashAttention as three CUDA kernels, the plainest tiled form: one thread per query (forward, dQ) or per key
// (dK and dV), one block per tile of them, and the other side's tiles staged through dynamic shared memory so
// that the block reads each key (or query) from global memory once per tile instead of once per thread.
//
// Forward: a block of `tile` queries walks the key tiles; each thread keeps its query's running max m and sum l
// and rescales its unnormalised output row by exp(m_old - m_new) when the max grows (the online softmax), so
// the [Tq, Tk] scores exist only a tile row at a time, in registers. Backward recomputes the weights from the
// saved lse: dK and dV by key tile (each thread owns one key's rows), dQ by query tile (each thread owns one
// query's), so no two threads write the same element and no atomics are needed. The formulas are the reference
// backend's (backends/reference/attention.cpp).
//
// Shared memory per block: the thread-owned rows are padded to an odd stride (Dh + 1) so that the 32 threads of
// a warp, reading element d of their own rows, hit 32 different banks; the staged tiles are read by every thread
// at the same address (a broadcast). `tile` (<= 32 threads) shrinks until a block's shared memory fits 48 KiB,
// the most a kernel gets without opting in.
//
// bfloat16 operands are widened into float32 copies for these float32 kernels and the results rounded back
// (`Widened`): the same numbers as the reference, at the cost of the copies. The usual heads (Dh == Dv in {16, 32,
// 64, 128}) run on the tensor cores instead (attention_tensor_cores.cu and its backward). A forward of one query a
// head, a decoding step's, runs attention_decode_kernel below in every operand type: a block of warps per head.
#include <algorithm>
#include <string>

#include "../attention_math.h"
#include "cuda_backend.h"
#include "device_utils.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

constexpr int kMaxTile = 32;
constexpr std::size_t kSharedBytes = 48 * 1024;

// a . b added in order from d = 0, in C (the operands' type, or float for bfloat16 operands): every kernel here
// computes a score so, and the backward's recomputed scores are the forward's to the bit.
template <class T, class C = T>
__device__ __forceinline__ C dot(const T* a, const T* b, std::int64_t n) {
  C s = 0;
  for (std::int64_t d = 0; d < n; ++d) s += static_cast<C>(a[d]) * static_cast<C>(b[d]);
  return s;
}

// Rows [first, first + rows) of a contiguous [*, width] matrix into shared memory, by the whole block.
template <class T>
__device__ __forceinline__ void stage(T* dst, const T* src, std::int64_t first, std::int64_t rows, std::int64_t width) {
  for (std::int64_t e = threadIdx.x; e < rows * width; e += blockDim.x) dst[e] = src[first * width + e];
}

template <class T>
__global__ void attention_forward_kernel(T* out, T* lse, AttentionProblem<T> p, int tile) {
  const AttentionDims n = p.n;
  CUDASIM_DYNAMIC_SHARED(T, shared);
  const std::int64_t own = n.Dh + 1, own_v = n.Dv + 1;  // padded strides of thread-owned rows
  T* q_own = shared;                                    // [tile, Dh + 1]: each thread's query
  T* acc = q_own + tile * own;                          // [tile, Dv + 1]: each thread's unnormalised output
  T* k_tile = acc + tile * own_v;                       // [tile, Dh]: the keys of this step
  T* v_tile = k_tile + tile * n.Dh;                     // [tile, Dv]
  const int r = threadIdx.x;
  const std::int64_t bh = blockIdx.y, b = bh / n.H, h = bh % n.H;
  const std::int64_t i0 = static_cast<std::int64_t>(blockIdx.x) * tile, i = i0 + r, row = bh * n.Tq + i;
  const bool active = i < n.Tq;
  if (active) {
    for (std::int64_t d = 0; d < n.Dh; ++d) q_own[r * own + d] = p.q[row * n.Dh + d];
    for (std::int64_t d = 0; d < n.Dv; ++d) acc[r * own_v + d] = 0;
  }
  const T neg_inf = -INFINITY;
  T m = neg_inf, l = 0;
  // Causal: no query of this block sees a key at or after i0 + tile. The bound is the block's, so every thread
  // runs the same steps and meets the same barriers.
  const std::int64_t key_end = p.mask.causal && i0 + tile < n.Tk ? i0 + tile : n.Tk;
  for (std::int64_t j0 = 0; j0 < key_end; j0 += tile) {
    const std::int64_t width = key_end - j0 < tile ? key_end - j0 : tile;
    __syncthreads();  // every thread is done with the previous tile
    stage(k_tile, p.keys(bh), j0, width, n.Dh);
    stage(v_tile, p.values(bh), j0, width, n.Dv);
    __syncthreads();
    if (!active) continue;
    // EXERCISE 9.5: this tile's scores (blocked: -inf), the new max, l and acc rescaled, the tile added.
    T s[kMaxTile];
    T tile_max = neg_inf;
    for (int c = 0; c < width; ++c) {
      s[c] = p.mask.blocked(b, h, i, j0 + c) ? neg_inf : p.scale * dot(q_own + r * own, k_tile + c * n.Dh, n.Dh);
      tile_max = s[c] > tile_max ? s[c] : tile_max;
    }
    if (tile_max == neg_inf) continue;  // every key of the tile blocked: nothing changes
    const T m_new = m > tile_max ? m : tile_max;
    const T rescale = exp_(m - m_new);  // 0 on the first tile that counts (m = -inf)
    l *= rescale;
    for (std::int64_t d = 0; d < n.Dv; ++d) acc[r * own_v + d] *= rescale;
    for (int c = 0; c < width; ++c) {
      const T w = exp_(s[c] - m_new);  // blocked: exp(-inf) = 0
      l += w;
      const T wd = w * static_cast<T>(p.drop.factor(static_cast<std::uint64_t>(row * n.Tk + j0 + c)));
      if (wd != T(0))
        for (std::int64_t d = 0; d < n.Dv; ++d) acc[r * own_v + d] += wd * v_tile[c * n.Dv + d];
    }
    m = m_new;
    // END EXERCISE
  }
  if (!active) return;
  // EXERCISE 9.5 (continued)
  const T inv = T(1) / l;  // l == 0 (no key seen): inf, and 0 * inf is NaN, as the composite's softmax
  for (std::int64_t d = 0; d < n.Dv; ++d) out[row * n.Dv + d] = acc[r * own_v + d] * inv;
  lse[row] = m + log_(l);
  // END EXERCISE
}

// One query a head (a decoding step's): a block of kDecodeWarps warps per head, where the kernel above gives the
// query one thread, which then walks every key alone. The warps take 32 keys at a time in turn, a key a lane: the lane
// computes its key's score as the backward kernels recompute it (`dot`, the same additions in the same order, so
// that the probabilities they rebuild from lse sum to 1 to the last bits: a score rounded differently here moves every
// gradient of q by its rounding, 1e-5 at scores near 40 in float32). Each warp keeps its own online softmax (m and l,
// and the output for its lanes' dimensions lane + 32 c in registers, each key's weight handed round by a shuffle);
// the warps' results are merged at the end: out = sum_w acc_w exp(m_w - M) / sum_w l_w exp(m_w - M), M the largest
// m_w. The sums of weights run in another order than the reference's: the output agrees to rounding, not to the bit.
constexpr int kDecodeWarps = 4;

template <class T, int kPerLane>
__global__ void attention_decode_kernel(T* out, attention_compute_t<T>* lse, AttentionProblem<T> p) {
  using C = attention_compute_t<T>;  // float for bfloat16 operands
  const AttentionDims n = p.n;
  __shared__ C warp_m[kDecodeWarps], warp_l[kDecodeWarps], warp_acc[kDecodeWarps][kPerLane * kWarp];
  const std::int64_t row = blockIdx.x, b = row / n.H, h = row % n.H;  // query 0 of head (b, h)
  const int lane = static_cast<int>(threadIdx.x) % kWarp, warp = static_cast<int>(threadIdx.x) / kWarp;
  const C neg_inf = -INFINITY;
  C acc[kPerLane] = {};
  C m = neg_inf, l = 0;
  const T* query = p.q + row * n.Dh;
  const T* keys = p.keys(row);
  const T* values = p.values(row);
  const std::int64_t key_end = p.mask.causal && n.Tk > 1 ? 1 : n.Tk;  // causal: key 0 alone
  for (std::int64_t j0 = static_cast<std::int64_t>(warp) * kWarp; j0 < key_end; j0 += kDecodeWarps * kWarp) {
    const std::int64_t j = j0 + lane;
    const bool seen = j < key_end && !p.mask.blocked(b, h, 0, j);
    const C s = seen ? p.scale * dot<T, C>(query, keys + j * n.Dh, n.Dh) : neg_inf;
    const C step_max = warp_reduce(s, Max{});
    if (step_max == neg_inf) continue;  // every key of the step blocked (the same for the whole warp)
    const C m_new = m > step_max ? m : step_max;
    const C rescale = exp_(m - m_new);  // 0 at the warp's first keys that count (m = -inf)
    const C w = exp_(s - m_new);        // blocked: exp(-inf) = 0
    l = l * rescale + warp_reduce(w, Sum{});
    const C wd = seen ? w * static_cast<C>(p.drop.factor(static_cast<std::uint64_t>(row * n.Tk + j))) : C(0);
    for (int c = 0; c < kPerLane; ++c) acc[c] *= rescale;
    for (int t = 0; t < kWarp; ++t) {
      const C wt = __shfl_sync(kFullMask, wd, t);  // key j0 + t's weight, the same in every lane
      if (wt == C(0)) continue;
      for (int c = 0; c < kPerLane; ++c) {
        const std::int64_t d = lane + c * kWarp;
        if (d < n.Dv) acc[c] += wt * static_cast<C>(values[(j0 + t) * n.Dv + d]);
      }
    }
    m = m_new;
  }
  if (lane == 0) warp_m[warp] = m, warp_l[warp] = l;
  for (int c = 0; c < kPerLane; ++c) warp_acc[warp][lane + c * kWarp] = acc[c];
  __syncthreads();
  C big = neg_inf;
  for (int w = 0; w < kDecodeWarps; ++w) big = warp_m[w] > big ? warp_m[w] : big;
  // A warp that saw no key weighs 0 (exp(-inf - M), and not NaN where M is -inf too: no key seen at all).
  C weight[kDecodeWarps], sum = 0;
  for (int w = 0; w < kDecodeWarps; ++w) {
    weight[w] = warp_m[w] == neg_inf ? C(0) : exp_(warp_m[w] - big);
    sum += warp_l[w] * weight[w];
  }
  const C inv = C(1) / sum;  // no key seen: inf, and 0 * inf is NaN, as the kernel above and the composite give
  for (std::int64_t d = threadIdx.x; d < n.Dv; d += blockDim.x) {
    C o = 0;
    for (int w = 0; w < kDecodeWarps; ++w) o += warp_acc[w][d] * weight[w];
    out[row * n.Dv + d] = static_cast<T>(o * inv);
  }
  if (threadIdx.x == 0) lse[row] = big + log_(sum);
}

// dK and dV: one thread per key; the queries, their output gradients, lse and D = dout . out staged per tile.
template <class T>
__global__ void attention_backward_kv_kernel(T* dk, T* dv, const T* dout, const T* out, const T* lse,
                                             AttentionProblem<T> p, int tile) {
  const AttentionDims n = p.n;
  CUDASIM_DYNAMIC_SHARED(T, shared);
  const std::int64_t own = n.Dh + 1, own_v = n.Dv + 1;
  T* k_own = shared;                    // [tile, Dh + 1]
  T* v_own = k_own + tile * own;        // [tile, Dv + 1]
  T* dk_own = v_own + tile * own_v;     // [tile, Dh + 1]
  T* dv_own = dk_own + tile * own;      // [tile, Dv + 1]
  T* q_tile = dv_own + tile * own_v;    // [tile, Dh]
  T* do_tile = q_tile + tile * n.Dh;    // [tile, Dv]
  T* lse_tile = do_tile + tile * n.Dv;  // [tile]
  T* D_tile = lse_tile + tile;          // [tile]
  const int c = threadIdx.x;
  const std::int64_t bh = blockIdx.y, b = bh / n.H, h = bh % n.H;
  const std::int64_t j0 = static_cast<std::int64_t>(blockIdx.x) * tile, j = j0 + c, key = bh * n.Tk + j;
  const bool active = j < n.Tk;
  if (active) {
    for (std::int64_t d = 0; d < n.Dh; ++d) k_own[c * own + d] = p.keys(bh)[j * n.Dh + d], dk_own[c * own + d] = 0;
    for (std::int64_t d = 0; d < n.Dv; ++d)
      v_own[c * own_v + d] = p.values(bh)[j * n.Dv + d], dv_own[c * own_v + d] = 0;
  }
  const T neg_inf = -INFINITY;
  for (std::int64_t i0 = p.mask.causal ? j0 : 0; i0 < n.Tq; i0 += tile) {  // causal: earlier queries never see j
    const std::int64_t width = n.Tq - i0 < tile ? n.Tq - i0 : tile;
    __syncthreads();
    stage(q_tile, p.q, bh * n.Tq + i0, width, n.Dh);
    stage(do_tile, dout, bh * n.Tq + i0, width, n.Dv);
    if (c < width) {
      const std::int64_t row = bh * n.Tq + i0 + c;
      lse_tile[c] = lse[row];
      D_tile[c] = dot(dout + row * n.Dv, out + row * n.Dv, n.Dv);
    }
    __syncthreads();
    if (!active) continue;
    for (int r = 0; r < width; ++r) {
      const std::int64_t i = i0 + r;
      if (lse_tile[r] == neg_inf || p.mask.blocked(b, h, i, j)) continue;
      const T w = exp_(p.scale * dot(q_tile + r * n.Dh, k_own + c * own, n.Dh) - lse_tile[r]);
      const T f = static_cast<T>(p.drop.factor(static_cast<std::uint64_t>((bh * n.Tq + i) * n.Tk + j)));
      const T dw = f == T(0) ? T(0) : f * dot(do_tile + r * n.Dv, v_own + c * own_v, n.Dv);
      const T ds = w * (dw - D_tile[r]);
      for (std::int64_t d = 0; d < n.Dv; ++d) dv_own[c * own_v + d] += w * f * do_tile[r * n.Dv + d];
      for (std::int64_t d = 0; d < n.Dh; ++d) dk_own[c * own + d] += p.scale * ds * q_tile[r * n.Dh + d];
    }
  }
  if (!active) return;
  for (std::int64_t d = 0; d < n.Dh; ++d) dk[key * n.Dh + d] = dk_own[c * own + d];
  for (std::int64_t d = 0; d < n.Dv; ++d) dv[key * n.Dv + d] = dv_own[c * own_v + d];
}

// dQ: one thread per query; the keys and values staged per tile, as in the forward.
template <class T>
__global__ void attention_backward_q_kernel(T* dq, const T* dout, const T* out, const T* lse, AttentionProblem<T> p,
                                            int tile) {
  const AttentionDims n = p.n;
  CUDASIM_DYNAMIC_SHARED(T, shared);
  const std::int64_t own = n.Dh + 1, own_v = n.Dv + 1;
  T* q_own = shared;                // [tile, Dh + 1]
  T* dq_own = q_own + tile * own;   // [tile, Dh + 1]
  T* do_own = dq_own + tile * own;  // [tile, Dv + 1]
  T* k_tile = do_own + tile * own_v;
  T* v_tile = k_tile + tile * n.Dh;
  const int r = threadIdx.x;
  const std::int64_t bh = blockIdx.y, b = bh / n.H, h = bh % n.H;
  const std::int64_t i0 = static_cast<std::int64_t>(blockIdx.x) * tile, i = i0 + r, row = bh * n.Tq + i;
  const bool active = i < n.Tq;
  const T neg_inf = -INFINITY;
  T L = neg_inf, D = 0;
  if (active) {
    for (std::int64_t d = 0; d < n.Dh; ++d) q_own[r * own + d] = p.q[row * n.Dh + d], dq_own[r * own + d] = 0;
    for (std::int64_t d = 0; d < n.Dv; ++d) do_own[r * own_v + d] = dout[row * n.Dv + d];
    L = lse[row];
    D = dot(dout + row * n.Dv, out + row * n.Dv, n.Dv);
  }
  const std::int64_t key_end = p.mask.causal && i0 + tile < n.Tk ? i0 + tile : n.Tk;
  for (std::int64_t j0 = 0; j0 < key_end; j0 += tile) {
    const std::int64_t width = key_end - j0 < tile ? key_end - j0 : tile;
    __syncthreads();
    stage(k_tile, p.keys(bh), j0, width, n.Dh);
    stage(v_tile, p.values(bh), j0, width, n.Dv);
    __syncthreads();
    if (!active || L == neg_inf) continue;
    for (int c = 0; c < width; ++c) {
      const std::int64_t j = j0 + c;
      if (p.mask.blocked(b, h, i, j)) continue;
      const T w = exp_(p.scale * dot(q_own + r * own, k_tile + c * n.Dh, n.Dh) - L);
      const T f = static_cast<T>(p.drop.factor(static_cast<std::uint64_t>(row * n.Tk + j)));
      const T dw = f == T(0) ? T(0) : f * dot(do_own + r * own_v, v_tile + c * n.Dv, n.Dv);
      const T ds = w * (dw - D);
      for (std::int64_t d = 0; d < n.Dh; ++d) dq_own[r * own + d] += p.scale * ds * k_tile[c * n.Dh + d];
    }
  }
  if (!active) return;
  for (std::int64_t d = 0; d < n.Dh; ++d) dq[row * n.Dh + d] = dq_own[r * own + d];
}

// The largest tile (threads per block, a power of two up to 32) whose shared memory fits, given the elements
// one row of the tile needs and the elements per block besides.
struct Launch {
  int tile;
  std::size_t bytes;
};
Launch fit(const char* kernel, std::size_t element, std::int64_t per_row, std::int64_t per_block = 0) {
  for (int tile = kMaxTile; tile >= 1; tile /= 2) {
    const std::size_t bytes = element * static_cast<std::size_t>(tile * per_row + per_block);
    if (bytes <= kSharedBytes) return {tile, bytes};
  }
  throw ValueError(std::string("cuda ") + kernel + ": a head of " + std::to_string(per_row) +
                   " elements per row does not fit in 48 KiB of shared memory");
}

dim3 grid(std::int64_t rows, int tile, const AttentionDims& n) {
  return dim3(static_cast<unsigned>((rows + tile - 1) / tile), static_cast<unsigned>(n.B * n.H));
}

// A contiguous float32 copy of a tensor for the float32 kernels, in memory from the backend's cache: a bfloat16
// operand copied in (a KV cache's keys may be a view), or a result that round_into converts into its bfloat16 tensor.
class Widened {
 public:
  Widened(Backend& backend, const TensorDesc& like, bool copy_in) : backend_(backend), desc_(like) {
    desc_.dtype = DType::float32;
    for (std::int64_t d = desc_.ndim - 1, stride = 1; d >= 0; stride *= desc_.shape[d--]) desc_.strides[d] = stride;
    bytes_ = static_cast<std::size_t>(like.numel()) * sizeof(float);
    desc_.data = backend_.allocate(bytes_);
    if (copy_in) backend_.unary(UnaryOp::copy, desc_, like, 0.0);
  }
  ~Widened() { backend_.deallocate(desc_.data, bytes_); }  // the cache hands it out only to work queued after ours
  Widened(const Widened&) = delete;
  Widened& operator=(const Widened&) = delete;
  const TensorDesc& desc() const { return desc_; }
  void round_into(const TensorDesc& to) const { backend_.unary(UnaryOp::copy, to, desc_, 0.0); }

 private:
  Backend& backend_;
  TensorDesc desc_;
  std::size_t bytes_ = 0;
};

// attention_decode_kernel for one query a head, with heads of at most 256; false (nothing done) otherwise.
bool attention_forward_decode(const TensorDesc& out, const TensorDesc& lse, const TensorDesc& q, const TensorDesc& k,
                              const TensorDesc& v, const TensorDesc& blocked, const AttentionConfig& cfg) {
  const AttentionDims n = attention_dims(q, v);
  const std::int64_t widest = std::max(n.Dh, n.Dv), per_lane = (widest + kWarp - 1) / kWarp;
  if (n.Tq != 1 || per_lane > 8) return false;
  if (n.B * n.H == 0) return true;
  dispatch_operands(q.dtype, "attention_forward", [&](auto z) {
    using T = decltype(z);
    using C = attention_compute_t<T>;
    const AttentionProblem<T> p = attention_problem<T>(q, k, v, blocked, cfg);
    next_launch_flops(static_cast<std::uint64_t>(2 * n.B * n.H * n.Tq * n.Tk * (n.Dh + n.Dv)));
    const auto run = [&](auto kernel) {
      launch(kernel, dim3(static_cast<unsigned>(n.B * n.H)), dim3(kDecodeWarps * kWarp), 0, static_cast<T*>(out.data),
             static_cast<C*>(lse.data), p);
    };
    if (per_lane <= 1)
      run(attention_decode_kernel<T, 1>);
    else if (per_lane <= 2)
      run(attention_decode_kernel<T, 2>);
    else if (per_lane <= 4)
      run(attention_decode_kernel<T, 4>);
    else
      run(attention_decode_kernel<T, 8>);
  });
  return true;
}

}  // namespace

void CudaBackend::attention_forward(const TensorDesc& out, const TensorDesc& lse, const TensorDesc& q,
                                    const TensorDesc& k, const TensorDesc& v, const TensorDesc& blocked,
                                    const AttentionConfig& cfg) {
  if (attention_forward_decode(out, lse, q, k, v, blocked, cfg)) return;
  if (q.dtype == DType::bfloat16) {
    if (attention_forward_tensor_cores(out, lse, q, k, v, blocked, cfg)) return;
    const Widened qw(*this, q, true), kw(*this, k, true), vw(*this, v, true), ow(*this, out, false);
    attention_forward(ow.desc(), lse, qw.desc(), kw.desc(), vw.desc(), blocked, cfg);
    ow.round_into(out);
    return;
  }
  dispatch_floating(q.dtype, "attention_forward", [&](auto z) {
    using T = decltype(z);
    const AttentionProblem<T> p = attention_problem<T>(q, k, v, blocked, cfg);
    if (p.n.Tq == 0 || p.n.B * p.n.H == 0) return;
    const Launch l = fit("attention_forward", sizeof(T), 2 * (p.n.Dh + 1 + p.n.Dv + 1));
    next_launch_flops(static_cast<std::uint64_t>(2 * p.n.B * p.n.H * p.n.Tq * p.n.Tk * (p.n.Dh + p.n.Dv)));
    launch(attention_forward_kernel<T>, grid(p.n.Tq, l.tile, p.n), dim3(static_cast<unsigned>(l.tile)), l.bytes,
           static_cast<T*>(out.data), static_cast<T*>(lse.data), p, l.tile);
  });
}

void CudaBackend::attention_backward(const TensorDesc& dq, const TensorDesc& dk, const TensorDesc& dv,
                                     const TensorDesc& dout, const TensorDesc& q, const TensorDesc& k,
                                     const TensorDesc& v, const TensorDesc& out, const TensorDesc& lse,
                                     const TensorDesc& blocked, const AttentionConfig& cfg) {
  if (q.dtype == DType::bfloat16) {
    if (attention_backward_tensor_cores(dq, dk, dv, dout, q, k, v, out, lse, blocked, cfg)) return;
    const Widened qw(*this, q, true), kw(*this, k, true), vw(*this, v, true), ow(*this, out, true),
        gw(*this, dout, true), dqw(*this, dq, false), dkw(*this, dk, false), dvw(*this, dv, false);
    attention_backward(dqw.desc(), dkw.desc(), dvw.desc(), gw.desc(), qw.desc(), kw.desc(), vw.desc(), ow.desc(), lse,
                       blocked, cfg);
    dqw.round_into(dq);
    dkw.round_into(dk);
    dvw.round_into(dv);
    return;
  }
  dispatch_floating(q.dtype, "attention_backward", [&](auto z) {
    using T = decltype(z);
    const AttentionProblem<T> p = attention_problem<T>(q, k, v, blocked, cfg);
    const AttentionDims& n = p.n;
    if (n.B * n.H == 0) return;
    const T* g = static_cast<const T*>(dout.data);
    const T* o = static_cast<const T*>(out.data);
    const T* l = static_cast<const T*>(lse.data);
    if (n.Tk > 0) {
      const Launch kv = fit("attention_backward", sizeof(T), 3 * (n.Dh + n.Dv) + 4 + 2);
      next_launch_flops(static_cast<std::uint64_t>(4 * n.B * n.H * n.Tq * n.Tk * (n.Dh + n.Dv)));
      launch(attention_backward_kv_kernel<T>, grid(n.Tk, kv.tile, n), dim3(static_cast<unsigned>(kv.tile)), kv.bytes,
             static_cast<T*>(dk.data), static_cast<T*>(dv.data), g, o, l, p, kv.tile);
    }
    if (n.Tq > 0) {
      const Launch qt = fit("attention_backward", sizeof(T), 3 * n.Dh + 2 * n.Dv + 3);
      next_launch_flops(static_cast<std::uint64_t>(2 * n.B * n.H * n.Tq * n.Tk * (2 * n.Dh + n.Dv)));
      launch(attention_backward_q_kernel<T>, grid(n.Tq, qt.tile, n), dim3(static_cast<unsigned>(qt.tile)), qt.bytes,
             static_cast<T*>(dq.data), g, o, l, p, qt.tile);
    }
  });
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
