// RunRecurrentPass: one recurrent pass of recurrent_{rnn,gru,lstm}.h on a backend (recurrent_math.h).
#pragma once

#include "providers/cuda/kernels/recurrent_gru.h"
#include "providers/cuda/kernels/recurrent_lstm.h"
#include "providers/cuda/kernels/recurrent_rnn.h"

namespace ontrain {
namespace cuda {

template <class Be, typename T>
bool RunRecurrentPass(Be& be, RecurrentPass p, const RecurrentCall<T>& c) {
  switch (p) {
    case RecurrentPass::kRnn: return rec::RnnForward(be, c);
    case RecurrentPass::kRnnGrad: return rec::RnnBackward(be, c);
    case RecurrentPass::kGru: return rec::GruForward(be, c);
    case RecurrentPass::kGruGrad: return rec::GruBackward(be, c);
    case RecurrentPass::kLstm: return rec::LstmForward(be, c);
    case RecurrentPass::kLstmGrad: return rec::LstmBackward(be, c);
  }
  return false;
}

}  // namespace cuda
}  // namespace ontrain
