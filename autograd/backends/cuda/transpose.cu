// Transposing copies: `out` (contiguous, [batch..., rows, cols]) gets `in` whose rows are adjacent in
// memory (stride 1 along dimension -2): what contiguous() of a transposed matrix asks for (K^T in
// attention, the gradient of a transpose). The elementwise copy does this too, but one of its sides is
// always strided: a warp writing 32 neighbours of a row of out reads 32 elements a whole column apart, 32
// sectors for one request. Through a 32x32 tile in shared memory both sides coalesce: the block reads the
// tile along in's contiguous direction, waits at __syncthreads, and writes it along out's. The tile has a
// 33rd column so that reading a column of it touches 32 different banks. Blocks of 32x8 threads, each
// thread 4 elements (the kernel of Mark Harris, "An Efficient Matrix Transpose in CUDA C/C++", 2013).
#include "cuda_backend.h"
#include "device_utils.cuh"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

constexpr int kTile = 32, kTileRows = 8;

struct Transpose {
  TensorDesc out, in;
  std::int64_t rows = 0, cols = 0, batches = 1;
  std::int64_t ld = 0;  // in's stride along dimension -1 (its stride along -2 is 1)
};

template <class T>
__global__ void transpose_kernel(Transpose t) {
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * kTile;
  const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * kTile;
  for (std::int64_t z = blockIdx.z; z < t.batches; z += gridDim.z) {
    const T* in = at<T>(t.in) + unravel(z, t.out.ndim - 2, t.out.shape, t.in.strides);  // batch z of in
    T* out = at<T>(t.out) + z * t.rows * t.cols;
    // EXERCISE 9.4: out[r][c] = in[r + c * ld] via a [32][33] tile: read along r, barrier, write along c
    __shared__ T tile[kTile][kTile + 1];
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {  // a warp reads 32 neighbours of a column of out
      const std::int64_t r = r0 + threadIdx.x, c = c0 + j;
      if (r < t.rows && c < t.cols) tile[j][threadIdx.x] = in[r + c * t.ld];
    }
    __syncthreads();
    for (int j = threadIdx.y; j < kTile; j += kTileRows) {  // and writes 32 neighbours of a row of out
      const std::int64_t r = r0 + j, c = c0 + threadIdx.x;
      if (r < t.rows && c < t.cols) out[r * t.cols + c] = tile[threadIdx.x][j];
    }
    __syncthreads();  // the tile is read before the next batch overwrites it
    // END EXERCISE
  }
}

bool row_major(const TensorDesc& d) {
  std::int64_t expected = 1;
  for (int dim = d.ndim - 1; dim >= 0; --dim) {
    if (d.shape[dim] != 1 && d.strides[dim] != expected) return false;
    expected *= d.shape[dim];
  }
  return true;
}

}  // namespace

bool CudaBackend::transpose_copy(const TensorDesc& out, const TensorDesc& in) {
  const int nd = out.ndim;
  if (nd < 2 || out.dtype != in.dtype || !row_major(out)) return false;
  Transpose t{out, in, out.shape[nd - 2], out.shape[nd - 1], 1, in.strides[nd - 1]};
  if (t.rows < 2 || t.cols < 2 || in.strides[nd - 2] != 1 || t.ld == 1) return false;
  for (int dim = 0; dim < nd - 2; ++dim) t.batches *= out.shape[dim];
  if (t.batches == 0) return true;
  const dim3 grid(static_cast<unsigned>((t.cols + kTile - 1) / kTile),
                  static_cast<unsigned>((t.rows + kTile - 1) / kTile),
                  static_cast<unsigned>(std::min<std::int64_t>(t.batches, 65535)));
  if (grid.y > 65535) return false;  // taller than a grid: the elementwise copy takes it
  dispatch_storage(out.dtype,
                   [&](auto v) { launch(transpose_kernel<decltype(v)>, grid, dim3(kTile, kTileRows), 0, t); });
  return true;
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
