// The transpose ladder (ladders.h): out [rows, cols], row-major, from `in` whose rows are adjacent in memory
// (element (r, c) at r + c * ld), as contiguous() of a transposed matrix asks. After Mark Harris, "An Efficient
// Matrix Transpose in CUDA C/C++" (NVIDIA, 2013).
// Each version against the CPU: `build/cudasim-check/bin/cuda_tests "cuda: every version of the softmax, row-sum
// and transpose ladders matches the CPU"`; what each fix buys, counted: `build/cudasim-check/bin/ladder_bench`.
#include <string>

#include "cuda_backend.h"
#include "device_utils.cuh"
#include "ladders.h"

namespace stepformer::STEPFORMER_CUDA_NS {

namespace {

constexpr int kTile = 32, kTileRows = 8;

// v1, one thread per element, threads along a row of out: the writes of a warp are 32 neighbours
// (coalesced), but its reads are in[r + c * ld] for 32 consecutive c, ld elements apart: one sector per
// lane, 32 per request. One side of a transpose is always strided when each thread copies one element.
template <class T>
__global__ void transpose_v1(T* out, const T* in, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * kTile;
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kTile + threadIdx.x;
  for (int j = threadIdx.y; j < kTile; j += kTileRows) {
    const std::int64_t r = r0 + j;
    if (r < rows && c < cols) out[r * cols + c] = in[r + c * ld];
  }
}

// v2, through a 32x32 tile in shared memory: a warp reads 32 neighbours along in's contiguous direction into
// a row of the tile, the block waits at __syncthreads, and a warp writes 32 neighbours of a row of out from a
// column of the tile. Both global sides coalesce (4 sectors per request); but a column of a [32][32] float
// tile is 32 words 32 apart, all in one bank: each such read is 32 wavefronts, 31 bank conflicts.
template <class T>
__global__ void transpose_v2(T* out, const T* in, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  __shared__ T tile[kTile][kTile];
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * kTile;
  const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * kTile;
  for (int j = threadIdx.y; j < kTile; j += kTileRows) {
    const std::int64_t r = r0 + threadIdx.x, c = c0 + j;
    if (r < rows && c < cols) tile[j][threadIdx.x] = in[r + c * ld];
  }
  __syncthreads();
  for (int j = threadIdx.y; j < kTile; j += kTileRows) {
    const std::int64_t r = r0 + j, c = c0 + threadIdx.x;
    if (r < rows && c < cols) out[r * cols + c] = tile[threadIdx.x][j];
  }
}

}  // namespace

// v3 is transpose.cu's kernel: v2 with a 33rd column in the tile, so that a column's 32 words fall in 32
// different banks: no conflict. It also loops over batches (blockIdx.z), which the ladder does not need.
void transpose_version(int version, const TensorDesc& out, const TensorDesc& in) {
  if (version < 1 || version > kTransposeVersions)
    throw ValueError("transpose_version: version " + std::to_string(version) + " is not 1, 2 or 3");
  if (out.ndim != 2 || in.ndim != 2 || in.strides[0] != 1)
    throw ValueError("transpose_version: wants a 2-d out and a 2-d in whose rows are adjacent (stride 1)");
  const std::int64_t rows = out.shape[0], cols = out.shape[1], ld = in.strides[1];
  if (rows == 0 || cols == 0) return;
  if (version == 3) {
    if (!backend().transpose_copy(out, in)) throw ValueError("transpose_version: transpose_copy declined the layout");
    return;
  }
  const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile), static_cast<unsigned>((rows + kTile - 1) / kTile));
  dispatch_floating(out.dtype, "transpose_version", [&](auto t) {
    using T = decltype(t);
    T* o = static_cast<T*>(out.data);
    const T* x = static_cast<const T*>(in.data);
    if (version == 1)
      launch(transpose_v1<T>, grid, dim3(kTile, kTileRows), 0, o, x, rows, cols, ld);
    else
      launch(transpose_v2<T>, grid, dim3(kTile, kTileRows), 0, o, x, rows, cols, ld);
  });
}

}  // namespace stepformer::STEPFORMER_CUDA_NS
