/* fake_cuda_builtins.c — the stand-in for NVRTC's builtins library (libnvrtc-builtins.so.M.m),
 * built into a directory of its own: tests/fake_cuda.c's NVRTC opens it by name, as the real one
 * does, so a compile succeeds only when the backend loaded it first from NVRTC's directory (or
 * the loader finds it). Nothing in it is called. */
int ck_fake_nvrtc_builtins(void);
int ck_fake_nvrtc_builtins(void) { return 1; }
