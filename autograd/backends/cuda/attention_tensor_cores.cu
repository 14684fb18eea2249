// FlashAttention on the tensor cores (the forward; attention_tensor_cores_backward.cu has the backward), with
// FlashAttention-2's partition of the work (Dao 2023, "FlashAttention-2: Faster Attention with Better Parallelism and
// Work Partitioning", section 3.2: each warp owns its queries, so no two warps combine partial results): bfloat16 q, k
// and v, float32 scores, running statistics and sums, and the weights rounded to bfloat16 before they multiply V, as
// the CPU's bfloat16 kernel does.
//
// A block of 4 warps takes 64 queries of one (batch, head), a warp 16 of them, and walks the keys 64 at a time.
// A warp's scores S = Q K^T (16 x 64) and its output rows (16 x Dh) live in mma.sync's accumulators, so the online
// softmax (attention.cu's forward, per row) runs in registers: lane 4g + t holds rows g and g + 8, columns 2t and
// 2t + 1 of every 8, so a row's max and sum meet across the 4 lanes of a quad in two shuffles. The accumulators of
// two neighbouring 8-column pieces of P are, value for value, the A fragment of a 16 x 16 piece (gemm_tensor_cores.cu
// spells the layouts out), so the weights go from the first product into the second without leaving registers.
// Shared memory holds the block's 64 queries (read once into fragments) and two stages of 64 keys and values, rows
// padded by 16 bytes so that ldmatrix's 8 rows hit 32 banks; K is read with ldmatrix, V with ldmatrix.trans (V is
// the product's B along its rows). The stages alternate: the cp.async copies of the next tile start before the
// warps multiply this one (gemm_pipelined.cu's pipeline, two stages deep), so the tile lands while they work
// instead of between two barriers. The output leaves through the warp's rows of the query tile, whole rows at a time
// (store_rows).
// Heads of Dh == Dv in {16, 32, 64, 128} and 16-byte aligned operands take these kernels; others the float32 ones.
#include "attention_tensor_cores.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {
using namespace attention_mma;

template <int D>
__global__ void __launch_bounds__(kThreads)
    attention_forward_mma(bfloat16* out, float* lse, AttentionProblem<bfloat16> p) {
  constexpr int kStride = D + 8;
  const AttentionDims n = p.n;
  CUDASIM_DYNAMIC_SHARED(bfloat16, shared);
  bfloat16* q_tile = shared;                          // [64 queries][D]
  bfloat16* k_tiles = q_tile + kRows * kStride;       // [2 stages][64 keys][D]
  bfloat16* v_tiles = k_tiles + 2 * kKeys * kStride;  // [2 stages][64 keys][D]
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
  TileStages<D> kv{{k_tiles, v_tiles}, {k, v}, n.Tk, key_end, {}};
  kv.start(0);
  for (std::int64_t j0 = 0, stage = 0; j0 < key_end; j0 += kKeys, stage ^= 1) {
    kv.next(j0, stage);
    const bfloat16 *k_tile = kv.tile(0, stage), *v_tile = kv.tile(1, stage);
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
    __syncthreads();  // every warp is done with this stage before the next step's copies overwrite it
  }
  float inverse[2];
  STEPFORMER_UNROLL
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(kFullMask, l[r], 1);
    l[r] += __shfl_xor_sync(kFullMask, l[r], 2);
    inverse[r] = 1.f / l[r];  // l == 0 (no key seen): inf, and 0 * inf is NaN, as the composite's softmax
    const std::int64_t i = rows[r];
    if (t == 0 && i < n.Tq) lse[bh * n.Tq + i] = m[r] + log_(l[r]);
  }
  // The output through this warp's own 16 rows of the query tile, read only by it (into its fragments, long ago).
  store_rows<D>(out + bh * n.Tq * D, i0 + 16 * warp, n.Tq, q_tile + 16 * warp * kStride, o, inverse[0], inverse[1]);
}

template <int D>
void launch_forward(const TensorDesc& out, const TensorDesc& lse, const AttentionProblem<bfloat16>& p) {
  const std::size_t bytes = sizeof(bfloat16) * (kRows + 2 * 2 * kKeys) * (D + 8);
#if defined(__CUDACC__)
  // Dh = 64 needs 46 KB and Dh = 128 85 KB: more than the 48 KB a launch gets without asking at 128.
  STEPFORMER_CUDA_CHECK(cudaFuncSetAttribute(attention_forward_mma<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(bytes)));
#endif
  const dim3 grid(static_cast<unsigned>((p.n.Tq + kRows - 1) / kRows), static_cast<unsigned>(p.n.B * p.n.H));
  launch(attention_forward_mma<D>, grid, dim3(kThreads), bytes, static_cast<bfloat16*>(out.data),
         static_cast<float*>(lse.data), p);
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

}  // namespace stepformer::STEPFORMER_CUDA_NS
