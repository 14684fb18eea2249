// FlashAttention on the tensor cores (the forward here; the backward further down), with FlashAttention-2's partition
// of the work (Dao 2023, "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning",
// section 3.2: each warp owns its queries, so no two warps combine partial results): bfloat16 q, k and v, float32
// scores, running statistics and sums, and the weights rounded to bfloat16 before they multiply V, as the CPU's
// bfloat16 kernel does.
//
// A block of 4 warps takes 64 queries of one (batch, head), a warp 16 of them, and walks the keys 64 at a time.
// A warp's scores S = Q K^T (16 x 64) and its output rows (16 x Dh) live in mma.sync's accumulators, so the online
// softmax (attention.cu's forward, per row) runs in registers: lane 4g + t holds rows g and g + 8, columns 2t and
// 2t + 1 of every 8, so a row's max and sum meet across the 4 lanes of a quad in two shuffles. The accumulators of
// two neighbouring 8-column pieces of P are, value for value, the A fragment of a 16 x 16 piece (gemm_tensor_cores.cu
// spells the layouts out), so the weights go from the first product into the second without leaving registers.
// Shared memory holds the block's 64 queries (read once into fragments) and one tile of 64 keys and values, rows
// padded by 16 bytes so that ldmatrix's 8 rows hit 32 banks; K is read with ldmatrix, V with ldmatrix.trans (V is
// the product's B along its rows). Staging is plain 16-byte loads and stores, no cp.async pipeline yet.
// Heads of Dh == Dv in {16, 32, 64, 128} and 16-byte aligned operands take these kernels; others the float32 ones.
#include <string>

#include "../attention_math.h"
#include "cuda_backend.h"
#include "device_utils.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

constexpr int kRows = 64, kKeys = 64, kThreads = 128;

// Rows [first, first + rows) of a contiguous [*, D] bfloat16 matrix into a tile of row stride D + 8; rows at or
// past `valid` are zeros.
template <int D>
__device__ __forceinline__ void stage_rows(bfloat16* tile, const bfloat16* x, std::int64_t first, std::int64_t valid) {
  constexpr int kPieces = D / 8;  // 16 bytes each
  for (int e = static_cast<int>(threadIdx.x); e < kRows * kPieces; e += kThreads) {
    const int r = e / kPieces, c = e % kPieces * 8;
    Bytes16 w{};
    if (r < valid) w = *reinterpret_cast<const Bytes16*>(x + (first + r) * D + c);
    *reinterpret_cast<Bytes16*>(tile + r * (D + 8) + c) = w;
  }
}

__device__ __forceinline__ std::uint32_t bf16_pair(float low, float high) {
  return std::uint32_t{bfloat16(low).bits} | std::uint32_t{bfloat16(high).bits} << 16;
}

// Row r (0: g, 1: g + 8) of accumulators [D / 8][4] times `factor`, this lane's two columns of each 8, into `row`.
template <int D>
__device__ __forceinline__ void store_row(bfloat16* row, const float (&acc)[D / 8][4], int r, float factor) {
  const int t = static_cast<int>(threadIdx.x) % 4;
  STEPFORMER_UNROLL
  for (int d = 0; d < D / 8; ++d) {
    row[8 * d + 2 * t] = bfloat16(acc[d][2 * r] * factor);
    row[8 * d + 2 * t + 1] = bfloat16(acc[d][2 * r + 1] * factor);
  }
}

template <int D>
__global__ void __launch_bounds__(kThreads)
    attention_forward_mma(bfloat16* out, float* lse, AttentionProblem<bfloat16> p) {
  constexpr int kStride = D + 8;
  const AttentionDims n = p.n;
  CUDASIM_DYNAMIC_SHARED(bfloat16, shared);
  bfloat16* q_tile = shared;                    // [64 queries][D]
  bfloat16* k_tile = q_tile + kRows * kStride;  // [64 keys][D]
  bfloat16* v_tile = k_tile + kKeys * kStride;  // [64 keys][D]
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int g = lane / 4, t = lane % 4, q8 = lane / 8;
  const std::int64_t bh = blockIdx.y, b = bh / n.H, h = bh % n.H;
  const std::int64_t i0 = static_cast<std::int64_t>(blockIdx.x) * kRows;
  const std::int64_t rows[2] = {i0 + 16 * warp + g, i0 + 16 * warp + g + 8};  // this lane's two queries
  const bfloat16* q = p.q + bh * n.Tq * D;
  const bfloat16* k = p.keys(bh);
  const bfloat16* v = p.values(bh);

  stage_rows<D>(q_tile, q, i0, n.Tq - i0);
  __syncthreads();
  std::uint32_t qf[D / 16][4];  // this warp's 16 queries as A fragments, 16 of Dh each
  STEPFORMER_UNROLL
  for (int c = 0; c < D / 16; ++c)
    ldmatrix_x4(qf[c], q_tile + (16 * warp + lane % 16) * kStride + 16 * c + lane / 16 * 8, false);

  const float neg_inf = -INFINITY;
  float o[D / 8][4] = {};  // unnormalised output rows: [8 of Dv][rows g (0, 1) and g + 8 (2, 3)]
  float m[2] = {neg_inf, neg_inf}, l[2] = {0, 0};  // per row; l: this lane's columns only, until the end
  // Causal: no query of this block sees a key at or after i0 + 64 (the same bound for every warp and barrier).
  const std::int64_t key_end = p.mask.causal && i0 + kRows < n.Tk ? i0 + kRows : n.Tk;
  for (std::int64_t j0 = 0; j0 < key_end; j0 += kKeys) {
    __syncthreads();  // every warp is done with the previous tiles
    stage_rows<D>(k_tile, k, j0, n.Tk - j0);
    stage_rows<D>(v_tile, v, j0, n.Tk - j0);
    __syncthreads();
    float s[kKeys / 8][4] = {};  // S = Q K^T: [8 keys][rows g (0, 1) and g + 8 (2, 3)]
    STEPFORMER_UNROLL
    for (int c = 0; c < D / 16; ++c) {
      STEPFORMER_UNROLL
      for (int j = 0; j < kKeys / 8; j += 2) {  // keys 8j..8j+15 at dims 16c..16c+15: K's rows as B's columns
        std::uint32_t two[4];
        ldmatrix_x4(two, k_tile + (8 * j + lane % 8 + q8 / 2 * 8) * kStride + 16 * c + q8 % 2 * 8, false);
        const std::uint32_t first[2] = {two[0], two[1]}, second[2] = {two[2], two[3]};
        mma_m16n8k16_bf16(s[j], qf[c], first);
        mma_m16n8k16_bf16(s[j + 1], qf[c], second);
      }
    }
    float tile_max[2] = {neg_inf, neg_inf};
    STEPFORMER_UNROLL
    for (int j = 0; j < kKeys / 8; ++j) {
      STEPFORMER_UNROLL
      for (int e = 0; e < 4; ++e) {
        const std::int64_t i = rows[e / 2], col = j0 + 8 * j + 2 * t + e % 2;
        const bool blocked = i >= n.Tq || col >= n.Tk || p.mask.blocked(b, h, i, col);
        s[j][e] = blocked ? neg_inf : p.scale * s[j][e];
        tile_max[e / 2] = s[j][e] > tile_max[e / 2] ? s[j][e] : tile_max[e / 2];
      }
    }
    float rescale[2];
    STEPFORMER_UNROLL
    for (int r = 0; r < 2; ++r) {  // the row's max over its quad; a tile with every key blocked changes nothing
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(kFullMask, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(kFullMask, tile_max[r], 2));
      const float m_new = m[r] > tile_max[r] ? m[r] : tile_max[r];
      rescale[r] = m_new == neg_inf ? 1.f : exp_(m[r] - m_new);  // 0 on the first tile that counts (m = -inf)
      l[r] *= rescale[r];
      m[r] = m_new;
    }
    STEPFORMER_UNROLL
    for (int d = 0; d < D / 8; ++d) {
      STEPFORMER_UNROLL
      for (int e = 0; e < 4; ++e) o[d][e] *= rescale[e / 2];
    }
    STEPFORMER_UNROLL
    for (int c = 0; c < kKeys / 16; ++c) {  // keys 16c..16c+15: P's piece as an A fragment, times V's rows
      float w[2][4];                        // the weights of pieces 2c and 2c + 1, dropout applied
      STEPFORMER_UNROLL
      for (int half = 0; half < 2; ++half) {
        STEPFORMER_UNROLL
        for (int e = 0; e < 4; ++e) {
          const float x = s[2 * c + half][e];
          const float weight = x == neg_inf ? 0.f : exp_(x - m[e / 2]);
          l[e / 2] += weight;
          const std::int64_t i = rows[e / 2], col = j0 + 16 * c + 8 * half + 2 * t + e % 2;
          const std::uint64_t at = static_cast<std::uint64_t>((bh * n.Tq + i) * n.Tk + col);
          w[half][e] = weight == 0.f ? 0.f : weight * static_cast<float>(p.drop.factor(at));
        }
      }
      const std::uint32_t pf[4] = {bf16_pair(w[0][0], w[0][1]), bf16_pair(w[0][2], w[0][3]),
                                   bf16_pair(w[1][0], w[1][1]), bf16_pair(w[1][2], w[1][3])};
      STEPFORMER_UNROLL
      for (int d = 0; d < D / 8; d += 2) {  // dims 8d..8d+15: V's rows 16c.. read transposed, as B
        std::uint32_t two[4];
        ldmatrix_x4(two, v_tile + (16 * c + q8 % 2 * 8 + lane % 8) * kStride + 8 * d + q8 / 2 * 8, true);
        const std::uint32_t first[2] = {two[0], two[1]}, second[2] = {two[2], two[3]};
        mma_m16n8k16_bf16(o[d], pf, first);
        mma_m16n8k16_bf16(o[d + 1], pf, second);
      }
    }
  }
  STEPFORMER_UNROLL
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(kFullMask, l[r], 1);
    l[r] += __shfl_xor_sync(kFullMask, l[r], 2);
    const std::int64_t i = rows[r];
    if (i >= n.Tq) continue;
    // l == 0 (no key seen): inf, and 0 * inf is NaN, as the composite's softmax
    store_row<D>(out + (bh * n.Tq + i) * D, o, r, 1.f / l[r]);
    if (t == 0) lse[bh * n.Tq + i] = m[r] + log_(l[r]);
  }
}

// Backward, as FlashAttention-2's (Dao 2023, algorithm 2) in two kernels so that no two blocks add into the same
// gradient: one per 64 queries for dQ, one per 64 keys for dK and dV (attention.cu's float32 kernels split it so
// too). Both recompute a tile's weights P = exp(scale q.k - lse) from the forward's lse, dP = dO V^T (times the
// dropout factors f), dS = P (dP - D) with D = dO . O per query, and round P f and dS to bfloat16 before the products
// that read them, as the CPU's bfloat16 kernel does; every sum is float32 and each gradient is rounded once.

// Rows [first, first + 64) of x staged in `tile`, then each warp's 16 of them as A fragments, 16 of D each.
template <int D>
__device__ __forceinline__ void rows_as_a(std::uint32_t (&fragments)[D / 16][4], bfloat16* tile, const bfloat16* x,
                                          std::int64_t first, std::int64_t valid) {
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  __syncthreads();  // every warp is done with the tile
  stage_rows<D>(tile, x, first, valid);
  __syncthreads();
  STEPFORMER_UNROLL
  for (int c = 0; c < D / 16; ++c)
    ldmatrix_x4(fragments[c], tile + (16 * warp + lane % 16) * (D + 8) + 16 * c + lane / 16 * 8, false);
}

// s += a x^T and u += b y^T over the 64 rows of the tiles x and y (row stride D + 8), whose rows are B's columns
// (K's in S = Q K^T): a and b are a warp's [16, D] A fragments; s and u [8 pieces of 8 rows of x, y][4].
template <int D>
__device__ __forceinline__ void times_rows(float (&s)[8][4], const std::uint32_t (&a)[D / 16][4], const bfloat16* x,
                                           float (&u)[8][4], const std::uint32_t (&b)[D / 16][4], const bfloat16* y) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp, q8 = lane / 8;
  STEPFORMER_UNROLL
  for (int c = 0; c < D / 16; ++c) {
    STEPFORMER_UNROLL
    for (int j = 0; j < 8; j += 2) {  // rows 8j..8j+15 at dims 16c..16c+15
      const int at = (8 * j + lane % 8 + q8 / 2 * 8) * (D + 8) + 16 * c + q8 % 2 * 8;
      std::uint32_t two[4];
      ldmatrix_x4(two, x + at, false);
      const std::uint32_t x_first[2] = {two[0], two[1]}, x_second[2] = {two[2], two[3]};
      mma_m16n8k16_bf16(s[j], a[c], x_first);
      mma_m16n8k16_bf16(s[j + 1], a[c], x_second);
      ldmatrix_x4(two, y + at, false);
      const std::uint32_t y_first[2] = {two[0], two[1]}, y_second[2] = {two[2], two[3]};
      mma_m16n8k16_bf16(u[j], b[c], y_first);
      mma_m16n8k16_bf16(u[j + 1], b[c], y_second);
    }
  }
}

// Pieces 2c and 2c + 1 of accumulators [8][4] as the A fragment of their [16, 16], rounded to bfloat16.
__device__ __forceinline__ void as_a(std::uint32_t (&f)[4], const float (&x)[8][4], int c) {
  f[0] = bf16_pair(x[2 * c][0], x[2 * c][1]);
  f[1] = bf16_pair(x[2 * c][2], x[2 * c][3]);
  f[2] = bf16_pair(x[2 * c + 1][0], x[2 * c + 1][1]);
  f[3] = bf16_pair(x[2 * c + 1][2], x[2 * c + 1][3]);
}

// acc += f x[16c..16c+15, :]: the tile's rows (row stride D + 8) are B's rows, read with ldmatrix.trans.
template <int D>
__device__ __forceinline__ void add_times_rows(float (&acc)[D / 8][4], const std::uint32_t (&f)[4], const bfloat16* x,
                                               int c) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp, q8 = lane / 8;
  STEPFORMER_UNROLL
  for (int d = 0; d < D / 8; d += 2) {  // dims 8d..8d+15
    std::uint32_t two[4];
    ldmatrix_x4(two, x + (16 * c + q8 % 2 * 8 + lane % 8) * (D + 8) + 8 * d + q8 / 2 * 8, true);
    const std::uint32_t first[2] = {two[0], two[1]}, second[2] = {two[2], two[3]};
    mma_m16n8k16_bf16(acc[d], f, first);
    mma_m16n8k16_bf16(acc[d + 1], f, second);
  }
}

// dQ = scale dS K for a block's 64 queries (a warp's 16), key tile by key tile: the forward's loop with dP beside S.
// D of each query is computed here and left in `dots` for the dK/dV kernel, which runs after it.
template <int D>
__global__ void __launch_bounds__(kThreads)
    attention_backward_q_mma(bfloat16* dq, float* dots, const bfloat16* dout, const bfloat16* out, const float* lse,
                             AttentionProblem<bfloat16> p) {
  constexpr int kStride = D + 8;
  const AttentionDims n = p.n;
  CUDASIM_DYNAMIC_SHARED(bfloat16, shared);
  bfloat16* row_tile = shared;                    // [64 queries][D]: Q, then dO, read once into fragments
  bfloat16* k_tile = row_tile + kRows * kStride;  // [64 keys][D]
  bfloat16* v_tile = k_tile + kKeys * kStride;    // [64 keys][D]
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int g = lane / 4, t = lane % 4;
  const std::int64_t bh = blockIdx.y, b = bh / n.H, h = bh % n.H;
  const std::int64_t i0 = static_cast<std::int64_t>(blockIdx.x) * kRows;
  const std::int64_t rows[2] = {i0 + 16 * warp + g, i0 + 16 * warp + g + 8};  // this lane's two queries
  const bfloat16* k = p.keys(bh);
  const bfloat16* v = p.values(bh);
  std::uint32_t qf[D / 16][4], gf[D / 16][4];  // this warp's 16 queries and their output gradients as A fragments
  rows_as_a<D>(qf, row_tile, p.q + bh * n.Tq * D, i0, n.Tq - i0);
  rows_as_a<D>(gf, row_tile, dout + bh * n.Tq * D, i0, n.Tq - i0);
  const float neg_inf = -INFINITY;
  float L[2], dot[2];  // per row: lse, and D = dO . O (a row's D/4 terms per lane, then the quad's sum)
  STEPFORMER_UNROLL
  for (int r = 0; r < 2; ++r) {
    const std::int64_t i = rows[r];
    float sum = 0;
    if (i < n.Tq)
      for (int d = t; d < D; d += 4)
        sum += static_cast<float>(dout[(bh * n.Tq + i) * D + d]) * static_cast<float>(out[(bh * n.Tq + i) * D + d]);
    sum += __shfl_xor_sync(kFullMask, sum, 1);
    sum += __shfl_xor_sync(kFullMask, sum, 2);
    dot[r] = sum;
    L[r] = i < n.Tq ? lse[bh * n.Tq + i] : neg_inf;
    if (t == 0 && i < n.Tq) dots[bh * n.Tq + i] = sum;
  }
  float acc[D / 8][4] = {};  // dQ / scale: [8 of Dh][rows g (0, 1) and g + 8 (2, 3)]
  const std::int64_t key_end = p.mask.causal && i0 + kRows < n.Tk ? i0 + kRows : n.Tk;
  for (std::int64_t j0 = 0; j0 < key_end; j0 += kKeys) {
    __syncthreads();
    stage_rows<D>(k_tile, k, j0, n.Tk - j0);
    stage_rows<D>(v_tile, v, j0, n.Tk - j0);
    __syncthreads();
    float s[kKeys / 8][4] = {}, dp[kKeys / 8][4] = {};  // S = Q K^T and dO V^T: [8 keys][rows g, g + 8]
    times_rows<D>(s, qf, k_tile, dp, gf, v_tile);
    STEPFORMER_UNROLL
    for (int j = 0; j < kKeys / 8; ++j) {  // s becomes dS = P (f dP - D); blocked, past the end or unseen: 0
      STEPFORMER_UNROLL
      for (int e = 0; e < 4; ++e) {
        const std::int64_t i = rows[e / 2], col = j0 + 8 * j + 2 * t + e % 2;
        const bool none = i >= n.Tq || col >= n.Tk || L[e / 2] == neg_inf || p.mask.blocked(b, h, i, col);
        const float w = none ? 0.f : exp_(p.scale * s[j][e] - L[e / 2]);
        const std::uint64_t at = static_cast<std::uint64_t>((bh * n.Tq + i) * n.Tk + col);
        s[j][e] = w == 0.f ? 0.f : w * (static_cast<float>(p.drop.factor(at)) * dp[j][e] - dot[e / 2]);
      }
    }
    STEPFORMER_UNROLL
    for (int c = 0; c < kKeys / 16; ++c) {  // keys 16c..16c+15: dS's piece times K's rows
      std::uint32_t dsf[4];
      as_a(dsf, s, c);
      add_times_rows<D>(acc, dsf, k_tile, c);
    }
  }
  STEPFORMER_UNROLL
  for (int r = 0; r < 2; ++r) {
    const std::int64_t i = rows[r];
    if (i < n.Tq) store_row<D>(dq + (bh * n.Tq + i) * D, acc, r, p.scale);
  }
}

// dV = (P f)^T dO and dK = scale dS^T Q for a block's 64 keys (a warp's 16), query tile by query tile: the same
// products transposed, S^T = K Q^T and dP^T = V dO^T, so that the warp's keys are the rows of its accumulators.
template <int D>
__global__ void __launch_bounds__(kThreads)
    attention_backward_kv_mma(bfloat16* dk, bfloat16* dv, const bfloat16* dout, const float* lse, const float* dots,
                              AttentionProblem<bfloat16> p) {
  constexpr int kStride = D + 8;
  const AttentionDims n = p.n;
  CUDASIM_DYNAMIC_SHARED(bfloat16, shared);
  bfloat16* q_tile = shared;                    // [64 queries][D] (first the block's keys)
  bfloat16* g_tile = q_tile + kRows * kStride;  // [64 queries][D] of dO (first the block's values)
  float* lse_tile = reinterpret_cast<float*>(g_tile + kRows * kStride);  // [64]
  float* dot_tile = lse_tile + kRows;                                    // [64]
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int g = lane / 4, t = lane % 4;
  const std::int64_t bh = blockIdx.y, b = bh / n.H, h = bh % n.H;
  const std::int64_t j0 = static_cast<std::int64_t>(blockIdx.x) * kKeys;
  const std::int64_t keys[2] = {j0 + 16 * warp + g, j0 + 16 * warp + g + 8};  // this lane's two keys
  const bfloat16* q = p.q + bh * n.Tq * D;
  const bfloat16* g_out = dout + bh * n.Tq * D;
  std::uint32_t kf[D / 16][4], vf[D / 16][4];  // this warp's 16 keys and values as A fragments
  rows_as_a<D>(kf, q_tile, p.keys(bh), j0, n.Tk - j0);
  rows_as_a<D>(vf, g_tile, p.values(bh), j0, n.Tk - j0);
  const float neg_inf = -INFINITY;
  float dk_acc[D / 8][4] = {}, dv_acc[D / 8][4] = {};  // [8 of D][keys g (0, 1) and g + 8 (2, 3)]
  // Causal: the queries before j0 (a multiple of 64) see none of these keys.
  for (std::int64_t i0 = p.mask.causal ? j0 : 0; i0 < n.Tq; i0 += kRows) {
    __syncthreads();  // every warp is done with the previous tiles (and the first, with its fragments)
    stage_rows<D>(q_tile, q, i0, n.Tq - i0);
    stage_rows<D>(g_tile, g_out, i0, n.Tq - i0);
    for (int e = static_cast<int>(threadIdx.x); e < kRows; e += kThreads) {
      const bool in = i0 + e < n.Tq;
      lse_tile[e] = in ? lse[bh * n.Tq + i0 + e] : neg_inf;
      dot_tile[e] = in ? dots[bh * n.Tq + i0 + e] : 0.f;
    }
    __syncthreads();
    float st[kRows / 8][4] = {}, dpt[kRows / 8][4] = {};  // S^T = K Q^T and V dO^T: [8 queries][keys g, g + 8]
    times_rows<D>(st, kf, q_tile, dpt, vf, g_tile);
    STEPFORMER_UNROLL
    for (int j = 0; j < kRows / 8; ++j) {  // st becomes P f, dpt dS = P (f dP - D); blocked or unseen: 0
      STEPFORMER_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int qi = 8 * j + 2 * t + e % 2;
        const std::int64_t key = keys[e / 2], i = i0 + qi;
        const float L = lse_tile[qi];
        const bool none = i >= n.Tq || key >= n.Tk || L == neg_inf || p.mask.blocked(b, h, i, key);
        const float w = none ? 0.f : exp_(p.scale * st[j][e] - L);
        const std::uint64_t at = static_cast<std::uint64_t>((bh * n.Tq + i) * n.Tk + key);
        const float f = w == 0.f ? 0.f : static_cast<float>(p.drop.factor(at));
        st[j][e] = w * f;
        dpt[j][e] = w == 0.f ? 0.f : w * (f * dpt[j][e] - dot_tile[qi]);
      }
    }
    STEPFORMER_UNROLL
    for (int c = 0; c < kRows / 16; ++c) {  // queries 16c..16c+15: (P f)^T times dO's rows, dS^T times Q's
      std::uint32_t pf[4], dsf[4];
      as_a(pf, st, c);
      as_a(dsf, dpt, c);
      add_times_rows<D>(dv_acc, pf, g_tile, c);
      add_times_rows<D>(dk_acc, dsf, q_tile, c);
    }
  }
  STEPFORMER_UNROLL
  for (int r = 0; r < 2; ++r) {
    const std::int64_t key = keys[r];
    if (key >= n.Tk) continue;
    store_row<D>(dk + (bh * n.Tk + key) * D, dk_acc, r, p.scale);
    store_row<D>(dv + (bh * n.Tk + key) * D, dv_acc, r, 1.f);
  }
}

template <int D>
void launch_forward(const TensorDesc& out, const TensorDesc& lse, const AttentionProblem<bfloat16>& p) {
  const std::size_t bytes = sizeof(bfloat16) * (kRows + 2 * kKeys) * (D + 8);
#if defined(__CUDACC__)
  // Dh = 128 needs 51 KB, more than the 48 KB a launch gets without asking.
  STEPFORMER_CUDA_CHECK(cudaFuncSetAttribute(attention_forward_mma<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(bytes)));
#endif
  const dim3 grid(static_cast<unsigned>((p.n.Tq + kRows - 1) / kRows), static_cast<unsigned>(p.n.B * p.n.H));
  launch(attention_forward_mma<D>, grid, dim3(kThreads), bytes, static_cast<bfloat16*>(out.data),
         static_cast<float*>(lse.data), p);
}

template <int D>
void launch_backward(const TensorDesc& dq, const TensorDesc& dk, const TensorDesc& dv, const TensorDesc& dout,
                     const TensorDesc& out, const TensorDesc& lse, float* dots, const AttentionProblem<bfloat16>& p) {
  const std::size_t q_bytes = sizeof(bfloat16) * (kRows + 2 * kKeys) * (D + 8);
  const std::size_t kv_bytes = sizeof(bfloat16) * 2 * kRows * (D + 8) + sizeof(float) * 2 * kRows;
#if defined(__CUDACC__)
  STEPFORMER_CUDA_CHECK(cudaFuncSetAttribute(attention_backward_q_mma<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(q_bytes)));
  STEPFORMER_CUDA_CHECK(cudaFuncSetAttribute(attention_backward_kv_mma<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(kv_bytes)));
#endif
  const auto* g = static_cast<const bfloat16*>(dout.data);
  const unsigned heads = static_cast<unsigned>(p.n.B * p.n.H);
  if (p.n.Tq > 0) {  // first: it leaves D = dO . O of every query in `dots`
    next_launch_flops(static_cast<std::uint64_t>(2 * p.n.B * p.n.H * p.n.Tq * p.n.Tk * 3 * D));
    launch(attention_backward_q_mma<D>, dim3(static_cast<unsigned>((p.n.Tq + kRows - 1) / kRows), heads),
           dim3(kThreads), q_bytes, static_cast<bfloat16*>(dq.data), dots, g, static_cast<const bfloat16*>(out.data),
           static_cast<const float*>(lse.data), p);
  }
  if (p.n.Tk > 0) {
    next_launch_flops(static_cast<std::uint64_t>(2 * p.n.B * p.n.H * p.n.Tq * p.n.Tk * 4 * D));
    launch(attention_backward_kv_mma<D>, dim3(static_cast<unsigned>((p.n.Tk + kKeys - 1) / kKeys), heads),
           dim3(kThreads), kv_bytes, static_cast<bfloat16*>(dk.data), static_cast<bfloat16*>(dv.data), g,
           static_cast<const float*>(lse.data), static_cast<const float*>(dots), p);
  }
}

// Every head starts on 16 bytes (the rows are D >= 16 bfloat16s): so do the 16-byte copies of stage_rows.
bool aligned16(const TensorDesc& t) {
  return reinterpret_cast<std::uintptr_t>(t.data) % 16 == 0 && t.strides[0] % 8 == 0 && t.strides[1] % 8 == 0;
}

}  // namespace

bool CudaBackend::attention_forward_tensor_cores(const TensorDesc& out, const TensorDesc& lse, const TensorDesc& q,
                                                 const TensorDesc& k, const TensorDesc& v, const TensorDesc& blocked,
                                                 const AttentionConfig& cfg) {
  const AttentionProblem<bfloat16> p = attention_problem<bfloat16>(q, k, v, blocked, cfg);
  const std::int64_t D = p.n.Dh;
  if (!has_bf16_tensor_cores() || p.n.Dv != D || (D != 16 && D != 32 && D != 64 && D != 128) || !aligned16(q) ||
      !aligned16(k) || !aligned16(v) || lse.dtype != DType::float32)
    return false;
  if (p.n.Tq == 0 || p.n.B * p.n.H == 0) return true;
  next_launch_flops(static_cast<std::uint64_t>(2 * p.n.B * p.n.H * p.n.Tq * p.n.Tk * (p.n.Dh + p.n.Dv)));
  if (D == 16) launch_forward<16>(out, lse, p);
  if (D == 32) launch_forward<32>(out, lse, p);
  if (D == 64) launch_forward<64>(out, lse, p);
  if (D == 128) launch_forward<128>(out, lse, p);
  return true;
}

bool CudaBackend::attention_backward_tensor_cores(const TensorDesc& dq, const TensorDesc& dk, const TensorDesc& dv,
                                                  const TensorDesc& dout, const TensorDesc& q, const TensorDesc& k,
                                                  const TensorDesc& v, const TensorDesc& out, const TensorDesc& lse,
                                                  const TensorDesc& blocked, const AttentionConfig& cfg) {
  const AttentionProblem<bfloat16> p = attention_problem<bfloat16>(q, k, v, blocked, cfg);
  const std::int64_t D = p.n.Dh;
  if (!has_bf16_tensor_cores() || p.n.Dv != D || (D != 16 && D != 32 && D != 64 && D != 128) || !aligned16(q) ||
      !aligned16(k) || !aligned16(v) || !aligned16(dout) || !aligned16(out) || lse.dtype != DType::float32)
    return false;
  if (p.n.B * p.n.H == 0) return true;
  // D = dO . O per query, from the dQ kernel to the dK/dV kernel; the cache hands the block only to later work.
  const std::size_t bytes = sizeof(float) * static_cast<std::size_t>(p.n.B * p.n.H * p.n.Tq);
  float* dots = static_cast<float*>(allocate(bytes));
  if (D == 16) launch_backward<16>(dq, dk, dv, dout, out, lse, dots, p);
  if (D == 32) launch_backward<32>(dq, dk, dv, dout, out, lse, dots, p);
  if (D == 64) launch_backward<64>(dq, dk, dv, dout, out, lse, dots, p);
  if (D == 128) launch_backward<128>(dq, dk, dv, dout, out, lse, dots, p);
  deallocate(dots, bytes);
  return true;
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
