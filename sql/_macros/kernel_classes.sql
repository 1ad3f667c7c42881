-- The kernel classifier: which compute kernels are matrix multiplies and attention, the
-- work that runs on tensor cores (kernels.tensor_cores, kernels.top). By name alone
-- (the short name and the demangled name, case-insensitive), first match wins:
--   attention: flash, fmha, sdpa, attention, attn_ / _attn, mha_ (FlashAttention,
--     cuDNN SDPA `cudnn_generated_fort_native_sdpa_*`, PyTorch's memory-efficient
--     `fmha_cutlass*`, FlexAttention `triton_tem_fused_flex_attention*`, paged attention);
--   matmul: nvjet* (cuBLAS/cuBLASLt on Hopper and Blackwell), gemm (cuBLAS `*gemm*`,
--     CUTLASS `*s16816gemm*`, implicit-GEMM convolutions), xmma (`sm90_xmma_*`),
--     cutlass, wgmma, matmul (Triton `matmul_kernel`), triton_tem_* (TorchInductor's
--     matmul templates), cublasLt, splitKreduce (cuBLAS split-K), scudnn / hcudnn (cuDNN
--     GEMM convolutions), marlin;
--   other: everything else (elementwise, reductions, normalization, copies by kernel).
-- A matmul in plain FP32 without TF32 (`*sgemm*`) is a matmul on CUDA cores, not tensor
-- cores; its name cannot tell (it counts as matmul).
CREATE OR REPLACE MACRO kernel_class(name, demangled) AS CASE
    WHEN regexp_matches(lower(concat_ws(' ', name, demangled)),
                        'flash|fmha|sdpa|attention|attn_|_attn|mha_')
        THEN 'attention'
    WHEN regexp_matches(lower(concat_ws(' ', name, demangled)),
                        '^nvjet|gemm|xmma|cutlass|wgmma|matmul|^triton_tem_|cublaslt'
                        || '|splitkreduce|scudnn|hcudnn|marlin')
        THEN 'matmul'
    ELSE 'other'
END;
