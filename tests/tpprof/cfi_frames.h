// cfi_frames.h: functions built without frame pointers, for test_cfi.c
// (cfi_frames.c says what frames they make). Each calls fn(n).
#ifndef TPPROF_TESTS_CFI_FRAMES_H
#define TPPROF_TESTS_CFI_FRAMES_H

typedef void (*cfi_frames_fn)(int n);
void nofp_call(cfi_frames_fn fn, int n);
void nofp_rbp_call(cfi_frames_fn fn, int n);
void nofp_alloca_call(cfi_frames_fn fn, int n);
// nofp_chain(fn, d): d frames of those three kinds, then cfi_frames_leaf(0)
// (fn is used only at d == 0).
extern cfi_frames_fn cfi_frames_leaf;
void nofp_chain(cfi_frames_fn fn, int depth);
void nofp_chain_next(int depth);

#endif
