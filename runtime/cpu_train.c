/* cpu_train.c — the CPU backend's training kernels: loops over ckrt_kernels_train.h. The elementwise
 * ones (activation gradients, softmax and dropout backward, AdamW) are spread over the thread pool
 * (ckrt_pool.h) in blocks whose size never depends on the thread count. */
#include "ckrt.h"
#include "ckrt_pool.h"
#include "cpu_iter.h"
#include "ckrt_kernels_train.h"

#include <math.h>

typedef struct {
    float *dx;
    const float *logits;
    const void *labels;
    int label_i64;
    int64_t classes;
    float g;
    double sum;
} xent_job;

static int64_t label_of(const void *labels, int label_i64, int64_t r) {
    return label_i64 ? ((const int64_t *)labels)[r] : ((const int32_t *)labels)[r];
}

/* every label in [0, classes) (before any row is computed) */
static int check_labels(ckrt_ctx *c, const xent_job *j, int64_t rows) {
    for (int64_t r = 0; r < rows; r++) {
        int64_t l = label_of(j->labels, j->label_i64, r);
        if (l < 0 || l >= j->classes)
            return ckrt_fail(c, CKRT_ERR_DATA, "label %lld at position %lld is out of range [0, %lld)", (long long)l, (long long)r,
                             (long long)j->classes);
    }
    return CKRT_OK;
}

/* the loss: the rows' terms added in row order (one thread: a single sum) */
CK_VEC static void xent_rows(void *arg, int64_t r0, int64_t r1) {
    xent_job *j = arg;
    for (int64_t r = r0; r < r1; r++) j->sum += ck_k_xent_row(r, j->logits, label_of(j->labels, j->label_i64, r), j->classes);
}

CK_VEC static void xent_grad_rows(void *arg, int64_t r0, int64_t r1) {
    const xent_job *j = arg;
    for (int64_t r = r0; r < r1; r++) ck_k_xent_grad_row(r, j->dx, j->logits, label_of(j->labels, j->label_i64, r), j->classes, j->g);
}

int ckrt_cross_entropy(ckrt_ctx *c, float *loss, const float *logits, const void *labels, ckrt_dtype label_dt, int64_t rows,
                       int64_t classes) {
    xent_job j = {.logits = logits, .labels = labels, .label_i64 = label_dt == CKRT_I64, .classes = classes};
    CKRT_TRY(check_labels(c, &j, rows));
    xent_rows(&j, 0, rows);
    *loss = (float)(j.sum / (double)rows);
    return CKRT_OK;
}

int ckrt_cross_entropy_grad(ckrt_ctx *c, float *dx, const float *dloss, const float *logits, const void *labels,
                            ckrt_dtype label_dt, int64_t rows, int64_t classes) {
    xent_job j = {.dx = dx, .logits = logits, .labels = labels, .label_i64 = label_dt == CKRT_I64, .classes = classes,
                  .g = (float)((double)dloss[0] / (double)rows)};
    CKRT_TRY(check_labels(c, &j, rows));
    ckrt_parallel_for(rows, ck_par_rows(classes), xent_grad_rows, &j);
    return CKRT_OK;
}

/* The arguments of one elementwise training kernel, for its block function (in the pool,
 * ckrt_pool.h: blocks of CK_PAR_ELEMS elements, or rows, whatever the thread count). */
typedef struct {
    int op;
    float *dx, *p, *m, *v;
    const float *dy, *x, *g, *a;
    int64_t n, len, inner;
    float alpha, beta, lo, hi, gs, lr, b1, b2, eps, wd, bc1, bc2, ratio, scale, momentum;
    uint64_t seed, step, key, base;
} elem_job;

/* one loop per CKRT_UNARY_OPS row with the op a constant (the body's switch folds away; simple
 * ops vectorize) */
CK_VEC static void unary_grad_elems(void *arg, int64_t i0, int64_t i1) {
    const elem_job *j = arg;
    float *dx = j->dx, alpha = j->alpha, beta = j->beta, lo = j->lo, hi = j->hi;
    const float *dy = j->dy, *x = j->x;
    switch (j->op) {
#define CK_GRAD_CASE_(CODE, ...)                                                                                      \
    case CKRT_##CODE:                                                                                                 \
        for (int64_t i = i0; i < i1; i++) dx[i] = ck_k_unary_grad(CKRT_##CODE, dy[i], x[i], alpha, beta, lo, hi);     \
        return;
        CKRT_UNARY_OPS(CK_GRAD_CASE_) CK_GRAD_CASE_(CLIP_GRAD)
#undef CK_GRAD_CASE_
    default: break;
    }
    for (int64_t i = i0; i < i1; i++) dx[i] = ck_k_unary_grad(j->op, dy[i], x[i], alpha, beta, lo, hi);
}

int ckrt_unary_grad(ckrt_ctx *c, int op, float *dx, const float *dy, const float *x, int64_t n, float alpha, float beta,
                    float lo, float hi) {
    (void)c;
    elem_job j = {.op = op, .dx = dx, .dy = dy, .x = x, .alpha = alpha, .beta = beta, .lo = lo, .hi = hi};
    ckrt_parallel_for(n, CK_PAR_ELEMS, unary_grad_elems, &j);
    return CKRT_OK;
}

CK_VEC static void softmax_grad_lines(void *arg, int64_t l0, int64_t l1) {
    const elem_job *j = arg;
    if (j->inner == 1) /* the last axis: the same body with contiguous lines, which vectorizes */
        for (int64_t l = l0; l < l1; l++) ck_k_softmax_grad_line(l, j->op, j->dx, j->dy, j->x, j->len, 1);
    else
        for (int64_t l = l0; l < l1; l++) ck_k_softmax_grad_line(l, j->op, j->dx, j->dy, j->x, j->len, j->inner);
}

int ckrt_softmax_grad(ckrt_ctx *c, int log_sm, float *dx, const float *dy, const float *y, int64_t outer, int64_t len,
                      int64_t inner) {
    (void)c;
    elem_job j = {.op = log_sm, .dx = dx, .dy = dy, .x = y, .len = len, .inner = inner};
    ckrt_parallel_for(outer * inner, ck_par_rows(len), softmax_grad_lines, &j);
    return CKRT_OK;
}

static void dropout_grad_blocks(void *arg, int64_t b0, int64_t b1) {
    const elem_job *j = arg;
    for (int64_t b = b0; b < b1; b++)
        ck_k_dropout_block(b, j->dx, NULL, j->dy, j->n, j->ratio, j->scale, j->seed, j->step, j->key, j->base);
}

int ckrt_dropout_grad(ckrt_ctx *c, float *dx, const float *dy, int64_t n, float ratio, uint64_t key) {
    /* the forward's mask, regenerated: dx = dy * mask / (1 - ratio) (ck_k_dropout_block on dy) */
    elem_job j = {.dx = dx, .dy = dy, .n = n, .ratio = ratio, .scale = ratio > 0.0f ? 1.0f / (1.0f - ratio) : 1.0f,
                  .seed = c->seed, .step = ckrt_rng_step(c), .key = key, .base = c->rng_rank * (uint64_t)n};
    ckrt_parallel_for((n + 3) / 4, CK_PAR_ELEMS / 4, dropout_grad_blocks, &j);
    return CKRT_OK;
}

/* ckptc --grad-accum with --grad-accum K > 1: on the step's first K - 1 micro-batches an update
 * only adds its gradient into the accumulator (true returned, the work done). */
static bool accumulating(const ckrt_ctx *c, float *acc, const float *g, int64_t n) {
    if (!acc || c->accum <= 1 || c->micro + 1 >= c->accum) return false;
    for (int64_t i = 0; i < n; i++) ck_k_grad_accum(i, acc, g, c->micro == 0);
    return true;
}

/* the NULLs are literal so that the tests fold away; m is the momentum buffer */
CK_VEC static void sgd_elems(void *arg, int64_t i0, int64_t i1) {
    const elem_job *j = arg;
    if (j->a && j->m) for (int64_t i = i0; i < i1; i++) ck_k_sgd(i, j->p, j->g, j->m, j->a, j->gs, j->lr, j->momentum, j->wd);
    else if (j->a) for (int64_t i = i0; i < i1; i++) ck_k_sgd(i, j->p, j->g, NULL, j->a, j->gs, j->lr, j->momentum, j->wd);
    else if (j->m) for (int64_t i = i0; i < i1; i++) ck_k_sgd(i, j->p, j->g, j->m, NULL, j->gs, j->lr, j->momentum, j->wd);
    else for (int64_t i = i0; i < i1; i++) ck_k_sgd(i, j->p, j->g, NULL, NULL, j->gs, j->lr, j->momentum, j->wd);
}

int ckrt_sgd(ckrt_ctx *c, float *p, const float *g, float *buf, float *acc, int64_t n, float lr, float momentum, float wd) {
    if (accumulating(c, acc, g, n)) return CKRT_OK;
    /* lr times the schedule's factor (1: the compiled lr, the same bits) */
    elem_job j = {.p = p, .g = g, .m = buf, .a = c->accum > 1 ? acc : NULL, .gs = c->grad_scale, .lr = lr * c->lr_scale,
                  .momentum = momentum, .wd = wd};
    ckrt_parallel_for(n, CK_PAR_ELEMS, sgd_elems, &j);
    return CKRT_OK;
}

/* the NULL is literal so that the test folds away */
CK_VEC static void adamw_elems(void *arg, int64_t i0, int64_t i1) {
    const elem_job *j = arg;
    if (j->a)
        for (int64_t i = i0; i < i1; i++)
            ck_k_adamw(i, j->p, j->g, j->m, j->v, j->a, j->gs, j->lr, j->b1, j->b2, j->eps, j->wd, j->bc1, j->bc2);
    else
        for (int64_t i = i0; i < i1; i++)
            ck_k_adamw(i, j->p, j->g, j->m, j->v, NULL, j->gs, j->lr, j->b1, j->b2, j->eps, j->wd, j->bc1, j->bc2);
}

int ckrt_adamw(ckrt_ctx *c, float *p, const float *g, float *m, float *v, float *acc, int64_t n, float lr, float b1, float b2,
               float eps, float wd) {
    if (accumulating(c, acc, g, n)) return CKRT_OK;
    const float *a = c->accum > 1 ? acc : NULL;
    float gs = c->grad_scale;
    float bc1 = (float)(1.0 - pow((double)b1, (double)c->step)), bc2 = (float)(1.0 - pow((double)b2, (double)c->step));
    lr *= c->lr_scale;
    elem_job j = {.p = p, .g = g, .m = m, .v = v, .a = a, .gs = gs, .lr = lr, .b1 = b1, .b2 = b2, .eps = eps, .wd = wd,
                  .bc1 = bc1, .bc2 = bc2};
    ckrt_parallel_for(n, CK_PAR_ELEMS, adamw_elems, &j);
    return CKRT_OK;
}

int ckrt_offload(ckrt_ctx *c, void *host, const void *dev, int64_t bytes) { return c->be->copy_to_host(c, host, dev, bytes, 1); }

int ckrt_reload(ckrt_ctx *c, void *dev, const void *host, int64_t bytes) { return c->be->copy_to_device(c, dev, host, bytes, 1); }
