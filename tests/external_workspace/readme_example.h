// The README's C++ example as a function: one training step on an artifacts folder.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

// Trains one step on `images`/`labels` from `dir`'s artifacts, saves the checkpoint there, and returns the loss.
ontrain::StatusOr<float> TrainOneStep(const std::string& dir, const ontrain::Tensor& images,
                                      const ontrain::Tensor& labels);
