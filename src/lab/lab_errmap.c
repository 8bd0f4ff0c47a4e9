/* lab_errmap.c - verify's error map as a picture: one square per cell of
 * the map (a BM x BN tile of C, or a block of tiles when the map merged
 * them), coloured by the cell's worst relative error, one colour per
 * decade; failing cells (a digit or 'N' in the text map) outlined in black;
 * unchecked cells grey. Axes are numbered in tile coordinates, with a title
 * and the colour key, drawn in a 3x5 pixel font (upper case, digits, a few
 * signs) at twice its size. Written as a palette PNG by lab_png.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "lab.h"

/* ---- palette ---- */
enum { C_WHITE, C_BLACK, C_GREY, C_NAN, C_BIN0 };
#define NCOLORS (C_BIN0 + TK_LAB_ERRMAP_DECADES)

/* Bin i holds relative errors in [10^(i-7), 10^(i-6)), bin 0 everything
 * below 1e-6 and the last bin everything from 1 up: cool (blue) for
 * fp32-accurate results, yellow around bf16's rounding, dark red where the
 * value is wrong. */
static const unsigned char palette[NCOLORS][3] = {
    [C_WHITE] = { 255, 255, 255 }, [C_BLACK] = { 0, 0, 0 }, [C_GREY] = { 205, 205, 205 },
    [C_NAN] = { 200, 0, 200 },
    [C_BIN0 + 0] = { 40, 60, 130 },   /* < 1e-6 */
    [C_BIN0 + 1] = { 45, 110, 170 },  /* 1e-6 .. 1e-5 */
    [C_BIN0 + 2] = { 60, 160, 165 },  /* 1e-5 .. */
    [C_BIN0 + 3] = { 120, 195, 115 }, /* 1e-4 .. */
    [C_BIN0 + 4] = { 215, 215, 80 },  /* 1e-3 .. (bf16's half ulp, 2^-9, is in here) */
    [C_BIN0 + 5] = { 245, 160, 50 },  /* 1e-2 .. */
    [C_BIN0 + 6] = { 225, 80, 35 },   /* 1e-1 .. 1 */
    [C_BIN0 + 7] = { 150, 20, 20 },   /* >= 1: the value is wrong */
};
_Static_assert(TK_LAB_ERRMAP_DECADES == 8, "the palette has 8 decades");

/* The palette index of a cell whose worst relative error is rel. */
static int color_of(double rel)
{
    if (rel < 0.0)
        return C_GREY;
    if (isinf(rel) || isnan(rel))
        return C_NAN;
    int bin = rel > 0.0 ? (int)floor(log10(rel)) + TK_LAB_ERRMAP_DECADES - 1 : 0;
    return C_BIN0 + (bin < 0 ? 0 : bin >= TK_LAB_ERRMAP_DECADES ? TK_LAB_ERRMAP_DECADES - 1 : bin);
}

void tk_lab_errmap_rgb(double rel, unsigned char rgb[3]) { memcpy(rgb, palette[color_of(rel)], 3); }
void tk_lab_errmap_outline_rgb(unsigned char rgb[3]) { memcpy(rgb, palette[C_BLACK], 3); }

/* ---- the font: 3 x 5 pixels, rows top to bottom, '1' = ink ---- */
static const struct glyph { char ch; const char *rows; } font[] = {
    { '0', "111101101101111" }, { '1', "010110010010111" }, { '2', "111001111100111" },
    { '3', "111001111001111" }, { '4', "101101111001001" }, { '5', "111100111001111" },
    { '6', "111100111101111" }, { '7', "111001010010010" }, { '8', "111101111101111" },
    { '9', "111101111001111" }, { 'A', "010101111101101" }, { 'B', "110101110101110" },
    { 'C', "011100100100011" }, { 'D', "110101101101110" }, { 'E', "111100110100111" },
    { 'F', "111100110100100" }, { 'G', "011100101101011" }, { 'H', "101101111101101" },
    { 'I', "111010010010111" }, { 'J', "001001001101010" }, { 'K', "101101110101101" },
    { 'L', "100100100100111" }, { 'M', "101111111101101" }, { 'N', "110101101101101" },
    { 'O', "010101101101010" }, { 'P', "110101110100100" }, { 'Q', "010101101110011" },
    { 'R', "110101110101101" }, { 'S', "011100010001110" }, { 'T', "111010010010010" },
    { 'U', "101101101101111" }, { 'V', "101101101101010" }, { 'W', "101101111111101" },
    { 'X', "101101010101101" }, { 'Y', "101101010010010" }, { 'Z', "111001010100111" },
    { '-', "000000111000000" }, { '.', "000000000000010" }, { ':', "000010000010000" },
    { '/', "001001010100100" }, { '(', "010100100100010" }, { ')', "010001001001010" },
    { '=', "000111000111000" }, { '+', "000010111010000" }, { ',', "000000000010100" },
    { '_', "000000000000111" }, { '%', "101001010100101" }, { '<', "001010100010001" },
    { '>', "100010001010100" }, { '|', "010010010010010" },
};

#define SCALE 2                     /* font pixels per glyph pixel */
#define ADV (4 * SCALE)             /* advance per character */
#define GLYPH_H (5 * SCALE)
#define MARGIN 10

typedef struct canvas {
    int w, h;
    unsigned char *px;
} canvas;

static void fill(canvas *c, int x, int y, int w, int h, int color)
{
    for (int j = y < 0 ? 0 : y; j < y + h && j < c->h; j++)
        for (int i = x < 0 ? 0 : x; i < x + w && i < c->w; i++)
            c->px[(size_t)j * (size_t)c->w + (size_t)i] = (unsigned char)color;
}

static const char *glyph_of(char ch)
{
    if (ch >= 'a' && ch <= 'z')
        ch = (char)(ch - 'a' + 'A');
    for (size_t g = 0; g < sizeof font / sizeof font[0]; g++)
        if (font[g].ch == ch)
            return font[g].rows;
    return NULL;    /* a blank */
}

static int text_w(const char *s) { return (int)strlen(s) * ADV - SCALE; }

static void text(canvas *c, int x, int y, const char *s, int color)
{
    for (; *s; s++, x += ADV) {
        const char *g = glyph_of(*s);
        for (int r = 0; g && r < 5; r++)
            for (int q = 0; q < 3; q++)
                if (g[r * 3 + q] == '1')
                    fill(c, x + q * SCALE, y + r * SCALE, SCALE, SCALE, color);
    }
}

/* The tick step in cells: 1, 2, 5, 10, 20, 50, ... whichever first leaves
 * room for a label of `label_w` pixels. */
static int tick_step(int cell, int label_w)
{
    for (int step = 1;; step *= 10)
        for (int f = 1; f <= 5; f += f == 2 ? 3 : 1)   /* 1, 2, 5 */
            if (step * f * cell >= label_w + 4)
                return step * f;
}

/* Key: the decades worst first, NaN, not checked, the outline. */
#define KEY_ROWS (TK_LAB_ERRMAP_DECADES + 3)
#define KEY_SWATCH 12
#define KEY_LINE 16
#define KEY_W (KEY_SWATCH + 6 + 14 * ADV)

static const char *const key_title = "REL. ERROR";

static void key_label(int row, char *buf, size_t len)
{
    if (row < TK_LAB_ERRMAP_DECADES) {
        int bin = TK_LAB_ERRMAP_DECADES - 1 - row, e = bin - (TK_LAB_ERRMAP_DECADES - 1);
        if (bin == TK_LAB_ERRMAP_DECADES - 1)
            snprintf(buf, len, ">= 1");
        else if (bin == 0)
            snprintf(buf, len, "< 1E%d", e + 1);
        else
            snprintf(buf, len, "1E%d", e);
    } else
        snprintf(buf, len, "%s", row == TK_LAB_ERRMAP_DECADES ? "NAN OR INF" : row == TK_LAB_ERRMAP_DECADES + 1
                                                                                 ? "NOT CHECKED"
                                                                                 : "FAILED");
}

static int digits(int64_t v)
{
    int d = 1;
    while (v >= 10) {
        v /= 10;
        d++;
    }
    return d;
}

/* Tiles per cell along each side (the map merges cells past TK_LAB_MAP_MAX). */
static int64_t per_cell(int64_t cell, int64_t unit) { return unit > 0 && cell % unit == 0 ? cell / unit : 1; }

static void subtitle(const tk_lab_map *m, char *buf, size_t len)
{
    int64_t fr = per_cell(m->cell_rows, m->unit_rows), fc = per_cell(m->cell_cols, m->unit_cols);
    if (fr == 1 && fc == 1)
        snprintf(buf, len, "worst relative error per %lldx%lld tile of C", (long long)m->cell_rows,
                 (long long)m->cell_cols);
    else
        snprintf(buf, len, "worst relative error per %lldx%lld tiles (%lldx%lld of C)", (long long)fr,
                 (long long)fc, (long long)m->cell_rows, (long long)m->cell_cols);
}

void tk_lab_errmap_layout(const tk_lab_map *m, tk_lab_errmap_geom *g)
{
    int rows = m->rows > 0 ? m->rows : 1, cols = m->cols > 0 ? m->cols : 1;
    int side = rows > cols ? rows : cols;
    g->cell = 480 / side;
    g->cell = g->cell < 6 ? 6 : g->cell > 40 ? 40 : g->cell;
    g->outline = g->cell >= 16 ? 2 : 1;
    int64_t last_row = (int64_t)(rows - 1) * per_cell(m->cell_rows, m->unit_rows);
    int label_w = digits(last_row) * ADV;
    int left = text_w("tile row");
    left = left > label_w ? left : label_w;
    g->x0 = MARGIN + left + 6;
    /* title, subtitle, "tile col", the column numbers */
    g->y0 = MARGIN + 4 * (GLYPH_H + 6) + 4;
    int grid_w = cols * g->cell, grid_h = rows * g->cell;
    g->width = g->x0 + grid_w + 20 + KEY_W + MARGIN;
    g->height = g->y0 + grid_h + MARGIN;
    int key_h = g->y0 + (KEY_ROWS + 1) * KEY_LINE + MARGIN;
    g->height = g->height > key_h ? g->height : key_h;
}

int tk_lab_errmap_png(FILE *f, const tk_lab_map *m, const char *title)
{
    tk_lab_errmap_geom g;
    tk_lab_errmap_layout(m, &g);
    char sub[160];
    subtitle(m, sub, sizeof sub);
    int need = MARGIN + (text_w(title) > text_w(sub) ? text_w(title) : text_w(sub)) + MARGIN;
    canvas c = { g.width > need ? g.width : need, g.height, NULL };
    c.px = calloc((size_t)c.w * (size_t)c.h, 1);    /* C_WHITE is 0 */
    if (!c.px)
        return -1;
    int y = MARGIN;
    text(&c, MARGIN, y, title, C_BLACK);
    text(&c, MARGIN, y += GLYPH_H + 6, sub, C_BLACK);
    text(&c, g.x0, y += GLYPH_H + 6, "tile col", C_BLACK);
    text(&c, MARGIN, y + GLYPH_H + 6, "tile row", C_BLACK);
    y += GLYPH_H + 6;
    /* column numbers above, row numbers left, in tile coordinates */
    int64_t fr = per_cell(m->cell_rows, m->unit_rows), fc = per_cell(m->cell_cols, m->unit_cols);
    int cstep = tick_step(g.cell, digits((int64_t)(m->cols - 1) * fc) * ADV);
    int rstep = tick_step(g.cell, GLYPH_H);
    char num[32];
    for (int j = 0; j < m->cols; j += cstep) {
        snprintf(num, sizeof num, "%lld", (long long)(j * fc));
        int cx = g.x0 + j * g.cell + g.cell / 2;
        text(&c, cx - text_w(num) / 2, y, num, C_BLACK);
        fill(&c, cx, g.y0 - 3, 1, 3, C_BLACK);
    }
    for (int i = 0; i < m->rows; i += rstep) {
        snprintf(num, sizeof num, "%lld", (long long)(i * fr));
        int cy = g.y0 + i * g.cell + g.cell / 2;
        text(&c, g.x0 - 6 - text_w(num), cy - GLYPH_H / 2, num, C_BLACK);
        fill(&c, g.x0 - 3, cy, 3, 1, C_BLACK);
    }
    /* the cells; a 1-pixel white gap between them where they are big enough */
    int gap = g.cell >= 10;
    for (int i = 0; i < m->rows; i++)
        for (int j = 0; j < m->cols; j++) {
            int at = i * m->cols + j, x = g.x0 + j * g.cell, yy = g.y0 + i * g.cell, s = g.cell - gap;
            char ch = m->cell[at];
            fill(&c, x, yy, s, s, ch == ' ' ? C_GREY : color_of(m->rel[at]));
            if (ch != '.' && ch != ' ') {   /* failed: outlined */
                fill(&c, x, yy, s, g.outline, C_BLACK);
                fill(&c, x, yy + s - g.outline, s, g.outline, C_BLACK);
                fill(&c, x, yy, g.outline, s, C_BLACK);
                fill(&c, x + s - g.outline, yy, g.outline, s, C_BLACK);
            }
        }
    /* the key */
    int kx = g.x0 + m->cols * g.cell + 20, ky = g.y0;
    text(&c, kx, ky, key_title, C_BLACK);
    for (int r = 0; r < KEY_ROWS; r++) {
        int sy = ky + (r + 1) * KEY_LINE;
        char lab[32];
        key_label(r, lab, sizeof lab);
        if (r < TK_LAB_ERRMAP_DECADES)
            fill(&c, kx, sy, KEY_SWATCH, KEY_SWATCH, C_BIN0 + TK_LAB_ERRMAP_DECADES - 1 - r);
        else if (r == TK_LAB_ERRMAP_DECADES)
            fill(&c, kx, sy, KEY_SWATCH, KEY_SWATCH, C_NAN);
        else if (r == TK_LAB_ERRMAP_DECADES + 1)
            fill(&c, kx, sy, KEY_SWATCH, KEY_SWATCH, C_GREY);
        else {
            fill(&c, kx, sy, KEY_SWATCH, KEY_SWATCH, C_BLACK);
            fill(&c, kx + 2, sy + 2, KEY_SWATCH - 4, KEY_SWATCH - 4, C_WHITE);
        }
        text(&c, kx + KEY_SWATCH + 6, sy + 1, lab, C_BLACK);
    }
    int rc = tk_lab_png_write(f, c.w, c.h, c.px, palette, NCOLORS);
    free(c.px);
    return rc;
}
