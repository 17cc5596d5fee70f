// Kernel classes of the recurrent layers on CUDA: RNN, GRU, LSTM (ONNX, layout 0), com.microsoft
// GRUTraining and LSTMTraining (with the extra outputs in the CPU kernels' layout, so that either provider's
// gradient kernel reads either one's forward outputs), and the gradients RNNGrad, GRUGrad and LSTMGrad.
// Prepare is the CPU kernel's (checks and output shapes) plus this kernel's own scratch: sequence_lens as
// int64 (a host input, uploaded per run when given) and the pass's workspace. The passes themselves are in
// recurrent_math.h; layout 1 and LSTM peepholes stay on the CPU (RecurrentRejects).
#include <cstring>

#include "providers/cpu/kernels/kernels.h"
#include "providers/cpu/kernels/recurrent.h"
#include "providers/cuda/kernels/cuda_kernels.h"

namespace ontrain {
namespace cuda {
namespace {

using cpu::recurrent::RecurrentAttrs;

bool IsGradient(RecurrentPass p) {
  return p == RecurrentPass::kRnnGrad || p == RecurrentPass::kGruGrad || p == RecurrentPass::kLstmGrad;
}
int GatesOf(RecurrentPass p) {
  if (p == RecurrentPass::kRnn || p == RecurrentPass::kRnnGrad) return 1;
  if (p == RecurrentPass::kGru || p == RecurrentPass::kGruGrad) return 3;
  return 4;
}

class RecurrentKernel : public DelegatingKernel {
 public:
  RecurrentKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu, RecurrentPass pass)
      : DelegatingKernel(info, std::move(cpu)), pass_(pass) {}

  // Sequence lengths (a host input) are uploaded from pageable memory at every run.
  bool capturable() const override {
    const size_t sl = pass_ == RecurrentPass::kLstmGrad ? 3 : 4;
    return node_.inputs.size() <= sl || node_.inputs[sl].empty();
  }

  Status Prepare(KernelContext& ctx) override {
    ONT_RETURN_IF_ERROR(DelegatingKernel::Prepare(ctx));
    if (!parsed_) {
      const int g = GatesOf(pass_);
      if (g == 1) {
        ONT_ASSIGN_OR_RETURN(attrs_, RecurrentAttrs::FromNode(node_, 1, {"Tanh"}));
      } else if (g == 3) {
        ONT_ASSIGN_OR_RETURN(attrs_, RecurrentAttrs::FromNode(node_, 2, {"Sigmoid", "Tanh"}));
      } else {
        ONT_ASSIGN_OR_RETURN(attrs_, RecurrentAttrs::FromNode(node_));
      }
      if (attrs_.layout != 0) return Unimplemented(node_.op_type, " with layout 1 on CUDA");
      parsed_ = true;
    }
    const Tensor& x = *ctx.input(0);
    const int64_t S = x.dim(0), B = x.dim(1), H = attrs_.hidden, D = attrs_.directions;
    const size_t lens_bytes = static_cast<size_t>(B) * sizeof(int64_t);
    ctx.RequestScratch(lens_bytes + static_cast<size_t>(RecurrentWorkElements(pass_, S, B, H, D)) * DTypeSize(x.dtype()));
    return Status::OK();
  }

  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    if (ctx.input(0)->dtype() == DType::kFloat64) return Run<double>(r, ctx);
    return Run<float>(r, ctx);
  }

 private:
  static const Tensor* Given(const KernelContext& ctx, int i) {
    const Tensor* t = ctx.input(i);
    return t && t->NumElements() > 0 ? t : nullptr;
  }
  template <typename T>
  static const T* In(const KernelContext& ctx, int i) {
    const Tensor* t = Given(ctx, i);
    return t ? t->template data<T>() : nullptr;
  }
  template <typename T>
  static T* Out(KernelContext& ctx, int i) {
    Tensor* t = i < ctx.num_outputs() ? ctx.output(i) : nullptr;
    return t && t->NumElements() > 0 ? t->template data<T>() : nullptr;
  }

  template <typename T>
  Status Run(const CudaResources& r, KernelContext& ctx) {
    const Tensor& x = *ctx.input(0);
    RecurrentCall<T> c;
    c.S = x.dim(0), c.B = x.dim(1), c.I = x.dim(2), c.H = attrs_.hidden, c.D = attrs_.directions;
    c.reverse_only = attrs_.reverse_only;
    c.input_forget = attrs_.input_forget;
    c.linear_before_reset = attrs_.linear_before_reset;
    c.clip = attrs_.clip;
    for (int d = 0; d < 2; ++d) {
      for (int q = 0; q < 3; ++q) {
        c.act[d][q].kind = static_cast<int>(attrs_.act[d][q].kind);
        c.act[d][q].alpha = attrs_.act[d][q].alpha;
        c.act[d][q].beta = attrs_.act[d][q].beta;
      }
    }
    const bool lstm_grad = pass_ == RecurrentPass::kLstmGrad;
    const int sl_input = lstm_grad ? 3 : 4;
    int64_t* lens = static_cast<int64_t*>(ctx.scratch());
    c.work = reinterpret_cast<T*>(lens + c.B);
    if (const Tensor* sl = Given(ctx, sl_input)) {  // host memory: validated by the CPU kernel's Prepare
      lens_host_.resize(static_cast<size_t>(c.B));
      for (int64_t b = 0; b < c.B; ++b) {
        lens_host_[b] = sl->dtype() == DType::kInt64 ? sl->data<int64_t>()[b] : sl->data<int32_t>()[b];
      }
      ONT_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(lens, lens_host_.data(), lens_host_.size() * sizeof(int64_t),
                                                     cudaMemcpyHostToDevice, r.stream),
                                     "cudaMemcpyAsync"));
      c.lens = lens;
    }
    c.x = x.data<T>();
    c.w = ctx.input(1)->data<T>();
    c.r = ctx.input(2)->data<T>();
    if (!lstm_grad) c.b = In<T>(ctx, 3);
    if (!IsGradient(pass_)) {
      c.h0 = In<T>(ctx, 5);
      if (pass_ == RecurrentPass::kLstm) c.c0 = In<T>(ctx, 6);
      c.y = Out<T>(ctx, 0);
      c.yh = Out<T>(ctx, 1);
      if (pass_ == RecurrentPass::kGru) c.gates = Out<T>(ctx, 2);  // GRUTraining's zrh
      if (pass_ == RecurrentPass::kLstm) {
        c.yc = Out<T>(ctx, 2);
        c.call = Out<T>(ctx, 3);   // LSTMTraining's CAll
        c.gates = Out<T>(ctx, 4);  // and iofc
      }
    } else if (pass_ == RecurrentPass::kRnnGrad) {  // X W R B SL H0 Y dY dYh
      c.h0 = In<T>(ctx, 5);
      c.hall = In<T>(ctx, 6);
      c.dy = In<T>(ctx, 7);
      c.dyh = In<T>(ctx, 8);
    } else if (pass_ == RecurrentPass::kGruGrad) {  // X W R B SL H0 HAll zrh dHAll dHFinal
      c.h0 = In<T>(ctx, 5);
      c.hall = In<T>(ctx, 6);
      c.gates_in = In<T>(ctx, 7);
      c.dy = In<T>(ctx, 8);
      c.dyh = In<T>(ctx, 9);
    } else {  // LSTMGrad: X W R SL H0 C0 HAll CAll iofc dHAll dHFinal dCFinal [P]
      c.h0 = In<T>(ctx, 4);
      c.c0 = In<T>(ctx, 5);
      c.hall = In<T>(ctx, 6);
      c.call_in = In<T>(ctx, 7);
      c.gates_in = In<T>(ctx, 8);
      c.dy = In<T>(ctx, 9);
      c.dyh = In<T>(ctx, 10);
      c.dyc = In<T>(ctx, 11);
      if (Given(ctx, 12)) return Unimplemented("LSTMGrad with peepholes on CUDA");
      if (Tensor* dp = ctx.num_outputs() > 6 ? ctx.output(6) : nullptr) {  // no peepholes: dP is 0
        ONT_RETURN_IF_ERROR(CudaStatus(cudaMemsetAsync(dp->raw_data(), 0, dp->SizeInBytes(), r.stream), "cudaMemsetAsync"));
      }
    }
    if (IsGradient(pass_)) {
      c.dx = Out<T>(ctx, 0);
      c.dw = Out<T>(ctx, 1);
      c.dr = Out<T>(ctx, 2);
      c.db = Out<T>(ctx, 3);
      c.dh0 = Out<T>(ctx, 4);
      if (lstm_grad) c.dc0 = Out<T>(ctx, 5);
      if ((pass_ == RecurrentPass::kGruGrad || lstm_grad) && c.gates_in == nullptr) {
        return InvalidArgument(node_.op_type, " needs the forward pass's gate pre-activations");
      }
    }
    if (pass_ == RecurrentPass::kLstm && Given(ctx, 7)) return Unimplemented("LSTM with peepholes on CUDA");
    if (c.S == 0 || c.B == 0) return Status::OK();  // nothing ran; outputs are empty (gradients of empty X)
    if (const char* failed = Recurrent(pass_, c, r.cublas, r.stream)) {
      return Internal(node_.Describe(), ": ", failed, " failed");
    }
    return Status::OK();
  }

  RecurrentPass pass_;
  bool parsed_ = false;
  RecurrentAttrs attrs_;
  std::vector<int64_t> lens_host_;
};

template <RecurrentPass P, const KernelFactory* F>
StatusOr<std::unique_ptr<OpKernel>> MakeRecurrent(const NodeInfo& info) {
  ONT_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> cpu, (*F)(info));
  return std::unique_ptr<OpKernel>(new RecurrentKernel(info, std::move(cpu), P));
}

}  // namespace

const char* RecurrentRejects(const Node& n) {
  if (n.GetInt("layout", 0) != 0) return "layout 1 (batch first)";
  const bool lstm = n.op_type == "LSTM" || n.op_type == "LSTMTraining";
  if (lstm && n.inputs.size() > 7 && !n.inputs[7].empty()) return "peephole weights";
  if (n.op_type == "LSTMGrad" && n.inputs.size() > 12 && !n.inputs[12].empty()) return "peephole weights";
  return nullptr;
}

KernelFactory kRnn = MakeRecurrent<RecurrentPass::kRnn, &cpu::kRnn>;
KernelFactory kRnnGrad = MakeRecurrent<RecurrentPass::kRnnGrad, &cpu::kRnnGrad>;
KernelFactory kGru = MakeRecurrent<RecurrentPass::kGru, &cpu::kGru>;
KernelFactory kGruTraining = MakeRecurrent<RecurrentPass::kGru, &cpu::kGruTraining>;
KernelFactory kGruGrad = MakeRecurrent<RecurrentPass::kGruGrad, &cpu::kGruGrad>;
KernelFactory kLstm = MakeRecurrent<RecurrentPass::kLstm, &cpu::kLstm>;
KernelFactory kLstmTraining = MakeRecurrent<RecurrentPass::kLstm, &cpu::kLstmTraining>;
KernelFactory kLstmGrad = MakeRecurrent<RecurrentPass::kLstmGrad, &cpu::kLstmGrad>;

}  // namespace cuda
}  // namespace ontrain
