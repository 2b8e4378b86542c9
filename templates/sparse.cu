// SPDX-License-Identifier: MIT
// barecuda.sparse kernels: y += A x for a matrix split into row packets.
// Rendered by barecuda.sparse.packeted with string.Template; the one hook is
//   $${value_t}   float or double, the type of the matrix, x and y
//
// bc_spmv_pkt: one block per packet.  A packet is a run of consecutive (permuted)
// rows [base[p], base[p+1]); the block stages x and y of those rows in shared memory,
// and every thread walks its own entries, each a (row, column) pair inside the packet
// packed as (row << 16) | column, stored interleaved with the packet's other threads
// (entry j of thread t at start + j * blockDim.x).  A row belongs to exactly one
// thread, so the shared y needs no atomics.
//
// bc_spmv_coo: the entries whose column lies outside their row's packet, as
// (row, column, value) triples sorted by row.  Each warp takes 32 consecutive
// entries, sums runs of equal rows with shuffles and adds each run's total to y
// with one atomicAdd.

typedef ${value_t} value_t;

extern "C" __global__ void bc_spmv_pkt(const int *packet_base,
                                       const int *thread_start,
                                       const int *thread_end,
                                       const unsigned int *packed,
                                       const value_t *data,
                                       const value_t *x,
                                       value_t *y,
                                       int rows_per_packet)
{
    extern __shared__ __align__(16) unsigned char bc_smem[];
    value_t *sx = reinterpret_cast<value_t *>(bc_smem);
    value_t *sy = sx + rows_per_packet;

    const int base = packet_base[blockIdx.x];
    const int rows = packet_base[blockIdx.x + 1] - base;
    for (int r = threadIdx.x; r < rows; r += blockDim.x) {
        sx[r] = x[base + r];
        sy[r] = y[base + r];
    }
    __syncthreads();

    const int me = blockIdx.x * blockDim.x + threadIdx.x;
    const int stop = thread_end[me];
    int row = -1;
    value_t acc = 0;
    for (int k = thread_start[me]; k < stop; k += blockDim.x) {
        const unsigned int rc = packed[k];
        const int r = (int)(rc >> 16);
        if (r != row) {
            if (row >= 0)
                sy[row] += acc;
            row = r;
            acc = 0;
        }
        acc += data[k] * sx[rc & 0xffffu];
    }
    if (row >= 0)
        sy[row] += acc;
    __syncthreads();

    for (int r = threadIdx.x; r < rows; r += blockDim.x)
        y[base + r] = sy[r];
}

extern "C" __global__ void bc_spmv_coo(int nnz,
                                       const int *row,
                                       const int *col,
                                       const value_t *val,
                                       const value_t *x,
                                       value_t *y)
{
    const unsigned int all = 0xffffffffu;
    const int lane = threadIdx.x & 31;
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long first = warp * 32; first < nnz; first += warps * 32) {
        const long long k = first + lane;
        int r = -1;
        value_t v = 0;
        if (k < nnz) {
            r = row[k];
            v = val[k] * x[col[k]];
        }
        // Runs of equal rows are the segments; number them by counting run heads.
        const int before = __shfl_up_sync(all, r, 1);
        const bool head = lane == 0 || before != r;
        const unsigned int heads = __ballot_sync(all, head);
        const int seg = __popc(heads & (0xffffffffu >> (31 - lane)));
        // Suffix sums inside each segment: the head ends with the run's total.
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
            const value_t ov = __shfl_down_sync(all, v, off);
            const int os = __shfl_down_sync(all, seg, off);
            if (lane + off < 32 && os == seg)
                v += ov;
        }
        if (head && r >= 0)
            atomicAdd(y + r, v);   // native for float and double (sm_60+)
    }
}
