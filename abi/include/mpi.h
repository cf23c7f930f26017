/* <mpi.h> for programs built against runthrough's copy of the standard ABI header without
 * a wrapper compiler (gcc -I abi/include): the standard ABI is the whole API. */
#include "mpi_abi.h"
