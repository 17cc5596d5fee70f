// MatMul, com.microsoft FusedMatMul and Gemm on cuBLAS, float32 and float64 (shapes validated by the CPU
// kernels' Prepare). Row-major C = op(A) op(B) is computed as column-major C^T = op(B)^T op(A)^T, so no
// operand is ever transposed in memory. Batches with uniform strides (each operand either fully batched
// or shared by every batch) are one strided-batched call; A with batch dims times a 2-D B is one GEMM over
// the folded rows; anything else loops over the batch.
//
// Results are deterministic: one stream, the default math mode (no TF32), no split-K atomics requested.
#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cuda/kernels/cuda_kernels.h"

namespace ontrain {
namespace cuda {
namespace {

struct GemmShape {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
};

// C (m x n, row-major, ldc n) = alpha op(A) op(B) + beta C for one matrix, or `batches` of them with
// element strides sa, sb, sc.
template <typename T>
Status GemmCall(const CudaResources& r, const GemmShape& g, T alpha, const T* a, const T* b, T beta, T* c,
                int64_t batches, int64_t sa, int64_t sb, int64_t sc) {
  if (g.m == 0 || g.n == 0 || batches == 0) return Status::OK();
  if (g.m > INT32_MAX || g.n > INT32_MAX || g.k > INT32_MAX || batches > INT32_MAX) {
    return Unimplemented("GEMM dims beyond 2^31");
  }
  // Column-major view: C^T (n x m) = op(B)^T (n x k) op(A)^T (k x m).
  cublasOperation_t ob = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N, oa = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  int m = static_cast<int>(g.n), n = static_cast<int>(g.m), k = static_cast<int>(g.k);
  int ldb = static_cast<int>(g.tb ? g.k : g.n), lda = static_cast<int>(g.ta ? g.m : g.k), ldc = m;
  if (g.k == 0 && beta == T(0) && (batches == 1 || sc == g.m * g.n)) {  // an empty sum
    return CudaStatus(cudaMemsetAsync(c, 0, sizeof(T) * g.m * g.n * batches, r.stream), "cudaMemsetAsync");
  }
  if constexpr (std::is_same_v<T, float>) {
    return CublasStatus(cublasSgemmStridedBatched(r.cublas, ob, oa, m, n, k, &alpha, b, ldb, sb, a, lda, sa, &beta, c,
                                                  ldc, sc, static_cast<int>(batches)),
                        "cublasSgemmStridedBatched");
  } else {
    return CublasStatus(cublasDgemmStridedBatched(r.cublas, ob, oa, m, n, k, &alpha, b, ldb, sb, a, lda, sa, &beta, c,
                                                  ldc, sc, static_cast<int>(batches)),
                        "cublasDgemmStridedBatched");
  }
}

// alpha op(A) op(B) with MatMul's batch broadcasting and 1-D promotion (FusedMatMul: rank >= 2 operands).
class MatMulKernel : public DelegatingKernel {
 public:
  MatMulKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu)
      : DelegatingKernel(info, std::move(cpu)),
        ta_(info.node->GetInt("transA", 0) != 0),
        tb_(info.node->GetInt("transB", 0) != 0),
        alpha_(info.node->GetFloat("alpha", 1.0f)) {}

  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &a = *ctx.input(0), &b = *ctx.input(1);
    if (a.dtype() == DType::kFloat64) return Run<double>(r, a, b, ctx.output(0));
    return Run<float>(r, a, b, ctx.output(0));
  }

 private:
  template <typename T>
  Status Run(const CudaResources& r, const Tensor& a, const Tensor& b, Tensor* y) {
    // 1. Promote 1-D operands and read the matrix dims.
    Shape as = a.shape(), bs = b.shape();
    if (as.size() == 1) as.insert(as.begin(), 1);
    if (bs.size() == 1) bs.push_back(1);
    GemmShape g{ta_, tb_};
    size_t ar = as.size(), br = bs.size();
    g.m = ta_ ? as[ar - 1] : as[ar - 2];
    g.k = ta_ ? as[ar - 2] : as[ar - 1];
    g.n = tb_ ? bs[br - 2] : bs[br - 1];
    Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
    int64_t a_batch = ShapeNumElements(ab), b_batch = ShapeNumElements(bb);
    ONT_ASSIGN_OR_RETURN(Shape batch, cpu::BroadcastShapes({ab, bb}));
    int64_t batches = ShapeNumElements(batch);
    T alpha = static_cast<T>(alpha_);
    const T *pa = a.data<T>(), *pb = b.data<T>();
    T* py = y->data<T>();
    // 2. A batched, B one matrix, A not transposed: fold A's batch into its rows.
    if (b_batch == 1 && !ta_) {
      GemmShape folded = g;
      folded.m = g.m * batches;
      return GemmCall<T>(r, folded, alpha, pa, pb, T(0), py, 1, 0, 0, 0);
    }
    // 3. Uniform strides: one strided-batched call.
    bool a_uniform = a_batch == batches || a_batch == 1, b_uniform = b_batch == batches || b_batch == 1;
    if (a_uniform && b_uniform) {
      return GemmCall<T>(r, g, alpha, pa, pb, T(0), py, batches, a_batch == 1 ? 0 : g.m * g.k,
                         b_batch == 1 ? 0 : g.k * g.n, g.m * g.n);
    }
    // 4. General broadcasting: one call per batch.
    std::vector<int64_t> sa = cpu::BroadcastStrides(ab, batch), sb = cpu::BroadcastStrides(bb, batch);
    for (int64_t bi = 0; bi < batches; ++bi) {
      int64_t rem = bi, oa = 0, ob = 0;
      for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
        int64_t i = rem % batch[d];
        rem /= batch[d];
        oa += i * sa[d];
        ob += i * sb[d];
      }
      ONT_RETURN_IF_ERROR(GemmCall<T>(r, g, alpha, pa + oa * g.m * g.k, pb + ob * g.k * g.n, T(0),
                                      py + bi * g.m * g.n, 1, 0, 0, 0));
    }
    return Status::OK();
  }

  bool ta_, tb_;
  float alpha_;
};

// Gemm: Y = alpha op(A) op(B) + beta C, C broadcast to [M, N] (copied into Y first).
class GemmKernel : public DelegatingKernel {
 public:
  GemmKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu)
      : DelegatingKernel(info, std::move(cpu)),
        ta_(info.node->GetInt("transA", 0) != 0),
        tb_(info.node->GetInt("transB", 0) != 0),
        alpha_(info.node->GetFloat("alpha", 1.0f)),
        beta_(info.node->GetFloat("beta", 1.0f)) {}

  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    if (ctx.input(0)->dtype() == DType::kFloat64) return Run<double>(r, ctx);
    return Run<float>(r, ctx);
  }

 private:
  template <typename T>
  Status Run(const CudaResources& r, KernelContext& ctx) {
    const Tensor &a = *ctx.input(0), &b = *ctx.input(1);
    const Tensor* c = ctx.input(2);
    Tensor* y = ctx.output(0);
    GemmShape g{ta_, tb_};
    g.m = ta_ ? a.dim(1) : a.dim(0);
    g.k = ta_ ? a.dim(0) : a.dim(1);
    g.n = tb_ ? b.dim(0) : b.dim(1);
    T beta = T(0);
    if (c != nullptr && beta_ != 0.0f) {
      ONT_ASSIGN_OR_RETURN(StridedSpace s, BroadcastSpace(y->shape(), {y->shape(), c->shape()}));
      ONT_RETURN_IF_ERROR(CudaStatus(StridedCopy(c->raw_data(), y->raw_data(), s, sizeof(T), r.stream), "StridedCopy"));
      beta = static_cast<T>(beta_);
    }
    return GemmCall<T>(r, g, static_cast<T>(alpha_), a.data<T>(), b.data<T>(), beta, y->data<T>(), 1, 0, 0, 0);
  }

  bool ta_, tb_;
  float alpha_, beta_;
};

}  // namespace

KernelFactory kMatMul = Wrap<MatMulKernel, &cpu::kMatMul>;
KernelFactory kFusedMatMul = Wrap<MatMulKernel, &cpu::kFusedMatMul>;
KernelFactory kGemm = Wrap<GemmKernel, &cpu::kGemm>;

}  // namespace cuda
}  // namespace ontrain
