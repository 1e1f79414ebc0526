/* emit_cuda.c — writes DIR/kernels.cu: the CUDA kernels one program needs.
 *
 * The kernel bodies are not written here: the text of runtime/ckrt_kernels*.h is embedded into
 * ckptc at build time (cmake/embed_kernels.cmake -> ck_kernel_headers) and copied in, so the GPU
 * runs the very bodies the CPU backend runs. What this file adds is one thin extern "C"
 * __global__ wrapper per launch the CUDA backend makes (runtime/cuda_ops.c), each running the
 * grid-stride loop CK_G_LOOP over its work items and calling a body; each wrapper is declared
 * once, typed, in runtime/ckrt_cuda_kernels.h, which cuda_ops.c launches it by. A wrapper is
 * emitted when the program calls the ckrt_* entry point that launches it (the emitters record
 * every entry they call: ck_emit_call), so kernels.cu holds only what the program uses. Under CK_EMULATE each wrapper also gets a host thunk taking the
 * argument array of cuLaunchKernel (and its arguments' sizes), which lets tests/cuda_emu.c and
 * tests/fake_cuda.c run kernels.cu on the CPU.
 *
 * The trainer compiles kernels.cu with NVRTC at start-up for its GPU's architecture; a source
 * hash is part of its cache key, so the text must be reproducible (it is: no timestamps).
 */
#include "emit.h"
#include "../runtime/ckrt_cuda_kernels.h"

#include <stdlib.h>
#include <string.h>

/* ckrt_kernels_ops.h, ckrt_kernels.h, then the other ckrt_kernels_*.h (generated) */
extern const char *const ck_kernel_header_names[];
extern const char *const ck_kernel_header_texts[];
extern const int ck_kernel_header_count;

typedef struct ck_wrapper {
    const char *entry;   /* the ckrt_* entry point whose CUDA implementation launches it */
    const char *name;    /* ck_g_NAME; the first parameter is always int64_t n, the work items */
    const char *params;  /* after n, each preceded by ", " */
    const char *body;    /* runs once per work item i */
} ck_wrapper;

/* The wrappers of runtime/ckrt_cuda_kernels.h, the declaration cuda_ops.c launches them by. */
#define CK_PARAM_STR_(T, N) ", " #T " " #N
#define CK_WRAPPER_(ENTRY, NAME, ...) {#ENTRY, #NAME, "" CK_G_PARAMS_##NAME(CK_PARAM_STR_, CK_PARAM_STR_), #__VA_ARGS__},
#define CK_REUSE_(ENTRY, NAME) {#ENTRY, #NAME, NULL, NULL},
static const ck_wrapper wrappers[] = {CKRT_CUDA_KERNELS(CK_WRAPPER_, CK_REUSE_)};
#undef CK_PARAM_STR_
#undef CK_WRAPPER_
#undef CK_REUSE_

enum { N_WRAPPERS = (int)(sizeof wrappers / sizeof wrappers[0]) };

/* Does the program call ckrt_ENTRY? ("main": ckrt_main's own, in every program) */
static bool calls_entry(const ck_emit_calls *calls, const char *entry) {
    if (strcmp(entry, "main") == 0) return true;
    for (int i = 0; i < calls->n; i++)
        if (strcmp(calls->entry[i], entry) == 0) return true;
    return false;
}

/* Entry points the CUDA backend runs without a kernel of kernels.cu (cuBLAS, copies, reads). */
static const char *const no_kernel_entries[] = {"matmul", "check_finite", "offload", "reload", "grad_allreduce_wait"};

/* Is ckrt_<entry> one the CUDA backend implements (runtime/ckrt_device.h's list)? */
static bool cuda_knows(const char *entry) {
    for (int i = 0; i < N_WRAPPERS; i++)
        if (strcmp(wrappers[i].entry, entry) == 0) return true;
    for (size_t i = 0; i < sizeof no_kernel_entries / sizeof no_kernel_entries[0]; i++)
        if (strcmp(no_kernel_entries[i], entry) == 0) return true;
    return false;
}

/* A header's text with its #include "ckrt_kernels*.h" lines turned into comments: kernels.cu
 * holds every header it needs, in order, and must compile alone. */
static void put_header(FILE *f, const char *name, const char *text) {
    fprintf(f, "\n/* ================================================================ runtime/%s */\n", name);
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len > 18 && strncmp(p, "#include \"ckrt_ker", 18) == 0) fprintf(f, "/* %.*s: above */", (int)len, p);
        else fwrite(p, 1, len, f);
        fputc('\n', f);
        p += len + (nl != NULL);
    }
}

/* The emulation's thunks: ck_emu_NAME unpacks cuLaunchKernel's argument array and calls the
 * wrapper; ck_emu_NAME_sizes gives each argument's size (a stand-in driver copies the arguments
 * when the launch is enqueued, as the real one does). */
static void put_thunk(FILE *f, const ck_wrapper *w) {
    char types[32][96];
    int nt = 0;
    for (const char *p = w->params + 2; *p && nt < 32;) { /* after the leading ", " */
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && p[len - 1] == ' ') len--;
        size_t nm = len; /* the parameter's name: the trailing identifier */
        while (nm > 0 && (p[nm - 1] == '_' || (p[nm - 1] >= 'a' && p[nm - 1] <= 'z') || (p[nm - 1] >= 'A' && p[nm - 1] <= 'Z') || (p[nm - 1] >= '0' && p[nm - 1] <= '9')))
            nm--;
        while (nm && p[nm - 1] == ' ') nm--;
        snprintf(types[nt++], sizeof types[0], "%.*s", (int)nm, p);
        if (!end) break;
        p = end + 1;
        while (*p == ' ') p++;
    }
    fprintf(f, "extern \"C\" void ck_emu_%s(void **a) {\n    ck_g_%s(*(int64_t *)a[0]", w->name, w->name);
    for (int k = 0; k < nt; k++) fprintf(f, ", *(%s *)a[%d]", types[k], k + 1);
    fprintf(f, ");\n}\nextern \"C\" int ck_emu_%s_sizes(size_t *s) {\n    s[0] = sizeof(int64_t);\n", w->name);
    for (int k = 0; k < nt; k++) fprintf(f, "    s[%d] = sizeof(%s);\n", k + 1, types[k]);
    fprintf(f, "    return %d;\n}\n", nt + 1);
}

ck_status ck_codegen_kernels_cu(FILE *f, const char *program, const ck_emit_calls *calls) {
    fprintf(f, "/* Generated by ckptc %s: the CUDA kernels of %s. Do not edit.\n *\n"
               " * The trainer compiles this file with NVRTC at start-up for its GPU (sm_XY from the device's\n"
               " * compute capability) and caches the result keyed by its hash, the architecture and the NVRTC\n"
               " * version. The kernel bodies are libckrt's (runtime/ckrt_kernels*.h, copied below): the CPU\n"
               " * backend runs the same code. Each ck_g_* wrapper runs one grid-stride loop over n work items.\n"
               " */\n", CK_VERSION, program);
    fprintf(f, "#if defined(CK_EMULATE)\n#include \"cuda_emu_shim.h\" /* tests/: the CPU emulation */\n#else\n"
               "typedef signed char int8_t;\ntypedef short int16_t;\ntypedef int int32_t;\ntypedef long long int64_t;\n"
               "typedef unsigned char uint8_t;\ntypedef unsigned short uint16_t;\ntypedef unsigned int uint32_t;\n"
               "typedef unsigned long long uint64_t;\n#define INT64_MAX 9223372036854775807LL\n#define INT64_MIN (-INT64_MAX - 1)\n"
               "#ifndef NULL\n#define NULL 0\n#endif\n"
               "/* the headers hold every body libckrt has; a program calls some: unused ones are no warning */\n"
               "#pragma nv_diag_suppress 177\n#endif\n");
    /* a kernel entry point the CUDA backend lacks would run on the CPU against device memory: the
     * program must not start on a GPU (NVRTC stops at the #error and the trainer says why) */
    for (int i = 0; i < calls->n; i++)
        if (!cuda_knows(calls->entry[i]))
            fprintf(f, "#error \"ckptc: ckrt_%s has no CUDA implementation yet; run this program with --device cpu\"\n",
                    calls->entry[i]);
    for (int i = 0; i < ck_kernel_header_count; i++) put_header(f, ck_kernel_header_names[i], ck_kernel_header_texts[i]);
    fprintf(f, "\n/* ================================================================ wrappers */\n");
    for (int i = 0; i < N_WRAPPERS; i++) {
        const ck_wrapper *w = &wrappers[i];
        if (!w->params) continue; /* a reuse: emitted with its definition */
        bool need = false;
        for (int j = 0; j < N_WRAPPERS && !need; j++)
            if (strcmp(wrappers[j].name, w->name) == 0 && calls_entry(calls, wrappers[j].entry)) need = true;
        if (!need) continue;
        fprintf(f, "\n/* for ckrt_%s */\nextern \"C\" __global__ void __launch_bounds__(CK_G_BLOCK) ck_g_%s(int64_t n, %s) {\n"
                   "    CK_G_LOOP(i, n) {\n        ", w->entry, w->name, w->params + 2);
        for (const char *p = w->body; *p; p++) {
            fputc(*p, f);
            if (*p == '\n') fputs("        ", f);
        }
        fprintf(f, "\n    }\n}\n#if defined(CK_EMULATE)\n");
        put_thunk(f, w);
        fprintf(f, "#endif\n");
    }
    return ferror(f) ? CK_ERR_IO : CK_OK;
}
