/*
 * tensorplay/tensorplay.h - the whole public runtime API in one include.
 */
#ifndef TENSORPLAY_TENSORPLAY_H
#define TENSORPLAY_TENSORPLAY_H
#include "tensorplay/error.h"
#include "tensorplay/dtype.h"
#include "tensorplay/allocator.h"
#include "tensorplay/storage.h"
#include "tensorplay/tensor.h"
#include "tensorplay/ops.h"
#include "tensorplay/device.h"
#include "tensorplay/observer.h"
#include "tensorplay/caching_allocator.h"
#include "tensorplay/deferred_allocator.h"
#include "tensorplay/safetensors.h"
#include "tensorplay/autograd.h"
#include "tensorplay/nn.h"
#include "tensorplay/optim.h"
#include "tensorplay/dlpack.h"
#endif
