// Convolution on cuDNN, and pooling on our own kernels (pool.cu), all float32; shapes and window geometry are the CPU kernels' (their Prepare, providers/cpu/kernels/
// conv_geometry.h).
//
// Conv and ConvGrad keep cuDNN descriptors and algorithms per input shape. In deterministic mode (the
// default) the algorithm is cuDNN's heuristic choice among those it reports deterministic, the same on
// every run; otherwise cuDNN times every algorithm on the first run at a shape (cudnnFind*AlgorithmEx, as
// PyTorch's cudnn.benchmark and ONNX Runtime's exhaustive search do) and the fastest is kept, falling back
// to the heuristic's where the search fails. FMA math (no TF32) keeps float32 results comparable with the
// CPU's either way. The bias gradient is our own ordered reduction. cuDNN needs symmetric padding; ONNX's
// asymmetric padding (some SAME cases) is reported as unimplemented on CUDA.
#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/conv_geometry.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cuda/kernels/cuda_kernels.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // cuDNN 9 marks the convolution API deprecated

namespace ontrain {
namespace cuda {
namespace {

// cuDNN's view of one convolution: dims padded to at least two spatial dims (1-D becomes H = 1).
struct ConvGeometry {
  std::vector<int> x, w, y, pads, strides, dilations;
  int group = 1;
};

StatusOr<ConvGeometry> MakeGeometry(const Node& node, const Shape& x, const Shape& w, int64_t group) {
  cpu::WindowAttrs geo = cpu::WindowAttrs::FromNode(node, Shape(w.begin() + 2, w.end()));
  std::vector<int64_t> in(x.begin() + 2, x.end());
  ONT_ASSIGN_OR_RETURN(std::vector<int64_t> out, geo.OutputDims(in));
  size_t nd = in.size();
  if (nd > 3) return Unimplemented("convolution over ", nd, " spatial dims on CUDA");
  for (size_t d = 0; d < nd; ++d) {
    if (geo.pads[d] != geo.pads[d + nd]) {
      return Unimplemented("asymmetric padding (", ShapeToString(geo.pads), ") on CUDA: cuDNN pads both sides alike");
    }
  }
  ConvGeometry g;
  g.group = static_cast<int>(group);
  bool one_d = nd == 1;
  g.x = {static_cast<int>(x[0]), static_cast<int>(x[1])};
  g.w = {static_cast<int>(w[0]), static_cast<int>(w[1])};
  g.y = {static_cast<int>(x[0]), static_cast<int>(w[0])};
  if (one_d) {
    g.x.push_back(1), g.w.push_back(1), g.y.push_back(1);
    g.pads.push_back(0), g.strides.push_back(1), g.dilations.push_back(1);
  }
  for (size_t d = 0; d < nd; ++d) {
    g.x.push_back(static_cast<int>(in[d]));
    g.w.push_back(static_cast<int>(w[2 + d]));
    g.y.push_back(static_cast<int>(out[d]));
    g.pads.push_back(static_cast<int>(geo.pads[d]));
    g.strides.push_back(static_cast<int>(geo.strides[d]));
    g.dilations.push_back(static_cast<int>(geo.dilations[d]));
  }
  return g;
}

Status SetTensor(cudnnTensorDescriptor_t d, const std::vector<int>& dims) {
  std::vector<int> strides(dims.size());
  int s = 1;
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= dims[i];
  }
  return CudnnStatus(cudnnSetTensorNdDescriptor(d, CUDNN_DATA_FLOAT, static_cast<int>(dims.size()), dims.data(),
                                                strides.data()),
                     "cudnnSetTensorNdDescriptor");
}

// One run's device buffers, for timing algorithms on (nondeterministic mode): the inputs are read, the
// outputs overwritten (the run then computes them). Null where the run has none (a gradient not wanted):
// that pass keeps the heuristic's algorithm.
struct ConvBuffers {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* dy = nullptr;
  void* y = nullptr;
  void* dx = nullptr;
  void* dw = nullptr;
};

// The most device memory a timed search offers the algorithms as workspace; those needing more are not
// timed.
constexpr size_t kMaxSearchWorkspace = size_t{256} << 20;

// Descriptors and algorithms for one (x, w) shape pair.
class ConvPlan {
 public:
  ~ConvPlan() {
    if (x_) cudnnDestroyTensorDescriptor(x_);
    if (y_) cudnnDestroyTensorDescriptor(y_);
    if (w_) cudnnDestroyFilterDescriptor(w_);
    if (conv_) cudnnDestroyConvolutionDescriptor(conv_);
  }

  // Rebuilds for new shapes; a no-op when they are the ones planned.
  Status Plan(const CudaResources& r, const Node& node, const Shape& x, const Shape& w, int64_t group, bool backward,
              const ConvBuffers& run) {
    if (x == x_shape_ && w == w_shape_ && planned_) return Status::OK();
    ONT_ASSIGN_OR_RETURN(ConvGeometry g, MakeGeometry(node, x, w, group));
    if (!x_) {
      ONT_CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(&x_));
      ONT_CUDNN_RETURN_IF_ERROR(cudnnCreateTensorDescriptor(&y_));
      ONT_CUDNN_RETURN_IF_ERROR(cudnnCreateFilterDescriptor(&w_));
      ONT_CUDNN_RETURN_IF_ERROR(cudnnCreateConvolutionDescriptor(&conv_));
    }
    ONT_RETURN_IF_ERROR(SetTensor(x_, g.x));
    ONT_RETURN_IF_ERROR(SetTensor(y_, g.y));
    ONT_CUDNN_RETURN_IF_ERROR(cudnnSetFilterNdDescriptor(w_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                                         static_cast<int>(g.w.size()), g.w.data()));
    ONT_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionNdDescriptor(conv_, static_cast<int>(g.pads.size()), g.pads.data(),
                                                              g.strides.data(), g.dilations.data(),
                                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    ONT_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionGroupCount(conv_, g.group));
    ONT_CUDNN_RETURN_IF_ERROR(cudnnSetConvolutionMathType(conv_, CUDNN_FMA_MATH));
    ONT_RETURN_IF_ERROR(backward ? ChooseBackward(r, run) : ChooseForward(r, run));
    y_shape_.assign(g.y.begin(), g.y.end());
    if (x.size() == 3) y_shape_.erase(y_shape_.begin() + 2);  // the added H = 1
    x_shape_ = x;
    w_shape_ = w;
    planned_ = true;
    return Status::OK();
  }

  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnConvolutionFwdAlgo_t fwd_{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_{};
  size_t workspace_ = 0;
  Shape y_shape_;  // the convolution's output shape

 private:
  template <typename Perf>
  static const Perf* Pick(const Perf* perf, int n, bool deterministic) {
    for (int i = 0; i < n; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].mathType == CUDNN_TENSOR_OP_MATH) continue;
      if (deterministic && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
      return &perf[i];
    }
    return nullptr;
  }

  // The largest workspace the heuristic's candidates ask for, capped: what a timed search is given.
  template <typename Perf>
  static size_t SearchWorkspace(const Perf* perf, int n) {
    size_t bytes = 0;
    for (int i = 0; i < n; ++i) {
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= kMaxSearchWorkspace) {
        bytes = std::max(bytes, perf[i].memory);
      }
    }
    return bytes;
  }

  // A timed search's choice, or `heuristic` where the search cannot run or finds nothing usable. `find`
  // runs the search with (workspace, bytes, perf out, count out).
  template <typename Perf, typename Find>
  static const Perf* Timed(const CudaResources& r, const Perf* heuristic, size_t workspace_bytes, Perf* timed,
                           int count, Find find) {
    DeviceBuffer workspace;  // freed back to the caching allocator when the search is done
    auto ws = workspace.Get(std::max<size_t>(workspace_bytes, 1), r.allocator);
    if (!ws.ok()) return heuristic;
    int n = 0;
    if (find(ws.value(), workspace_bytes, count, &n, timed) != CUDNN_STATUS_SUCCESS) {
      cudaGetLastError();
      return heuristic;
    }
    for (int i = 0; i < n; ++i) {  // fastest first; float32 arithmetic, within the workspace given
      if (timed[i].status == CUDNN_STATUS_SUCCESS && timed[i].mathType != CUDNN_TENSOR_OP_MATH &&
          timed[i].memory <= workspace_bytes) {
        return &timed[i];
      }
    }
    return heuristic;
  }

  Status ChooseForward(const CudaResources& r, const ConvBuffers& run) {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT], timed[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int n = 0;
    ONT_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionForwardAlgorithm_v7(r.cudnn, x_, w_, conv_, y_,
                                                                     CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf));
    const auto* p = Pick(perf, n, r.deterministic);
    if (p == nullptr) return Unimplemented("cuDNN offers no forward algorithm for this convolution");
    if (!r.deterministic && run.x && run.w && run.y) {
      p = Timed(r, p, SearchWorkspace(perf, n), timed, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                [&](void* ws, size_t bytes, int count, int* found, cudnnConvolutionFwdAlgoPerf_t* out) {
                  return cudnnFindConvolutionForwardAlgorithmEx(r.cudnn, x_, run.x, w_, run.w, conv_, y_, run.y, count,
                                                                found, out, ws, bytes);
                });
    }
    fwd_ = p->algo;
    workspace_ = p->memory;
    return Status::OK();
  }

  Status ChooseBackward(const CudaResources& r, const ConvBuffers& run) {
    cudnnConvolutionBwdDataAlgoPerf_t dperf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT],
        dtimed[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    cudnnConvolutionBwdFilterAlgoPerf_t fperf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT],
        ftimed[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int nd = 0, nf = 0;
    ONT_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        r.cudnn, w_, y_, conv_, x_, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &nd, dperf));
    ONT_CUDNN_RETURN_IF_ERROR(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        r.cudnn, x_, y_, conv_, w_, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &nf, fperf));
    const auto* d = Pick(dperf, nd, r.deterministic);
    const auto* f = Pick(fperf, nf, r.deterministic);
    if (d == nullptr || f == nullptr) return Unimplemented("cuDNN offers no deterministic backward algorithm here");
    if (!r.deterministic && run.w && run.dy && run.dx) {
      d = Timed(r, d, SearchWorkspace(dperf, nd), dtimed, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                [&](void* ws, size_t bytes, int count, int* found, cudnnConvolutionBwdDataAlgoPerf_t* out) {
                  return cudnnFindConvolutionBackwardDataAlgorithmEx(r.cudnn, w_, run.w, y_, run.dy, conv_, x_,
                                                                     run.dx, count, found, out, ws, bytes);
                });
    }
    if (!r.deterministic && run.x && run.dy && run.dw) {
      f = Timed(r, f, SearchWorkspace(fperf, nf), ftimed, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                [&](void* ws, size_t bytes, int count, int* found, cudnnConvolutionBwdFilterAlgoPerf_t* out) {
                  return cudnnFindConvolutionBackwardFilterAlgorithmEx(r.cudnn, x_, run.x, y_, run.dy, conv_, w_,
                                                                       run.dw, count, found, out, ws, bytes);
                });
    }
    bwd_data_ = d->algo;
    bwd_filter_ = f->algo;
    workspace_ = std::max(d->memory, f->memory);
    return Status::OK();
  }

  Shape x_shape_, w_shape_;
  bool planned_ = false;
};

// Y += B along the channel dim (dim 1), in place; nothing when B is absent. relu: then Y = Y > 0 ? Y : 0 in
// the same pass (FusedConv; Relu's expression, so the bits of Conv then Relu).
Status AddChannelBias(const CudaResources& r, const Tensor* b, Tensor* y, bool relu = false) {
  if (b == nullptr) {
    if (!relu) return Status::OK();
    return CudaStatus(Unary(UnaryOp::kRelu, y->data<float>(), y->data<float>(), y->NumElements(), 0.0f, r.stream),
                      "Unary(Relu)");
  }
  if (y->rank() < 2 || b->NumElements() != y->dim(1)) {
    return InvalidArgument("a bias of ", b->NumElements(), " values for output ", ShapeToString(y->shape()));
  }
  // B steps along dim 1 only (no shape list built: this runs at every step).
  ONT_ASSIGN_OR_RETURN(StridedSpace s, BroadcastSpace(y->shape(), {y->shape(), y->shape()}));
  for (int d = 0; d < s.rank; ++d) s.strides[2][d] = d == 1 ? 1 : 0;
  return CudaStatus(Binary(relu ? BinaryOp::kAddRelu : BinaryOp::kAdd, y->data<float>(), b->data<float>(),
                           y->data<float>(), s, 0, r.stream),
                    "Binary(Add)");
}

// Conv(X, W, B?) -> Y; com.microsoft FusedConv (activation "Relu", the executor's Conv + Relu fusion; the
// CPU kernel's Prepare checks the activation): relu(Y), in the bias's pass.
class ConvKernel : public DelegatingKernel {
 public:
  ConvKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu)
      : DelegatingKernel(info, std::move(cpu)),
        group_(info.node->GetInt("group", 1)),
        relu_(info.node->op_type == "FusedConv") {}
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &x = *ctx.input(0), &w = *ctx.input(1);
    Tensor* y = ctx.output(0);
    if (y->NumElements() == 0) return Status::OK();
    ConvBuffers run;
    run.x = x.raw_data(), run.w = w.raw_data(), run.y = y->raw_data();
    ONT_RETURN_IF_ERROR(plan_.Plan(r, node_, x.shape(), w.shape(), group_, false, run));
    ONT_ASSIGN_OR_RETURN(void* ws, workspace_.Get(plan_.workspace_, r.allocator));
    const float one = 1.0f, zero = 0.0f;
    ONT_CUDNN_RETURN_IF_ERROR(cudnnConvolutionForward(r.cudnn, &one, plan_.x_, x.raw_data(), plan_.w_, w.raw_data(),
                                                      plan_.conv_, plan_.fwd_, ws, plan_.workspace_, &zero, plan_.y_,
                                                      y->raw_data()));
    return AddChannelBias(r, ctx.input(2), y, relu_);
  }

 private:
  int64_t group_;
  bool relu_;
  ConvPlan plan_;
  DeviceBuffer workspace_;
};

// ConvTranspose(X, W, B?) -> Y: the data gradient of the convolution that maps Y's shape to X's, which is
// cuDNN's backward-data call with Y as its "dx" and X as its "dy". Explicit pads only (auto_pad SAME and
// output_shape derive pads another way; they are reported as unimplemented on CUDA).
class ConvTransposeKernel : public DelegatingKernel {
 public:
  ConvTransposeKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu)
      : DelegatingKernel(info, std::move(cpu)), group_(info.node->GetInt("group", 1)) {}
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &x = *ctx.input(0), &w = *ctx.input(1);
    Tensor* y = ctx.output(0);
    std::string auto_pad = node_.GetString("auto_pad", "NOTSET");
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER" || node_.HasAttribute("output_shape")) {
      return Unimplemented("ConvTranspose with auto_pad ", auto_pad, " or output_shape on CUDA");
    }
    if (y->NumElements() == 0) return Status::OK();
    ConvBuffers run;  // the data gradient of the convolution from Y to X: X is its dy, Y its dx
    run.w = w.raw_data(), run.dy = x.raw_data(), run.dx = y->raw_data();
    ONT_RETURN_IF_ERROR(plan_.Plan(r, node_, y->shape(), w.shape(), group_, true, run));
    if (plan_.y_shape_ != x.shape()) {
      return Unimplemented("ConvTranspose geometry (output_padding or pads) that cuDNN cannot express: X ",
                           ShapeToString(x.shape()), " vs ", ShapeToString(plan_.y_shape_));
    }
    ONT_ASSIGN_OR_RETURN(void* ws, workspace_.Get(plan_.workspace_, r.allocator));
    const float one = 1.0f, zero = 0.0f;
    ONT_CUDNN_RETURN_IF_ERROR(cudnnConvolutionBackwardData(r.cudnn, &one, plan_.w_, w.raw_data(), plan_.y_, x.raw_data(),
                                                           plan_.conv_, plan_.bwd_data_, ws, plan_.workspace_, &zero,
                                                           plan_.x_, y->raw_data()));
    return AddChannelBias(r, ctx.input(2), y);
  }

 private:
  int64_t group_;
  ConvPlan plan_;
  DeviceBuffer workspace_;
};

// ConvGrad(dY, X, W) -> (dX?, dW?, dB?).
class ConvGradKernel : public DelegatingKernel {
 public:
  ConvGradKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu)
      : DelegatingKernel(info, std::move(cpu)), group_(info.node->GetInt("group", 1)) {}
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &dy = *ctx.input(0), &x = *ctx.input(1), &w = *ctx.input(2);
    Tensor *dx = ctx.output(0), *dw = ctx.output(1), *db = ctx.output(2);
    if (dy.NumElements() == 0 || x.NumElements() == 0) return ZeroGrads(r, dx, dw, db);
    ConvBuffers run;
    run.x = x.raw_data(), run.w = w.raw_data(), run.dy = dy.raw_data();
    run.dx = dx ? dx->raw_data() : nullptr, run.dw = dw ? dw->raw_data() : nullptr;
    ONT_RETURN_IF_ERROR(plan_.Plan(r, node_, x.shape(), w.shape(), group_, true, run));
    ONT_ASSIGN_OR_RETURN(void* ws, workspace_.Get(plan_.workspace_, r.allocator));
    const float one = 1.0f, zero = 0.0f;
    if (dx) {
      ONT_CUDNN_RETURN_IF_ERROR(cudnnConvolutionBackwardData(r.cudnn, &one, plan_.w_, w.raw_data(), plan_.y_,
                                                             dy.raw_data(), plan_.conv_, plan_.bwd_data_, ws,
                                                             plan_.workspace_, &zero, plan_.x_, dx->raw_data()));
    }
    if (dw) {
      ONT_CUDNN_RETURN_IF_ERROR(cudnnConvolutionBackwardFilter(r.cudnn, &one, plan_.x_, x.raw_data(), plan_.y_,
                                                               dy.raw_data(), plan_.conv_, plan_.bwd_filter_, ws,
                                                               plan_.workspace_, &zero, plan_.w_, dw->raw_data()));
    }
    if (db) {
      // dB[m] = sum over n and space of dY[n, m, ...]: per (n, m) row sums, then over n, both in order.
      int64_t n = dy.dim(0), m = dy.dim(1), space = dy.NumElements() / (n * m);
      ONT_ASSIGN_OR_RETURN(void* tmp, rows_.Get(sizeof(float) * n * m, r.allocator));
      ONT_RETURN_IF_ERROR(CudaStatus(Reduce(ReduceOp::kSum, dy.data<float>(), static_cast<float*>(tmp), n * m, space, 1,
                                            nullptr, r.stream),
                                     "Reduce"));
      ONT_RETURN_IF_ERROR(CudaStatus(Reduce(ReduceOp::kSum, static_cast<float*>(tmp), db->data<float>(), 1, n, m,
                                            nullptr, r.stream),
                                     "Reduce"));
    }
    return Status::OK();
  }

 private:
  static Status ZeroGrads(const CudaResources& r, Tensor* dx, Tensor* dw, Tensor* db) {
    for (Tensor* t : {dx, dw, db}) {
      if (t) ONT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(t->raw_data(), 0, t->SizeInBytes(), r.stream));
    }
    return Status::OK();
  }

  int64_t group_;
  ConvPlan plan_;
  DeviceBuffer workspace_, rows_;
};

// The 2-D pooling geometry of a node for input [N, C, spatial...] (1 or 2 spatial dims).
StatusOr<Pool2D> PoolGeometry(const Node& node, const Shape& x) {
  std::vector<int64_t> in(x.begin() + 2, x.end());
  cpu::WindowAttrs geo = cpu::WindowAttrs::FromNode(node, {});
  ONT_ASSIGN_OR_RETURN(std::vector<int64_t> out, geo.OutputDims(in));
  if (in.size() != 1 && in.size() != 2) return Unimplemented("pooling over ", in.size(), " spatial dims on CUDA");
  size_t nd = in.size(), d = nd - 1;  // the last spatial dim is W; with one dim, H = 1
  Pool2D g{};
  g.planes = x[0] * x[1];
  g.h = nd == 2 ? in[0] : 1, g.w = in[d], g.oh = nd == 2 ? out[0] : 1, g.ow = out[d];
  g.kh = nd == 2 ? geo.kernel[0] : 1, g.kw = geo.kernel[d];
  g.sh = nd == 2 ? geo.strides[0] : 1, g.sw = geo.strides[d];
  g.dh = nd == 2 ? geo.dilations[0] : 1, g.dw = geo.dilations[d];
  g.pt = nd == 2 ? geo.pads[0] : 0, g.pl = geo.pads[d], g.pb = nd == 2 ? geo.pads[nd] : 0, g.pr = geo.pads[nd + d];
  g.count_include_pad = node.GetInt("count_include_pad", 0) != 0;
  g.storage_order = static_cast<int>(node.GetInt("storage_order", 0));
  return g;
}

// PoolGeometry for the last input shape, kept: worked out again (with its allocations) only when the shape
// changes.
class PoolPlan {
 public:
  StatusOr<Pool2D> Get(const Node& node, const Shape& x) {
    if (!planned_ || x != shape_) {
      ONT_ASSIGN_OR_RETURN(geometry_, PoolGeometry(node, x));
      shape_ = x;
      planned_ = true;
    }
    return geometry_;
  }

 private:
  bool planned_ = false;
  Shape shape_;
  Pool2D geometry_{};
};

class MaxPoolKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    ONT_ASSIGN_OR_RETURN(Pool2D g, plan_.Get(node_, x.shape()));
    Tensor* ind = ctx.output(1);
    return CudaStatus(MaxPool2D(x.data<float>(), ctx.output(0)->data<float>(), ind ? ind->data<int64_t>() : nullptr, g,
                                r.stream),
                      "MaxPool2D");
  }

 private:
  PoolPlan plan_;
};

// MaxPoolGrad(dY, Indices), and ai.ontrain MaxPoolReluGrad(dY, Indices, Y) (the executor's MaxPoolGrad +
// ReluGrad fusion): only the windows whose pooled value Y is positive (the CPU kernel's comment says why
// that is ReluGrad's mask). Its window-code form (compact_indices) follows a FusedConvMaxPool, which CUDA
// does not run (MaxPoolReluGradRejects).
class MaxPoolGradKernel : public DelegatingKernel {
 public:
  MaxPoolGradKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu)
      : DelegatingKernel(info, std::move(cpu)), masked_(info.node->op_type == "MaxPoolReluGrad") {}
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    Tensor* dx = ctx.output(0);
    ONT_ASSIGN_OR_RETURN(Pool2D g, plan_.Get(node_, dx->shape()));
    const float* y = masked_ ? ctx.input(2)->data<float>() : nullptr;
    return CudaStatus(MaxPool2DGrad(ctx.input(0)->data<float>(), ctx.input(1)->data<int64_t>(), y, dx->data<float>(), g,
                                    r.stream),
                      "MaxPool2DGrad");
  }

 private:
  bool masked_;
  PoolPlan plan_;
};

class AveragePoolKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    ONT_ASSIGN_OR_RETURN(Pool2D g, plan_.Get(node_, x.shape()));
    return CudaStatus(AvgPool2D(x.data<float>(), ctx.output(0)->data<float>(), g, r.stream), "AvgPool2D");
  }

 private:
  PoolPlan plan_;
};

class AveragePoolGradKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    Tensor* dx = ctx.output(0);
    ONT_ASSIGN_OR_RETURN(Pool2D g, plan_.Get(node_, dx->shape()));
    return CudaStatus(AvgPool2DGrad(ctx.input(0)->data<float>(), dx->data<float>(), g, r.stream), "AvgPool2DGrad");
  }

 private:
  PoolPlan plan_;
};

// GlobalAveragePool and GlobalMaxPool: the mean or the max of each [N * C] plane.
class GlobalPoolKernel : public DelegatingKernel {
 public:
  GlobalPoolKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu, bool max)
      : DelegatingKernel(info, std::move(cpu)), op_(max ? ReduceOp::kMax : ReduceOp::kMean) {}
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    int64_t planes = x.dim(0) * x.dim(1), space = planes ? x.NumElements() / planes : 0;
    return CudaStatus(Reduce(op_, x.data<float>(), ctx.output(0)->data<float>(), planes, space, 1, nullptr, r.stream),
                      "Reduce");
  }

 private:
  ReduceOp op_;
};

}  // namespace

const char* ConvRejects(const Node& n) {
  std::vector<int64_t> pads = n.GetInts("pads");
  size_t k = pads.size() / 2;
  for (size_t d = 0; d < k; ++d) {
    if (pads[d] != pads[d + k]) return "asymmetric pads (cuDNN pads both sides alike)";
  }
  if (n.GetInts("kernel_shape").size() > 3) return "more than 3 spatial dims";
  return nullptr;
}

const char* ConvTransposeRejects(const Node& n) {
  std::string auto_pad = n.GetString("auto_pad", "NOTSET");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") return "auto_pad SAME";
  if (n.HasAttribute("output_shape")) return "output_shape (pads derived from it)";
  return ConvRejects(n);
}

const char* PoolRejects(const Node& n) {
  return n.GetInts("kernel_shape").size() > 2 ? "pooling over more than 2 spatial dims" : nullptr;
}

const char* MaxPoolReluGradRejects(const Node& n) {
  if (n.GetInt("compact_indices", 0) != 0) return "window-code Indices (compact_indices)";
  return PoolRejects(n);
}

KernelFactory kConv = Wrap<ConvKernel, &cpu::kConv>;
KernelFactory kFusedConv = Wrap<ConvKernel, &cpu::kFusedConv>;
KernelFactory kConvTranspose = Wrap<ConvTransposeKernel, &cpu::kConvTranspose>;
KernelFactory kConvGrad = Wrap<ConvGradKernel, &cpu::kConvGrad>;
KernelFactory kMaxPool = Wrap<MaxPoolKernel, &cpu::kMaxPool>;
KernelFactory kMaxPoolGrad = Wrap<MaxPoolGradKernel, &cpu::kMaxPoolGrad>;
KernelFactory kMaxPoolReluGrad = Wrap<MaxPoolGradKernel, &cpu::kMaxPoolReluGrad>;
KernelFactory kAveragePool = Wrap<AveragePoolKernel, &cpu::kAveragePool>;
KernelFactory kAveragePoolGrad = Wrap<AveragePoolGradKernel, &cpu::kAveragePoolGrad>;
KernelFactory kGlobalAveragePool = WrapOp<GlobalPoolKernel, bool, false, &cpu::kGlobalAveragePool>;
KernelFactory kGlobalMaxPool = WrapOp<GlobalPoolKernel, bool, true, &cpu::kGlobalMaxPool>;

}  // namespace cuda
}  // namespace ontrain
