// SPDX-License-Identifier: MIT
// barecuda reduction kernel: map every element, combine with an associative and
// commutative reduce_expr; warp shuffles within a warp, shared memory across warps.
// Stage 1 ($${name}_stage1) runs a few blocks per SM over the input, each thread
// keeping $${unroll} independent loads in flight, and writes one partial per block;
// stage 2 ($${name}_stage2, one block) combines the partials into out[0].  A launch of
// stage 1 with one block writes out[0] directly.
// Hooks: $${headers} $${preamble} $${name} $${out_t} $${neutral} $${reduce_expr} $${map_expr}
//        $${params} $${unpack} $${index_t} $${block} $${unroll}
${headers}
${preamble}

#define REDUCE(a, b) (${reduce_expr})

namespace {

typedef ${out_t} out_t;

__device__ __forceinline__ out_t bc_warp_reduce(out_t v)
{
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        out_t b = barecuda::shfl_down(v, off);
        out_t a = v;
        v = REDUCE(a, b);
    }
    return v;
}

// The reduction of v over the block, valid in thread 0.
__device__ __forceinline__ out_t bc_block_reduce(out_t v)
{
    __shared__ __align__(16) unsigned char raw[32 * sizeof(out_t)];
    out_t *warp_sums = reinterpret_cast<out_t *>(raw);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = bc_warp_reduce(v);
    if (lane == 0)
        warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        const int nwarps = (blockDim.x + 31) >> 5;
        v = lane < nwarps ? warp_sums[lane] : barecuda::bc_cast<out_t>(${neutral});
        v = bc_warp_reduce(v);
    }
    return v;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(${block}) ${name}_stage1(out_t *bc_out, ${params})
{
    typedef ${index_t} index_t;
    ${unpack}
#define MAP(i) (${map_expr})
    const index_t bc_stride = (index_t)gridDim.x * (${block} * ${unroll});
    index_t i = (index_t)blockIdx.x * (${block} * ${unroll}) + threadIdx.x;
    out_t bc_acc = barecuda::bc_cast<out_t>(${neutral});
    // MAP is expanded where no local but i is in scope: it may use any argument name.
    for (; i + (${unroll} - 1) * ${block} < bc_n; i += bc_stride) {
        out_t bc_vals[${unroll}];
#pragma unroll
        for (int bc_k = 0; bc_k < ${unroll}; bc_k++)
            bc_vals[bc_k] = barecuda::bc_cast<out_t>(MAP((i + bc_k * ${block})));
#pragma unroll
        for (int bc_k = 0; bc_k < ${unroll}; bc_k++) {
            out_t a = bc_acc, b = bc_vals[bc_k];
            bc_acc = REDUCE(a, b);
        }
    }
#pragma unroll
    for (int bc_k = 0; bc_k < ${unroll}; bc_k++) {
        const index_t bc_j = i + bc_k * ${block};
        if (bc_j < bc_n) {
            const out_t bc_v = barecuda::bc_cast<out_t>(MAP(bc_j));
            out_t a = bc_acc, b = bc_v;
            bc_acc = REDUCE(a, b);
        }
    }
#undef MAP
    bc_acc = bc_block_reduce(bc_acc);
    if (threadIdx.x == 0)
        bc_out[blockIdx.x] = bc_acc;
}

extern "C" __global__ void __launch_bounds__(${block}) ${name}_stage2(out_t *bc_out, const out_t *bc_partials, int bc_n)
{
    out_t acc = barecuda::bc_cast<out_t>(${neutral});
    for (int i = threadIdx.x; i < bc_n; i += ${block}) {
        out_t a = acc, b = bc_partials[i];
        acc = REDUCE(a, b);
    }
    acc = bc_block_reduce(acc);
    if (threadIdx.x == 0)
        bc_out[0] = acc;
}
