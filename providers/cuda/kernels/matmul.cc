// MatMul, com.microsoft FusedMatMul, ai.ontrain MatMulBias and Gemm on cuBLAS, float32 and float64 (shapes
// validated by the CPU kernels' Prepare). Row-major C = op(A) op(B) is computed as column-major
// C^T = op(B)^T op(A)^T, so no operand is ever transposed in memory. Batches with uniform strides (each
// operand either fully batched or shared by every batch) are one strided-batched call; A with batch dims
// times a 2-D B is one GEMM over the folded rows; anything else loops over the batch.
//
// A bias added to every row of a float32 product (MatMulBias's, and Gemm's C of shape [N] or [1, N] with
// beta 1: a linear layer) is cuBLASLt's bias epilogue, in the same call; where cuBLASLt offers no algorithm
// (or the product is batched in a way one call cannot fold), the bias rows are written into the output
// first and the product added to them (beta 1), as Gemm does with any C.
//
// com.microsoft FusedGemm with activation "Relu" (the executor's Gemm + Relu fusion) is Gemm with
// cuBLASLt's ReLU-bias epilogue where the bias is a row, else Gemm followed by the Relu kernel in place.
//
// Results are deterministic: one stream, the default math mode (no TF32), no split-K atomics requested.
#include <algorithm>
#include <cstdint>
#include <optional>

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
  // Leading dimensions of at least 1, as cuBLAS requires even of an empty operand.
  int ldb = static_cast<int>(std::max<int64_t>(1, g.tb ? g.k : g.n));
  int lda = static_cast<int>(std::max<int64_t>(1, g.ta ? g.m : g.k)), ldc = m;
  if (g.k == 0 && beta == T(1)) return Status::OK();  // an empty sum added to C
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

// The alignment in bytes of a device address, capped at the 256 cuBLASLt's heuristic assumes by default.
uint32_t Alignment(const void* p) {
  uintptr_t v = reinterpret_cast<uintptr_t>(p);
  uintptr_t low = v & (~v + 1);
  return v == 0 || low >= 256 ? 256u : static_cast<uint32_t>(low);
}

// Row-major Y (m x n) = alpha op(A) op(B) + bias, float32, the bias (n floats) added to every row by
// cuBLASLt's bias epilogue (relu: its ReLU-bias epilogue, max(. , 0) after the bias). The descriptors (no heap: cuBLASLt's opaque structs, initialized in place) and
// the heuristic's algorithm are kept for the last shape and operand alignments, planned again when either
// changes; only the bias address is set at every call.
class LtBiasGemm {
 public:
  // *ran is false, with nothing queued, where cuBLASLt offers no algorithm for the call.
  Status Run(const CudaResources& r, const GemmShape& g, float alpha, const float* a, const float* b,
             const float* bias, float* y, bool relu, bool* ran) {
    *ran = false;
    if (g.m == 0 || g.n == 0 || g.k == 0 || r.cublaslt == nullptr) return Status::OK();
    Key key{g.ta, g.tb, relu, g.m, g.n, g.k, {Alignment(a), Alignment(b), Alignment(y), Alignment(bias)}};
    if (!key_.has_value() || !(*key_ == key)) {
      key_.reset();
      ONT_RETURN_IF_ERROR(Plan(r, key, bias));
      key_ = key;
    }
    if (!has_algo_) return Status::OK();
    ONT_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(&desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    const float beta = 0.0f;
    ONT_CUBLAS_RETURN_IF_ERROR(cublasLtMatmul(r.cublaslt, &desc_, &alpha, b, &first_, a, &second_, &beta, y, &out_, y,
                                              &out_, &algo_, r.blas_workspace, r.blas_workspace_bytes, r.stream));
    *ran = true;
    return Status::OK();
  }

 private:
  struct Key {
    bool ta, tb, relu;
    int64_t m, n, k;
    uint32_t align[4];  // A, B, Y, bias
    bool operator==(const Key& o) const {
      return ta == o.ta && tb == o.tb && relu == o.relu && m == o.m && n == o.n && k == o.k && align[0] == o.align[0] &&
             align[1] == o.align[1] && align[2] == o.align[2] && align[3] == o.align[3];
    }
  };

  // The column-major view of GemmCall: Y^T (n x m) = op(B)^T op(A)^T; cuBLASLt's A is our B.
  Status Plan(const CudaResources& r, const Key& key, const float* bias) {
    has_algo_ = false;
    if (key.m > INT32_MAX || key.n > INT32_MAX || key.k > INT32_MAX) return Status::OK();
    ONT_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescInit(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ob = key.tb ? CUBLAS_OP_T : CUBLAS_OP_N, oa = key.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtEpilogue_t epilogue = key.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
    ONT_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(&desc_, CUBLASLT_MATMUL_DESC_TRANSA, &ob, sizeof ob));
    ONT_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(&desc_, CUBLASLT_MATMUL_DESC_TRANSB, &oa, sizeof oa));
    ONT_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(&desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue));
    ONT_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(&desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    const uint64_t m = key.m, n = key.n, k = key.k;
    ONT_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutInit(&first_, CUDA_R_32F, key.tb ? k : n, key.tb ? n : k,
                                                        static_cast<int64_t>(key.tb ? k : n)));
    ONT_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutInit(&second_, CUDA_R_32F, key.ta ? m : k, key.ta ? k : m,
                                                        static_cast<int64_t>(key.ta ? m : k)));
    ONT_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutInit(&out_, CUDA_R_32F, n, m, static_cast<int64_t>(n)));
    cublasLtMatmulPreferenceOpaque_t pref;
    ONT_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceInit(&pref));
    const uint64_t workspace = r.blas_workspace_bytes;
    ONT_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(&pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                    &workspace, sizeof workspace));
    // cuBLASLt's A is our B, its C and D are Y.
    const cublasLtMatmulPreferenceAttributes_t attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    const uint32_t align[4] = {key.align[1], key.align[0], key.align[2], key.align[2]};
    for (int i = 0; i < 4; ++i) {
      ONT_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceSetAttribute(&pref, attr[i], &align[i], sizeof align[i]));
    }
    cublasLtMatmulHeuristicResult_t result = {};
    int found = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(r.cublaslt, &desc_, &first_, &second_, &out_, &out_, &pref, 1,
                                                      &result, &found);
    if (s == CUBLAS_STATUS_NOT_SUPPORTED || (s == CUBLAS_STATUS_SUCCESS && found == 0)) return Status::OK();
    ONT_RETURN_IF_ERROR(CublasStatus(s, "cublasLtMatmulAlgoGetHeuristic"));
    if (result.state != CUBLAS_STATUS_SUCCESS) return Status::OK();
    algo_ = result.algo;
    has_algo_ = true;
    return Status::OK();
  }

  std::optional<Key> key_;
  bool has_algo_ = false;
  cublasLtMatmulDescOpaque_t desc_ = {};
  cublasLtMatrixLayoutOpaque_t first_ = {}, second_ = {}, out_ = {};
  cublasLtMatmulAlgo_t algo_ = {};
};

// Writes bias (n values) into every row of y (rows x n), for a product then added with beta 1.
template <typename T>
Status FillRows(const CudaResources& r, const Tensor& bias, Tensor* y) {
  ONT_ASSIGN_OR_RETURN(StridedSpace s, BroadcastSpace(y->shape(), {y->shape(), bias.shape()}));
  return CudaStatus(StridedCopy(bias.raw_data(), y->raw_data(), s, sizeof(T), r.stream), "StridedCopy");
}

// alpha op(A) op(B) with MatMul's batch broadcasting and 1-D promotion (FusedMatMul: rank >= 2 operands;
// MatMulBias: FusedMatMul plus a bias [N] added to every row).
class MatMulKernel : public DelegatingKernel {
 public:
  MatMulKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu)
      : DelegatingKernel(info, std::move(cpu)),
        ta_(info.node->GetInt("transA", 0) != 0),
        tb_(info.node->GetInt("transB", 0) != 0),
        alpha_(info.node->GetFloat("alpha", 1.0f)),
        bias_(info.node->op_type == "MatMulBias") {}

  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &a = *ctx.input(0), &b = *ctx.input(1);
    const Tensor* bias = bias_ ? ctx.input(2) : nullptr;
    if (a.dtype() == DType::kFloat64) return Run<double>(r, a, b, bias, ctx.output(0));
    return Run<float>(r, a, b, bias, ctx.output(0));
  }

 private:
  template <typename T>
  Status Run(const CudaResources& r, const Tensor& a, const Tensor& b, const Tensor* bias, Tensor* y) {
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
    const bool fold = b_batch == 1 && !ta_;
    if (fold) g.m *= batches;
    // 3. The bias: in cuBLASLt's epilogue where one call computes the whole product, else written first.
    T beta = T(0);
    if (bias != nullptr) {
      if constexpr (std::is_same_v<T, float>) {
        if (fold || batches == 1) {
          bool ran = false;
          ONT_RETURN_IF_ERROR(lt_.Run(r, g, alpha, pa, pb, bias->data<float>(), py, false, &ran));
          if (ran) return Status::OK();
        }
      }
      ONT_RETURN_IF_ERROR(FillRows<T>(r, *bias, y));
      beta = T(1);
    }
    if (fold) return GemmCall<T>(r, g, alpha, pa, pb, beta, py, 1, 0, 0, 0);
    // 4. Uniform strides: one strided-batched call.
    bool a_uniform = a_batch == batches || a_batch == 1, b_uniform = b_batch == batches || b_batch == 1;
    if (a_uniform && b_uniform) {
      return GemmCall<T>(r, g, alpha, pa, pb, beta, py, batches, a_batch == 1 ? 0 : g.m * g.k,
                         b_batch == 1 ? 0 : g.k * g.n, g.m * g.n);
    }
    // 5. General broadcasting: one call per batch.
    std::vector<int64_t> sa = cpu::BroadcastStrides(ab, batch), sb = cpu::BroadcastStrides(bb, batch);
    for (int64_t bi = 0; bi < batches; ++bi) {
      int64_t rem = bi, oa = 0, ob = 0;
      for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
        int64_t i = rem % batch[d];
        rem /= batch[d];
        oa += i * sa[d];
        ob += i * sb[d];
      }
      ONT_RETURN_IF_ERROR(GemmCall<T>(r, g, alpha, pa + oa * g.m * g.k, pb + ob * g.k * g.n, beta,
                                      py + bi * g.m * g.n, 1, 0, 0, 0));
    }
    return Status::OK();
  }

  bool ta_, tb_;
  float alpha_;
  bool bias_;
  LtBiasGemm lt_;
};

// Gemm: Y = alpha op(A) op(B) + beta C, C broadcast to [M, N] (copied into Y first); FusedGemm: relu(Y)
// (its activation checked by the CPU kernel's Prepare).
class GemmKernel : public DelegatingKernel {
 public:
  GemmKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu)
      : DelegatingKernel(info, std::move(cpu)),
        ta_(info.node->GetInt("transA", 0) != 0),
        tb_(info.node->GetInt("transB", 0) != 0),
        alpha_(info.node->GetFloat("alpha", 1.0f)),
        beta_(info.node->GetFloat("beta", 1.0f)),
        relu_(info.node->op_type == "FusedGemm") {}

  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const bool f64 = ctx.input(0)->dtype() == DType::kFloat64;
    bool activated = false;  // the ReLU already applied, in cuBLASLt's epilogue
    ONT_RETURN_IF_ERROR(f64 ? Run<double>(r, ctx, &activated) : Run<float>(r, ctx, &activated));
    if (!relu_ || activated) return Status::OK();
    Tensor* y = ctx.output(0);
    if (y->NumElements() == 0) return Status::OK();
    return CudaStatus(f64 ? Unary(UnaryOp::kRelu, y->data<double>(), y->data<double>(), y->NumElements(), 0.0f, r.stream)
                          : Unary(UnaryOp::kRelu, y->data<float>(), y->data<float>(), y->NumElements(), 0.0f, r.stream),
                      "Unary(Relu)");
  }

 private:
  template <typename T>
  Status Run(const CudaResources& r, KernelContext& ctx, bool* activated) {
    const Tensor &a = *ctx.input(0), &b = *ctx.input(1);
    const Tensor* c = ctx.input(2);
    Tensor* y = ctx.output(0);
    GemmShape g{ta_, tb_};
    g.m = ta_ ? a.dim(1) : a.dim(0);
    g.k = ta_ ? a.dim(0) : a.dim(1);
    g.n = tb_ ? b.dim(0) : b.dim(1);
    T beta = T(0);
    if (c != nullptr && beta_ != 0.0f) {
      if constexpr (std::is_same_v<T, float>) {
        // A bias row ([N] or [1, N]) at beta 1, as a linear layer has it: cuBLASLt's epilogue.
        const bool row = c->NumElements() == g.n && (c->rank() == 1 || (c->rank() == 2 && c->dim(0) == 1));
        if (row && beta_ == 1.0f) {
          bool ran = false;
          ONT_RETURN_IF_ERROR(lt_.Run(r, g, alpha_, a.data<float>(), b.data<float>(), c->data<float>(),
                                      y->data<float>(), relu_, &ran));
          *activated = ran && relu_;
          if (ran) return Status::OK();
        }
      }
      ONT_RETURN_IF_ERROR(FillRows<T>(r, *c, y));
      beta = static_cast<T>(beta_);
    }
    return GemmCall<T>(r, g, static_cast<T>(alpha_), a.data<T>(), b.data<T>(), beta, y->data<T>(), 1, 0, 0, 0);
  }

  bool ta_, tb_;
  float alpha_, beta_;
  bool relu_;
  LtBiasGemm lt_;
};

}  // namespace

KernelFactory kMatMul = Wrap<MatMulKernel, &cpu::kMatMul>;
KernelFactory kFusedMatMul = Wrap<MatMulKernel, &cpu::kFusedMatMul>;
KernelFactory kMatMulBias = Wrap<MatMulKernel, &cpu::kMatMulBias>;
KernelFactory kGemm = Wrap<GemmKernel, &cpu::kGemm>;
KernelFactory kFusedGemm = Wrap<GemmKernel, &cpu::kFusedGemm>;

}  // namespace cuda
}  // namespace ontrain
