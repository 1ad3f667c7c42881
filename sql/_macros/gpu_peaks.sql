-- Peak dense TFLOP/s of NVIDIA GPUs per data type, keyed by the GPU name nsys exports
-- (TARGET_INFO_GPU.name, e.g. `NVIDIA H100 80GB HBM3`): the denominator of MFU
-- (compute.mfu; listed by compute.peaks). `pattern` is a case-insensitive regular
-- expression over the name; the first matching row (lowest `priority`) wins, so the
-- more specific names (NVL, PCIe, GH200, GB200) come first. Tensor-core figures are
-- dense: NVIDIA's datasheets print them "with sparsity", twice the dense rate, and
-- the figures here are those halved. fp32 is the CUDA-core (non-tensor) rate; NULL
-- where the GPU has no such tensor-core type (V100 and T4: no BF16, TF32 or FP8).
-- Each row names its datasheet; `--peak-tflops` overrides the table.
CREATE OR REPLACE MACRO gpu_peaks() AS TABLE
SELECT *
FROM (VALUES
    (1, 'GB200', 'gb200', 80.0, 1250.0, 2500.0, 2500.0, 5000.0,
     'NVIDIA GB200 NVL72 datasheet, per GPU (72 per rack), sparsity halved'),
    (2, 'B200', 'b200', 75.0, 1125.0, 2250.0, 2250.0, 4500.0,
     'NVIDIA HGX B200 datasheet, per GPU (8 per board), sparsity halved'),
    (3, 'GH200', 'gh200', 67.0, 494.5, 989.5, 989.5, 1979.0,
     'NVIDIA GH200 Grace Hopper Superchip datasheet, sparsity halved'),
    (4, 'H200 NVL', 'h200.*nvl', 60.0, 417.5, 835.5, 835.5, 1670.5,
     'NVIDIA H200 datasheet, H200 NVL column, sparsity halved'),
    (5, 'H200 SXM', 'h200', 67.0, 494.5, 989.5, 989.5, 1979.0,
     'NVIDIA H200 datasheet, H200 SXM column, sparsity halved'),
    (6, 'H100 NVL', 'h100.*nvl', 60.0, 417.5, 835.5, 835.5, 1670.5,
     'NVIDIA H100 datasheet, H100 NVL column, sparsity halved'),
    (7, 'H100 PCIe', 'h100.*pcie', 51.0, 378.0, 756.5, 756.5, 1513.0,
     'NVIDIA H100 datasheet, H100 PCIe column, sparsity halved'),
    (8, 'H100 SXM', 'h100', 67.0, 494.5, 989.5, 989.5, 1979.0,
     'NVIDIA H100 datasheet, H100 SXM column, sparsity halved'),
    (9, 'A100', 'a100', 19.5, 156.0, 312.0, 312.0, NULL,
     'NVIDIA A100 datasheet (SXM and PCIe, 40 and 80 GB alike)'),
    (10, 'L40S', 'l40s', 91.6, 183.0, 362.05, 362.05, 733.0,
     'NVIDIA L40S datasheet, sparsity halved'),
    (11, 'L40', 'l40\b', 90.5, 90.5, 181.05, 181.05, 362.0,
     'NVIDIA L40 datasheet, sparsity halved'),
    (12, 'L4', 'l4$', 30.3, 60.0, 121.0, 121.0, 242.5,
     'NVIDIA L4 datasheet, sparsity halved'),
    (13, 'A10', 'a10$', 31.2, 62.5, 125.0, 125.0, NULL,
     'NVIDIA A10 datasheet, sparsity halved'),
    (14, 'V100 SXM2', 'v100.*sxm', 15.7, NULL, NULL, 125.0, NULL,
     'NVIDIA V100 datasheet, SXM2 column'),
    (15, 'V100 PCIe', 'v100', 14.0, NULL, NULL, 112.0, NULL,
     'NVIDIA V100 datasheet, PCIe column'),
    (16, 'T4', 't4$', 8.1, NULL, NULL, 65.0, NULL,
     'NVIDIA T4 datasheet')
) AS p(priority, gpu, pattern, fp32, tf32, bf16, fp16, fp8, source);
