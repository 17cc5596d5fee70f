// MatMul (numpy semantics: batch broadcasting, 1-D promotion) and Gemm; com.microsoft FusedGemm with
// activation "Relu" (the engine's Gemm + Relu fusion, engine/kernel_fusion.h; ONNX Runtime writes the same
// node) is Gemm then Relu's own expression on each output element in Gemm's epilogue, so it gives the two
// nodes' bits.
#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/gemm.h"
#include "providers/cpu/kernels/kernels.h"

namespace ontrain {
namespace cpu {
namespace {

template <typename F>
Status DispatchGemmType(DType t, F&& f) {
  switch (t) {
    case DType::kFloat32: return f(Tag<float>{});
    case DType::kFloat64: return f(Tag<double>{});
    case DType::kInt32: return f(Tag<int32_t>{});
    case DType::kInt64: return f(Tag<int64_t>{});
    case DType::kUInt32: return f(Tag<uint32_t>{});
    case DType::kUInt64: return f(Tag<uint64_t>{});
    default: return Unimplemented("dtype ", DTypeName(t));
  }
}

class MatMulKernel : public OpKernel {
 public:
  explicit MatMulKernel(const NodeInfo&) {}

  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* a, RequireInput(ctx, 0, "A"));
    ONT_ASSIGN_OR_RETURN(const Tensor* b, RequireInput(ctx, 1, "B"));
    if (a->dtype() != b->dtype()) return InvalidArgument("A is ", DTypeName(a->dtype()), ", B is ", DTypeName(b->dtype()));
    if (a->rank() == 0 || b->rank() == 0) return InvalidArgument("MatMul inputs must have rank >= 1");
    // 1. Promote 1-D operands: A [K] -> [1,K], B [K] -> [K,1]; the added dims are dropped from the output.
    Shape as = a->shape(), bs = b->shape();
    if (as.size() == 1) as.insert(as.begin(), 1);
    if (bs.size() == 1) bs.push_back(1);
    m_ = as[as.size() - 2];
    k_ = as.back();
    n_ = bs.back();
    if (bs[bs.size() - 2] != k_) {
      return InvalidArgument("inner dimensions differ: ", ShapeToString(a->shape()), " x ", ShapeToString(b->shape()));
    }
    // 2. Broadcast the batch dimensions.
    Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
    ONT_ASSIGN_OR_RETURN(batch_, BroadcastShapes({a_batch, b_batch}));
    a_strides_ = BroadcastStrides(a_batch, batch_);
    b_strides_ = BroadcastStrides(b_batch, batch_);
    Shape out = batch_;
    if (a->rank() > 1) out.push_back(m_);
    if (b->rank() > 1) out.push_back(n_);
    return ctx.DeclareOutput(0, a->dtype(), out);
  }

  Status Compute(KernelContext& ctx) override {
    const Tensor &a = *ctx.input(0), &b = *ctx.input(1);
    Tensor* y = ctx.output(0);
    return DispatchGemmType(a.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      int64_t batches = ShapeNumElements(batch_);
      // One B for every batch: A's batches are consecutive row blocks, so the product is one GEMM of
      // batches * M rows (one large product instead of many small ones).
      bool b_shared = true;
      for (int64_t s : b_strides_) b_shared = b_shared && s == 0;
      if (b_shared && batches > 1) {
        Gemm<T>(false, false, batches * m_, n_, k_, T(1), a.data<T>(), b.data<T>(), T(0), y->data<T>(),
                ctx.thread_pool());
        return Status::OK();
      }
      // Batches in parallel, each product on one thread (the same call, so the same bits, whatever the pool).
      ParallelFor(ctx.thread_pool(), batches, 2.0 * static_cast<double>(m_ * n_ * k_), [&](int64_t b0, int64_t b1) {
        for (int64_t bi = b0; bi < b1; ++bi) {
          int64_t oa = 0, ob = 0;
          BatchOffsets(batch_, a_strides_, b_strides_, bi, &oa, &ob);
          Gemm<T>(false, false, m_, n_, k_, T(1), a.data<T>() + oa * m_ * k_, b.data<T>() + ob * k_ * n_, T(0),
                  y->data<T>() + bi * m_ * n_, nullptr);
        }
      });
      return Status::OK();
    });
  }

 private:
  int64_t m_ = 0, n_ = 0, k_ = 0;
  Shape batch_;
  Shape a_strides_, b_strides_;
};

class GemmKernel : public OpKernel {
 public:
  explicit GemmKernel(const NodeInfo& info)
      : trans_a_(info.node->GetInt("transA", 0) != 0),
        trans_b_(info.node->GetInt("transB", 0) != 0),
        alpha_(info.node->GetFloat("alpha", 1.0f)),
        beta_(info.node->GetFloat("beta", 1.0f)),
        relu_(info.node->op_type == "FusedGemm"),
        activation_(info.node->GetString("activation", "")) {}

  Status Prepare(KernelContext& ctx) override {
    if (relu_ && activation_ != "Relu") {
      return InvalidArgument("FusedGemm activation \"", activation_, "\" is not supported (only Relu)");
    }
    ONT_ASSIGN_OR_RETURN(const Tensor* a, RequireInput(ctx, 0, "A"));
    ONT_ASSIGN_OR_RETURN(const Tensor* b, RequireInput(ctx, 1, "B"));
    if (a->rank() != 2 || b->rank() != 2) {
      return InvalidArgument("A and B must be 2-D, got ", ShapeToString(a->shape()), " and ", ShapeToString(b->shape()));
    }
    if (a->dtype() != b->dtype()) return InvalidArgument("A is ", DTypeName(a->dtype()), ", B is ", DTypeName(b->dtype()));
    ONT_RETURN_IF_ERROR(RequireSameDTypes(ctx, {0, 2}));
    m_ = trans_a_ ? a->dim(1) : a->dim(0);
    k_ = trans_a_ ? a->dim(0) : a->dim(1);
    int64_t kb = trans_b_ ? b->dim(1) : b->dim(0);
    n_ = trans_b_ ? b->dim(0) : b->dim(1);
    if (k_ != kb) {
      return InvalidArgument("inner dimensions differ: A", ShapeToString(a->shape()), trans_a_ ? "^T" : "", " x B",
                             ShapeToString(b->shape()), trans_b_ ? "^T" : "");
    }
    if (const Tensor* c = ctx.input(2)) {
      auto out = BroadcastShapes({c->shape(), {m_, n_}});
      if (!out.ok() || out.value() != Shape{m_, n_}) {
        return InvalidArgument("C ", ShapeToString(c->shape()), " does not broadcast to [", m_, ",", n_, "]");
      }
    }
    if (a->dtype() == DType::kFloat32) ctx.RequestScratch(GemmScratchBytes<float>(trans_a_, trans_b_, m_, n_, k_));
    return ctx.DeclareOutput(0, a->dtype(), {m_, n_});
  }

  Status Compute(KernelContext& ctx) override {
    const Tensor &a = *ctx.input(0), &b = *ctx.input(1);
    const Tensor* c = ctx.input(2);
    Tensor* y = ctx.output(0);
    return DispatchGemmType(a.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      T* py = y->data<T>();
      T beta = T(0);
      const T* bias = nullptr;
      if (c != nullptr && beta_ != 0.0f) {
        Shape st = BroadcastStrides(c->shape(), {m_, n_});
        const T* pc = c->data<T>();
        if (beta_ == 1.0f && st[0] == 0 && (st[1] == 1 || n_ == 1)) {
          // A row (a layer's bias): added to the product's rows inside Gemm, alpha*AB + C rounded as below.
          bias = pc;
        } else {
          // Y = broadcast(C), then Y = alpha*AB + beta*Y.
          for (int64_t i = 0; i < m_; ++i)
            for (int64_t j = 0; j < n_; ++j) py[i * n_ + j] = pc[i * st[0] + j * st[1]];
          beta = static_cast<T>(beta_);
        }
      }
      // FusedGemm: Relu's expression (unary.cc) in Gemm's epilogue, while each block of rows is in cache.
      Gemm<T>(trans_a_, trans_b_, m_, n_, k_, static_cast<T>(alpha_), a.data<T>(), b.data<T>(), beta, py,
              ctx.thread_pool(), ctx.scratch(), bias, relu_);
      return Status::OK();
    });
  }

 private:
  bool trans_a_, trans_b_;
  float alpha_, beta_;
  bool relu_;
  std::string activation_;
  int64_t m_ = 0, n_ = 0, k_ = 0;
};

}  // namespace

KernelFactory kMatMul = MakeKernel<MatMulKernel>;
KernelFactory kGemm = MakeKernel<GemmKernel>;
KernelFactory kFusedGemm = MakeKernel<GemmKernel>;

}  // namespace cpu
}  // namespace ontrain
