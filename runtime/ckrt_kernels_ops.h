/* ckrt_kernels_ops.h — the op tables of the elementwise kernel families, declared once.
 *
 * Each table is an X-macro: one row per runtime op code. From these rows come the runtime's op
 * code enums (below), the switch cases of the kernel bodies (ckrt_kernels.h,
 * ckrt_kernels_train.h: C on the CPU, CUDA under NVRTC), the CPU backend's per-op loops
 * (cpu_elementwise.c, cpu_train.c) and ckptc's map from IR ops to runtime codes
 * (codegen/emit_elementwise.c, emit_train.c). Nothing else spells an op code, so a code can
 * neither be skipped nor meet the wrong body.
 *
 * The file holds macros and enums only (no code): ckrt_ops.h includes it for the generated
 * programs, ckptc's code generator includes it for the names, and kernels.cu embeds it before
 * ckrt_kernels.h (CMakeLists.txt puts it first).
 *
 * Columns:
 *   CODE      the runtime code is CKRT_<CODE>
 *   IR        the ckptc op it runs (CK_OP_<IR> of ir/ops.def); the runtime ignores this column
 *   ALPHA, BETA  the defaults of the ONNX attributes alpha and beta (0 where the op has none)
 *   and per family the element expressions:
 *   binary:  F32, F64, I64 of a, b (the I64 one wraps as two's complement; 0: no integer form);
 *            Mod has two codes: codegen picks FMOD for fmod=1
 *   compare: of a, b (double or int64), a bool
 *   unary:   FWD, y of float x (and alpha, beta), and DERIV, dx of dy, x (and alpha, beta)
 *   unary_int: of int64_t x, for the ops that also run on integers
 */
#ifndef CKRT_KERNELS_OPS_H
#define CKRT_KERNELS_OPS_H

/* X(CODE, IR, F32, F64, I64) */
#define CKRT_BINARY_OPS(X)                                                                                            \
    X(ADD, ADD, a + b, a + b, (int64_t)((uint64_t)a + (uint64_t)b))                                                   \
    X(SUB, SUB, a - b, a - b, (int64_t)((uint64_t)a - (uint64_t)b))                                                   \
    X(MUL, MUL, a * b, a * b, (int64_t)((uint64_t)a * (uint64_t)b))                                                   \
    X(DIV, DIV, a / b, a / b, b == 0 || (b == -1 && a == INT64_MIN) ? 0 : a / b)                                      \
    X(POW, POW, powf(a, b), pow(a, b), 0) \
    X(MOD, MOD, ck_k_mod_f(a, b), ck_k_mod_d(a, b), ck_k_mod_i64(a, b))                                             \
    X(FMOD, MOD, fmodf(a, b), fmod(a, b), ck_k_fmod_i64(a, b))

/* X(CODE, IR, EXPR): the compare ops write bool (uint8); their codes follow the binary ones */
#define CKRT_COMPARE_OPS(X)                                                                                           \
    X(EQUAL, EQUAL, a == b)                                                                                           \
    X(LESS, LESS, a < b)                                                                                              \
    X(GREATER, GREATER, a > b)

/* X(CODE, IR, ALPHA, BETA, FWD, DERIV). The ck_k_* helpers named here are in ckrt_kernels.h
 * (forward) and ckrt_kernels_train.h (derivative). Gelu has two codes: codegen picks
 * GELU_TANH for approximate="tanh". */
#define CKRT_UNARY_OPS(X)                                                                                             \
    X(SQRT, SQRT, 0, 0, sqrtf(x), dy * 0.5f / sqrtf(x))                                                               \
    X(RECIPROCAL, RECIPROCAL, 0, 0, 1.0f / x, -dy / (x * x))                                                          \
    X(NEG, NEG, 0, 0, -x, -dy)                                                                                        \
    X(EXP, EXP, 0, 0, ck_expf(x), dy * ck_expf(x))                                                                    \
    X(LOG, LOG, 0, 0, logf(x), dy / x)                                                                                \
    X(ABS, ABS, 0, 0, fabsf(x), x > 0 ? dy : x < 0 ? -dy : 0.0f)                                                      \
    X(TANH, TANH, 0, 0, ck_tanhf(x), ck_k_tanh_grad(dy, x))                                                           \
    X(SIGMOID, SIGMOID, 0, 0, ck_k_sigmoid(x), ck_k_sigmoid_grad(dy, x))                                              \
    X(RELU, RELU, 0, 0, x > 0 ? x : 0.0f, x > 0 ? dy : 0.0f)                                                          \
    X(LEAKY_RELU, LEAKY_RELU, 0.01f, 0, x >= 0 ? x : alpha * x, x > 0 ? dy : dy * alpha)                              \
    X(ERF, ERF, 0, 0, ck_erff(x), dy * 1.12837916709551257390f * ck_expf(-x * x)) /* 2/sqrt(pi) e^-x^2 */             \
    X(GELU, GELU, 0, 0, 0.5f * x * (1.0f + ck_erff(x * 0.70710678118654752440f)), ck_k_gelu_grad(dy, x))              \
    X(GELU_TANH, GELU, 0, 0, ck_k_gelu_tanh(x), ck_k_gelu_tanh_grad(dy, x))                                           \
    X(HARD_SIGMOID, HARD_SIGMOID, 0.2f, 0.5f, ck_k_hard_sigmoid(x, alpha, beta),                                      \
      ck_k_hard_sigmoid_grad(dy, x, alpha, beta))                                                                     \
    X(HARD_SWISH, HARD_SWISH, 0, 0, x * ck_k_hard_sigmoid(x, 1.0f / 6.0f, 0.5f), ck_k_hard_swish_grad(dy, x))

/* X(CODE, EXPR): the unary ops that also run on int64/int32 */
#define CKRT_UNARY_INT_OPS(X)                                                                                         \
    X(NEG, (int64_t)(0 - (uint64_t)x))                                                                                \
    X(ABS, x < 0 ? (int64_t)(0 - (uint64_t)x) : x)                                                                    \
    X(RELU, x > 0 ? x : 0)

#define CKRT_CODE_(CODE, ...) CKRT_##CODE,
enum { CKRT_BINARY_OPS(CKRT_CODE_) CKRT_COMPARE_OPS(CKRT_CODE_) };
/* Not runs on bool only, with no expression row */
enum { CKRT_UNARY_OPS(CKRT_CODE_) CKRT_NOT };
#undef CKRT_CODE_

/* ckrt_unary_grad's code for Clip's derivative (dy inside [lo, hi], else 0), after the unary codes */
enum { CKRT_CLIP_GRAD = 100 };
enum { CKRT_REDUCE_SUM, CKRT_REDUCE_MEAN };
enum { CKRT_POOL_MAX, CKRT_POOL_AVG };
/* Pad's modes (the order of ckptc's CK_PAD_*) */
enum { CKRT_PAD_CONSTANT, CKRT_PAD_REFLECT, CKRT_PAD_EDGE };
/* ScatterND's reductions */
enum { CKRT_SCATTER_NONE, CKRT_SCATTER_ADD, CKRT_SCATTER_MUL };
/* ckrt_random's kinds: RandomUniform[Like], RandomNormal[Like], Bernoulli */
enum { CKRT_RAND_UNIFORM, CKRT_RAND_NORMAL, CKRT_RAND_BERNOULLI };

#endif
