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
    const index_t step = (index_t)gridDim.x * (${block} * ${unroll});
    index_t i = (index_t)blockIdx.x * (${block} * ${unroll}) + threadIdx.x;
    out_t acc = barecuda::bc_cast<out_t>(${neutral});
    for (; i + (${unroll} - 1) * ${block} < bc_n; i += step) {
        out_t v[${unroll}];
#pragma unroll
        for (int k = 0; k < ${unroll}; k++)
            v[k] = barecuda::bc_cast<out_t>(MAP(i + k * ${block}));
#pragma unroll
        for (int k = 0; k < ${unroll}; k++) {
            out_t a = acc, b = v[k];
            acc = REDUCE(a, b);
        }
    }
#pragma unroll
    for (int k = 0; k < ${unroll}; k++) {
        const index_t j = i + k * ${block};
        if (j < bc_n) {
            const out_t bc_v = barecuda::bc_cast<out_t>(MAP(j));  // before a, b shadow arguments
            out_t a = acc, b = bc_v;
            acc = REDUCE(a, b);
        }
    }
#undef MAP
    acc = bc_block_reduce(acc);
    if (threadIdx.x == 0)
        bc_out[blockIdx.x] = acc;
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
