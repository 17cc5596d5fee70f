// The emulated CUDA runtime (cuda_emu.h), under the toolkit header's name.
#pragma once
#include "cuda_emu.h"
