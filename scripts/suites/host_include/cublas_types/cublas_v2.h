// cuBLAS for the device half of a suite's file (scripts/suites): the CPU build has no cuBLAS.
// The types and constants that host declarations name (a handle, a status), no functions: a
// kernel never calls cuBLAS, and host code calling it is blanked before the compile.
#pragma once
#include <cuda_fp16.h>  // as the real header brings them (llm.c's common.h relies on it)
#include <cuda_bf16.h>
typedef enum { CUBLAS_STATUS_SUCCESS = 0 } cublasStatus_t;
typedef struct cublasContext* cublasHandle_t;
typedef enum { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 } cublasComputeType_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3 } cublasMath_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
