#pragma once
// The GEMM micro-kernel, written once for every vector instruction set. `V` names the set's register
// type and five operations; gemm_avx512.cpp and gemm_avx2.cpp instantiate it with their intrinsics, each
// in a file compiled for that instruction set only (so no other code can pick up its instructions).
//
// The tile: MR rows x NV registers of C (NR = NV * lanes columns) stay in registers for the whole k loop.
// Per k, NV loads of packed B and MR broadcasts of A feed MR * NV fused multiply-adds: the ratio of arithmetic
// to memory traffic that lets the loop run at the FMA units' speed (BLIS's "micro-kernel", Van Zee & van de
// Geijn, 2015). A is a packed panel, or a row-major A read in place (gemm.cpp says when).
#include <cstdint>

namespace stepformer::cpu::gemm_detail {

// Where row r's value at k is: packed, a[k * MR + r] (the panel packing wrote); in place, rows[r][k] (a row-major
// A read as it lies, one pointer per row). kAhead: the tile asks for its rows 64 values ahead every 16 k, since no
// packer asked for them (2-8% on the in-place products with operands from memory; docs/performance.md, "Packing asks
// ahead").
template <class T, int MR>
struct PackedA {
  static constexpr bool kAhead = false;
  const T* a;
  T at(int r, std::int64_t k) const { return a[k * MR + r]; }
};
template <class T, int MR>
struct InPlaceA {
  static constexpr bool kAhead = true;
  const T* rows[MR];
  T at(int r, std::int64_t k) const { return rows[r][k]; }
};

// C's rows from `rows` on are neither read nor written (a short edge panel of A stores into C itself).
template <class V, int MR, int NV, class A>
void micro_tile(std::int64_t K, const A& a, const typename V::T* b, typename V::T* c, std::int64_t rs_c,
                typename V::T alpha, typename V::T beta, int rows = MR) {
  using Reg = typename V::Reg;
  constexpr int L = V::kLanes, NR = NV * L;
  // Ask for C's tile now: the k loop takes thousands of cycles, so it is in cache when the loop ends.
  for (int r = 0; r < MR; ++r) __builtin_prefetch(c + r * rs_c, 1), __builtin_prefetch(c + r * rs_c + NR - 1, 1);
  Reg acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = V::zero();
  for (std::int64_t k = 0; k < K; ++k, b += NR) {
    Reg bk[NV];
    if constexpr (A::kAhead)
      if ((k & 15) == 0 && k + 64 < K)
        for (int r = 0; r < MR; ++r) __builtin_prefetch(a.rows[r] + k + 64);
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bk[v] = V::load(b + v * L);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const Reg ar = V::broadcast(a.at(r, k));
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = V::fma(ar, bk[v], acc[r][v]);
    }
  }
  const Reg va = V::broadcast(alpha), vb = V::broadcast(beta);
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      if (r >= rows) break;
      typename V::T* p = c + r * rs_c + v * L;
      const Reg scaled = V::mul(acc[r][v], va);
      V::store(p, beta == 0 ? scaled : V::fma(V::load(p), vb, scaled));
    }
}

// A packed panel of A (MR values per k).
template <class V, int MR, int NV>
void micro_kernel(std::int64_t K, const typename V::T* a, const typename V::T* b, typename V::T* c, std::int64_t rs_c,
                  typename V::T alpha, typename V::T beta) {
  micro_tile<V, MR, NV>(K, PackedA<typename V::T, MR>{a}, b, c, rs_c, alpha, beta);
}

// A row-major A in place: row r of the tile starts at a + r * lda; rows from m on repeat row m - 1 and are not
// stored, so a short edge panel reads nothing past A and writes nothing past its m rows of C.
template <class V, int MR, int NV>
void micro_kernel_rows(std::int64_t K, const typename V::T* a, std::int64_t lda, int m, const typename V::T* b,
                       typename V::T* c, std::int64_t rs_c, typename V::T alpha, typename V::T beta) {
  InPlaceA<typename V::T, MR> rows;
  for (int r = 0; r < MR; ++r) rows.rows[r] = a + (r < m ? r : m - 1) * lda;
  micro_tile<V, MR, NV>(K, rows, b, c, rs_c, alpha, beta, m);
}

}  // namespace stepformer::cpu::gemm_detail
