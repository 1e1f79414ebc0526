/* ck_codegen.h — scheduled, planned ck_graph -> a directory holding a standalone program.
 *
 *   DIR/model.c     provenance header, tensor tables, one step function of straight-line
 *                   libckrt calls on the planned arena offsets, main() -> ckrt_main
 *   DIR/weights.bin magic, version, checksum, tensor table, then the static region's image
 *   DIR/plan.json   the memory plan: every buffer's offset, size, lifetime and category
 *   DIR/Makefile    `make -C DIR` builds DIR/model against libckrt
 *   DIR/kernels.cu  the CUDA kernels the program calls: libckrt's kernel bodies plus thin
 *                   __global__ wrappers (emit_cuda.c); the trainer compiles it with NVRTC
 *
 * Output is byte-for-byte reproducible for the same model and flags. Op/dtype/attribute
 * combinations the runtime cannot run are rejected here, naming the node.
 */
#ifndef CK_CODEGEN_H
#define CK_CODEGEN_H

#include "ck_passes.h"

typedef struct ck_codegen_options {
    const char *out_dir;
    const char *command_line;  /* provenance */
    const char *ckrt_include;  /* directory of ckrt.h */
    const char *ckrt_lib;      /* directory of libckrt.a */
    const char *program_name;  /* the generated executable's name ("model") */
    bool plan_only, explain;   /* CLI: print the plan / the kept-recomputed-offloaded list */
} ck_codegen_options;

ck_status ck_codegen(const ck_graph *g, const ck_options *o, const ck_codegen_options *co, ck_diag *d);

/* Checks that every node can be emitted (dtypes, attributes) without writing anything. */
ck_status ck_codegen_check(const ck_graph *g, const ck_options *o, ck_diag *d);

#endif
