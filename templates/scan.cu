// SPDX-License-Identifier: MIT
// barecuda scan kernels: a three-phase scan with an associative scan_expr (order kept).
//   $${name}_tiles: each block scans one tile of $${block} x $${items} elements (staged
//     through shared memory so global loads and stores stay coalesced), writes the tile's
//     local scan (inclusive, or exclusive from $${neutral}) and the tile's total.
//   the tile totals are scanned (inclusively) by the same kernels, recursively.
//   $${name}_carry: every element of tile b > 0 becomes SCAN(total of tiles < b, element).
// Hooks: $${headers} $${preamble} $${name} $${t} $${scan_expr} $${block} $${items}
//        $${neutral} (only used when bc_exclusive is set)
${headers}
${preamble}

#define SCAN(a, b) (${scan_expr})

namespace {
typedef ${t} scan_t;
}

extern "C" __global__ void __launch_bounds__(${block})
${name}_tiles(scan_t *bc_out, const scan_t *bc_in, long long bc_n, scan_t *bc_tile_sums, int bc_exclusive)
{
    const int ITEMS = ${items}, BLOCK = ${block}, TILE = ${block} * ${items};
    __shared__ __align__(16) unsigned char raw[TILE * sizeof(scan_t)];
    __shared__ __align__(16) unsigned char raw_w[32 * sizeof(scan_t)];
    scan_t *tile = reinterpret_cast<scan_t *>(raw);
    scan_t *warp_tot = reinterpret_cast<scan_t *>(raw_w);
    const long long base = (long long)blockIdx.x * TILE;
    const int valid = (int)(bc_n - base < TILE ? bc_n - base : TILE);
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;

#pragma unroll
    for (int k = 0; k < ITEMS; k++) {
        const int j = k * BLOCK + t;
        if (j < valid)
            tile[j] = bc_in[base + j];
    }
    __syncthreads();

    // Each thread scans its ITEMS consecutive elements (inclusively).
    const int first = t * ITEMS;
    const int mine = valid - first < 0 ? 0 : (valid - first < ITEMS ? valid - first : ITEMS);
    scan_t v[ITEMS];
    scan_t acc;
    if (mine > 0) {
        acc = tile[first];
        v[0] = acc;
#pragma unroll
        for (int k = 1; k < ITEMS; k++) {
            if (k < mine) {
                scan_t a = acc, b = tile[first + k];
                acc = SCAN(a, b);
                v[k] = acc;
            }
        }
    } else {
        acc = tile[0];  // never combined into a valid result
    }

    // Inclusive scan of the thread totals over the warp, then over the warps.
    scan_t inc = acc;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        scan_t up = barecuda::shfl_up(inc, off);
        if (lane >= off) {
            scan_t a = up, b = inc;
            inc = SCAN(a, b);
        }
    }
    if (lane == 31)
        warp_tot[warp] = inc;
    __syncthreads();
    if (warp == 0) {
        const int nwarps = BLOCK / 32;
        scan_t w = warp_tot[lane < nwarps ? lane : 0];
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
            scan_t up = barecuda::shfl_up(w, off);
            if (lane >= off) {
                scan_t a = up, b = w;
                w = SCAN(a, b);
            }
        }
        if (lane < nwarps)
            warp_tot[lane] = w;
    }
    __syncthreads();
    // Exclusive prefix of this thread: combine the previous warps' total and the
    // previous lanes' inclusive value.
    scan_t lane_prev = barecuda::shfl_up(inc, 1);
    bool have = false;
    scan_t prefix;
    if (warp > 0) {
        prefix = warp_tot[warp - 1];
        have = true;
    }
    if (lane > 0) {
        if (have) {
            scan_t a = prefix, b = lane_prev;
            prefix = SCAN(a, b);
        } else {
            prefix = lane_prev;
        }
        have = true;
    }
    __syncthreads();

    if (bc_exclusive) {
        scan_t run = have ? prefix : barecuda::bc_cast<scan_t>(${neutral});
        if (mine > 0) {
            tile[first] = run;
#pragma unroll
            for (int k = 1; k < ITEMS; k++) {
                if (k < mine) {
                    scan_t a = run, b = v[k - 1];
                    tile[first + k] = have ? (scan_t)SCAN(a, b) : b;
                }
            }
        }
    } else if (mine > 0) {
#pragma unroll
        for (int k = 0; k < ITEMS; k++) {
            if (k < mine) {
                if (have) {
                    scan_t a = prefix, b = v[k];
                    tile[first + k] = SCAN(a, b);
                } else {
                    tile[first + k] = v[k];
                }
            }
        }
    }
    // The tile's inclusive total, from the thread holding the last valid element.
    if (mine > 0 && first + mine == valid) {
        scan_t tot = v[0];
#pragma unroll
        for (int k = 1; k < ITEMS; k++)
            if (k == mine - 1)
                tot = v[k];
        if (have) {
            scan_t a = prefix, b = tot;
            tot = SCAN(a, b);
        }
        if (bc_tile_sums != 0)
            bc_tile_sums[blockIdx.x] = tot;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < ITEMS; k++) {
        const int j = k * BLOCK + t;
        if (j < valid)
            bc_out[base + j] = tile[j];
    }
}

extern "C" __global__ void __launch_bounds__(${block})
${name}_carry(scan_t *bc_out, long long bc_n, const scan_t *bc_tile_sums)
{
    const int TILE = ${block} * ${items};
    const long long b = blockIdx.x + 1;  // tile 0 needs no carry
    const scan_t carry = bc_tile_sums[b - 1];
    const long long base = b * TILE;
#pragma unroll
    for (int k = 0; k < ${items}; k++) {
        const long long j = base + k * ${block} + threadIdx.x;
        if (j < bc_n) {
            scan_t a = carry, e = bc_out[j];
            bc_out[j] = SCAN(a, e);
        }
    }
}
