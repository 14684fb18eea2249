// Backward, as FlashAttention-2's (Dao 2023, algorithm 2) in two kernels so that no two blocks add into the same
// gradient: one per 64 queries for dQ, one per 64 keys for dK and dV (attention.cu's float32 kernels split it so
// too). Both recompute a tile's weights P = exp(scale q.k - lse) from the forward's lse, dP = dO V^T (times the
// dropout factors f), dS = P (dP - D) with D = dO . O per query, and round P f and dS to bfloat16 before the products
// that read them, as the CPU's bfloat16 kernel does; every sum is float32 and each gradient is rounded once.
// Each kernel's other side (K and V for dQ; Q, dO, lse and D for dK and dV) goes through two stages of shared memory
// as in the forward: the next tile's cp.async copies start before the warps multiply this one.
#include "attention_tensor_cores.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {
using namespace attention_mma;

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
  bfloat16* row_tile = shared;                        // [64 queries][D]: Q, then dO, read once into fragments
  bfloat16* k_tiles = row_tile + kRows * kStride;     // [2 stages][64 keys][D]
  bfloat16* v_tiles = k_tiles + 2 * kKeys * kStride;  // [2 stages][64 keys][D]
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
  TileStages<D> kv{{k_tiles, v_tiles}, {k, v}, n.Tk, key_end, {}};
  kv.start(0);
  for (std::int64_t j0 = 0, stage = 0; j0 < key_end; j0 += kKeys, stage ^= 1) {
    kv.next(j0, stage);
    const bfloat16 *k_tile = kv.tile(0, stage), *v_tile = kv.tile(1, stage);
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
    __syncthreads();  // every warp is done with this stage before the next step's copies overwrite it
  }
  // dQ through this warp's own 16 rows of the row tile (the last read of them was its dO fragments).
  store_rows<D>(dq + bh * n.Tq * D, i0 + 16 * warp, n.Tq, row_tile + 16 * warp * kStride, acc, p.scale, p.scale);
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
  bfloat16* q_tiles = shared;                         // [2 stages][64 queries][D] (first the block's keys)
  bfloat16* g_tiles = q_tiles + 2 * kRows * kStride;  // [2 stages][64 queries][D] of dO (first the block's values)
  float* lse_tiles = reinterpret_cast<float*>(g_tiles + 2 * kRows * kStride);  // [2 stages][64]
  float* dot_tiles = lse_tiles + 2 * kRows;                                    // [2 stages][64]
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int g = lane / 4, t = lane % 4;
  const std::int64_t bh = blockIdx.y, b = bh / n.H, h = bh % n.H;
  const std::int64_t j0 = static_cast<std::int64_t>(blockIdx.x) * kKeys;
  const std::int64_t keys[2] = {j0 + 16 * warp + g, j0 + 16 * warp + g + 8};  // this lane's two keys
  const bfloat16* q = p.q + bh * n.Tq * D;
  const bfloat16* g_out = dout + bh * n.Tq * D;
  std::uint32_t kf[D / 16][4], vf[D / 16][4];  // this warp's 16 keys and values as A fragments
  rows_as_a<D>(kf, q_tiles, p.keys(bh), j0, n.Tk - j0);
  rows_as_a<D>(vf, g_tiles, p.values(bh), j0, n.Tk - j0);
  const float neg_inf = -INFINITY;
  float dk_acc[D / 8][4] = {}, dv_acc[D / 8][4] = {};  // [8 of D][keys g (0, 1) and g + 8 (2, 3)]
  // lse and D of the query tile at i0 into a stage, by plain loads, before the copies of its Q and dO start: they are
  // read after the barrier that follows the stage's wait, as the copies are.
  const auto stage_scalars = [&](std::int64_t i0, std::int64_t stage) {
    for (int e = static_cast<int>(threadIdx.x); e < kRows; e += kThreads) {
      const bool in = i0 + e < n.Tq;
      lse_tiles[stage * kRows + e] = in ? lse[bh * n.Tq + i0 + e] : neg_inf;
      dot_tiles[stage * kRows + e] = in ? dots[bh * n.Tq + i0 + e] : 0.f;
    }
  };
  // Causal: the queries before j0 (a multiple of 64) see none of these keys.
  const std::int64_t first = p.mask.causal ? j0 : 0;
  TileStages<D> queries{{q_tiles, g_tiles}, {q, g_out}, n.Tq, n.Tq, {}};
  __syncthreads();  // every warp has its fragments of stage 0 before the first copies overwrite it
  if (first < n.Tq) stage_scalars(first, 0);
  queries.start(first);
  for (std::int64_t i0 = first, stage = 0; i0 < n.Tq; i0 += kRows, stage ^= 1) {
    if (i0 + kRows < n.Tq) stage_scalars(i0 + kRows, stage ^ 1);
    queries.next(i0, stage);
    const bfloat16 *q_tile = queries.tile(0, stage), *g_tile = queries.tile(1, stage);
    const float* lse_tile = lse_tiles + stage * kRows;
    const float* dot_tile = dot_tiles + stage * kRows;
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
    __syncthreads();  // every warp is done with this stage before the next step's copies overwrite it
  }
  // dK and dV through this warp's 16 rows of the first query stage: every warp is past the last step's barrier.
  bfloat16* band = q_tiles + 16 * warp * kStride;
  store_rows<D>(dk + bh * n.Tk * D, j0 + 16 * warp, n.Tk, band, dk_acc, p.scale, p.scale);
  store_rows<D>(dv + bh * n.Tk * D, j0 + 16 * warp, n.Tk, band, dv_acc, 1.f, 1.f);
}
template <int D>
void launch_backward(const TensorDesc& dq, const TensorDesc& dk, const TensorDesc& dv, const TensorDesc& dout,
                     const TensorDesc& out, const TensorDesc& lse, float* dots, const AttentionProblem<bfloat16>& p) {
  const std::size_t q_bytes = sizeof(bfloat16) * (kRows + 2 * 2 * kKeys) * (D + 8);
  const std::size_t kv_bytes = sizeof(bfloat16) * 2 * 2 * kRows * (D + 8) + sizeof(float) * 2 * 2 * kRows;
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

}  // namespace

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
