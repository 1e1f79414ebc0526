/* resize.c — ONNX Resize: what ckptc accepts, its output shape, and where each output position
 * reads the input (ck_resize_taps), for shape inference here and the lowering in passes/lower.c
 * (ckptc has no Resize kernel: each resized axis becomes one Gather (nearest) or two Gathers and
 * a weighted sum (linear) of constant indices and weights).
 *
 * Accepted (opsets 13-18): mode nearest or linear (cubic is refused); coordinate_transformation_mode
 * half_pixel (the default), pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn
 * (tf_crop_and_resize, which reads roi, is refused); every nearest_mode; scales or sizes as
 * constants, for every axis or for opset 18's `axes`; antialias where it changes nothing
 * (nearest, or no axis shrinking); keep_aspect_ratio_policy stretch. Per axis, with scale s the given scale (scales) or out / in (sizes), the output
 * position i reads the input coordinate
 *   half_pixel          (i + 0.5) / s - 0.5
 *   pytorch_half_pixel  (i + 0.5) / s - 0.5, or 0 when the axis' output length is 1
 *   align_corners       i (in - 1) / (out - 1), or 0 when out is 1
 *   asymmetric          i / s
 *   tf_half_pixel_for_nn (i + 0.5) / s
 * nearest takes the input index that coordinate rounds to (nearest_mode: round_prefer_floor (the
 * default), round_prefer_ceil, floor, ceil); linear the two indices around it, weighted by the
 * distance; indices outside the axis are clamped to it (the spec's edge padding, PyTorch's clamp).
 * Lengths and coordinates are computed in float32 from the float32 scales (as onnxruntime does,
 * and so the output lengths a PyTorch export declares): floor(in * scale) for scales, and
 * out / in as the scale for sizes. Where the spec's reference implementation and PyTorch /
 * onnxruntime part (align_corners, and pytorch_half_pixel's "output length 1", with scales whose
 * in * scale is not a whole number: the reference takes that fraction as length_resized, the
 * others the output length), ckptc refuses and names the fix (export with sizes), rather than
 * match one and silently differ from the other.
 */
#include "ck_ir.h"

#include <math.h>
#include <string.h>

enum { COORD_HALF_PIXEL, COORD_PYTORCH_HALF_PIXEL, COORD_ALIGN_CORNERS, COORD_ASYMMETRIC, COORD_TF_HALF_PIXEL_FOR_NN };
enum { NEAREST_ROUND_PREFER_FLOOR, NEAREST_ROUND_PREFER_CEIL, NEAREST_FLOOR, NEAREST_CEIL };

static int pick(const char *s, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

/* Whether input i is given with elements (an empty scales or sizes counts as absent). */
static bool given(const ck_node *n, int i) { return i < n->n_in && n->in[i] && ck_value_numel(n->in[i]) > 0; }

ck_status ck_resize_geometry(ck_node *n, ck_resize *r, ck_diag *d) {
    static const char *const coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn"};
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    const ck_value *x = n->in[0];
    memset(r, 0, sizeof *r);
    const char *mode = ck_attr_str(n, "mode", "nearest"), *coord = ck_attr_str(n, "coordinate_transformation_mode", "half_pixel");
    const char *nm = ck_attr_str(n, "nearest_mode", "round_prefer_floor");
    if (strcmp(mode, "nearest") != 0 && strcmp(mode, "linear") != 0)
        return ck_node_err(d, n, CK_ERR_UNSUPPORTED, "mode '%s': ckptc supports nearest and linear", mode);
    r->linear = strcmp(mode, "linear") == 0;
    if ((r->coord = pick(coord, coords, 5)) < 0)
        return ck_node_err(d, n, CK_ERR_UNSUPPORTED,
                           "coordinate_transformation_mode '%s': ckptc supports half_pixel, pytorch_half_pixel, align_corners, "
                           "asymmetric and tf_half_pixel_for_nn", coord);
    if ((r->nearest = pick(nm, nearests, 4)) < 0) return ck_node_err(d, n, CK_ERR_UNSUPPORTED, "nearest_mode '%s' is not known", nm);
    const char *keep = ck_attr_str(n, "keep_aspect_ratio_policy", "stretch");
    if (strcmp(keep, "stretch") != 0)
        return ck_node_err(d, n, CK_ERR_UNSUPPORTED, "keep_aspect_ratio_policy '%s': ckptc supports stretch", keep);
    if (x->dtype != CK_F32)
        return ck_node_err(d, n, CK_ERR_UNSUPPORTED, "input '%s' has dtype %s; ckptc resizes float32", x->name, ck_dtype_name(x->dtype));
    bool by_scales = given(n, 2), by_sizes = given(n, 3);
    if (by_scales == by_sizes)
        return ck_node_err(d, n, CK_ERR_SHAPE, "exactly one of scales and sizes must be given (with elements)");
    const ck_value *v = n->in[by_scales ? 2 : 3];
    if (!v->data) {
        char sh[CK_SHAPE_STR_MAX];
        return ck_node_err(d, n, CK_ERR_UNSUPPORTED, "input %d '%s' %s %s must be a constant known at compile time, but it is computed "
                           "at run time", by_scales ? 2 : 3, v->name, ck_dtype_name(v->dtype), ck_shape_str(v, sh, sizeof sh));
    }
    /* the axes the values are for: opset 18's attribute, else all */
    int64_t axes[CK_MAX_RANK];
    int na = x->rank;
    const ck_attr *aa = ck_attr_find(n, "axes");
    if (aa) {
        if (aa->kind != CK_ATTR_INTS || aa->n > x->rank) return ck_node_err(d, n, CK_ERR_SHAPE, "attribute 'axes' is not a list of axes");
        na = aa->n;
        for (int i = 0; i < na; i++) {
            axes[i] = aa->ints[i] < 0 ? aa->ints[i] + x->rank : aa->ints[i];
            if (axes[i] < 0 || axes[i] >= x->rank) return ck_node_err(d, n, CK_ERR_SHAPE, "axis %lld is out of range", (long long)aa->ints[i]);
            for (int j = 0; j < i; j++)
                if (axes[j] == axes[i]) return ck_node_err(d, n, CK_ERR_SHAPE, "axis %lld is repeated in 'axes'", (long long)aa->ints[i]);
        }
    } else
        for (int i = 0; i < na; i++) axes[i] = i;
    if (ck_value_numel(v) != na)
        return ck_node_err(d, n, CK_ERR_SHAPE, "%s '%s' has %lld elements for %d axes", by_scales ? "scales" : "sizes", v->name,
                           (long long)ck_value_numel(v), na);
    r->rank = x->rank;
    for (int a = 0; a < x->rank; a++) r->out[a] = x->dims[a], r->scale[a] = 1.0f;
    for (int i = 0; i < na; i++) {
        int a = (int)axes[i];
        if (by_scales) {
            float s = (float)ck_value_get_f(v, i), len = (float)x->dims[a] * s;
            if (!(s > 0.0f) || !(len <= (float)((int64_t)1 << 31)))
                return ck_node_err(d, n, CK_ERR_SHAPE, "scale %g for axis %d must be positive and give at most 2^31 elements", (double)s, a);
            r->scale[a] = s;
            r->out[a] = (int64_t)floorf(len);
            bool whole = (float)r->out[a] == len;
            if (!whole && ((r->coord == COORD_ALIGN_CORNERS && r->out[a] > 1) || (r->coord == COORD_PYTORCH_HALF_PIXEL && r->out[a] == 1 && len > 1.0f)))
                return ck_node_err(d, n, CK_ERR_UNSUPPORTED,
                                   "%s with scale %g on axis %d (length %lld): %lld x %g = %g is not a whole length, where the ONNX "
                                   "reference and PyTorch/onnxruntime disagree; export with sizes (F.interpolate(size=...)) instead",
                                   coord, (double)s, a, (long long)x->dims[a], (long long)x->dims[a], (double)s, (double)len);
        } else {
            int64_t o = ck_value_get_i(v, i);
            if (o < 0 || o > ((int64_t)1 << 31)) return ck_node_err(d, n, CK_ERR_SHAPE, "size %lld for axis %d is out of range", (long long)o, a);
            r->out[a] = o;
            r->scale[a] = x->dims[a] > 0 ? (float)o / (float)x->dims[a] : 1.0f;
        }
        if (r->out[a] > 0 && x->dims[a] == 0)
            return ck_node_err(d, n, CK_ERR_SHAPE, "axis %d of '%s' is empty and cannot be resized to %lld", a, x->name, (long long)r->out[a]);
    }
    bool shrinks = false;
    for (int a = 0; a < x->rank; a++) shrinks = shrinks || r->out[a] < x->dims[a];
    if (ck_attr_int(n, "antialias", 0) && r->linear && shrinks)
        return ck_node_err(d, n, CK_ERR_UNSUPPORTED, "antialias=1 when linear resizing shrinks an axis is not supported");
    return CK_OK;
}

/* The input coordinate output position i of axis a reads (in input units), in float32. */
static float coordinate(const ck_resize *r, int a, int64_t i, int64_t in) {
    float s = r->scale[a], out = (float)r->out[a], fi = (float)i;
    switch (r->coord) {
    case COORD_PYTORCH_HALF_PIXEL: return out > 1.0f ? (fi + 0.5f) / s - 0.5f : 0.0f;
    case COORD_ALIGN_CORNERS: return out > 1.0f ? fi * (float)(in - 1) / (out - 1.0f) : 0.0f;
    case COORD_ASYMMETRIC: return fi / s;
    case COORD_TF_HALF_PIXEL_FOR_NN: return (fi + 0.5f) / s;
    default: return (fi + 0.5f) / s - 0.5f;
    }
}

static int64_t clamp(int64_t v, int64_t in) { return v < 0 ? 0 : v >= in ? in - 1 : v; }

bool ck_resize_taps(const ck_resize *r, int a, int64_t in, int64_t i, int64_t *i0, int64_t *i1, float *w1) {
    float c = coordinate(r, a, i, in), f = floorf(c);
    if (!r->linear) {
        float frac = c - f;
        int64_t k;
        switch (r->nearest) {
        case NEAREST_ROUND_PREFER_CEIL: k = (int64_t)(frac >= 0.5f ? f + 1.0f : f); break;
        case NEAREST_FLOOR: k = (int64_t)f; break;
        case NEAREST_CEIL: k = (int64_t)ceilf(c); break;
        default: k = (int64_t)(frac > 0.5f ? f + 1.0f : f); break;
        }
        *i0 = *i1 = clamp(k, in), *w1 = 0.0f;
        return false;
    }
    *i0 = clamp((int64_t)f, in), *i1 = clamp((int64_t)f + 1, in), *w1 = c - f;
    return *i0 != *i1 && *w1 != 0.0f;
}

ck_status ck_infer_resize(ck_node *n, ck_diag *d) {
    ck_resize r;
    ck_status st = ck_resize_geometry(n, &r, d);
    if (st) return st;
    ck_node_set_out(n, 0, n->in[0]->dtype, r.rank, r.out);
    return CK_OK;
}
