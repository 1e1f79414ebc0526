/* main.c — ckrt_main: everything a generated program does around its step functions (the flags,
 * files and report are in main_flags.c, main_files.c and main_report.c; main.h holds the run).
 *
 * Order of work: parse flags, allocate the arena once (the compiler's planned size plus a guard
 * zone), load weights.bin into the static region (magic, version, layout and checksum checked),
 * zero the optimizer state, read each --input .npy (dtype and shape must match exactly; no silent
 * conversion) or fill it from the seed, paint the dynamic region with a canary, run the steps,
 * then measure the high-water mark independently of the plan: the highest arena byte that no
 * longer holds the canary after the first step. A guard zone past the planned end catches any
 * kernel writing outside the plan. Files (outputs, gradients, parameters, weights, report) are
 * written through temporary names renamed into place: a failure never leaves half a file.
 *
 * Training: each step runs the forward, checks the loss (a non-finite loss reruns the forward
 * with every output checked, to name the first node that produced a NaN/Inf, unless
 * --allow-nonfinite), then the backward, which updates each parameter as soon as its gradient is
 * final (ckptc's early updates), then the updates left for the end. The check comes before any
 * update, so a step with a non-finite loss changes no parameter. --dump-grads: on the last step
 * each gradient is copied to a host buffer (outside the planned arena) right before its update
 * (ckrt_grad_ready), and written with the other files after the run.
 */
#include "main.h"
#include "ckrt_pool.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define GUARD_BYTES 4096
#define CANARY_BYTE 0xCB

/* ---------------------------------------------------------------- steps */

/* Forward, the loss check, then the backward (with the early updates) of micro-batch c->micro of
 * step s (the only one without --grad-accum); its loss in *loss. */
static int train_local(run *r, int64_t s, float *loss_out) {
    ckrt_ctx *c = &r->c;
    const ckrt_program *p = r->p;
    CKRT_TRY(p->forward(c));
    CKRT_TRY(c->be->synchronize(c));
    ckrt_run_debug_kill("step", s + 1);
    c->node = NULL;
    float loss;
    CKRT_TRY(ckrt_arena_read(c, p->loss_offset, &loss, (int64_t)sizeof loss));
    *loss_out = loss;
    if (!isfinite(loss) && !r->allow_nonfinite) {
        /* rerun the forward (no parameter is updated before the backward) checking every output */
        c->check_finite = 1;
        int rc = p->forward(c);
        c->check_finite = 0;
        c->node = NULL; /* the message names the node itself */
        if (rc) {
            char msg[sizeof c->msg];
            snprintf(msg, sizeof msg, "%s", c->msg);
            return ckrt_fail(c, CKRT_ERR_DATA, "step %lld: the loss is %g; first non-finite tensor: %s (rerun with "
                             "--allow-nonfinite to go on)", (long long)(s + 1), (double)loss, msg);
        }
        return ckrt_fail(c, CKRT_ERR_DATA, "step %lld: the loss is %g but no forward tensor is non-finite on a rerun", (long long)(s + 1),
                         (double)loss);
    }
    CKRT_TRY(p->backward(c));
    return c->be->synchronize(c);
}

/* --clip-grad-norm (every update in update(), after the backward): the global L2 norm of the
 * gradients the updates will read (accumulated over the micro-batches and divided by K), summed
 * in double in parameter order; the updates then scale them by min(1, max / (norm + 1e-6)), as
 * torch.nn.utils.clip_grad_norm_. */
static int clip_gradients(run *r, double *norm) {
    ckrt_ctx *c = &r->c;
    const ckrt_program *p = r->p;
    double sq = 0;
    for (int k = 0; k < p->n_state; k++) {
        const ckrt_state *st = &p->state[k];
        if (st->grad_offset < 0) continue;
        const float *acc = c->accum > 1 && st->acc_offset >= 0 ? (const float *)(const void *)(c->arena + st->acc_offset) : NULL;
        double s = 0;
        CKRT_TRY(ckrt_run_grad_pass(c, (const float *)(const void *)(c->arena + st->grad_offset), acc, ckrt_numel(st->rank, st->dims),
                                    NULL, &s));
        sq += s;
    }
    *norm = sqrt(sq);
    float coef = (float)(r->clip / (*norm + 1e-6));
    if (coef < 1.0f) c->grad_scale *= coef;
    return CKRT_OK;
}

/* One training step: K micro-batches (--grad-accum K; 1 without), each forward and backward, the
 * updates of the first K - 1 only accumulating their gradients; the step's loss is their mean.
 * On the last step --dump-grads copies each gradient as its update reads it (the files are
 * written after the run). Data parallel: the backward's all-reduce node averaged the gradients
 * bucket by bucket once every rank got there (each update follows its bucket); a rank that failed
 * makes the one agreement call the others are waiting in, so all stop at the same point; the loss
 * becomes the ranks' mean; buffers and replica checks follow (dp.c). */
static int train_step(run *r, int64_t s) {
    ckrt_ctx *c = &r->c;
    const ckrt_program *p = r->p;
    int64_t K = r->accum;
    int rc = s + 1 == r->steps && r->grads_dir && ckrt_dp_writes(r->dp) ? ckrt_run_alloc_grad_dump(r) : CKRT_OK;
    c->step = s + 1;
    c->lr_scale = ckrt_run_lr_scale(r, s);
    c->grad_scale = K > 1 ? 1.0f / (float)K : 1.0f;
    r->lrs[s] = p->lr * (double)c->lr_scale;
    r->grad_norms[s] = NAN;
    c->grad_sq = r->grad_sq && !r->clip ? r->grad_sq : NULL; /* clipping takes the norm itself */
    for (int k = 0; c->grad_sq && k < p->n_state; k++) c->grad_sq[k] = 0;
    double loss_sum = 0;
    for (int64_t m = 0; !rc && m < K; m++) {
        c->micro = (int)m;
        float loss = 0;
        rc = m ? ckrt_run_feed(r, s * K + m) : CKRT_OK; /* the first one was fed with the step */
        if (!rc) rc = train_local(r, s, &loss);
        loss_sum += loss;
        if (!rc && m + 1 < K) rc = p->update(c); /* the updates after the backward accumulate too */
    }
    r->losses[s] = loss_sum / (double)K;
    if (r->dp && !ckrt_dp_agreed(r->dp)) rc = ckrt_dp_after_backward(r->dp, c, rc, &r->losses[s]);
    if (rc) return rc;
    if (r->clip) CKRT_TRY(clip_gradients(r, &r->grad_norms[s]));
    CKRT_TRY(p->update(c));
    CKRT_TRY(c->be->synchronize(c));
    if (c->grad_sq) {
        double sq = 0;
        for (int k = 0; k < p->n_state; k++) sq += c->grad_sq[k];
        r->grad_norms[s] = sqrt(sq);
    }
    return r->dp ? ckrt_dp_after_update(r->dp, c, p, s + 1, r->steps) : CKRT_OK;
}

/* What limits an allocation the system refused: the address-space limit when one is set, else
 * the memory Linux says is available. */
static void system_limit(char *buf, size_t n) {
    char b[64];
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        snprintf(buf, n, "the address-space limit (ulimit -v) is %s", ckrt_run_bytes_str(b, sizeof b, (int64_t)rl.rlim_cur));
        return;
    }
    snprintf(buf, n, "the system refused it");
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return;
    char line[256];
    long long kb;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) {
            snprintf(buf, n, "the system refused it (%s available)", ckrt_run_bytes_str(b, sizeof b, kb * 1024));
            break;
        }
    fclose(f);
}

/* --mem-limit, then the arena and the host pool. A plan over the limit, or memory the system will
 * not give, is the user's to fix (exit 2): the message names what the plan needs and the limit. */
static int alloc_memory(run *r) {
    ckrt_ctx *c = &r->c;
    const ckrt_program *p = r->p;
    char need[200], b1[64], b2[64], lim[sizeof c->msg];
    int64_t total = p->arena_bytes + p->host_bytes;
    if (p->host_bytes > 0)
        snprintf(need, sizeof need, "%s: arena %lld + host pool %lld bytes", ckrt_run_bytes_str(b1, sizeof b1, total),
                 (long long)p->arena_bytes, (long long)p->host_bytes);
    else
        snprintf(need, sizeof need, "%s for the arena", ckrt_run_bytes_str(b1, sizeof b1, total));
    if (r->mem_limit > 0 && total > r->mem_limit)
        return ckrt_fail(c, CKRT_ERR_NOMEM, "the plan needs %s, over --mem-limit %s; compile with a checkpoint policy "
                         "(ckptc --checkpoint=blocks, or --checkpoint=budget:SIZE) to plan less", need,
                         ckrt_run_bytes_str(b2, sizeof b2, r->mem_limit));
    if (c->be->arena_alloc(c, p->arena_bytes + GUARD_BYTES, &c->arena)) {
        /* a device backend says what its memory holds; the host's limits say nothing there */
        if (c->be->dev) snprintf(lim, sizeof lim, "%s", c->msg);
        else system_limit(lim, sizeof lim);
        return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate the arena in %s memory: the plan needs %s; %s", c->be->name, need, lim);
    }
    c->arena_bytes = p->arena_bytes;
    c->guard_bytes = GUARD_BYTES;
    if (p->host_bytes > 0) {
        void *h = NULL;
        if (c->be->host_alloc(c, p->host_bytes, &h)) {
            system_limit(lim, sizeof lim);
            c->be->arena_free(c, c->arena);
            c->arena = NULL;
            return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate the host pool for offloaded activations: the plan needs %s; %s", need,
                             lim);
        }
        c->host = h;
        c->host_bytes = p->host_bytes;
    }
    return CKRT_OK;
}

/* The CPU backend's thread pool: --threads N, else CKRT_NUM_THREADS, else OMP_NUM_THREADS, else
 * every core in the process's affinity mask. */
static int start_threads(run *r) {
    int n = (int)r->threads;
    r->threads_from = "--threads";
    if (!n && !(n = ckrt_threads_default(&r->threads_from)))
        return ckrt_fail(&r->c, CKRT_ERR_USAGE, "%s='%s': expected a thread count from 1 to %d", r->threads_from,
                         getenv(r->threads_from), CKRT_MAX_THREADS);
    if (ckrt_threads_set(n) != 0)
        return ckrt_fail(&r->c, CKRT_ERR_INTERNAL, "cannot start %d threads (%d running)", n, ckrt_threads());
    return CKRT_OK;
}

/* --device: the CUDA backend when asked for (an error when it cannot open) or, by default, when
 * a GPU is usable; the CPU otherwise. The first line of output says which (printed once weights
 * and inputs loaded: a program that fails before its steps prints nothing on stdout). */
static int select_device(run *r) {
    ckrt_ctx *c = &r->c;
    const char *why = "--device cpu";
    /* data parallel: every rank must pick the same backend, so the GPU is never probed for, only
     * asked for; each rank then takes the GPU of its local rank (modulo the GPUs present) */
    if (r->dp && !r->device) why = "data-parallel programs run on the CPU unless given --device cuda";
    else if (!r->device || strcmp(r->device, "cuda") == 0) {
        ckrt_cuda_options o = {.ordinal = r->dp ? ckrt_dp_local_rank() : 0, .wrap_ordinal = r->dp != NULL, .tf32 = r->tf32,
                               .quiet_probe = r->device == NULL};
        const ckrt_backend *be = NULL;
        int rc = ckrt_cuda_open(c, &o, &be);
        if (!rc) {
            c->be = be;
            snprintf(r->device_line, sizeof r->device_line, "device: cuda (%s)\n", ckrt_cuda_describe());
            return CKRT_OK;
        }
        if (r->device) {
            char msg[sizeof c->msg];
            snprintf(msg, sizeof msg, "%s", c->msg);
            return ckrt_fail(c, rc == CKRT_ERR_USAGE ? CKRT_ERR_USAGE : rc, "--device cuda: %s", msg);
        }
        why = c->msg;
    }
    c->code = 0;
    CKRT_TRY(start_threads(r));
    snprintf(r->device_line, sizeof r->device_line, "device: cpu (%.500s; %d thread%s, from %s)\n", why, ckrt_threads(),
             ckrt_threads() == 1 ? "" : "s", r->threads_from);
    return CKRT_OK;
}

/* After step s: the checkpoint --save-every asks for; on SIGINT/SIGTERM one (with --ckpt-dir),
 * then a stop saying where it is. Data parallel: rank 0 writes, every rank stops. */
static int after_step(run *r, int64_t s) {
    int sig = ckrt_run_stop_signal();
    bool save = r->ckpt_dir && ((r->save_every && (s + 1) % r->save_every == 0) || sig);
    int rc = save && ckrt_dp_writes(r->dp) ? ckrt_run_save_ckpt(r, s + 1) : CKRT_OK;
    if (rc || !sig) return rc; /* signals are caught only with --ckpt-dir */
    fflush(stdout);
    r->c.node = NULL;
    return ckrt_fail(&r->c, CKRT_ERR_STOPPED, "stopped by signal %d after step %lld; checkpoint %s/ckpt-%lld.bin (continue with --resume %s)",
                     sig, (long long)(s + 1), r->ckpt_dir, (long long)(s + 1), r->ckpt_dir);
}

static int run_program(run *r, int argc, char **argv) {
    ckrt_ctx *c = &r->c;
    const ckrt_program *p = r->p;
    r->steps = 1;
    int rc = ckrt_run_parse_args(r, argc, argv);
    if (!rc && ckrt_dp_writes(r->dp)) rc = ckrt_run_check_export(r); /* --export-*: before any step */
    c->accum = (int)r->accum;
    if (!rc) rc = select_device(r);
    if (!rc) rc = ckrt_run_open_data(r); /* sets the steps from --epochs */
    if (rc > 0 && r->dp) rc = ckrt_dp_agree(r->dp, c, rc);
    if (rc) return rc;
    if (p->n_inputs > 64) return ckrt_fail(c, CKRT_ERR_INTERNAL, "more than 64 inputs");
    r->losses = calloc((size_t)r->steps, sizeof *r->losses);
    r->step_seconds = calloc((size_t)r->steps, sizeof *r->step_seconds);
    r->lrs = calloc((size_t)r->steps, sizeof *r->lrs);
    r->grad_norms = calloc((size_t)r->steps, sizeof *r->grad_norms);
    if (r->metrics) r->grad_sq = calloc((size_t)p->n_state + 1, sizeof *r->grad_sq);
    if (!r->losses || !r->step_seconds || !r->lrs || !r->grad_norms || (r->metrics && !r->grad_sq)) return ckrt_fail(c, CKRT_ERR_NOMEM, "cannot allocate %lld steps' records", (long long)r->steps);
    CKRT_TRY(alloc_memory(r));
    c->seed = r->seed; /* dropout: the same stream on every rank, each at its own counters (ck_k_dropout_block) */
    c->rng_rank = r->dp ? (uint64_t)ckrt_dp_rank(r->dp) : 0;
    if (!(rc = ckrt_run_load_weights(r))) {
        rc = ckrt_arena_fill(c, p->weights_bytes, p->static_bytes - p->weights_bytes, 0); /* optimizer state */
        if (!rc) rc = ckrt_run_load_inputs(r);
        if (!rc && r->resume) rc = ckrt_run_resume(r); /* the static region as it was after its step */
        if (!rc && ckrt_dp_writes(r->dp)) rc = ckrt_run_check_ckpt_dir(r);
    }
    if (r->dp) { /* every rank checked its weights and inputs: stop all if one failed; same weights everywhere */
        rc = ckrt_dp_agree(r->dp, c, rc);
        if (!rc) rc = ckrt_dp_check_replicas(r->dp, c, p, "after loading the weights");
    }
    if (!rc) {
        fputs(r->device_line, stdout);
        fputs(r->resume_line, stdout);
        /* the dynamic region and the guard zone, to a multiple of 8 bytes (static_bytes is aligned) */
        int64_t paint_end = p->static_bytes + (p->arena_bytes + GUARD_BYTES - p->static_bytes) / 8 * 8;
        rc = ckrt_arena_fill(c, p->static_bytes, paint_end - p->static_bytes, CANARY_BYTE);
        double t_start = ckrt_run_now();
        if (r->ckpt_dir) ckrt_run_catch_signals();
        if (r->metrics && ckrt_dp_writes(r->dp) && !(r->metrics_f = fopen(r->metrics, r->resume ? "a" : "w")))
            rc = ckrt_fail(c, CKRT_ERR_IO, "cannot write '%s': %s", r->metrics, strerror(errno));
        if (!rc && r->profile) rc = ckrt_prof_start(c, r->profile);
        for (int64_t s = r->first_step; !rc && s < r->steps; s++) {
            double t0 = ckrt_run_now();
            if (r->profile) rc = ckrt_prof_step_begin(c);
            c->micro = 0;
            rc = ckrt_run_feed(r, s * r->accum); /* --data: this step's (first) batch */
            if (!rc && training(r)) {
                rc = train_step(r, s);
            } else if (!rc) {
                c->step = s + 1;
                rc = p->step(c);
                if (!rc) rc = c->be->synchronize(c);
            }
            rc = ckrt_run_data_context(r, s, rc);
            r->step_seconds[s] = ckrt_run_now() - t0;
            if (!rc && r->profile) rc = ckrt_prof_step_end(c, s > r->first_step || r->steps - r->first_step == 1);
            if (s == r->first_step && !rc) { /* the high-water mark of one whole step, measured before reuse hides it */
                c->node = NULL;
                int64_t top = 0;
                rc = ckrt_arena_top(c, p->static_bytes, paint_end, CANARY_BYTE, &top);
                if (!rc && top > p->arena_bytes)
                    rc = ckrt_fail(c, CKRT_ERR_INTERNAL, "a kernel wrote past the planned arena (byte %lld of %lld)",
                                   (long long)(top - 1), (long long)p->arena_bytes);
                r->measured = top;
            }
            /* --eval-every N steps and after the last one (not in the step's time) */
            bool eval_now = !rc && training(r) && r->eval_batches &&
                            ((r->eval_every && (s + 1) % r->eval_every == 0) || s + 1 == r->steps);
            double eval_s = ckrt_run_now();
            if (eval_now) rc = ckrt_run_eval(r, s + 1);
            eval_s = ckrt_run_now() - eval_s;
            if (!rc && training(r)) {
                double el = ckrt_run_now() - t_start;
                if (r->train.n) printf("epoch %lld  ", (long long)(r->epoch + 1));
                printf("step %lld/%lld  loss %.6f  %.1f ms", (long long)(s + 1), (long long)r->steps, r->losses[s],
                       r->step_seconds[s] * 1e3);
                if (eval_now) printf("  eval loss %.6f", r->eval_losses[r->n_evals - 1]);
                if (r->schedule || r->warmup) printf("  lr %.3g", r->lrs[s]);
                if (r->steps >= 20) printf("  (%.0f%%, %.1f s left)", 100.0 * (double)(s + 1) / (double)r->steps,
                                           el / (double)(s + 1) * (double)(r->steps - s - 1));
                printf("\n");
            }
            if (!rc && training(r)) rc = ckrt_run_metrics_line(r, s, eval_now ? eval_s : -1);
            if (!rc && training(r)) rc = after_step(r, s);
        }
        c->node = NULL;
        bool steps_ok = rc == CKRT_OK;
        if (!ckrt_dp_writes(r->dp)) /* data parallel: rank 0 writes every file */
            r->dump_dir = r->params_dir = r->save_weights = r->report = r->timeline = r->grads_dir = NULL;
        if (!ckrt_dp_writes(r->dp)) r->export_onnx = r->export_st = NULL; /* --export-*: rank 0 too */
        if (!rc && r->dump_dir) rc = ckrt_run_ensure_dir(c, r->dump_dir);
        for (int i = 0; !rc && r->dump_dir && i < p->n_outputs; i++) {
            const ckrt_io *io = &p->outputs[i];
            char path[4200];
            snprintf(path, sizeof path, "%s/%s.npy", r->dump_dir, io->file);
            rc = ckrt_run_write_arena_npy(c, path, io->dtype, io->rank, io->dims, io->offset);
        }
        if (!rc && r->grads_dir) rc = ckrt_run_write_npys(r, r->grads_dir, true);
        if (!rc && r->params_dir) rc = ckrt_run_write_npys(r, r->params_dir, false);
        if (!rc && r->save_weights) rc = ckrt_run_save_weights(r);
        if (!rc) rc = ckrt_run_export(r); /* --export-onnx, --export-safetensors */
        if (!rc && r->report) rc = ckrt_run_write_report(r);
        if (!rc && r->profile && ckrt_dp_writes(r->dp)) rc = ckrt_prof_write(c, r->profile);
        if (!rc && r->timeline) {
            ckrt_curve cv = {p->policy ? p->policy : p->name, p->n_timeline, p->timeline, p->backward_step, p->n_recompute_steps, p->recompute_steps};
            rc = ckrt_timeline_svg(c, r->timeline, 1, &cv);
        }
        if (r->dp && steps_ok) rc = ckrt_dp_agree(r->dp, c, rc); /* rank 0's files written, or all stop */
        if (!rc && training(r)) ckrt_run_print_summary(r);
        if (!rc)
            printf("%s: %lld step%s; planned peak %lld bytes, measured %lld bytes\n", p->name, (long long)r->steps,
                   r->steps == 1 ? "" : "s", (long long)p->arena_bytes, (long long)r->measured);
    }
    if (r->metrics_f) fclose(r->metrics_f);
    ckrt_prof_stop(c);
    ckrt_run_free_grad_dump(r);
    c->be->arena_free(c, c->arena);
    c->arena = NULL;
    if (c->host) c->be->host_free(c, c->host);
    c->host = NULL;
    if (c->be->dev) ckrt_cuda_close(c);
    return rc;
}

int ckrt_main(const ckrt_program *p, int argc, char **argv) {
    run r;
    memset(&r, 0, sizeof r);
    r.p = p;
    r.c.be = &ckrt_cpu_backend;
    r.c.lr_scale = 1.0f;
    r.c.grad_scale = 1.0f;
    ckrt_cpu_init();
    int rc = p->comm_init ? ckrt_dp_init(&r.dp, p, &r.c, &argc, &argv) : CKRT_OK;
    if (!rc) rc = run_program(&r, argc, argv);
    ckrt_threads_set(1); /* the pool's threads joined, however run_program ended */
    ckrt_run_close_data(&r); /* here: also after a failure part way through opening them */
    if (rc < 0 && r.dp) printf(ckrt_dp_usage, argv[0]);
    free(r.losses);
    free(r.step_seconds);
    free(r.lrs);
    free(r.grad_norms);
    free(r.grad_sq);
    free(r.eval_steps);
    free(r.eval_losses);
    if (r.dp) return ckrt_dp_finish(r.dp, &r.c, rc, p->name); /* prints, aborts or finalizes */
    if (rc < 0) return 0; /* --help */
    if (rc) {
        fflush(stdout);
        fprintf(stderr, "%s: error: %s\n", p->name, r.c.msg);
        return rc == CKRT_ERR_USAGE || rc == CKRT_ERR_DATA || rc == CKRT_ERR_NOMEM ? 2 : 1;
    }
    return 0;
}
