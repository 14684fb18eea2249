#pragma once
// cuda-sim's tensor cores: the arithmetic of one mma.sync (PTX's m16n8k16, bfloat16 in, float32 sums), and the
// exchange of one ldmatrix (the rows the lanes loaded, handed out as fragments), once every lane of the warp has
// met at it (warp.cpp's collective). Inner: kernels see only cudasim.h.
#include <cstdint>

namespace cudasim::detail {

// A lane's part of an mma.sync: its fragments, on its own stack while it waits at the meeting.
struct MmaFragments {
  float* d;
  const std::uint32_t* a;
  const std::uint32_t* b;
};

// The PTX ISA's m16n8k16 layout for 16-bit A and B, with g = lane / 4 and t = lane % 4: a[0] holds A's row g,
// columns 2t and 2t + 1; a[1] row g + 8; a[2] and a[3] the same rows at columns 8 higher. b[0] holds B's rows
// 2t and 2t + 1 of column g, b[1] rows 8 higher. d[0], d[1]: row g, columns 2t and 2t + 1; d[2], d[3]: row g + 8.
// lanes[i] holds lane i's MmaFragments' address; d += A B for all 32 lanes, each sum in float32 over k in order.
void mma_bf16(const std::uint64_t (&lanes)[32]);

// A lane's part of an ldmatrix.x4: the 16-byte row it loaded from the address it gave, and where its 4 words go.
struct LdmatrixRow {
  std::uint32_t* d;
  const std::uint32_t* row;
};

// PTX's ldmatrix.sync.aligned.m8n8.x4.shared.b16: lane 8q + r gave the address of row r of 8 x 8 matrix q (8
// 16-bit values, 4 words). Lane 4r + w receives, in d[q], word w of row r of matrix q: its values (r, 2w) and
// (r, 2w + 1), the lower column in the low half. With .trans, the same of the transposed matrix: values (2w, r)
// and (2w + 1, r). lanes[i] holds lane i's LdmatrixRow's address.
void ldmatrix_x4(const std::uint64_t (&lanes)[32], bool trans);

}  // namespace cudasim::detail
