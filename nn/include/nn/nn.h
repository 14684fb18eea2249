#pragma once
// Everything of stepformer::nn in one include.
#include "nn/checkpoint.h"
#include "nn/errors.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "nn/safetensors.h"
#include "nn/schedule.h"
