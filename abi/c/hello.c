/* hello.c: the first program of an installed runthrough (tests/install.rs builds it with
 * the installed mpicc, and as C++ with mpicxx, and runs it with the installed mpiexec).
 *
 * Each rank prints one line
 *   hello: rank R of N, sum S, max M, lib PATH: ok
 * where S is the MPI_SUM of rank+1 over the ranks (N(N+1)/2), M the MPI_MAX of the ranks
 * (N-1), PATH the file of the libmpi_abi.so.1 this process loaded (/proc/self/maps), and
 * `FAILED` instead of `ok` (exit 1) when a value is wrong or a call fails. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

/* The path of the mapped file named libmpi_abi.so*, or "none". */
static void mpi_library(char *out, size_t len) {
  char line[8192];
  FILE *maps = fopen("/proc/self/maps", "r");
  snprintf(out, len, "none");
  while (maps && fgets(line, sizeof line, maps)) {
    char *path = strchr(line, '/');
    if (path && strstr(path, "/libmpi_abi.so")) {
      path[strcspn(path, "\n")] = '\0';
      snprintf(out, len, "%s", path);
      break;
    }
  }
  if (maps) fclose(maps);
}

int main(int argc, char **argv) {
  int rank = -1, size = -1, one, sum = -1, max = -1, err = 0;
  char lib[4096];
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
    printf("hello: MPI_Init FAILED\n");
    return 1;
  }
  err |= MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  err |= MPI_Comm_size(MPI_COMM_WORLD, &size);
  one = rank + 1;
  err |= MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  err |= MPI_Allreduce(&rank, &max, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  mpi_library(lib, sizeof lib);
  int ok = err == MPI_SUCCESS && size > 0 && sum == size * (size + 1) / 2 && max == size - 1;
  printf("hello: rank %d of %d, sum %d, max %d, lib %s: %s\n", rank, size, sum, max, lib,
         ok ? "ok" : "FAILED");
  fflush(stdout);
  if (MPI_Finalize() != MPI_SUCCESS) {
    printf("hello: rank %d: MPI_Finalize FAILED\n", rank);
    return 1;
  }
  return ok ? 0 : 1;
}
