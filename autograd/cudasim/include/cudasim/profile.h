#pragma once
// cuda-sim as a profiler: memory-traffic counters per kernel, counted exactly from every access (checking
// build only: it needs the same access hooks as cudasim/check.h).
//
// A warp-level memory instruction is what the lanes of one warp do at one place in the code the n-th time
// each reaches it (exact when the lanes do not diverge). For each such request:
//  - global memory: the distinct 32-byte sectors its lanes touch (Nsight Compute:
//    l1tex__t_sectors_pipe_lsu_mem_global_op_ld / _st, per request l1tex__t_requests_...). A fully coalesced
//    request of 32 four-byte lanes touches 4 sectors; 32 lanes 128 bytes apart touch 32.
//  - shared memory: wavefronts = the largest number of distinct 4-byte words any of the 32 banks
//    (bank = word % 32) must serve; a word many lanes read is served once (a broadcast). Bank conflicts =
//    wavefronts beyond the ideal, ceil(distinct words / 32): a warp reading 32 neighbouring doubles (64
//    words) needs 2 wavefronts with no conflict (l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld / _st).
// FLOPs are not memory accesses: the hooks cannot see them, so the host states them for the launch it is about
// to make (next_launch_flops; the GEMM does: 2 m n k per batch). With them: arithmetic intensity (FLOPs per
// byte of global sectors) and the kernel's place on the roofline of a named GPU (kRoofline).
// Switch on with STEPFORMER_CUDASIM_PROFILE=1 (a table per kernel on stderr at exit, and the same as JSON in
// cudasim-profile.json), STEPFORMER_CUDASIM_PROFILE=FILE.json (the JSON there), or enable(true).
#include <cstdint>
#include <string>
#include <vector>

namespace cudasim::profile {

struct Counters {
  std::string kernel;  // as in checker reports: gemm_v2<float>
  std::uint64_t launches = 0, blocks = 0, threads = 0;
  std::uint64_t global_load_requests = 0, global_load_sectors = 0, global_load_bytes = 0;
  std::uint64_t global_store_requests = 0, global_store_sectors = 0, global_store_bytes = 0;
  std::uint64_t shared_load_requests = 0, shared_load_wavefronts = 0;
  std::uint64_t shared_store_requests = 0, shared_store_wavefronts = 0;
  std::uint64_t shared_bank_conflicts = 0;  // loads and stores
  std::uint64_t barriers = 0;               // __syncthreads executed, counted per warp (as Nsight counts instructions)
  std::uint64_t warp_collectives = 0;       // shuffles, ballots, __syncwarp, per warp
  std::uint64_t flops = 0;                  // as the host stated them (0: not stated)
  std::uint64_t global_bytes() const { return 32 * (global_load_sectors + global_store_sectors); }
  double intensity() const;  // flops / global_bytes(); 0 when either is unknown
};

// A GPU's roofline: peak FP32 (non-tensor-core) FLOP/s and memory bandwidth, from the vendor's datasheet.
// A model, not a measurement: a kernel's attainable rate is min(peak, intensity x bandwidth).
struct Roofline {
  const char* gpu;
  double peak_flops, bytes_per_second;
  double attainable(double intensity) const;
  double ridge() const { return peak_flops / bytes_per_second; }  // FLOP/byte where memory stops limiting
};
// NVIDIA A100 SXM4 40 GB datasheet: 19.5 TFLOP/s FP32, 1555 GB/s HBM2.
inline constexpr Roofline kRoofline{"A100 (datasheet)", 19.5e12, 1555e9};

void next_launch_flops(std::uint64_t flops);  // the next launch's FLOPs (ignored when not profiling)
void enable(bool on);                         // throws std::logic_error in the plain build: nothing would be counted
bool enabled();
std::vector<Counters> take();  // per kernel, in order of first launch, and forgets them
std::string table(const std::vector<Counters>& counters);
std::string json(const std::vector<Counters>& counters);  // an array of objects: every counter, and the derived

}  // namespace cudasim::profile
