// Einsum: the equation is parsed once per shape (ellipses become letters of their own, an implicit output
// lists the letters used once, in order). Two operands without repeated letters contract as one batched
// GEMM over permuted copies ([batch, free, contracted] x [batch, contracted, free]); one operand, more than
// two, or a letter repeated within an operand (a diagonal), or a broadcast dim, go through a direct loop over
// every combination of letters, summed in double. Both are planned once per input shapes.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/elementwise.h"
#include "providers/cpu/kernels/gemm.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cpu/kernels/plans.h"

namespace ontrain {
namespace cpu {
namespace {

// Letters as indices 0..51 ('a'-'z', 'A'-'Z'); ellipsis dims get 52 on.
struct Equation {
  std::vector<std::vector<int>> inputs;  // per operand, its letters in order
  std::vector<int> output;
  std::map<int, int64_t> size;           // letter -> dim

  static StatusOr<Equation> Parse(const std::string& eq, const std::vector<Shape>& shapes) {
    Equation e;
    std::string text;
    for (char ch : eq) if (ch != ' ') text += ch;
    const size_t arrow = text.find("->");
    const std::vector<std::string> terms = SplitTerms(text.substr(0, arrow));
    if (terms.size() != shapes.size()) {
      return InvalidArgument("equation \"", eq, "\" has ", terms.size(), " operands, the node ", shapes.size());
    }
    // The most dims any operand's ellipsis stands for.
    int64_t ellipsis_rank = -1;
    for (size_t k = 0; k < terms.size(); ++k) {
      if (terms[k].find("...") != std::string::npos) {
        ellipsis_rank = std::max<int64_t>(ellipsis_rank, static_cast<int64_t>(shapes[k].size()) - NamedLetters(terms[k]));
      }
    }
    for (size_t k = 0; k < terms.size(); ++k) {
      std::vector<int> letters;
      ONT_RETURN_IF_ERROR(Expand(eq, terms[k], static_cast<int64_t>(shapes[k].size()), ellipsis_rank, &letters));
      if (letters.size() != shapes[k].size()) {
        return InvalidArgument("equation \"", eq, "\": operand ", k, " has rank ", shapes[k].size(), ", the term ",
                               letters.size(), " letters");
      }
      for (size_t d = 0; d < letters.size(); ++d) {
        const int64_t dim = shapes[k][d];
        auto it = e.size.find(letters[d]);
        if (it == e.size.end() || it->second == 1) e.size[letters[d]] = dim;
        else if (dim != 1 && dim != it->second) {
          return InvalidArgument("equation \"", eq, "\": a letter is ", it->second, " in one place and ", dim, " in another");
        }
      }
      e.inputs.push_back(letters);
    }
    if (arrow != std::string::npos) {
      ONT_RETURN_IF_ERROR(Expand(eq, text.substr(arrow + 2), -1, ellipsis_rank, &e.output));
      for (int l : e.output) {
        if (!e.size.count(l)) return InvalidArgument("equation \"", eq, "\": an output letter is in no operand");
      }
    } else {  // implicit: the ellipsis dims, then the letters used once, alphabetically
      std::map<int, int> count;
      for (const auto& in : e.inputs) for (int l : in) count[l]++;
      for (const auto& [l, n] : count) if (l >= 52) e.output.push_back(l);
      for (const auto& [l, n] : count) if (l < 52 && n == 1) e.output.push_back(l);
    }
    return e;
  }

  // The comma-separated terms of the equation's left side.
  static std::vector<std::string> SplitTerms(const std::string& lhs) {
    std::vector<std::string> terms;
    size_t start = 0;
    for (size_t i = 0; i <= lhs.size(); ++i) {
      if (i == lhs.size() || lhs[i] == ',') {
        terms.push_back(lhs.substr(start, i - start));
        start = i + 1;
      }
    }
    return terms;
  }

  static int Letter(char ch) {
    if (ch >= 'a' && ch <= 'z') return ch - 'a';
    if (ch >= 'A' && ch <= 'Z') return 26 + (ch - 'A');
    return -1;
  }

  static int64_t NamedLetters(const std::string& term) {
    int64_t named = 0;
    for (char ch : term) named += Letter(ch) >= 0;
    return named;
  }

  // A term's letters, its ellipsis (if any) as letters 52 on for the dims it stands for: rank - named ones
  // (an output term, rank -1: ellipsis_rank of them). Ranks under an ellipsis may differ (numpy
  // broadcasting): their letters are right-aligned.
  static Status Expand(const std::string& eq, const std::string& term, int64_t rank, int64_t ellipsis_rank,
                       std::vector<int>* out) {
    const size_t dots = term.find("...");
    if (dots == std::string::npos) {
      for (char ch : term) {
        int l = Letter(ch);
        if (l < 0) return InvalidArgument("equation \"", eq, "\": '", ch, "' is not a letter");
        out->push_back(l);
      }
      return Status::OK();
    }
    const int64_t er = rank < 0 ? ellipsis_rank : rank - NamedLetters(term);
    if (er < 0) return InvalidArgument("equation \"", eq, "\": the ellipsis does not fit rank ", rank);
    for (size_t i = 0; i < term.size(); ++i) {
      if (i == dots) {
        const int64_t total = std::max<int64_t>(er, ellipsis_rank);
        for (int64_t k = total - er; k < total; ++k) out->push_back(52 + static_cast<int>(k));
        i += 2;
        continue;
      }
      int l = Letter(term[i]);
      if (l < 0) return InvalidArgument("equation \"", eq, "\": '", term[i], "' is not a letter");
      out->push_back(l);
    }
    return Status::OK();
  }
};

class EinsumKernel : public OpKernel {
 public:
  const EinsumDirectPlan& direct_plan() const { return direct_; }
  explicit EinsumKernel(const NodeInfo& info) : equation_(info.node->GetString("equation", "")) {}
  Status Prepare(KernelContext& ctx) override {
    std::vector<Shape>& shapes = seen_;  // reused: no allocation once the shapes have been seen
    shapes.resize(static_cast<size_t>(ctx.num_inputs()));
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      ONT_ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, i, "Inputs"));
      if (t->dtype() != ctx.input(0)->dtype()) return InvalidArgument("operands have different dtypes");
      shapes[static_cast<size_t>(i)] = t->shape();
    }
    if (!parsed_ || shapes != shapes_) {
      ONT_ASSIGN_OR_RETURN(eq_, Equation::Parse(equation_, shapes));
      shapes_ = shapes;
      parsed_ = true;
      Plan();
    }
    Shape out;
    for (int l : eq_.output) out.push_back(eq_.size.at(l));
    ctx.RequestScratch(static_cast<size_t>(scratch_elems_) * DTypeSize(ctx.input(0)->dtype()));
    return ctx.DeclareOutput(0, ctx.input(0)->dtype(), out);
  }
  Status Compute(KernelContext& ctx) override {
    const DType dt = ctx.input(0)->dtype();
    return DispatchAll(dt, [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, bool>) {
        return Unimplemented("Einsum of bool");
      } else {
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
          if (gemm_) return ComputeGemm<T>(ctx);
        }
        return ComputeDirect<T>(ctx);
      }
    });
  }

 private:
  // Decides between the GEMM form and the direct loop; sizes the scratch of the GEMM form.
  void Plan() {
    gemm_ = eq_.inputs.size() == 2;
    for (const auto& in : eq_.inputs) {
      std::vector<int> sorted = in;
      std::sort(sorted.begin(), sorted.end());
      gemm_ = gemm_ && std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
    }
    {
      std::vector<int> sorted = eq_.output;
      std::sort(sorted.begin(), sorted.end());
      gemm_ = gemm_ && std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
    }
    // broadcast dims of size 1 against a larger one need the direct loop
    for (size_t k = 0; k < shapes_.size() && gemm_; ++k) {
      for (size_t d = 0; d < shapes_[k].size(); ++d) gemm_ = gemm_ && shapes_[k][d] == eq_.size.at(eq_.inputs[k][d]);
    }
    scratch_elems_ = 0;
    PlanDirect();
    if (!gemm_) return;
    auto in = [&](int l, size_t k) { return std::find(eq_.inputs[k].begin(), eq_.inputs[k].end(), l) != eq_.inputs[k].end(); };
    auto out = [&](int l) { return std::find(eq_.output.begin(), eq_.output.end(), l) != eq_.output.end(); };
    batch_.clear(), free_a_.clear(), free_b_.clear(), contracted_.clear(), only_a_.clear(), only_b_.clear();
    for (const auto& [l, n] : eq_.size) {
      const bool a = in(l, 0), b = in(l, 1), o = out(l);
      if (a && b && o) batch_.push_back(l);
      else if (a && b) contracted_.push_back(l);
      else if (a && o) free_a_.push_back(l);
      else if (b && o) free_b_.push_back(l);
      else if (a) only_a_.push_back(l);  // summed away before the product
      else only_b_.push_back(l);
    }
    auto prod = [&](const std::vector<int>& ls) {
      int64_t p = 1;
      for (int l : ls) p *= eq_.size.at(l);
      return p;
    };
    nb_ = prod(batch_), nfa_ = prod(free_a_), nfb_ = prod(free_b_), nc_ = prod(contracted_);
    scratch_elems_ = nb_ * nfa_ * nc_ + nb_ * nc_ * nfb_ + nb_ * nfa_ * nfb_;
    std::vector<int> order_a = batch_, order_b = batch_;
    order_a.insert(order_a.end(), free_a_.begin(), free_a_.end());
    order_a.insert(order_a.end(), contracted_.begin(), contracted_.end());
    order_b.insert(order_b.end(), contracted_.begin(), contracted_.end());
    order_b.insert(order_b.end(), free_b_.begin(), free_b_.end());
    gather_a_ = MakeGather(0, order_a, only_a_);
    gather_b_ = MakeGather(1, order_b, only_b_);
    std::vector<int> have = batch_;
    have.insert(have.end(), free_a_.begin(), free_a_.end());
    have.insert(have.end(), free_b_.begin(), free_b_.end());
    std::vector<int64_t> hstride(have.size(), 1);
    for (int64_t d = static_cast<int64_t>(have.size()) - 2; d >= 0; --d) hstride[d] = hstride[d + 1] * eq_.size.at(have[d + 1]);
    out_sz_.clear();
    out_st_.clear();
    for (int l : eq_.output) {
      out_sz_.push_back(eq_.size.at(l));
      out_st_.push_back(hstride[std::find(have.begin(), have.end(), l) - have.begin()]);
    }
  }

  // How operand k is copied into the GEMM layout: sizes and strides of the kept letters, in order, and of the
  // letters summed away first.
  struct GatherPlan {
    std::vector<int64_t> osz, ost, ssz, sst;
  };
  GatherPlan MakeGather(size_t k, const std::vector<int>& order, const std::vector<int>& sum) const {
    const std::vector<int>& letters = eq_.inputs[k];
    std::vector<int64_t> stride(letters.size(), 1);
    for (int64_t d = static_cast<int64_t>(letters.size()) - 2; d >= 0; --d) stride[d] = stride[d + 1] * shapes_[k][d + 1];
    auto stride_of = [&](int l) {
      int64_t s = 0;
      for (size_t d = 0; d < letters.size(); ++d) if (letters[d] == l) s += stride[d];
      return s;
    };
    GatherPlan p;
    for (int l : order) p.osz.push_back(eq_.size.at(l)), p.ost.push_back(stride_of(l));
    for (int l : sum) p.ssz.push_back(eq_.size.at(l)), p.sst.push_back(stride_of(l));
    return p;
  }
  // Copies an operand into `dst` by its plan, summing the summed-away letters in double.
  template <typename T>
  static void Gather(const T* src, const GatherPlan& p, T* dst) {
    const std::vector<int64_t>&osz = p.osz, &ost = p.ost, &ssz = p.ssz, &sst = p.sst;
    int64_t total = 1, sums = 1;
    for (int64_t v : osz) total *= v;
    for (int64_t v : ssz) sums *= v;
    for (int64_t o = 0; o < total; ++o) {
      int64_t rem = o, base = 0;
      for (int64_t d = static_cast<int64_t>(osz.size()) - 1; d >= 0; --d) {
        base += (rem % osz[d]) * ost[d];
        rem /= osz[d];
      }
      double acc = 0;
      for (int64_t s = 0; s < sums; ++s) {
        int64_t r2 = s, off = base;
        for (int64_t d = static_cast<int64_t>(ssz.size()) - 1; d >= 0; --d) {
          off += (r2 % ssz[d]) * sst[d];
          r2 /= ssz[d];
        }
        acc += static_cast<double>(src[off]);
      }
      dst[o] = static_cast<T>(acc);
    }
  }

  template <typename T>
  Status ComputeGemm(KernelContext& ctx) {
    T* a = static_cast<T*>(ctx.scratch());
    T* b = a + nb_ * nfa_ * nc_;
    T* c = b + nb_ * nc_ * nfb_;
    Gather<T>(ctx.input(0)->data<T>(), gather_a_, a);
    Gather<T>(ctx.input(1)->data<T>(), gather_b_, b);
    for (int64_t i = 0; i < nb_; ++i) {
      Gemm<T>(false, false, nfa_, nfb_, nc_, T(1), a + i * nfa_ * nc_, b + i * nc_ * nfb_, T(0), c + i * nfa_ * nfb_,
              ctx.thread_pool());
    }
    // c is [batch, free_a, free_b]: permute into the output's letter order.
    const std::vector<int64_t>&osz = out_sz_, &ost = out_st_;
    T* y = ctx.output(0)->data<T>();
    const int64_t total = ctx.output(0)->NumElements();
    for (int64_t o = 0; o < total; ++o) {
      int64_t rem = o, off = 0;
      for (int64_t d = static_cast<int64_t>(osz.size()) - 1; d >= 0; --d) {
        off += (rem % osz[d]) * ost[d];
        rem /= osz[d];
      }
      y[o] = c[off];
    }
    return Status::OK();
  }

  // The direct loop's plan: letters numbered densely; the output letters' sizes and numbers, the summed
  // letters', and per operand (number, stride) pairs (a repeated letter adds its strides: the diagonal; a
  // dim of 1 broadcast against a larger one has none).
  void PlanDirect() {
    std::map<int, int> dense;
    for (const auto& [l, n] : eq_.size) dense.emplace(l, static_cast<int>(dense.size()));
    EinsumDirectPlan& p = direct_;
    p.letters = static_cast<int>(dense.size());
    p.out_letters.clear(), p.sum_letters.clear(), p.sum_sizes.clear(), p.out_sizes.clear();
    for (int l : eq_.output) p.out_letters.push_back(dense.at(l)), p.out_sizes.push_back(eq_.size.at(l));
    for (const auto& [l, n] : eq_.size) {
      if (std::find(eq_.output.begin(), eq_.output.end(), l) == eq_.output.end()) {
        p.sum_letters.push_back(dense.at(l));
        p.sum_sizes.push_back(n);
      }
    }
    p.operand_strides.assign(eq_.inputs.size(), {});
    for (size_t k = 0; k < eq_.inputs.size(); ++k) {
      const Shape& s = shapes_[k];
      int64_t st = 1;
      for (int64_t d = static_cast<int64_t>(s.size()) - 1; d >= 0; --d) {
        if (s[d] != 1) p.operand_strides[k].push_back({dense.at(eq_.inputs[k][d]), st});
        st *= s[d];
      }
    }
  }

  // Every combination of the letters: output letters outside, the rest summed inside, in double.
  template <typename T>
  Status ComputeDirect(KernelContext& ctx) {
    using C = ComputeType<T>;
    int64_t at[kMaxLetters] = {};
    T* y = ctx.output(0)->data<T>();
    const int64_t total = ctx.output(0)->NumElements();
    const EinsumDirectPlan& p = direct_;
    int64_t sums = 1;
    for (int64_t n : p.sum_sizes) sums *= n;
    const size_t nops = p.operand_strides.size();
    for (int64_t o = 0; o < total; ++o) {
      int64_t rem = o;
      for (int64_t d = static_cast<int64_t>(p.out_letters.size()) - 1; d >= 0; --d) {
        at[p.out_letters[d]] = rem % p.out_sizes[d];
        rem /= p.out_sizes[d];
      }
      double acc = 0;
      for (int64_t s = 0; s < sums; ++s) {
        int64_t r2 = s;
        for (int64_t d = static_cast<int64_t>(p.sum_letters.size()) - 1; d >= 0; --d) {
          at[p.sum_letters[d]] = r2 % p.sum_sizes[d];
          r2 /= p.sum_sizes[d];
        }
        double term = 1;
        for (size_t k = 0; k < nops; ++k) {
          int64_t off = 0;
          for (const auto& [letter, stride] : p.operand_strides[k]) off += at[letter] * stride;
          term *= static_cast<double>(static_cast<C>(ctx.input(static_cast<int>(k))->data<T>()[off]));
        }
        acc += term;
      }
      y[o] = static_cast<T>(static_cast<C>(acc));
    }
    return Status::OK();
  }

  static constexpr size_t kMaxLetters = 128;  // 52 letters and the ellipsis dims
  std::string equation_;
  bool parsed_ = false;
  std::vector<Shape> shapes_, seen_;
  Equation eq_;
  bool gemm_ = false;
  std::vector<int> batch_, free_a_, free_b_, contracted_, only_a_, only_b_;
  int64_t nb_ = 1, nfa_ = 1, nfb_ = 1, nc_ = 1, scratch_elems_ = 0;
  GatherPlan gather_a_, gather_b_;
  std::vector<int64_t> out_sz_, out_st_;  // output letters: sizes, and strides in the product
  EinsumDirectPlan direct_;
};

}  // namespace

KernelFactory kEinsum = MakeKernel<EinsumKernel>;

const EinsumDirectPlan* EinsumPlanOf(const OpKernel& k) {
  const auto* e = dynamic_cast<const EinsumKernel*>(&k);
  return e ? &e->direct_plan() : nullptr;
}

}  // namespace cpu
}  // namespace ontrain
