// SPDX-License-Identifier: MIT
// Kernels of one curandom generator class on cuRAND's device API.  Each generator
// (one per thread of a launch: block_count x generators_per_block) keeps its
// curand state in bc_states[id]; a fill loads it, strides over the output and
// stores it back.
// Hooks: $${config} (the #defines below), set by curandom.py:
//   BC_STATE        curand state type
//   BC_BITS         width of curand(&state): 32 or 64
//   BC_SKIP_T       argument type of skipahead()
//   BC_INIT         1 pseudo-random (seed, subsequence, offset), 2 Sobol, 3 scrambled Sobol
//   BC_DIRVEC       direction vector type (Sobol), BC_SCRAMBLE scramble constant type
//   BC_BOX_MULLER   1 when curand_normal2 exists for BC_STATE
//   BC_SUBSEQUENCE  1 when skipahead_subsequence exists (MRG32k3a)
${config}
#include <curand_kernel.h>

typedef unsigned long long bc_u64;

// Its size is what the host allocates per generator (Module.get_global's size).
__device__ BC_STATE bc_state_probe;

#define BC_LOOP_BEGIN                                                    \
    const bc_u64 id = (bc_u64)blockIdx.x * blockDim.x + threadIdx.x;     \
    const bc_u64 step = (bc_u64)blockDim.x * gridDim.x;                  \
    if (id >= n)                                                         \
        return;                                                          \
    BC_STATE s = bc_states[id];                                          \
    for (bc_u64 i = id; i < n; i += step) {
#define BC_LOOP_END                                                      \
    }                                                                    \
    bc_states[id] = s;

// A kernel writing n values of type T, each the expression `expr` of state s.
#define BC_GEN(name, T, expr)                                                        \
    extern "C" __global__ void name(BC_STATE *bc_states, T *d, const bc_u64 n)       \
    {                                                                                \
        BC_LOOP_BEGIN d[i] = (expr); BC_LOOP_END                                     \
    }
#define BC_GEN_LOG(name, T, P, expr)                                                 \
    extern "C" __global__ void name(BC_STATE *bc_states, T *d, const P mean,         \
                                    const P stddev, const bc_u64 n)                  \
    {                                                                                \
        BC_LOOP_BEGIN d[i] = (expr); BC_LOOP_END                                     \
    }

#if BC_BITS == 32
BC_GEN(uniform_int, unsigned int, curand(&s))
#else
// the upper half: the first points of a 64-bit Sobol sequence have zero low bits
BC_GEN(uniform_int, unsigned int, (unsigned int)(curand(&s) >> 32))
BC_GEN(uniform_long, bc_u64, curand(&s))
#endif
BC_GEN(uniform_float, float, curand_uniform(&s))
BC_GEN(uniform_double, double, curand_uniform_double(&s))
BC_GEN(normal_float, float, curand_normal(&s))
BC_GEN(normal_double, double, curand_normal_double(&s))
BC_GEN_LOG(normal_log_float, float, float, curand_log_normal(&s, mean, stddev))
BC_GEN_LOG(normal_log_double, double, double, curand_log_normal_double(&s, mean, stddev))
#if BC_BOX_MULLER
BC_GEN(normal_float2, float2, curand_normal2(&s))
BC_GEN(normal_double2, double2, curand_normal2_double(&s))
BC_GEN_LOG(normal_log_float2, float2, float, curand_log_normal2(&s, mean, stddev))
BC_GEN_LOG(normal_log_double2, double2, double, curand_log_normal2_double(&s, mean, stddev))
#endif

extern "C" __global__ void poisson_int(BC_STATE *bc_states, unsigned int *d, const double lambda,
                                       const bc_u64 n)
{
    BC_LOOP_BEGIN d[i] = curand_poisson(&s, lambda); BC_LOOP_END
}

// Each element holds its own lambda and is replaced by a draw.
#define BC_POISSON_INPLACE(name, T)                                                  \
    extern "C" __global__ void name(BC_STATE *bc_states, T *d, const bc_u64 n)       \
    {                                                                                \
        BC_LOOP_BEGIN d[i] = (T)curand_poisson(&s, (double)d[i]); BC_LOOP_END        \
    }
BC_POISSON_INPLACE(poisson_inplace_float, float)
BC_POISSON_INPLACE(poisson_inplace_double, double)
BC_POISSON_INPLACE(poisson_inplace_int, unsigned int)

// ------------------------------------------------------------------ set-up

#if BC_INIT == 1
extern "C" __global__ void prepare(BC_STATE *bc_states, const bc_u64 n, const unsigned int *seeds,
                                   const bc_u64 offset)
{
    const bc_u64 id = (bc_u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (id < n)
        curand_init(seeds[id], id, offset, &bc_states[id]);
}
#elif BC_INIT == 2
extern "C" __global__ void prepare(BC_STATE *bc_states, const bc_u64 n, BC_DIRVEC *vectors,
                                   const BC_SKIP_T offset)
{
    const bc_u64 id = (bc_u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (id < n)
        curand_init(vectors[id], offset, &bc_states[id]);
}
#else
extern "C" __global__ void prepare(BC_STATE *bc_states, const bc_u64 n, BC_DIRVEC *vectors,
                                   const BC_SCRAMBLE *scramble, const BC_SKIP_T offset)
{
    const bc_u64 id = (bc_u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (id < n)
        curand_init(vectors[id], scramble[id], offset, &bc_states[id]);
}
#endif

// ------------------------------------------------------------- skip ahead

#define BC_SKIP(name, fn)                                                            \
    extern "C" __global__ void name(BC_STATE *bc_states, const bc_u64 n,             \
                                    const BC_SKIP_T skip)                            \
    {                                                                                \
        const bc_u64 id = (bc_u64)blockIdx.x * blockDim.x + threadIdx.x;             \
        if (id < n)                                                                  \
            fn(skip, &bc_states[id]);                                                \
    }                                                                                \
    extern "C" __global__ void name##_array(BC_STATE *bc_states, const bc_u64 n,     \
                                            const BC_SKIP_T *skip)                   \
    {                                                                                \
        const bc_u64 id = (bc_u64)blockIdx.x * blockDim.x + threadIdx.x;             \
        if (id < n)                                                                  \
            fn(skip[id], &bc_states[id]);                                            \
    }

BC_SKIP(skip_ahead, skipahead)
#if BC_INIT == 1
BC_SKIP(skip_ahead_sequence, skipahead_sequence)
#endif
#if BC_SUBSEQUENCE
BC_SKIP(skip_ahead_subsequence, skipahead_subsequence)
#endif
