// An MPI program for the end-to-end tests (tests/e2e/mpi_test.cc): every
// rank runs under `rocemu exec` on a NIC of the fabric, Open MPI's UCX PML
// carries the traffic over the emulated RoCE devices, and every byte is
// checked:
//   - ping-pong between ranks 0 and 1 (8 B x 4^k up to 2 MiB; rank 1 returns each
//     word transformed, so a stale or misplaced buffer cannot pass);
//   - allreduce (sum) of a vector whose expected value every rank knows;
//   - alltoall of blocks naming their source and destination.
// Prints one line per rank and exits 1 on any wrong byte.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

uint32_t word(uint32_t i, uint32_t round) { return i * 2654435761u + round * 40503u + 1; }

int ping_pong(int rank) {
  int bad = 0;
  uint32_t round = 0;
  for (size_t bytes = 8; bytes <= (size_t(4) << 20); bytes *= 4) {
    const size_t n = bytes / sizeof(uint32_t);
    std::vector<uint32_t> buf(n);
    for (int rep = 0; rep < 5; rep++, round++) {
      const int tag = int(round);
      if (rank == 0) {
        for (size_t i = 0; i < n; i++) buf[i] = word(uint32_t(i), round);
        MPI_Send(buf.data(), int(n), MPI_UINT32_T, 1, tag, MPI_COMM_WORLD);
        MPI_Recv(buf.data(), int(n), MPI_UINT32_T, 1, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (size_t i = 0; i < n; i++) bad += buf[i] != ~word(uint32_t(i), round);
      } else if (rank == 1) {
        MPI_Recv(buf.data(), int(n), MPI_UINT32_T, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (size_t i = 0; i < n; i++) {
          bad += buf[i] != word(uint32_t(i), round);
          buf[i] = ~buf[i];
        }
        MPI_Send(buf.data(), int(n), MPI_UINT32_T, 0, tag, MPI_COMM_WORLD);
      }
    }
  }
  return bad;
}

int allreduce(int rank, int size) {
  const size_t n = 1 << 18;
  std::vector<int64_t> in(n), out(n);
  for (size_t i = 0; i < n; i++) in[i] = int64_t(i) * (rank + 1);
  MPI_Allreduce(in.data(), out.data(), int(n), MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  const int64_t ranks_sum = int64_t(size) * (size + 1) / 2;
  int bad = 0;
  for (size_t i = 0; i < n; i++) bad += out[i] != int64_t(i) * ranks_sum;
  return bad;
}

int alltoall(int rank, int size) {
  const size_t block = 1 << 15;  // words per destination
  std::vector<uint32_t> send(block * size), recv(block * size);
  for (int d = 0; d < size; d++)
    for (size_t i = 0; i < block; i++) send[d * block + i] = word(uint32_t(i), uint32_t(rank * 1000 + d));
  MPI_Alltoall(send.data(), int(block), MPI_UINT32_T, recv.data(), int(block), MPI_UINT32_T, MPI_COMM_WORLD);
  int bad = 0;
  for (int s = 0; s < size; s++)
    for (size_t i = 0; i < block; i++) bad += recv[s * block + i] != word(uint32_t(i), uint32_t(s * 1000 + rank));
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int pp = size >= 2 ? ping_pong(rank) : 0;
  const int ar = allreduce(rank, size);
  const int a2a = alltoall(rank, size);
  MPI_Barrier(MPI_COMM_WORLD);
  std::printf("rocemu-mpi-check: rank %d of %d: ping-pong %s, allreduce %s, alltoall %s\n", rank, size,
              pp ? "FAIL" : "ok", ar ? "FAIL" : "ok", a2a ? "FAIL" : "ok");
  std::fflush(stdout);
  MPI_Finalize();
  return pp || ar || a2a ? 1 : 0;
}
