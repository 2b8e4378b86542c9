# SPDX-License-Identifier: MIT
"""PyCUDA 2026.1's public names, as data: each must exist in the barecuda module of the
same name, so that a PyCUDA program finds everything it imports after the rename.

The lists were taken from PyCUDA's Python modules and C++ wrappers (names only).  Left
out on purpose, with the reason: texture and surface *references* (TextureReference,
SurfaceReference, bind_array_to_texref, matrix_to_texref, Module.get_texref) were removed
from CUDA 12's driver; initialize_profiler (cuProfilerInitialize) likewise; OpenGL interop
(pycuda.gl, BufferObject, RegisteredObject, make_gl_context) waits for a GL stack;
curandom's CUDA source strings are PyCUDA's own kernels, not an API.  Each name's
behaviour is tested in the test file of its concept.
"""

import importlib

import pytest

PYCUDA_NAMES = {
    "driver": """
        init get_version get_driver_version Device Context Stream Event Module Function
        Linker DeviceAllocation PooledDeviceAllocation IPCMemoryHandle HostPointer
        PointerHolderBase ManagedAllocation RegisteredHostMemory Memcpy2D Memcpy3D
        Memcpy3DPeer Array ArrayDescriptor ArrayDescriptor3D
        Error LogicError LaunchError RuntimeError MemoryError CompileError
        ArgumentHandler In Out InOut
        mem_alloc mem_alloc_pitch mem_alloc_like mem_get_info mem_get_address_range
        mem_get_ipc_handle to_device from_device from_device_like
        memcpy_htod memcpy_dtoh memcpy_dtod memcpy_htod_async memcpy_dtoh_async
        memcpy_dtod_async memcpy_peer memcpy_peer_async memcpy_htoa memcpy_atoh
        memcpy_atoa memcpy_atod memcpy_dtoa py_memcpy_htoa py_memcpy_atoh
        memset_d8 memset_d16 memset_d32 memset_d2d8 memset_d2d16 memset_d2d32
        memset_d8_async memset_d16_async memset_d32_async memset_d2d8_async
        memset_d2d16_async memset_d2d32_async
        module_from_buffer module_from_file
        pagelocked_empty pagelocked_zeros pagelocked_empty_like pagelocked_zeros_like
        aligned_empty aligned_zeros aligned_empty_like aligned_zeros_like
        managed_empty managed_zeros managed_empty_like managed_zeros_like
        register_host_memory
        np_to_array matrix_to_array gpuarray_to_array make_multichannel_2d_array
        dtype_to_array_format
        start_profiler stop_profiler have_gl_ext set_debugging CUDA_DEBUGGING bitlog2
        DeviceMemoryPool PageLockedMemoryPool PageLockedAllocator PooledHostAllocation
        address_mode array3d_flags array_cubemap_face array_format compute_mode
        ctx_flags device_attribute event_flags filter_mode func_cache
        function_attribute host_alloc_flags ipc_mem_flags jit_fallback jit_input_type
        jit_option jit_target limit mem_attach_flags mem_host_register_flags
        memory_type pointer_attribute profiler_output_mode shared_config
    """,
    "compiler": """
        SourceModule DynamicSourceModule DynamicModule CudaModule compile compile_plain
        preprocess_source get_nvcc_version DEFAULT_NVCC_FLAGS
    """,
    "gpuarray": """
        GPUArray vec to_gpu to_gpu_async empty zeros ones empty_like zeros_like ones_like
        arange take multi_take multi_put multi_take_put if_positive maximum minimum
        sum subset_sum dot subset_dot min max subset_min subset_max concatenate stack
        transpose reshape splay any all logical_and logical_or logical_not where
        GPUArray.reverse GPUArray.any GPUArray.all GPUArray.mul_add GPUArray.real
        GPUArray.imag GPUArray.conj GPUArray.get GPUArray.set GPUArray.fill
    """,
    "elementwise": """
        ElementwiseKernel get_elwise_module get_elwise_range_module get_elwise_kernel
        get_elwise_kernel_and_types get_take_kernel get_take_put_kernel get_put_kernel
        get_copy_kernel get_linear_combination_kernel get_axpbyz_kernel
        get_axpbz_kernel get_binary_op_kernel get_rdivide_elwise_kernel
        get_binary_func_kernel get_binary_func_scalar_kernel get_binary_minmax_kernel
        get_fmod_kernel get_modf_kernel get_frexp_kernel get_ldexp_kernel
        get_unary_func_kernel get_if_positive_kernel get_where_kernel
        get_scalar_op_kernel get_logical_not_kernel get_fill_kernel get_reverse_kernel
        get_real_kernel get_imag_kernel get_conj_kernel get_arange_kernel
        get_pow_array_kernel
    """,
    "reduction": """
        ReductionKernel get_reduction_module get_reduction_kernel_and_types
        get_sum_kernel get_subset_sum_kernel get_dot_kernel get_subset_dot_kernel
        get_minmax_kernel get_subset_minmax_kernel get_minmax_neutral get_any_kernel
        get_all_kernel
    """,
    "scan": "InclusiveScanKernel ExclusiveScanKernel",
    "cumath": """
        fabs ceil floor exp log log10 sqrt sin cos tan asin acos atan sinh cosh tanh
        fmod frexp ldexp modf
    """,
    "curandom": """
        rand get_curand_version seed_getter_uniform seed_getter_unique
        generate_direction_vectors generate_scramble_constants32
        generate_scramble_constants64 XORWOWRandomNumberGenerator
        MRG32k3aRandomNumberGenerator Sobol32RandomNumberGenerator
        Sobol64RandomNumberGenerator ScrambledSobol32RandomNumberGenerator
        ScrambledSobol64RandomNumberGenerator
    """,
    "tools": """
        make_default_context get_default_device mark_cuda_test
        init_cuda_context_fixture context_dependent_memoize clear_context_caches
        DeviceData OccupancyRecord DebugMemoryPool DeviceMemoryPool
        PageLockedMemoryPool PageLockedAllocator bitlog2 dtype_to_ctype
        base_dtype_to_ctype get_arg_type parse_c_arg register_dtype
        get_or_register_dtype VectorArg ScalarArg
    """,
    "characterize": "has_double_support has_stack platform_bits sizeof",
    "debug": "main",
    "sparse": "",
}

_CASES = [(mod, name) for mod, names in PYCUDA_NAMES.items() for name in names.split()]


@pytest.mark.parametrize(("module", "name"), _CASES, ids=[f"{m}.{n}" for m, n in _CASES])
def test_pycuda_name_exists(module, name):
    if module == "debug":
        # Importing barecuda.debug turns debugging on for the process: look only.
        spec = importlib.util.find_spec("barecuda.debug")
        assert spec is not None
        with open(spec.origin, encoding="utf-8") as f:
            assert f"def {name}(" in f.read()
        return
    obj = importlib.import_module(f"barecuda.{module}")
    for part in name.split("."):
        assert hasattr(obj, part), f"barecuda.{module} has no {name} (PyCUDA has)"
        obj = getattr(obj, part)


def test_sparse_subpackage_imports():
    sparse = importlib.import_module("barecuda.sparse")
    for sub in ("packeted", "coordinate", "operator", "cg"):
        importlib.import_module(f"barecuda.sparse.{sub}")
    assert sparse.__doc__
