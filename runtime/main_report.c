/* main_report.c — what ckrt_main prints after training (the memory table, step time, device
 * figures) and the report JSON (--report): planned and measured peak, the plan's categories,
 * losses, step times, the device's copies and host transfers, data-parallel timings.
 */
#include "main.h"
#include "ckrt_dnnl.h"
#include "ckrt_pool.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double ckrt_run_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* "N bytes (X.Y MiB)" */
const char *ckrt_run_bytes_str(char *buf, size_t n, int64_t b) {
    static const char *unit[] = {"KiB", "MiB", "GiB", "TiB"};
    int k = -1;
    double v = (double)b;
    while (v >= 1024.0 && k < 3) v /= 1024.0, k++;
    if (k < 0) snprintf(buf, n, "%lld bytes", (long long)b);
    else snprintf(buf, n, "%lld bytes (%.1f %s)", (long long)b, v, unit[k]);
    return buf;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median step time; the first step (cold caches, page faults) is left out when there are more. */
static double median_ms(const run *r) {
    int64_t ran = r->steps - r->first_step, n = ran > 1 ? ran - 1 : ran; /* the first step run is a warm-up */
    double *t = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!t || n == 0) {
        free(t);
        return 0;
    }
    memcpy(t, r->step_seconds + r->first_step + (ran > 1), sizeof(double) * (size_t)n);
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    double m = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
    free(t);
    return m * 1e3;
}

/* The table printed after training. */
void ckrt_run_print_summary(const run *r) {
    const ckrt_program *p = r->p;
    static const char *cat[] = {"params", "inputs", "activations", "workspace", "grads", "optimizer state"};
    printf("\n  memory (planned)        bytes\n");
    for (int k = 0; k < CKRT_MEM_COUNT; k++)
        if (p->planned_bytes[k]) printf("  %-20s %12lld\n", cat[k], (long long)p->planned_bytes[k]);
    printf("  %-20s %12lld\n  %-20s %12lld\n", "planned peak", (long long)p->arena_bytes, "measured peak", (long long)r->measured);
    if (p->host_bytes) printf("  %-20s %12lld\n", "host pool (offload)", (long long)p->host_bytes);
    if (r->dp) ckrt_dp_print_summary(r->dp);
    printf("  %-20s %12.3f ms (median)\n", "step time", median_ms(r));
    ckrt_device_stats ds;
    if (r->c.be->dev && ckrt_cuda_stats((ckrt_ctx *)&r->c, &ds) == CKRT_OK) {
        printf("  %-20s %12lld of %lld (cuMemGetInfo: the whole device, CUDA context included)\n", "device used", (long long)ds.mem_used_bytes,
               (long long)ds.mem_total_bytes);
        if (ds.copy_bytes)
            printf("  %-20s %12.3f ms exposed of %.3f ms copying, %.2f GB/s\n", "offload copies", ds.copy_exposed_ms, ds.copy_ms,
                   ds.copy_ms > 0 ? (double)ds.copy_bytes / (ds.copy_ms * 1e6) : 0.0);
        printf("  %-20s %12.3f ms (weights, inputs, losses, dumps), %lld bytes of pinned staging\n", "host transfers", ds.host_io_ms,
               (long long)ds.host_staging_bytes);
        printf("  %-20s %12s\n", "kernels", ds.cache_hit ? "from the cache" : "compiled by NVRTC");
        if (ds.conv_cudnn + ds.conv_im2col)
            printf("  %-20s %12lld through cuDNN, %lld by im2col + cuBLAS (calls)\n", "convolutions", (long long)ds.conv_cudnn,
                   (long long)ds.conv_im2col);
    }
    if (training(r) && r->steps > r->first_step)
        printf("  %-20s %12.6f -> %.6f\n", "loss", r->losses[r->first_step], r->losses[r->steps - 1]);
}

/* A double as JSON: NaN and infinities (a loss with --allow-nonfinite) are null. */
static void json_num(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "%.9g", v);
    else fputs("null", f);
}

/* One JSON object per line and step, flushed: a run that is stopped keeps its lines. */
int ckrt_run_metrics_line(run *r, int64_t s, double eval_s) {
    if (!r->metrics_f) return CKRT_OK;
    double sec = r->step_seconds[s];
    int ranks = r->dp ? ckrt_dp_size(r->dp) : 1;
    int64_t K = r->accum;
    int64_t batch = r->p->n_inputs && r->p->inputs[0].rank ? r->p->inputs[0].dims[0] * ranks * K : 0;
    FILE *f = r->metrics_f;
    fprintf(f, "{\"step\": %lld, ", (long long)(s + 1));
    if (r->train.n) fprintf(f, "\"epoch\": %lld, ", (long long)(r->epoch + 1));
    fprintf(f, "\"loss\": ");
    json_num(f, r->losses[s]);
    fprintf(f, ", \"lr\": %.9g, \"grad_norm\": ", r->lrs[s]);
    json_num(f, r->grad_norms[s]);
    fprintf(f, ", \"step_ms\": %.4f, \"samples_per_s\": %.1f}\n", sec * 1e3, sec > 0 ? (double)batch / sec : 0.0);
    if (eval_s >= 0) {
        fprintf(f, "{\"step\": %lld, \"eval_loss\": ", (long long)(s + 1));
        json_num(f, r->eval_losses[r->n_evals - 1]);
        fprintf(f, ", \"eval_batches\": %lld, \"eval_ms\": %.4f}\n", (long long)r->eval_batches, eval_s * 1e3);
    }
    if (fflush(f) != 0 || ferror(f)) return ckrt_fail(&r->c, CKRT_ERR_IO, "cannot write '%s': %s", r->metrics, strerror(errno));
    return CKRT_OK;
}

int ckrt_run_write_report(run *r) {
    const ckrt_program *p = r->p;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", r->report);
    FILE *f = fopen(tmp, "w");
    if (!f) return ckrt_fail(&r->c, CKRT_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    static const char *cat[] = {"params", "inputs", "activations", "workspace", "grads", "optimizer_state"};
    fprintf(f, "{\n  \"program\": ");
    ckrt_json_str(f, p->name);
    fprintf(f, ",\n  \"backend\": \"%s\",\n  \"mode\": \"%s\",\n", r->c.be->name, training(r) ? "train" : "infer");
    if (!r->c.be->dev) {
        /* gemm: what runs the GEMMs, whose bits depend on it (ckrt_dnnl.h) */
        fprintf(f, "  \"threads\": %d,\n  \"gemm\": ", ckrt_threads());
        ckrt_json_str(f, ckrt_gemm_name());
        fprintf(f, ",\n");
    }
    ckrt_device_stats ds;
    if (r->c.be->dev && ckrt_cuda_stats(&r->c, &ds) == CKRT_OK) {
        fprintf(f, "  \"device\": {\"name\": ");
        ckrt_json_str(f, ckrt_cuda_describe());
        fprintf(f, ", \"used_bytes_context_included\": %lld, \"total_bytes\": %lld, "
                   "\"copy_bytes\": %lld, \"copy_ms\": %.3f, \"copy_exposed_ms\": %.3f, \"host_io_ms\": %.3f, "
                   "\"host_staging_bytes\": %lld, \"nvrtc_ms\": %.1f, \"kernel_cache_hit\": %s, \"conv_cudnn_calls\": %lld, "
                   "\"conv_im2col_calls\": %lld},\n",
                (long long)ds.mem_used_bytes, (long long)ds.mem_total_bytes, (long long)ds.copy_bytes,
                ds.copy_ms, ds.copy_exposed_ms, ds.host_io_ms, (long long)ds.host_staging_bytes, ds.compile_ms,
                ds.cache_hit ? "true" : "false", (long long)ds.conv_cudnn, (long long)ds.conv_im2col);
    }
    fprintf(f, "  \"planned_peak_bytes\": %lld,\n  \"measured_peak_bytes\": %lld,\n", (long long)p->arena_bytes,
            (long long)r->measured);
    /* the largest host copy of arena bytes held at once (dumps of outputs and parameters) */
    fprintf(f, "  \"host_readback_peak_bytes\": %lld,\n", (long long)r->c.readback_peak);
    fprintf(f, "  \"planned_bytes\": {");
    for (int k = 0; k < CKRT_MEM_COUNT; k++) fprintf(f, "%s\"%s\": %lld", k ? ", " : "", cat[k], (long long)p->planned_bytes[k]);
    fprintf(f, "},\n  \"static_bytes\": %lld,\n  \"seed\": %llu,\n  \"steps\": %lld,\n", (long long)p->static_bytes,
            (unsigned long long)r->seed, (long long)r->steps);
    if (r->first_step) fprintf(f, "  \"first_step\": %lld,\n", (long long)r->first_step); /* --resume: the steps before are not here */
    if (p->report_json && *p->report_json) fprintf(f, "  %s,\n", p->report_json);
    if (p->n_timeline) {
        fprintf(f, "  \"timeline\": {\"backward_step\": %d, \"update_step\": %d, \"recompute_steps\": [", p->backward_step,
                p->update_step);
        for (int i = 0; i < p->n_recompute_steps; i++) fprintf(f, "%s%d", i ? ", " : "", p->recompute_steps[i]);
        fprintf(f, "], \"bytes\": ");
        ckrt_json_i64s(f, p->n_timeline, p->timeline, ", ");
        fprintf(f, "},\n");
    }
    if (r->dp) ckrt_dp_report_json(r->dp, f);
    fprintf(f, "  \"step_time_ms\": %.4f,\n", median_ms(r));
    fprintf(f, "  \"step_seconds\": [");
    for (int64_t i = r->first_step; i < r->steps; i++) fprintf(f, "%s%.6f", i > r->first_step ? ", " : "", r->step_seconds[i]);
    fprintf(f, "],\n");
    if (r->train.n) {
        int64_t K = r->accum;
        fprintf(f, "  \"data\": {\"samples\": %lld, \"batch\": %lld, \"batches_per_epoch\": %lld, \"epochs\": %lld, "
                   "\"shuffle\": %s, \"files\": {", (long long)r->train.n_samples, (long long)r->batch, (long long)r->batches_per_epoch,
                (long long)(r->steps * K + r->batches_per_epoch - 1) / r->batches_per_epoch, r->shuffle ? "true" : "false");
        for (int k = 0; k < r->train.n; k++) {
            ckrt_json_key(f, k ? ", " : "", r->p->inputs[r->train.src[k].input].name);
            ckrt_json_str(f, r->train.src[k].path);
        }
        fprintf(f, "}},\n");
    }
    if (training(r)) {
        fprintf(f, "  \"grad_accum\": %lld,\n  \"clip_grad_norm\": ", (long long)r->accum);
        json_num(f, r->clip > 0 ? r->clip : NAN);
        fprintf(f, ",\n  \"grad_norms\": [");
        for (int64_t i = r->first_step; i < r->steps; i++) {
            fputs(i > r->first_step ? ", " : "", f);
            json_num(f, r->grad_norms[i]);
        }
        fprintf(f, "],\n  \"evals\": [");
        for (int64_t i = 0; i < r->n_evals; i++) {
            fprintf(f, "%s{\"step\": %lld, \"loss\": ", i ? ", " : "", (long long)r->eval_steps[i]);
            json_num(f, r->eval_losses[i]);
            fprintf(f, "}");
        }
        fprintf(f, "],\n");
    }
    if (training(r)) {
        fprintf(f, "  \"lrs\": [");
        for (int64_t i = r->first_step; i < r->steps; i++) fprintf(f, "%s%.9g", i > r->first_step ? ", " : "", r->lrs[i]);
        fprintf(f, "],\n");
        fprintf(f, "  \"losses\": [");
        for (int64_t i = r->first_step; i < r->steps; i++) {
            fputs(i > r->first_step ? ", " : "", f);
            json_num(f, r->losses[i]);
        }
        fprintf(f, "],\n");
    }
    fprintf(f, "  \"inputs\": {");
    for (int i = 0; i < p->n_inputs; i++) {
        ckrt_json_key(f, i ? ", " : "", p->inputs[i].name);
        fprintf(f, "\"%s\"", r->from_file[i] == 2 ? "data" : r->from_file[i] ? "file" : "random");
    }
    fprintf(f, "},\n  \"outputs\": {");
    for (int i = 0; i < p->n_outputs; i++) {
        ckrt_json_key(f, i ? ", " : "", p->outputs[i].name);
        fprintf(f, "\"%s.npy\"", p->outputs[i].file); /* sanitized: [A-Za-z0-9._-] only */
    }
    fprintf(f, "}\n}\n");
    if (fclose(f) != 0 || rename(tmp, r->report) != 0) {
        remove(tmp);
        return ckrt_fail(&r->c, CKRT_ERR_IO, "cannot write '%s': %s", r->report, strerror(errno));
    }
    return CKRT_OK;
}
