// SPDX-License-Identifier: MIT
// barecuda reduction kernel: map every element, combine with an associative and
// commutative reduce_expr; warp shuffles within a warp, shared memory across warps.
//
// $${name}_stage1 runs a fixed number of blocks over the input (a grid-stride loop,
// each thread keeping several loads in flight) and reduces each block to one
// partial.  How the partials are combined depends on $${onepass}:
//   1: one launch.  stage1(out, partials, ticket, <params>, n): every block stores
//      its partial in partials[blockIdx.x], then takes a ticket from the counter at
//      *ticket (threadfence + atomicAdd); the block drawing the last ticket
//      combines all partials, in index order, into out[0] and sets *ticket back to
//      0 for the next launch.  A fixed grid and a fixed combining order keep the
//      result deterministic.  With ticket == NULL each block only stores its
//      partial and $${name}_stage2 (one block) combines them afterwards.
//   0: stage1(out, <params>, n) stores block b's partial in out[b] (PyCUDA's
//      layout, used by reduction.get_reduction_module).
// A one-block launch of stage 1 writes out[0] directly in both modes.
//
// $${vec} > 1 adds a path for inputs read only as name[i]: while every such array
// is aligned to $${vec} of its elements, each thread loads $${vec} elements at a
// time (128-bit loads for 4-byte types), $${vunroll} of those per step; a scalar
// path serves the rest.
// Hooks: $${headers} $${preamble} $${name} $${out_t} $${neutral} $${reduce_expr} $${map_expr}
//        $${params} $${unpack} $${index_t} $${block} $${unroll} $${onepass} $${vec}
//        $${vunroll} $${vec_aligned} $${vec_load} $${vec_map}
${headers}
${preamble}

#define REDUCE(a, b) (${reduce_expr})
#define BC_ONEPASS ${onepass}
#define BC_VEC ${vec}

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

// The reduction of v over the block, valid in thread 0.  Two calls in a row need a
// __syncthreads() between them (they share warp_sums).
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

#if BC_ONEPASS
// A partial stored by another block, read from L2 (never a stale L1 line).
__device__ __forceinline__ out_t bc_load_partial(const out_t *p)
{
    __align__(16) unsigned char raw[sizeof(out_t)];
    if (sizeof(out_t) % 4 == 0) {
        const unsigned int *src = reinterpret_cast<const unsigned int *>(p);
#pragma unroll
        for (int k = 0; k < (int)(sizeof(out_t) / 4); k++)
            reinterpret_cast<unsigned int *>(raw)[k] = __ldcg(src + k);
    } else {
        const volatile unsigned char *src = reinterpret_cast<const volatile unsigned char *>(p);
#pragma unroll
        for (int k = 0; k < (int)sizeof(out_t); k++)
            raw[k] = src[k];
    }
    return *reinterpret_cast<const out_t *>(raw);
}
#endif

#if BC_VEC > 1
// BC_VEC elements of T loaded by one instruction (the pointer must be aligned to it).
template <typename T> struct alignas(sizeof(T) * BC_VEC) bc_pack {
    T v[BC_VEC];
};
#endif

}  // namespace

extern "C" __global__ void __launch_bounds__(${block}) ${name}_stage1(out_t *bc_out,
#if BC_ONEPASS
    out_t *bc_partials, unsigned int *bc_ticket,
#endif
    ${params})
{
    typedef ${index_t} index_t;
    ${unpack}
#define MAP(i) (${map_expr})
    out_t bc_acc = barecuda::bc_cast<out_t>(${neutral});
#if BC_VEC > 1
    if (${vec_aligned}) {
        // whole packs of BC_VEC elements, ${vunroll} packs per thread per step
        const index_t bc_nv = bc_n / BC_VEC;
        const index_t bc_vstride = (index_t)gridDim.x * (${block} * ${vunroll});
        index_t bc_j = (index_t)blockIdx.x * (${block} * ${vunroll}) + threadIdx.x;
        for (; bc_j + (${vunroll} - 1) * ${block} < bc_nv; bc_j += bc_vstride) {
#define BC_U ${vunroll}
            ${vec_load}
#undef BC_U
#pragma unroll
            for (int bc_u = 0; bc_u < ${vunroll}; bc_u++) {
#pragma unroll
                for (int bc_k = 0; bc_k < BC_VEC; bc_k++) {
                    out_t a = bc_acc, b = barecuda::bc_cast<out_t>(${vec_map});
                    bc_acc = REDUCE(a, b);
                }
            }
        }
        // the last partial step, one pack at a time
#pragma unroll
        for (int bc_s = 0; bc_s < ${vunroll}; bc_s++, bc_j += ${block}) {
            if (bc_j < bc_nv) {
#define BC_U 1
                ${vec_load}
#undef BC_U
                const int bc_u = 0;
#pragma unroll
                for (int bc_k = 0; bc_k < BC_VEC; bc_k++) {
                    out_t a = bc_acc, b = barecuda::bc_cast<out_t>(${vec_map});
                    bc_acc = REDUCE(a, b);
                }
            }
        }
        // fewer than BC_VEC elements left over
        const index_t bc_t = (index_t)blockIdx.x * ${block} + threadIdx.x;
        if (bc_t < bc_n - bc_nv * BC_VEC) {
            const out_t bc_v = barecuda::bc_cast<out_t>(MAP((bc_nv * BC_VEC + bc_t)));
            out_t a = bc_acc, b = bc_v;
            bc_acc = REDUCE(a, b);
        }
    } else
#endif
    {
        const index_t bc_stride = (index_t)gridDim.x * (${block} * ${unroll});
        index_t i = (index_t)blockIdx.x * (${block} * ${unroll}) + threadIdx.x;
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
    }
#undef MAP
    bc_acc = bc_block_reduce(bc_acc);
#if BC_ONEPASS
    if (gridDim.x == 1) {
        if (threadIdx.x == 0)
            bc_out[0] = bc_acc;
        return;
    }
    __shared__ int bc_last;
    if (threadIdx.x == 0) {
        bc_partials[blockIdx.x] = bc_acc;
        int last = 0;
        if (bc_ticket != 0) {
            __threadfence();  // the partial is visible before the ticket is taken
            last = atomicAdd(bc_ticket, 1u) == gridDim.x - 1;
        }
        bc_last = last;
    }
    __syncthreads();
    if (!bc_last)
        return;
    // the last block: every other partial is stored; combine them in index order
    __threadfence();
    out_t bc_fin = barecuda::bc_cast<out_t>(${neutral});
    for (unsigned int bc_p = threadIdx.x; bc_p < gridDim.x; bc_p += ${block}) {
        out_t a = bc_fin, b = bc_load_partial(bc_partials + bc_p);
        bc_fin = REDUCE(a, b);
    }
    bc_fin = bc_block_reduce(bc_fin);
    if (threadIdx.x == 0) {
        bc_out[0] = bc_fin;
        *bc_ticket = 0u;  // ready for the next launch, without a memset
    }
#else
    if (threadIdx.x == 0)
        bc_out[blockIdx.x] = bc_acc;
#endif
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
