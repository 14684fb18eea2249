// The tensor cores' mma.sync, emulated (mma.h): gather A and B from the 32 lanes' fragments, then each lane's
// four sums. The products of two bfloat16 values are exact in float32; the order of the additions is ours.
// ldmatrix: gather the 32 rows, then hand each lane its words.
#include "mma.h"

#include <cstring>

namespace cudasim::detail {

namespace {

float bf16_half(std::uint32_t pair, int half) {  // the low half holds the element of lower k
  const std::uint32_t bits = (half == 0 ? pair & 0xFFFFu : pair >> 16) << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

}  // namespace

void mma_bf16(const std::uint64_t (&lanes)[32]) {
  auto fragments = [&](int lane) {
    return *reinterpret_cast<const MmaFragments*>(lanes[static_cast<std::size_t>(lane)]);
  };
  float a[16][16], b[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const MmaFragments f = fragments(lane);
    const int g = lane / 4, t = lane % 4;
    for (int r = 0; r < 4; ++r)
      for (int h = 0; h < 2; ++h) a[g + 8 * (r % 2)][2 * t + h + 8 * (r / 2)] = bf16_half(f.a[r], h);
    for (int r = 0; r < 2; ++r)
      for (int h = 0; h < 2; ++h) b[2 * t + h + 8 * r][g] = bf16_half(f.b[r], h);
  }
  for (int lane = 0; lane < 32; ++lane) {
    const MmaFragments f = fragments(lane);
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = g + 8 * (i / 2), col = 2 * t + i % 2;
      float sum = f.d[i];
      for (int k = 0; k < 16; ++k) sum += a[row][k] * b[k][col];
      f.d[i] = sum;
    }
  }
}

void ldmatrix_x4(const std::uint64_t (&lanes)[32], bool trans) {
  std::uint16_t m[4][8][8];  // [matrix][row][column], as the lanes loaded them
  for (int lane = 0; lane < 32; ++lane) {
    const LdmatrixRow& mine = *reinterpret_cast<const LdmatrixRow*>(lanes[static_cast<std::size_t>(lane)]);
    for (int c = 0; c < 8; ++c)
      m[lane / 8][lane % 8][c] = static_cast<std::uint16_t>(mine.row[c / 2] >> (16 * (c % 2)) & 0xFFFFu);
  }
  for (int lane = 0; lane < 32; ++lane) {
    const LdmatrixRow& mine = *reinterpret_cast<const LdmatrixRow*>(lanes[static_cast<std::size_t>(lane)]);
    const int r = lane / 4, w = lane % 4;
    for (int q = 0; q < 4; ++q) {
      const std::uint32_t low = trans ? m[q][2 * w][r] : m[q][r][2 * w];
      const std::uint32_t high = trans ? m[q][2 * w + 1][r] : m[q][r][2 * w + 1];
      mine.d[q] = low | high << 16;
    }
  }
}

}  // namespace cudasim::detail
