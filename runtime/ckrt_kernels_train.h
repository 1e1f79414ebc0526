/* ckrt_kernels_train.h — bodies of the training kernels (loss, pointwise derivatives, softmax
 * backward, optimizer updates), under the rules of ckrt_kernels.h: one output element or one row
 * per call, no state, compiles as C and as CUDA.
 */
#ifndef CKRT_KERNELS_TRAIN_H
#define CKRT_KERNELS_TRAIN_H

#include "ckrt_kernels.h"

/* Row r of cross entropy: -log_softmax(logits[r])[label] in double. logits: (rows, classes). */
CK_DEV double ck_k_xent_row(int64_t r, const float *logits, int64_t label, int64_t classes) {
    const float *x = logits + r * classes;
    float m = x[0];
    for (int64_t j = 1; j < classes; j++) m = x[j] > m ? x[j] : m;
    double s = 0.0;
    for (int64_t j = 0; j < classes; j++) s += exp((double)(x[j] - m));
    return log(s) - (double)(x[label] - m);
}

/* Row r of d(mean cross entropy)/dlogits: g * (softmax(x) - onehot(label)) / rows. */
CK_DEV void ck_k_xent_grad_row(int64_t r, float *dx, const float *logits, int64_t label, int64_t classes, float g_over_rows) {
    const float *x = logits + r * classes;
    float *d = dx + r * classes;
    float m = x[0];
    for (int64_t j = 1; j < classes; j++) m = x[j] > m ? x[j] : m;
    double s = 0.0;
    for (int64_t j = 0; j < classes; j++) s += exp((double)(x[j] - m));
    for (int64_t j = 0; j < classes; j++) {
        double p = exp((double)(x[j] - m)) / s;
        d[j] = (float)((p - (j == label ? 1.0 : 0.0)) * (double)g_over_rows);
    }
}

/* d f(x) / dx times dy, for the forward op codes of ckrt_unary (CKRT_SQRT...) and CKRT_CLIP_GRAD. */
CK_DEV float ck_k_unary_grad(int op, float dy, float x, float alpha, float lo, float hi) {
    switch (op) {
    case 0: return dy * 0.5f / sqrtf(x);                                           /* sqrt */
    case 1: return -dy / (x * x);                                                  /* reciprocal */
    case 2: return -dy;                                                            /* neg */
    case 3: return dy * expf(x);                                                   /* exp */
    case 4: return dy / x;                                                         /* log */
    case 5: return x > 0 ? dy : x < 0 ? -dy : 0.0f;                                /* abs */
    case 6: { float t = tanhf(x); return dy * (1.0f - t * t); }                    /* tanh */
    case 7: { float s = x >= 0 ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x)); return dy * s * (1.0f - s); }
    case 8: return x > 0 ? dy : 0.0f;                                              /* relu */
    case 9: return x > 0 ? dy : dy * alpha;                                        /* leaky relu */
    case 10: return dy * 1.12837916709551257390f * expf(-x * x);                   /* erf: 2/sqrt(pi) e^-x^2 */
    case 11: {                                                                     /* gelu (erf) */
        float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752440f));
        float pdf = 0.39894228040143267794f * expf(-0.5f * x * x);
        return dy * (cdf + x * pdf);
    }
    case 12: {                                                                     /* gelu (tanh) */
        const float k = 0.79788456080286535588f;
        float u = k * (x + 0.044715f * x * x * x), t = tanhf(u);
        return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k * (1.0f + 3.0f * 0.044715f * x * x));
    }
    case 100: return x >= lo && x <= hi ? dy : 0.0f;                               /* clip */
    default: return 0.0f;
    }
}

/* Softmax backward along len for one (outer, inner) line, index l = o * inner + i:
 * softmax: dx = y (dy - sum(dy y)); log-softmax: dx = dy - exp(y) sum(dy). */
CK_DEV void ck_k_softmax_grad_line(int64_t l, int log_sm, float *dx, const float *dy, const float *y, int64_t len, int64_t inner) {
    int64_t o = l / inner, i = l % inner, base = o * len * inner + i;
    double s = 0.0;
    for (int64_t j = 0; j < len; j++) {
        int64_t at = base + j * inner;
        s += log_sm ? (double)dy[at] : (double)dy[at] * (double)y[at];
    }
    for (int64_t j = 0; j < len; j++) {
        int64_t at = base + j * inner;
        dx[at] = log_sm ? (float)((double)dy[at] - exp((double)y[at]) * s) : (float)((double)y[at] * ((double)dy[at] - s));
    }
}

/* SGD on element i (torch.optim.SGD, dampening 0, not Nesterov): g += wd p; with a momentum
 * buffer b = mu b + g (b starts at 0, so its first value is g); p -= lr (b or g). */
CK_DEV void ck_k_sgd(int64_t i, float *p, const float *g, float *buf, float lr, float mu, float wd) {
    float d = g[i] + wd * p[i];
    if (buf) {
        buf[i] = mu * buf[i] + d;
        d = buf[i];
    }
    p[i] -= lr * d;
}

/* AdamW on element i (torch.optim.AdamW): step t >= 1; bc1 = 1 - b1^t, bc2 = 1 - b2^t. */
CK_DEV void ck_k_adamw(int64_t i, float *p, const float *g, float *m, float *v, float lr, float b1, float b2, float eps,
                       float wd, float bc1, float bc2) {
    p[i] *= 1.0f - lr * wd;
    m[i] = b1 * m[i] + (1.0f - b1) * g[i];
    v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
    float denom = sqrtf(v[i]) / sqrtf(bc2) + eps;
    p[i] -= (lr / bc1) * m[i] / denom;
}

#endif
