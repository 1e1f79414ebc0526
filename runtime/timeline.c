/* timeline.c — draws live memory over the step schedule as an SVG: one polyline per curve,
 * vertical lines where the backward, the recompute groups and the update start, the peak of each
 * curve marked. Used by trainers (--timeline) and by `ckptc compare --timeline`. Plain SVG 1.1
 * written by hand: no dependencies, readable in any browser.
 */
#include "ckrt.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char *colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

static void mib(char *buf, size_t n, double bytes) {
    if (bytes >= 1024.0 * 1024 * 1024) snprintf(buf, n, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
    else if (bytes >= 1024.0 * 1024) snprintf(buf, n, "%.2f MiB", bytes / (1024.0 * 1024));
    else snprintf(buf, n, "%.1f KiB", bytes / 1024.0);
}

/* s as XML text: & < > as entities, control characters (not allowed in XML 1.0) as '?'. */
static void xml_text(FILE *f, const char *s) {
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '&') fputs("&amp;", f);
        else if (*p == '<') fputs("&lt;", f);
        else if (*p == '>') fputs("&gt;", f);
        else fputc(*p < 0x20 ? '?' : *p, f);
    }
}

int ckrt_timeline_svg(ckrt_ctx *c, const char *path, int n_curves, const ckrt_curve *curves) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return ckrt_fail(c, CKRT_ERR_IO, "cannot write '%s': %s", tmp, strerror(errno));
    const double W = 960, H = 420, L = 90, R = 20, T = 40, B = 60;
    double ymax = 1;
    for (int k = 0; k < n_curves; k++)
        for (int i = 0; i < curves[k].n; i++)
            if ((double)curves[k].bytes[i] > ymax) ymax = (double)curves[k].bytes[i];
    ymax *= 1.08;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" font-size=\"12\">\n", W,
            H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%.0f\" y=\"22\" font-size=\"15\">Planned device memory over the training step</text>\n", L);
    /* axes and gridlines */
    for (int gl = 0; gl <= 4; gl++) {
        double y = T + (H - T - B) * (1 - gl / 4.0);
        char lab[32];
        mib(lab, sizeof lab, ymax * gl / 4.0);
        fprintf(f, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, y, W - R, y);
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", L - 6, y + 4, lab);
    }
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">step (node index in the schedule; each curve scaled to its own length)</text>\n",
            (L + W - R) / 2, H - 18);
    for (int k = 0; k < n_curves; k++) {
        const ckrt_curve *cv = &curves[k];
        if (cv->n < 2) continue;
        const char *col = colors[k % 6];
        double xs = (W - L - R) / (double)(cv->n - 1);
#define X(i) (L + xs * (double)(i))
#define Y(v) (T + (H - T - B) * (1 - (double)(v) / ymax))
        /* phase and segment markers (first curve's in full, others' dashed in their color) */
        if (cv->backward_step > 0 && cv->backward_step < cv->n)
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"%s\" stroke-dasharray=\"6,3\" opacity=\"0.6\"/>\n",
                    X(cv->backward_step), T, X(cv->backward_step), H - B, col);
        for (int s = 0; s < cv->n_marks; s++)
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"%s\" stroke-dasharray=\"2,3\" opacity=\"0.5\"/>\n",
                    X(cv->marks[s]), T, X(cv->marks[s]), H - B, col);
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\" points=\"", col);
        for (int i = 0; i < cv->n; i++) fprintf(f, "%.1f,%.1f ", X(i), Y(cv->bytes[i]));
        fprintf(f, "\"/>\n");
        int pk = 0;
        for (int i = 0; i < cv->n; i++)
            if (cv->bytes[i] > cv->bytes[pk]) pk = i;
        char lab[32];
        mib(lab, sizeof lab, (double)cv->bytes[pk]);
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n", X(pk), Y(cv->bytes[pk]), col);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\" text-anchor=\"middle\">peak %s</text>\n", X(pk), Y(cv->bytes[pk]) - 8, col, lab);
        /* legend */
        fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"%s\"/>\n", W - R - 260, T + 4 + 18.0 * k, col);
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">", W - R - 242, T + 15 + 18.0 * k);
        xml_text(f, cv->label); /* a policy, nodes:REGEX included, or a path */
        fprintf(f, " (peak %s)</text>\n", lab);
#undef X
#undef Y
    }
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" fill=\"#555\">dashed: backward starts; dotted: a recompute group starts</text>\n", L,
            H - 36);
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        remove(tmp);
        return ckrt_fail(c, CKRT_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    }
    return CKRT_OK;
}
