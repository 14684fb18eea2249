#include "distributed/communicator.h"

#include <fmt/format.h>
#include <mpi.h>

#include <cstdlib>
#include <exception>
#include <limits>

namespace stepformer::distributed {

struct Communicator::Requests {
  std::vector<MPI_Request> pending;  // by handle; MPI_REQUEST_NULL once finished
};

namespace {

void check(int code, const std::string& what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw DistributedError(fmt::format("{}: MPI failed: {}", what, std::string(text, static_cast<std::size_t>(length))));
}

MPI_Datatype mpi_type(const Tensor& t, const char* op) {
  if (t.device() != kCPU || !t.is_contiguous())
    throw DistributedError(fmt::format("{}: needs a contiguous CPU tensor, got shape {} on {}{}", op,
                                       to_string(t.shape()), device_name(t.device()),
                                       t.is_contiguous() ? "" : " (not contiguous)"));
  switch (t.dtype()) {
    case DType::float32: return MPI_FLOAT;
    case DType::float64: return MPI_DOUBLE;
    case DType::int64: return MPI_INT64_T;
    default: break;
  }
  throw DistributedError(fmt::format("{}: dtype {} is not sent (float32, float64, int64)", op, dtype_name(t.dtype())));
}

void* data(const Tensor& t) { return t.desc().data; }
int count(const Tensor& t, const char* op) {
  if (t.numel() > std::numeric_limits<int>::max())
    throw DistributedError(fmt::format("{}: {} elements exceed MPI's int count", op, t.numel()));
  return static_cast<int>(t.numel());
}

}  // namespace

Communicator::Communicator() : requests_(std::make_unique<Requests>()) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (initialised) throw DistributedError("Communicator: MPI is already initialised (one Communicator per process)");
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  // Errors come back as codes (and become DistributedError) instead of aborting inside MPI. A rank that dies
  // still ends the job: mpirun kills the others and names the lost rank.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  char name[MPI_MAX_PROCESSOR_NAME];
  int length = 0;
  MPI_Get_processor_name(name, &length);
  host_.assign(name, static_cast<std::size_t>(length));
}

Communicator::~Communicator() {
  // Leaving because of an exception: the other ranks may be inside a collective waiting for this one, and
  // MPI_Finalize would wait for them forever. End the whole job instead (mpirun reports it).
  if (std::uncaught_exceptions() > 0) MPI_Abort(MPI_COMM_WORLD, 1);
  auto& pending = requests_->pending;  // after an exception: finish what was started before leaving MPI
  if (!pending.empty()) MPI_Waitall(static_cast<int>(pending.size()), pending.data(), MPI_STATUSES_IGNORE);
  MPI_Finalize();
}

void Communicator::broadcast(Tensor& t, int root) {
  check(MPI_Bcast(data(t), count(t, "broadcast"), mpi_type(t, "broadcast"), root, MPI_COMM_WORLD),
        fmt::format("broadcast of {} from rank {}", to_string(t.shape()), root));
  t.bump_version();
}

void Communicator::all_reduce_sum(Tensor& t) {
  check(
      MPI_Allreduce(MPI_IN_PLACE, data(t), count(t, "all_reduce"), mpi_type(t, "all_reduce"), MPI_SUM, MPI_COMM_WORLD),
      fmt::format("all_reduce of {}", to_string(t.shape())));
  t.bump_version();
}

double Communicator::all_reduce_sum(double value) {
  check(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD), "all_reduce of a double");
  return value;
}

std::int64_t Communicator::all_reduce_sum(std::int64_t value) {
  check(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD), "all_reduce of an int64");
  return value;
}

void Communicator::reduce_scatter_sum(const Tensor& in, Tensor& out) {
  const MPI_Datatype type = mpi_type(in, "reduce_scatter");
  if (mpi_type(out, "reduce_scatter") != type || in.numel() != out.numel() * size_)
    throw DistributedError(fmt::format("reduce_scatter: input {} {} must hold {} chunks of the output {} {}",
                                       dtype_name(in.dtype()), to_string(in.shape()), size_, dtype_name(out.dtype()),
                                       to_string(out.shape())));
  check(MPI_Reduce_scatter_block(data(in), data(out), count(out, "reduce_scatter"), type, MPI_SUM, MPI_COMM_WORLD),
        fmt::format("reduce_scatter of {}", to_string(in.shape())));
  out.bump_version();
}

void Communicator::all_gather(const Tensor& in, Tensor& out) {
  const MPI_Datatype type = mpi_type(in, "all_gather");
  if (mpi_type(out, "all_gather") != type || out.numel() != in.numel() * size_)
    throw DistributedError(fmt::format("all_gather: output {} {} must hold {} chunks of the input {} {}",
                                       dtype_name(out.dtype()), to_string(out.shape()), size_, dtype_name(in.dtype()),
                                       to_string(in.shape())));
  check(
      MPI_Allgather(data(in), count(in, "all_gather"), type, data(out), count(in, "all_gather"), type, MPI_COMM_WORLD),
      fmt::format("all_gather of {}", to_string(in.shape())));
  out.bump_version();
}

std::vector<std::int64_t> Communicator::all_gather(std::int64_t value) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(size_));
  check(MPI_Allgather(&value, 1, MPI_INT64_T, out.data(), 1, MPI_INT64_T, MPI_COMM_WORLD), "all_gather of an int64");
  return out;
}

void Communicator::abort(int exit_code) {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; the compiler cannot know
}

void Communicator::barrier() { check(MPI_Barrier(MPI_COMM_WORLD), "barrier"); }

void Communicator::start_all_reduce_sum(Tensor& t) {
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Iallreduce(MPI_IN_PLACE, data(t), count(t, "all_reduce"), mpi_type(t, "all_reduce"), MPI_SUM,
                       MPI_COMM_WORLD, &r),
        fmt::format("start of the all_reduce of {}", to_string(t.shape())));
  t.bump_version();
  requests_->pending.push_back(r);
}

void Communicator::start_reduce_sum(Tensor& t, int root) {
  MPI_Request r = MPI_REQUEST_NULL;
  const bool mine = rank_ == root;  // the root's t is both its part and the result
  check(MPI_Ireduce(mine ? MPI_IN_PLACE : data(t), mine ? data(t) : nullptr, count(t, "reduce"), mpi_type(t, "reduce"),
                    MPI_SUM, root, MPI_COMM_WORLD, &r),
        fmt::format("start of the reduce of {} to rank {}", to_string(t.shape()), root));
  if (mine) t.bump_version();
  requests_->pending.push_back(r);
}

void Communicator::start_broadcast(Tensor& t, int root) {
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Ibcast(data(t), count(t, "broadcast"), mpi_type(t, "broadcast"), root, MPI_COMM_WORLD, &r),
        fmt::format("start of the broadcast of {} from rank {}", to_string(t.shape()), root));
  t.bump_version();
  requests_->pending.push_back(r);
}

void Communicator::poll() {
  auto& pending = requests_->pending;
  if (pending.empty()) return;
  int done = 0;
  check(MPI_Testall(static_cast<int>(pending.size()), pending.data(), &done, MPI_STATUSES_IGNORE), "poll");
}

void Communicator::wait_all() {
  auto& pending = requests_->pending;
  check(MPI_Waitall(static_cast<int>(pending.size()), pending.data(), MPI_STATUSES_IGNORE),
        "wait for the started collectives");
  pending.clear();
}

}  // namespace stepformer::distributed
