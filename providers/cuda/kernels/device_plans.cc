// Builds the device_math.h arguments from the CPU kernels' plans (see device_plans.h).
#include "providers/cuda/kernels/device_plans.h"

#include <algorithm>

namespace ontrain {
namespace cuda {

Status MakeEinsumArgs(const cpu::EinsumDirectPlan& p, EinsumArgs* a) {
  *a = EinsumArgs();
  if (p.operand_strides.size() > static_cast<size_t>(kEinsumMaxOperands)) {
    return Unimplemented("Einsum of ", p.operand_strides.size(), " operands (the CUDA kernel takes up to ",
                         kEinsumMaxOperands, ")");
  }
  if (p.letters > kEinsumMaxLetters) {
    return Unimplemented("Einsum over ", p.letters, " letters and ellipsis dims (the CUDA kernel takes up to ",
                         kEinsumMaxLetters, ")");
  }
  a->operands = static_cast<int>(p.operand_strides.size());
  a->out_rank = static_cast<int>(p.out_letters.size());
  a->sum_rank = static_cast<int>(p.sum_letters.size());
  for (int d = 0; d < a->out_rank; ++d) {
    a->out_letter[d] = p.out_letters[d];
    a->out_size[d] = p.out_sizes[d];
  }
  a->sum_count = 1;
  for (int d = 0; d < a->sum_rank; ++d) {
    a->sum_letter[d] = p.sum_letters[d];
    a->sum_size[d] = p.sum_sizes[d];
    a->sum_count *= p.sum_sizes[d];
  }
  for (int k = 0; k < a->operands; ++k) {
    const auto& terms = p.operand_strides[k];
    if (terms.size() > static_cast<size_t>(kEinsumMaxLetters)) return Unimplemented("Einsum operand of rank ", terms.size());
    a->terms[k] = static_cast<int>(terms.size());
    for (size_t t = 0; t < terms.size(); ++t) {
      a->term_letter[k][t] = terms[t].first;
      a->term_stride[k][t] = terms[t].second;
    }
  }
  return Status::OK();
}

Status MakeResizeArgs(const cpu::ResizePlanView& v, ResizeArgs* a, ResizeHostTables* t) {
  *a = ResizeArgs();
  const Shape& in = *v.in;
  const Shape& out = *v.out;
  const std::vector<cpu::AxisTaps>& taps = *v.taps;
  if (in.size() > static_cast<size_t>(kResizeMaxRank)) {
    return Unimplemented("resizing a tensor of rank ", in.size(), " (the CUDA kernel takes up to ", kResizeMaxRank, ")");
  }
  if (taps.size() != in.size() || out.size() != in.size()) return Internal("Resize plan of inconsistent rank");
  a->rank = static_cast<int>(in.size());
  a->extrapolation = v.extrapolation;
  t->ints.clear();
  t->weights.clear();
  t->flags.clear();
  for (int d = 0; d < a->rank; ++d) {
    const cpu::AxisTaps& x = taps[d];
    a->in[d] = in[d];
    a->out[d] = out[d];
    a->begin[d] = static_cast<int64_t>(t->ints.size());
    t->ints.insert(t->ints.end(), x.begin.begin(), x.begin.end());
    a->index[d] = static_cast<int64_t>(t->ints.size());
    t->ints.insert(t->ints.end(), x.index.begin(), x.index.end());
    a->weight[d] = static_cast<int64_t>(t->weights.size());
    t->weights.insert(t->weights.end(), x.weight.begin(), x.weight.end());
    a->outside[d] = static_cast<int64_t>(t->flags.size());
    t->flags.insert(t->flags.end(), x.outside.begin(), x.outside.end());
    // The transpose: count the taps of each input coordinate, then place them by output coordinate and tap.
    const int64_t n_in = in[d], n_out = out[d];
    a->inv_begin[d] = static_cast<int64_t>(t->ints.size());
    t->ints.resize(t->ints.size() + static_cast<size_t>(n_in) + 1, 0);
    int64_t* ib = t->ints.data() + a->inv_begin[d];
    for (int64_t j = 0; j < n_out; ++j) {
      for (int64_t p = x.begin[j]; p < x.begin[j + 1]; ++p) ib[x.index[p] + 1]++;
    }
    for (int64_t i = 0; i < n_in; ++i) ib[i + 1] += ib[i];
    const int64_t n_taps = ib[n_in];
    a->inv_out[d] = static_cast<int64_t>(t->ints.size());
    t->ints.resize(t->ints.size() + static_cast<size_t>(n_taps) + static_cast<size_t>(n_in));  // outputs, then cursors
    ib = t->ints.data() + a->inv_begin[d];
    int64_t* inv_out = t->ints.data() + a->inv_out[d];
    int64_t* cursor = inv_out + n_taps;
    for (int64_t i = 0; i < n_in; ++i) cursor[i] = ib[i];
    a->inv_weight[d] = static_cast<int64_t>(t->weights.size());
    t->weights.resize(t->weights.size() + static_cast<size_t>(n_taps));
    double* inv_w = t->weights.data() + a->inv_weight[d];
    for (int64_t j = 0; j < n_out; ++j) {
      for (int64_t p = x.begin[j]; p < x.begin[j + 1]; ++p) {
        const int64_t at = cursor[x.index[p]]++;
        inv_out[at] = j;
        inv_w[at] = x.weight[p];
      }
    }
    t->ints.resize(t->ints.size() - static_cast<size_t>(n_in));  // drop the cursors
  }
  // Tables are never empty, so that every pointer of ResizeTables is valid.
  t->ints.push_back(0);
  t->weights.push_back(0);
  t->flags.push_back(0);
  return Status::OK();
}

Status MakeElementsArgs(const Shape& data, const Shape& idx, int64_t axis, ElementsArgs* a) {
  *a = ElementsArgs();
  if (data.size() > static_cast<size_t>(kResizeMaxRank) || idx.size() != data.size()) {
    return Unimplemented("elements op of rank ", data.size(), " with indices of rank ", idx.size(), " on CUDA");
  }
  a->rank = static_cast<int>(data.size());
  a->axis = static_cast<int>(axis);
  for (int d = 0; d < a->rank; ++d) {
    a->data[d] = data[d];
    a->idx[d] = idx[d];
  }
  return Status::OK();
}

Status MakeNdArgs(const Shape& data, const Shape& idx, int64_t batch_dims, NdArgs* a) {
  *a = NdArgs();
  const int64_t r = static_cast<int64_t>(data.size()), q = static_cast<int64_t>(idx.size());
  if (q < 1 || r < 1 || batch_dims < 0 || batch_dims >= std::min(r, q)) return InvalidArgument("GatherND/ScatterND ranks");
  a->k = idx.back();
  if (a->k < 1 || a->k > r - batch_dims || a->k > kResizeMaxRank) return InvalidArgument("GatherND/ScatterND index depth ", a->k);
  for (int64_t d = 0; d < batch_dims; ++d) a->batch *= data[d];
  for (int64_t d = batch_dims; d < q - 1; ++d) a->per_batch *= idx[d];
  for (int64_t d = batch_dims + a->k; d < r; ++d) a->slice *= data[d];
  for (int64_t d = batch_dims; d < r; ++d) a->data_batch *= data[d];
  for (int64_t j = 0; j < a->k; ++j) a->dims[j] = data[batch_dims + j];
  return Status::OK();
}

}  // namespace cuda
}  // namespace ontrain
