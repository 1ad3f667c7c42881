"""Names and launch attributes of the kernels and CUDA API calls the generator emits.

Compute kernels are copied from the real 2026.2.1 export ``nsysai__mfu_2gpu_before``
(short/demangled/mangled names, launch configuration, launching API). NCCL kernel
names follow NCCL >= 2.19 (``ncclDevKernel_<Coll>[_<Op>_<type>]_<ALGO>_<PROTO>``) with the
attributes of that file's ``ncclDevKernel_SendRecv``.
"""

from __future__ import annotations

from dataclasses import dataclass

# KERNEL columns that depend on the kernel (in DDL order, between the name columns
# and the per-launch ones); the rest are constant or per launch.
ATTR_COLUMNS = (
    "registersPerThread",
    "gridX",
    "gridY",
    "gridZ",
    "blockX",
    "blockY",
    "blockZ",
    "staticSharedMemory",
    "dynamicSharedMemory",
    "localMemoryPerThread",
    "localMemoryTotal",
    "sharedMemoryExecuted",
    "sharedMemoryLimitConfig",
    "clusterX",
    "clusterY",
    "clusterZ",
    "clusterSchedulingPolicy",
    "maxPotentialClusterSize",
    "maxActiveClusters",
)

# CUDA API calls: name -> eventClass (0 CUDA runtime, 1 CUDA driver; ENUM_NSYS_EVENT_CLASS).
API_CLASS = {
    "cudaLaunchKernel_v7000": 0,
    "cuLaunchKernelEx": 1,
    "cudaMemcpyAsync_v3020": 0,
    "cudaMemsetAsync_v3020": 0,
    "cudaStreamSynchronize_v3020": 0,
    "cudaEventRecord_v3020": 0,
    "cudaStreamWaitEvent_v3020": 0,
}
API_NAMES = tuple(API_CLASS)
API_INDEX = {name: i for i, name in enumerate(API_NAMES)}


@dataclass(frozen=True)
class KernelType:
    short: str
    demangled: str
    mangled: str
    attrs: tuple[int, ...]  # values for ATTR_COLUMNS
    api: str  # launching API call
    is_nccl: bool = False


def _k(short, demangled, mangled, attrs, api="cudaLaunchKernel_v7000"):
    return KernelType(short, demangled, mangled if mangled is not None else short, attrs, api)


LAYER_NORM = _k(
    "vectorized_layer_norm_kernel",
    "void at::native::<unnamed>::vectorized_layer_norm_kernel<float, float, (bool)0>"
    "(int, T2, const T1 *, const T1 *, const T1 *, T2 *, T2 *, T1 *)",
    "_ZN2at6native53_GLOBAL__N__21739cd4_20_layer_norm_kernel_cu_9c5ada8a28vectorized_layer_norm_kernelIffLb0EEEviT0_PKT_S6_S6_PS3_S7_PS4_",
    (39, 15600, 1, 1, 32, 4, 1, 0, 24, 0, 250871808, 32768, 0, 0, 0, 0, 1, 0, 0),
)
GEMM_TNN = _k(
    "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN",
    "nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN",
    None,
    (168, 2, 66, 1, 384, 1, 1, 0, 213196, 0, 250871808, 233472, 1, 2, 1, 1, 1, 16, 66),
    api="cuLaunchKernelEx",
)
GEMM_TNT = _k(
    "nvjet_tst_192x208_64x4_1x1_h_bz_coopB_bias_TNT",
    "nvjet_tst_192x208_64x4_1x1_h_bz_coopB_bias_TNT",
    None,
    (168, 1, 132, 1, 384, 1, 1, 0, 221388, 0, 250871808, 233472, 1, 0, 0, 0, 1, 0, 0),
    api="cuLaunchKernelEx",
)
FLASH_FWD = _k(
    "flash_fwd_kernel",
    "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128, (int)128, (int)64, (int)4, "
    "(bool)0, (bool)0, cutlass::bfloat16_t, "
    "Flash_kernel_traits<(int)128, (int)128, (int)64, (int)4, cutlass::bfloat16_t>>, "
    "(bool)0, (bool)0, (bool)0, (bool)0, (bool)0, (bool)1, (bool)0, (bool)0>"
    "(flash::Flash_fwd_params)",
    "_ZN5flash16flash_fwd_kernelI23Flash_fwd_kernel_traitsILi128ELi128ELi64ELi4ELb0ELb0EN7cutlass10bfloat16_tE19Flash_kernel_traitsILi128ELi128ELi64ELi4ES3_EELb0ELb0ELb0ELb0ELb0ELb1ELb0ELb0EEEvNS_16Flash_fwd_paramsE",
    (255, 244, 1, 6, 128, 1, 1, 0, 65536, 0, 285474816, 135168, 1, 0, 0, 0, 1, 0, 0),
)
MUL = _k(
    "elementwise_kernel",
    "void at::native::elementwise_kernel<(int)128, (int)2, "
    "void at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, float, float, "
    "at::native::binary_internal::MulFunctor<float>>>(at::TensorIteratorBase &, const T1 &)"
    "::[lambda(int) (instance 1)]>(int, T3)",
    "_ZN2at6native18elementwise_kernelILi128ELi2EZNS0_22gpu_kernel_impl_nocastINS0_13BinaryFunctorIfffNS0_15binary_internal10MulFunctorIfEEEEEEvRNS_18TensorIteratorBaseERKT_EUliE_EEviT1_",
    (18, 187200, 1, 1, 128, 1, 1, 0, 0, 0, 250871808, 32768, 0, 0, 0, 0, 1, 0, 0),
)
ADD_INPLACE = _k(
    "vectorized_elementwise_kernel",
    "void at::native::vectorized_elementwise_kernel<(int)4, "
    "at::native::CUDAFunctorOnSelf_add<float>, std::array<char *, (unsigned long)2>>(int, T2, T3)",
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_21CUDAFunctorOnSelf_addIfEESt5arrayIPcLm2EEEEviT0_T1_",
    (32, 16, 1, 1, 128, 1, 1, 0, 0, 0, 250871808, 32768, 0, 0, 0, 0, 1, 0, 0),
)
REDUCE = _k(
    "reduce_kernel",
    "void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float, "
    "at::native::MeanOps<float, float, float, float>, unsigned int, float, (int)4, (int)4>>(T3)",
    "_ZN2at6native13reduce_kernelILi512ELi1ENS0_8ReduceOpIfNS0_7MeanOpsIffffEEjfLi4ELi4EEEEEvT1_",
    (32, 975, 1, 1, 32, 16, 1, 16, 0, 0, 250871808, 16384, 0, 0, 0, 0, 1, 0, 0),
)
COPY = _k(
    "unrolled_elementwise_kernel",
    "void at::native::unrolled_elementwise_kernel<"
    "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)"
    "::[lambda() (instance 3)]::operator ()() const"
    "::[lambda() (instance 7)]::operator ()() const"
    "::[lambda(float) (instance 1)], std::array<char *, (unsigned long)2>, (int)4, "
    "TrivialOffsetCalculator<(int)1, unsigned int>, "
    "TrivialOffsetCalculator<(int)1, unsigned int>, "
    "at::native::memory::LoadWithCast<(int)1>, at::native::memory::StoreWithCast<(int)1>>"
    "(int, T1, T2, T4, T5, T6, T7)",
    "_ZN2at6native27unrolled_elementwise_kernelIZZZNS0_23direct_copy_kernel_cudaERNS_18TensorIteratorBaseEENKUlvE1_clEvENKUlvE5_clEvEUlfE_St5arrayIPcLm2EELi4E23TrivialOffsetCalculatorILi1EjESB_NS0_6memory12LoadWithCastILi1EEENSC_13StoreWithCastILi1EEEEEviT_T0_T2_T3_T4_T5_",
    (32, 93600, 1, 1, 128, 1, 1, 0, 0, 0, 250871808, 32768, 0, 0, 0, 0, 1, 0, 0),
)
CAT = _k(
    "CatArrayBatchedCopy_vectorized",
    "void at::native::<unnamed>::CatArrayBatchedCopy_vectorized<"
    "at::native::<unnamed>::OpaqueType<(unsigned int)2>, unsigned int, (int)1, (int)128, (int)1, "
    "(int)16, (int)8>(char *, at::native::<unnamed>::CatArrInputTensorMetadata<T1, T2, T4, T5>, "
    "at::native::<unnamed>::TensorSizeStride<T2, (unsigned int)4>, int, T2)",
    "_ZN2at6native40_GLOBAL__N__0f1a8107_8_Shape_cu_49f7391c30CatArrayBatchedCopy_vectorizedINS1_10OpaqueTypeILj2EEEjLi1ELi128ELi1ELi16ELi8EEEvPcNS1_25CatArrInputTensorMetadataIT_T0_XT2_EXT3_EEENS1_16TensorSizeStrideIS8_Lj4EEEiS8_",
    (16, 4224, 3, 1, 128, 1, 1, 0, 0, 0, 250871808, 32768, 0, 0, 0, 0, 1, 0, 0),
)

# Kernel cycles per phase (the i-th kernel of a phase uses entry i % len).
PHASE_KERNELS = {
    "forward": (LAYER_NORM, GEMM_TNN, FLASH_FWD, GEMM_TNN, ADD_INPLACE, MUL),
    "backward": (GEMM_TNT, MUL, GEMM_TNT, REDUCE, COPY, ADD_INPLACE),
    "optimizer": (ADD_INPLACE, MUL),
    "side": (CAT, COPY),
}
COVER_KERNEL = GEMM_TNT  # long kernel that hides an NCCL kernel in "hidden" steps

NCCL_ATTRS = (96, 32, 1, 1, 640, 1, 1, 21568, 82240, 0, 787218432, 135168, 1, 4, 1, 1, 1, 8, 30)
NCCL_DTYPES = {
    "float32": "f32",
    "float16": "f16",
    "bfloat16": "bf16",
    "float64": "f64",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "int8": "i8",
}
_NCCL_COLLS = {
    "all_reduce": "AllReduce_Sum_{t}",
    "reduce": "Reduce_Sum_{t}",
    "reduce_scatter": "ReduceScatter_Sum_{t}",
    "all_gather": "AllGather",
    "broadcast": "Broadcast",
}


def nccl_kernel(op: str, dtype: str) -> KernelType:
    """The NCCL kernel that runs a torch.distributed ``op`` on ``dtype``."""
    coll = _NCCL_COLLS.get(op)
    if coll is None:  # send/recv/all_to_all/... run as point-to-point kernels
        name = "ncclDevKernel_SendRecv"
    else:
        name = "ncclDevKernel_" + coll.format(t=NCCL_DTYPES.get(dtype, "f32")) + "_RING_LL"
    return KernelType(
        short=name,
        demangled=f"{name}(ncclDevKernelArgsStorage<(unsigned long)4096>)",
        mangled=f"_Z{len(name)}{name}24ncclDevKernelArgsStorageILm4096EE",
        attrs=NCCL_ATTRS,
        api="cuLaunchKernelEx",
        is_nccl=True,
    )
