/* ckrt_kernels_train.h — bodies of the training kernels (loss, pointwise derivatives, softmax
 * backward, optimizer updates), under the rules of ckrt_kernels.h: one output element or one row
 * per call, no state, compiles as C and as CUDA.
 */
#ifndef CKRT_KERNELS_TRAIN_H
#define CKRT_KERNELS_TRAIN_H

#include "ckrt_kernels.h"

/* The max of row x[0, classes) and the sum of exp(x - max) (exp in float, ck_expf; the sum in double
 * in ckrt_kernels.h's 8-lane order); e, when not NULL, gets each exp(x - max) (it may be x). */
CK_DEV double ck_k_xent_sumexp(const float *x, float *e, int64_t classes, float *max) {
    int64_t n8 = classes - classes % CK_LANES;
    float m = x[0];
    for (int64_t j = 1; j < classes; j++) m = x[j] > m ? x[j] : m;
    double a[CK_LANES] = {0};
    for (int64_t j = 0; j < n8; j += CK_LANES)
        for (int l = 0; l < CK_LANES; l++) {
            float v = ck_expf(x[j + l] - m);
            if (e) e[j + l] = v;
            a[l] += (double)v;
        }
    double s = CK_LANES_COMBINE(a);
    for (int64_t j = n8; j < classes; j++) {
        float v = ck_expf(x[j] - m);
        if (e) e[j] = v;
        s += (double)v;
    }
    *max = m;
    return s;
}

/* Row r of cross entropy: -log_softmax(logits[r])[label] = log(sum exp(x - max)) - (x[label] - max),
 * in double from ck_k_xent_sumexp. logits: (rows, classes). */
CK_DEV double ck_k_xent_row(int64_t r, const float *logits, int64_t label, int64_t classes) {
    const float *x = logits + r * classes;
    float m;
    double s = ck_k_xent_sumexp(x, (float *)0, classes, &m);
    return log(s) - (double)(x[label] - m);
}

/* Row r of d(mean cross entropy)/dlogits: g * (softmax(x) - onehot(label)) / rows, softmax(x) =
 * exp(x - max) / sum in double from ck_k_xent_sumexp. dx may be logits. */
CK_DEV void ck_k_xent_grad_row(int64_t r, float *dx, const float *logits, int64_t label, int64_t classes, float g_over_rows) {
    const float *x = logits + r * classes;
    float *d = dx + r * classes, m;
    double s = ck_k_xent_sumexp(x, d, classes, &m);
    for (int64_t j = 0; j < classes; j++) d[j] = (float)(((double)d[j] / s - (j == label ? 1.0 : 0.0)) * (double)g_over_rows);
}

/* Derivative helpers the CKRT_UNARY_OPS rows (ckrt_kernels_ops.h) call: dy times f'(x). */
CK_DEV float ck_k_tanh_grad(float dy, float x) {
    float t = ck_tanhf(x);
    return dy * (1.0f - t * t);
}
CK_DEV float ck_k_sigmoid_grad(float dy, float x) {
    float s = ck_k_sigmoid(x);
    return dy * s * (1.0f - s);
}
CK_DEV float ck_k_gelu_grad(float dy, float x) { /* gelu (erf) */
    float cdf = 0.5f * (1.0f + ck_erff(x * 0.70710678118654752440f));
    float pdf = 0.39894228040143267794f * ck_expf(-0.5f * x * x);
    return dy * (cdf + x * pdf);
}
CK_DEV float ck_k_gelu_tanh_grad(float dy, float x) {
    const float k = 0.79788456080286535588f;
    float u = k * (x + 0.044715f * x * x * x), t = ck_tanhf(u);
    return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k * (1.0f + 3.0f * 0.044715f * x * x));
}
/* alpha where 0 < alpha x + beta < 1, else 0 (the flat parts; the kinks take 0, as PyTorch) */
CK_DEV float ck_k_hard_sigmoid_grad(float dy, float x, float alpha, float beta) {
    float v = alpha * x + beta;
    return v > 0.0f && v < 1.0f ? dy * alpha : 0.0f;
}
/* x hard_sigmoid(x) with alpha 1/6, beta 1/2: 0 below -3, x / 3 + 1/2 up to 3, 1 above (PyTorch's
 * hardswish_backward) */
CK_DEV float ck_k_hard_swish_grad(float dy, float x) {
    return x < -3.0f ? 0.0f : x <= 3.0f ? dy * (x / 3.0f + 0.5f) : dy;
}

/* d f(x) / dx times dy for the forward op codes of ckrt_unary (one case per CKRT_UNARY_OPS row,
 * its DERIV) and CKRT_CLIP_GRAD (dy inside [lo, hi]). */
#define CK_K_CASE_DERIV_(CODE, IR, ALPHA, BETA, FWD, DERIV) case CKRT_##CODE: return DERIV;
CK_DEV float ck_k_unary_grad(int op, float dy, float x, float alpha, float beta, float lo, float hi) {
    (void)alpha, (void)beta;
    switch (op) {
    CKRT_UNARY_OPS(CK_K_CASE_DERIV_)
    case CKRT_CLIP_GRAD: return x >= lo && x <= hi ? dy : 0.0f;
    default: return 0.0f;
    }
}
#undef CK_K_CASE_DERIV_

/* Softmax backward along len for one (outer, inner) line, index l = o * inner + i:
 * softmax: dx = y (dy - sum(dy y)); log-softmax: dx = dy - exp(y) sum(dy) (exp(y) in float,
 * ck_expf); the sum in double in ckrt_kernels.h's 8-lane order. */
CK_DEV void ck_k_softmax_grad_line(int64_t l, int log_sm, float *dx, const float *dy, const float *y, int64_t len, int64_t inner) {
    int64_t o = l / inner, i = l % inner, base = o * len * inner + i, n8 = len - len % CK_LANES;
    const float *dyl = dy + base, *yl = y + base;
    float *dxl = dx + base;
    double a[CK_LANES] = {0};
    for (int64_t j = 0; j < n8; j += CK_LANES)
        for (int k = 0; k < CK_LANES; k++) {
            int64_t at = (j + k) * inner;
            a[k] += log_sm ? (double)dyl[at] : (double)dyl[at] * (double)yl[at];
        }
    double s = CK_LANES_COMBINE(a);
    for (int64_t j = n8; j < len; j++) {
        int64_t at = j * inner;
        s += log_sm ? (double)dyl[at] : (double)dyl[at] * (double)yl[at];
    }
    if (log_sm)
        for (int64_t j = 0; j < len; j++) dxl[j * inner] = (float)((double)dyl[j * inner] - (double)ck_expf(yl[j * inner]) * s);
    else
        for (int64_t j = 0; j < len; j++) dxl[j * inner] = (float)((double)yl[j * inner] * ((double)dyl[j * inner] - s));
}

/* The gradient an update reads, element i: g, or with an accumulator (the trainer's --grad-accum
 * K, on the step's last micro-batch) acc + g; times gs (1/K times the --clip-grad-norm
 * coefficient; 1: g itself, the same bits). */
CK_DEV float ck_k_grad_eff(int64_t i, const float *g, const float *acc, float gs) { return (acc ? acc[i] + g[i] : g[i]) * gs; }

/* The first K - 1 micro-batches of a step: the gradient added into the accumulator (the first
 * one sets it). */
CK_DEV void ck_k_grad_accum(int64_t i, float *acc, const float *g, int first) { acc[i] = first ? g[i] : acc[i] + g[i]; }

/* SGD on element i (torch.optim.SGD, dampening 0, not Nesterov): g += wd p; with a momentum
 * buffer b = mu b + g (b starts at 0, so its first value is g); p -= lr (b or g). g is
 * ck_k_grad_eff's. */
CK_DEV void ck_k_sgd(int64_t i, float *p, const float *g, float *buf, const float *acc, float gs, float lr, float mu, float wd) {
    float d = ck_k_grad_eff(i, g, acc, gs) + wd * p[i];
    if (buf) {
        buf[i] = mu * buf[i] + d;
        d = buf[i];
    }
    p[i] -= lr * d;
}

/* AdamW on element i (torch.optim.AdamW): step t >= 1; bc1 = 1 - b1^t, bc2 = 1 - b2^t; g is
 * ck_k_grad_eff's. */
CK_DEV void ck_k_adamw(int64_t i, float *p, const float *g, float *m, float *v, const float *acc, float gs, float lr, float b1,
                       float b2, float eps, float wd, float bc1, float bc2) {
    float ge = ck_k_grad_eff(i, g, acc, gs);
    p[i] *= 1.0f - lr * wd;
    m[i] = b1 * m[i] + (1.0f - b1) * ge;
    v[i] = b2 * v[i] + (1.0f - b2) * ge * ge;
    float denom = sqrtf(v[i]) / sqrtf(bc2) + eps;
    p[i] -= (lr / bc1) * m[i] / denom;
}

/* ---------------------------------------------------------------- normalization backward (engineer D) */

/* LayerNormalization backward, row r of dy, x, dx: (rows, cols); scale: (cols); mean, inv_std:
 * (rows), the forward's float statistics. In double, with xhat = (x - mean) inv_std and
 * g = dy scale: dx = inv_std (g - mean_cols(g) - xhat mean_cols(g xhat)), both sums in
 * ckrt_kernels.h's 8-lane order. */
CK_DEV void ck_k_layer_norm_grad_row(int64_t r, float *dx, const float *dy, const float *x, const float *scale,
                                     const float *mean, const float *inv_std, int64_t cols) {
    const float *dyr = dy + r * cols, *xr = x + r * cols;
    float *dxr = dx + r * cols;
    double mu = mean[r], is = inv_std[r];
    int64_t n8 = cols - cols % CK_LANES;
    double a1[CK_LANES] = {0}, a2[CK_LANES] = {0};
    for (int64_t j = 0; j < n8; j += CK_LANES)
        for (int l = 0; l < CK_LANES; l++) a1[l] += (double)dyr[j + l] * (double)scale[j + l];
    for (int64_t j = 0; j < n8; j += CK_LANES)
        for (int l = 0; l < CK_LANES; l++) a2[l] += ((double)dyr[j + l] * (double)scale[j + l]) * (((double)xr[j + l] - mu) * is);
    double s1 = CK_LANES_COMBINE(a1), s2 = CK_LANES_COMBINE(a2);
    for (int64_t j = n8; j < cols; j++) {
        double g = (double)dyr[j] * (double)scale[j];
        s1 += g;
        s2 += g * (((double)xr[j] - mu) * is);
    }
    double m1 = cols > 0 ? s1 / (double)cols : 0.0, m2 = cols > 0 ? s2 / (double)cols : 0.0;
    for (int64_t j = 0; j < cols; j++) {
        double g = (double)dyr[j] * (double)scale[j], xh = ((double)xr[j] - mu) * is;
        dxr[j] = (float)(is * (g - m1 - xh * m2));
    }
}

/* LayerNormalization backward, the column sums: element (r, j) of dy, x: (rows, cols) added to
 * column j's sums in double, sb += dy, ss += dy xhat; mean, inv_std: (rows). A column's sums
 * take its rows in order (ck_k_layer_norm_grad_col; the CPU walks a block of columns a row at a
 * time, the same order per column). */
CK_DEV void ck_k_layer_norm_grad_acc(int64_t r, int64_t j, double *ss, double *sb, const float *dy, const float *x,
                                     const float *mean, const float *inv_std, int64_t cols) {
    double d = dy[r * cols + j];
    *sb += d;
    *ss += d * (((double)x[r * cols + j] - (double)mean[r]) * (double)inv_std[r]);
}

/* LayerNormalization backward, column j: dscale[j] = sum over rows of dy xhat, dbias[j] = sum
 * over rows of dy; dscale, dbias: (cols), either may be NULL. */
CK_DEV void ck_k_layer_norm_grad_col(int64_t j, float *dscale, float *dbias, const float *dy, const float *x,
                                     const float *mean, const float *inv_std, int64_t rows, int64_t cols) {
    double ss = 0.0, sb = 0.0;
    for (int64_t r = 0; r < rows; r++) ck_k_layer_norm_grad_acc(r, j, &ss, &sb, dy, x, mean, inv_std, cols);
    if (dscale) dscale[j] = (float)ss;
    if (dbias) dbias[j] = (float)sb;
}

/* (the GPU's split reduction, ckrt_kernels_gpu.h) LayerNorm backward's column sums, chunk p of rows for column j (item i = p cols + j):
 * part[2 i] = the sum of dy xhat, part[2 i + 1] = the sum of dy (ck_k_layer_norm_grad_acc) */
CK_DEV void ck_k_lng_part(int64_t i, double *part, int64_t cols, int64_t rows, int64_t chunk, const float *dy,
                          const float *x, const float *mean, const float *inv_std) {
    int64_t j = i % cols, p = i / cols, lo, hi;
    ck_k_chunk(p, chunk, rows, &lo, &hi);
    double ss = 0.0, sb = 0.0;
    for (int64_t r = lo; r < hi; r++) ck_k_layer_norm_grad_acc(r, j, &ss, &sb, dy, x, mean, inv_std, cols);
    part[2 * i] = ss;
    part[2 * i + 1] = sb;
}

/* BatchNormalization (training mode) backward, channel ch of dy, x, dx: (N, C, S); scale, mean,
 * inv_std, dscale, dbias: (C), mean / inv_std the float statistics the forward saved. Over the
 * n = N S elements of the channel (double, in the forward's statistics' lane order), xhat = (x - mean) inv_std:
 * dbias = sum dy, dscale = sum dy xhat, dx = scale inv_std (dy - dbias / n - xhat dscale / n).
 * dx, dscale, dbias may each be NULL. */
CK_DEV void ck_k_batch_norm_grad_channel(int64_t ch, float *dx, float *dscale, float *dbias, const float *dy,
                                         const float *x, const float *scale, const float *mean, const float *inv_std,
                                         int64_t N, int64_t C, int64_t S) {
    double mu = mean[ch], is = inv_std[ch], ab[CK_LANES] = {0}, as[CK_LANES] = {0};
    int64_t s8 = S - S % CK_LANES;
    for (int64_t n = 0; n < N; n++) {
        const float *g = dy + (n * C + ch) * S, *p = x + (n * C + ch) * S;
        for (int64_t k = 0; k < s8; k += CK_LANES)
            for (int l = 0; l < CK_LANES; l++) {
                double d = g[k + l];
                ab[l] += d;
                as[l] += d * (((double)p[k + l] - mu) * is);
            }
        for (int64_t k = s8; k < S; k++) {
            double d = g[k];
            ab[k - s8] += d;
            as[k - s8] += d * (((double)p[k] - mu) * is);
        }
    }
    double sb = CK_LANES_COMBINE(ab), ss = CK_LANES_COMBINE(as);
    if (dscale) dscale[ch] = (float)ss;
    if (dbias) dbias[ch] = (float)sb;
    if (!dx) return;
    int64_t cnt = N * S;
    double mb = cnt > 0 ? sb / (double)cnt : 0.0, ms = cnt > 0 ? ss / (double)cnt : 0.0, k0 = (double)scale[ch] * is;
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < S; k++) {
            int64_t i = (n * C + ch) * S + k;
            dx[i] = ck_k_batch_norm_grad_dx1(dy[i], x[i], mu, is, k0, mb, ms);
        }
}

/* The recompute of a training-mode BatchNormalization, element i of x, y: (N, C, S) with
 * c = (i / S) % C; scale, bias, mean, inv_std: (C), the statistics the forward saved. The same
 * expression as the forward (ck_k_batch_norm_apply1), hence the same bits. */
CK_DEV float ck_k_batch_norm_apply(int64_t i, const float *x, const float *scale, const float *bias, const float *mean,
                                   const float *inv_std, int64_t C, int64_t S) {
    int64_t c = (i / S) % C;
    return ck_k_batch_norm_apply1(x[i], mean[c], inv_std[c], scale[c], bias[c]);
}

/* ---------------------------------------------------------------- conv, pool, gather, slice gradients
 * (cpu_train_conv.c, cpu_train_move.c). Windows use ckrt_kernels_move.h's geometry (ck_k_tap,
 * ck_k_pool); each body computes one element (or one line) of the gradient as a gather, so a
 * GPU backend can run them one thread per element with no atomics. */
#include "ckrt_kernels_move.h"

/* The window (flat output position over out_sp) whose tap t reads input coordinates p, or -1
 * when no window does (the tap would need a fractional, negative or past-the-end position).
 * p, out_sp, k, strides, pads_begin, dilations: (nsp) */
CK_DEV int64_t ck_k_tap_window(const int64_t *p, int64_t t, int nsp, const int64_t *out_sp, const int64_t *k,
                               const int64_t *strides, const int64_t *pads_begin, const int64_t *dilations) {
    int64_t s = 0, step = 1;
    for (int d = nsp - 1; d >= 0; d--) {
        int64_t kk = t % k[d], q;
        t /= k[d];
        q = p[d] + pads_begin[d] - kk * dilations[d];
        if (q < 0 || q % strides[d] != 0) return -1;
        q /= strides[d];
        if (q >= out_sp[d]) return -1;
        s += q * step;
        step *= out_sp[d];
    }
    return s;
}

/* Element i of one image group's input gradient (Cg, in_sp...) from its column matrix
 * col: (Cg * prod(k), prod(out_sp)) = w_g^T dy_g (col2im, the adjoint of ck_k_im2col): the sum of
 * the column entries whose tap reads element i. Taps run in reverse row-major order, so the
 * windows are visited in ascending row-major order. in_sp, out_sp, k, strides, pads_begin,
 * dilations: (nsp) */
CK_DEV float ck_k_col2im(int64_t i, const float *col, int nsp, const int64_t *in_sp, const int64_t *out_sp, const int64_t *k,
                         const int64_t *strides, const int64_t *pads_begin, const int64_t *dilations) {
    int64_t p[CK_K_MAX_RANK], in_n = 1, out_n = 1, taps = 1;
    for (int d = nsp - 1; d >= 0; d--) {
        p[d] = (i / in_n) % in_sp[d];
        in_n *= in_sp[d];
        out_n *= out_sp[d];
        taps *= k[d];
    }
    const float *rows = col + (i / in_n) * taps * out_n;
    float sum = 0.0f;
    for (int64_t t = taps - 1; t >= 0; t--) {
        int64_t s = ck_k_tap_window(p, t, nsp, out_sp, k, strides, pads_begin, dilations);
        if (s >= 0) sum += rows[t * out_n + s];
    }
    return sum;
}

/* Average pooling's divisor for output element o of (N*C, out_sp...): the taps of its window
 * inside x (or, count_include_pad, inside [-pads_begin, in + pads_end)), as ck_k_pool counts
 * them; the window is a box, so the count is the product of the per-axis counts. */
CK_DEV int64_t ck_k_pool_divisor(int64_t o, int nsp, const int64_t *in_sp, const int64_t *out_sp, const int64_t *k,
                                 const int64_t *strides, const int64_t *pads_begin, const int64_t *pads_end,
                                 const int64_t *dilations, int count_include_pad) {
    int64_t count = 1;
    for (int d = nsp - 1; d >= 0; d--) {
        int64_t od = o % out_sp[d], lo = count_include_pad ? -pads_begin[d] : 0;
        int64_t hi = count_include_pad ? in_sp[d] + pads_end[d] : in_sp[d], n = 0;
        o /= out_sp[d];
        for (int64_t kk = 0; kk < k[d]; kk++) {
            int64_t q = ck_k_tap(od, kk, strides[d], pads_begin[d], dilations[d]);
            n += q >= lo && q < hi;
        }
        count *= n;
    }
    return count;
}

/* Element i of dx: (N*C, in_sp...), the gradient of ck_k_pool through dy: (N*C, out_sp...), summed
 * over the windows that read element i in ascending order. kind 0 (max): a window contributes
 * dy when element i is its argmax, recomputed from x by ck_k_pool (the first maximum, as the
 * forward chose); 1 (average): dy / its divisor (ck_k_pool_divisor). */
CK_DEV float ck_k_pool_grad(int64_t i, int kind, const float *dy, const float *x, int nsp, const int64_t *in_sp,
                            const int64_t *out_sp, const int64_t *k, const int64_t *strides, const int64_t *pads_begin,
                            const int64_t *pads_end, const int64_t *dilations, int count_include_pad) {
    int64_t p[CK_K_MAX_RANK], in_n = 1, out_n = 1, taps = 1;
    for (int d = nsp - 1; d >= 0; d--) {
        p[d] = (i / in_n) % in_sp[d];
        in_n *= in_sp[d];
        out_n *= out_sp[d];
        taps *= k[d];
    }
    int64_t img = i / in_n;
    float sum = 0.0f;
    for (int64_t t = taps - 1; t >= 0; t--) {
        int64_t s = ck_k_tap_window(p, t, nsp, out_sp, k, strides, pads_begin, dilations);
        if (s < 0) continue;
        int64_t o = img * out_n + s;
        if (kind == CKRT_POOL_MAX) {
            int64_t at = -1;
            ck_k_pool(o, CKRT_POOL_MAX, x, nsp, in_sp, out_sp, k, strides, pads_begin, pads_end, dilations, 0, &at);
            if (at == i) sum += dy[o];
        } else {
            int64_t div = ck_k_pool_divisor(o, nsp, in_sp, out_sp, k, strides, pads_begin, pads_end, dilations,
                                            count_include_pad);
            if (div > 0) sum += dy[o] / (float)div;
        }
    }
    return sum;
}

/* The same gradient as a scatter, for a backend that runs windows one after another: adds output
 * element o's share to dx (max: dy to its argmax; average: dy / divisor to each tap inside x).
 * Over o = 0, 1, ... onto a zeroed dx, every dx element receives its windows in ascending order,
 * as ck_k_pool_grad sums them: the same bits. */
CK_DEV void ck_k_pool_grad_window(int64_t o, int kind, float *dx, const float *dy, const float *x, int nsp, const int64_t *in_sp,
                                  const int64_t *out_sp, const int64_t *k, const int64_t *strides, const int64_t *pads_begin,
                                  const int64_t *pads_end, const int64_t *dilations, int count_include_pad) {
    if (kind == CKRT_POOL_MAX) {
        int64_t at = -1;
        ck_k_pool(o, CKRT_POOL_MAX, x, nsp, in_sp, out_sp, k, strides, pads_begin, pads_end, dilations, 0, &at);
        if (at >= 0) dx[at] += dy[o];
        return;
    }
    int64_t div = ck_k_pool_divisor(o, nsp, in_sp, out_sp, k, strides, pads_begin, pads_end, dilations, count_include_pad);
    if (div <= 0) return;
    float g = dy[o] / (float)div;
    int64_t od[CK_K_MAX_RANK], in_n = 1, out_n = 1, taps = 1;
    for (int d = nsp - 1; d >= 0; d--) {
        od[d] = (o / out_n) % out_sp[d];
        out_n *= out_sp[d];
        in_n *= in_sp[d];
        taps *= k[d];
    }
    float *img = dx + (o / out_n) * in_n;
    for (int64_t t = 0; t < taps; t++) {
        int64_t rem = t, flat = 0, step = 1;
        int inside = 1;
        for (int d = nsp - 1; d >= 0; d--) {
            int64_t p = ck_k_tap(od[d], rem % k[d], strides[d], pads_begin[d], dilations[d]);
            rem /= k[d];
            if (p < 0 || p >= in_sp[d]) inside = 0;
            flat += p * step;
            step *= in_sp[d];
        }
        if (inside) img[flat] += g;
    }
}

/* Gather's gradient on the lines (o, r), r in [r0, r1), of dx: (outer, len, inner): zero them,
 * then add the rows of dy: (outer, n_idx, inner) in index order, so every element sums its
 * contributions in index order however the lines are split (a GPU thread per (o, r): r1 = r0 + 1;
 * the CPU a whole o: r0 = 0, r1 = inner). An index out of [-len, len) is skipped (the backend
 * checks them first and reports it). idx: (n_idx), int64 when idx_i64 else int32. */
CK_DEV void ck_k_gather_grad(int64_t o, int64_t r0, int64_t r1, float *dx, const float *dy, const void *idx, int idx_i64,
                             int64_t len, int64_t inner, int64_t n_idx) {
    float *d = dx + o * len * inner;
    for (int64_t v = 0; v < len; v++)
        for (int64_t r = r0; r < r1; r++) d[v * inner + r] = 0.0f;
    for (int64_t j = 0; j < n_idx; j++) {
        int64_t v = ck_k_gather_index(idx, idx_i64, j, len);
        if (v < 0) continue;
        const float *s = dy + (o * n_idx + j) * inner;
        for (int64_t r = r0; r < r1; r++) d[v * inner + r] += s[r];
    }
}

/* The output indices along one axis whose Pad source (ck_k_pad_axis_src) is input index c, as
 * at most two progressions first[r] + q * step, q < cnt[r], each increasing: constant mode one
 * index, edge one run (the first and last input elements take the pads), reflect the two
 * mirror classes modulo 2 (len - 1) (one at the ends, where they coincide). */
CK_DEV void ck_k_pad_axis_dst(int64_t c, int64_t len, int64_t out, int64_t begin, int mode, int64_t *first, int64_t *cnt,
                              int64_t *step) {
    cnt[0] = cnt[1] = 0;
    first[0] = first[1] = 0;
    *step = 1;
    if (mode == CKRT_PAD_CONSTANT) {
        first[0] = c + begin;
        cnt[0] = first[0] >= 0 && first[0] < out;
    } else if (mode == CKRT_PAD_EDGE || len == 1) {
        int64_t lo = c == 0 ? 0 : c + begin, hi = c == len - 1 ? out - 1 : c + begin;
        lo = lo < 0 ? 0 : lo;
        hi = hi > out - 1 ? out - 1 : hi;
        first[0] = lo;
        cnt[0] = hi >= lo ? hi - lo + 1 : 0;
    } else {
        int64_t p = 2 * (len - 1);
        *step = p;
        for (int r = 0; r < (c == 0 || c == len - 1 ? 1 : 2); r++) {
            int64_t f = ((r == 0 ? c + begin : begin - c) % p + p) % p;
            first[r] = f;
            cnt[r] = f < out ? (out - 1 - f) / p + 1 : 0;
        }
    }
}

/* Pad's gradient, element j of dx: (in_dims): the sum of the dy: (out_dims) elements Pad copied
 * from x element j, visited in one fixed order (axis by axis, each axis's progressions in
 * turn), so every backend sums the same terms the same way. in_dims, out_dims, begin: (rank) */
CK_DEV float ck_k_pad_grad(int64_t j, const float *dy, int rank, const int64_t *in_dims, const int64_t *out_dims,
                           const int64_t *begin, int mode) {
    int64_t first[CK_K_MAX_RANK][2], cnt[CK_K_MAX_RANK][2], step[CK_K_MAX_RANK], pos[CK_K_MAX_RANK];
    for (int k = rank - 1; k >= 0; k--) {
        ck_k_pad_axis_dst(j % in_dims[k], in_dims[k], out_dims[k], begin[k], mode, first[k], cnt[k], &step[k]);
        if (cnt[k][0] + cnt[k][1] == 0) return 0.0f;
        j /= in_dims[k];
        pos[k] = 0;
    }
    float s = 0.0f;
    for (;;) {
        int64_t off = 0;
        for (int k = 0; k < rank; k++) {
            int64_t q = pos[k], r = q < cnt[k][0] ? 0 : 1;
            off = off * out_dims[k] + first[k][r] + (r ? q - cnt[k][0] : q) * step[k];
        }
        s += dy[off];
        int k = rank - 1;
        while (k >= 0 && ++pos[k] == cnt[k][0] + cnt[k][1]) pos[k--] = 0;
        if (k < 0) return s;
    }
}

/* Slice's gradient: dx zeroed, then dy element j lands at ck_k_strided_src(j, rank, dy_dims,
 * strides, base), the element Slice read it from (distinct for distinct j: no accumulation). */

#endif
