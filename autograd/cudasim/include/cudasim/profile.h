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
//    wavefronts - requests (l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld / _st).
// Switch on with STEPFORMER_CUDASIM_PROFILE=1 (a table per kernel on stderr at exit) or enable(true).
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
  std::uint64_t barriers = 0;          // __syncthreads executed, counted per warp (as Nsight counts instructions)
  std::uint64_t warp_collectives = 0;  // shuffles, ballots, __syncwarp, per warp
  std::uint64_t shared_bank_conflicts() const {
    return shared_load_wavefronts - shared_load_requests + shared_store_wavefronts - shared_store_requests;
  }
};

void enable(bool on);  // throws std::logic_error in the plain build: nothing would be counted
bool enabled();
std::vector<Counters> take();  // per kernel, in order of first launch, and forgets them
std::string table(const std::vector<Counters>& counters);

}  // namespace cudasim::profile
