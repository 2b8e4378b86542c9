// SPDX-License-Identifier: MIT
// barecuda XORWOW generator (Marsaglia's xorshift with a Weyl sequence, as in curand's
// XORWOW, but seeded barecuda's own way): one state of six 32-bit words per thread,
// stored structure-of-arrays in bc_state[6 * nstates].
// Hooks: $${headers} $${block}
${headers}

namespace {

struct xorwow_t {
    unsigned int x[5];
    unsigned int d;
};

__device__ __forceinline__ unsigned int xorwow_next(xorwow_t &s)
{
    unsigned int t = s.x[0] ^ (s.x[0] >> 2);
    s.x[0] = s.x[1];
    s.x[1] = s.x[2];
    s.x[2] = s.x[3];
    s.x[3] = s.x[4];
    s.x[4] = (s.x[4] ^ (s.x[4] << 4)) ^ (t ^ (t << 1));
    s.d += 362437u;
    return s.x[4] + s.d;
}

__device__ __forceinline__ unsigned long long splitmix64(unsigned long long &z)
{
    unsigned long long r = (z += 0x9E3779B97F4A7C15ull);
    r = (r ^ (r >> 30)) * 0xBF58476D1CE4E5B9ull;
    r = (r ^ (r >> 27)) * 0x94D049BB133111EBull;
    return r ^ (r >> 31);
}

__device__ __forceinline__ void load(xorwow_t &s, const unsigned int *st, int n, int id)
{
#pragma unroll
    for (int k = 0; k < 5; k++)
        s.x[k] = st[k * n + id];
    s.d = st[5 * n + id];
}

__device__ __forceinline__ void store(const xorwow_t &s, unsigned int *st, int n, int id)
{
#pragma unroll
    for (int k = 0; k < 5; k++)
        st[k * n + id] = s.x[k];
    st[5 * n + id] = s.d;
}

// Uniform in [0, 1) with 24 (float) or 53 (double) random bits.
__device__ __forceinline__ float uniform_f(xorwow_t &s) { return (xorwow_next(s) >> 8) * (1.0f / 16777216.0f); }
__device__ __forceinline__ double uniform_d(xorwow_t &s)
{
    unsigned long long hi = xorwow_next(s) >> 5, lo = xorwow_next(s) >> 6;
    return (double)((hi << 26) | lo) * (1.0 / 9007199254740992.0);
}

}  // namespace

// State of thread id: splitmix64 of (seed, subsequence offset + id), never all zero.
extern "C" __global__ void xorwow_init(unsigned int *bc_state, int n, unsigned long long seed,
                                       unsigned long long offset)
{
    const int id = blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= n)
        return;
    unsigned long long z = seed ^ ((offset + (unsigned long long)id) * 0xD1B54A32D192ED03ull);
    xorwow_t s;
    unsigned long long a = splitmix64(z), b = splitmix64(z), c = splitmix64(z);
    s.x[0] = (unsigned int)a;
    s.x[1] = (unsigned int)(a >> 32);
    s.x[2] = (unsigned int)b;
    s.x[3] = (unsigned int)(b >> 32);
    s.x[4] = (unsigned int)c | 1u;
    s.d = (unsigned int)(c >> 32);
    for (int k = 0; k < 16; k++)
        xorwow_next(s);
    store(s, bc_state, n, id);
}

// kind: 0 uniform float, 1 uniform double, 2 normal float, 3 normal double, 4 raw uint32.
extern "C" __global__ void __launch_bounds__(${block})
xorwow_fill(unsigned int *bc_state, int nstates, void *bc_out, long long bc_n, int kind,
            double scale, double shift)
{
    const int id = blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= nstates)
        return;
    xorwow_t s;
    load(s, bc_state, nstates, id);
    for (long long i = id; i < bc_n; i += nstates) {
        switch (kind) {
        case 0:
            ((float *)bc_out)[i] = (float)(uniform_f(s) * scale + shift);
            break;
        case 1:
            ((double *)bc_out)[i] = uniform_d(s) * scale + shift;
            break;
        case 2: {
            float u1 = 1.0f - uniform_f(s), u2 = uniform_f(s);
            ((float *)bc_out)[i] = (float)(sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2) * scale + shift);
            break;
        }
        case 3: {
            double u1 = 1.0 - uniform_d(s), u2 = uniform_d(s);
            ((double *)bc_out)[i] = sqrt(-2.0 * log(u1)) * cospi(2.0 * u2) * scale + shift;
            break;
        }
        default:
            ((unsigned int *)bc_out)[i] = xorwow_next(s);
        }
    }
    store(s, bc_state, nstates, id);
}
