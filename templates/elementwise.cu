// SPDX-License-Identifier: MIT
// barecuda elementwise kernel: one grid-stride loop over n elements.
// Rendered by barecuda.elementwise with string.Template; the hooks are
//   $${headers}    type support (complex, __half, casts), chosen by the Python layer
//   $${preamble}   the user's preamble (device functions, macros)
//   $${name}       the kernel's name
//   $${params}     the kernel parameters from the user's argument list (+ transport params)
//   $${unpack}     locals rebuilt from transport params (complex and __half scalars)
//   $${index_t}    int (when n fits 32 bits) or long long
//   $${loop_prep}  code run once per thread before the loop
//   $${loop}       the loop header (plain or over a range with start/stop/step)
//   $${operation}  the user's operation on element i
//   $${after_loop} code run once per thread after the loop
${headers}
${preamble}

extern "C" __global__ void ${name}(${params})
{
    typedef ${index_t} index_t;
    ${unpack}
    const index_t tid = (index_t)blockIdx.x * blockDim.x + threadIdx.x;
    const index_t total_threads = (index_t)blockDim.x * gridDim.x;
    index_t i;
    (void)tid;
    (void)total_threads;
    ${loop_prep};
    ${loop}
    {
        ${operation};
    }
    ${after_loop};
}
