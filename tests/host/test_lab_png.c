/* test_lab_png.c - the PNG writer and verify's error-map picture, read back
 * by a decoder written here (signature, chunk CRCs, IHDR, PLTE, the zlib
 * stream of stored blocks and its Adler-32, filter bytes): the pixels that
 * come out must be the ones that went in, and the error map of a planted
 * bug must show the bad tile in the colour of its error, outlined, and
 * every other tile plain. The checksums are first checked against their
 * specifications' check values. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "lab/lab.h"
#include "check.h"

typedef struct image {
    int w, h, ncolors;
    unsigned char palette[256][3];
    unsigned char *index;       /* w * h */
} image;

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Decodes what tk_lab_png_write writes (palette, 8 bits, stored deflate
 * blocks, filter 0). Returns 0, or -1 with why. */
static int decode(const unsigned char *png, size_t n, image *im, char *why, size_t len)
{
    static const unsigned char sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
    memset(im, 0, sizeof *im);
    if (n < 8 || memcmp(png, sig, 8)) {
        snprintf(why, len, "no PNG signature");
        return -1;
    }
    unsigned char *z = NULL;
    size_t zn = 0, at = 8;
    int seen_end = 0;
    while (at + 12 <= n && !seen_end) {
        uint32_t cl = be32(png + at);
        const unsigned char *type = png + at + 4, *data = png + at + 8;
        if (at + 12 + cl > n) {
            snprintf(why, len, "chunk at %zu runs past the end", at);
            goto fail;
        }
        if (be32(data + cl) != tk_lab_crc32(0, type, 4 + (size_t)cl)) {
            snprintf(why, len, "CRC of chunk %.4s wrong", (const char *)type);
            goto fail;
        }
        if (!memcmp(type, "IHDR", 4)) {
            im->w = (int)be32(data);
            im->h = (int)be32(data + 4);
            if (cl != 13 || data[8] != 8 || data[9] != 3 || data[10] || data[11] || data[12]) {
                snprintf(why, len, "IHDR is not 8-bit palette, deflate, filter 0, no interlace");
                goto fail;
            }
        } else if (!memcmp(type, "PLTE", 4)) {
            im->ncolors = (int)(cl / 3);
            memcpy(im->palette, data, cl);
        } else if (!memcmp(type, "IDAT", 4)) {
            unsigned char *nz = realloc(z, zn + cl);
            if (!nz)
                goto fail;
            z = nz;
            memcpy(z + zn, data, cl);
            zn += cl;
        } else if (!memcmp(type, "IEND", 4))
            seen_end = 1;
        at += 12 + cl;
    }
    if (!seen_end || at != n || !im->w || !im->h || !im->ncolors || zn < 6) {
        snprintf(why, len, "chunks: IEND %d, end at %zu of %zu, %dx%d, %d colours, %zu zlib bytes", seen_end, at, n,
                 im->w, im->h, im->ncolors, zn);
        goto fail;
    }
    if ((z[0] & 0x0f) != 8 || ((z[0] << 8) | z[1]) % 31 || (z[1] & 0x20)) {
        snprintf(why, len, "zlib header %02x %02x", z[0], z[1]);
        goto fail;
    }
    size_t row = (size_t)im->w + 1, raw_n = row * (size_t)im->h, got = 0, zi = 2;
    unsigned char *raw = malloc(raw_n);
    im->index = malloc((size_t)im->w * (size_t)im->h);
    if (!raw || !im->index) {
        free(raw);
        goto fail;
    }
    for (int last = 0; !last;) {
        if (zi + 5 > zn || (z[zi] & 6)) {
            snprintf(why, len, "block at %zu is not a stored block", zi);
            free(raw);
            goto fail;
        }
        last = z[zi] & 1;
        size_t bn = z[zi + 1] | (size_t)z[zi + 2] << 8, nn = z[zi + 3] | (size_t)z[zi + 4] << 8;
        if ((bn ^ nn) != 0xffff || zi + 5 + bn > zn || got + bn > raw_n) {
            snprintf(why, len, "stored block at %zu: length %zu, complement %zu", zi, bn, nn);
            free(raw);
            goto fail;
        }
        memcpy(raw + got, z + zi + 5, bn);
        got += bn;
        zi += 5 + bn;
    }
    if (got != raw_n || zi + 4 != zn || be32(z + zi) != tk_lab_adler32(1, raw, raw_n)) {
        snprintf(why, len, "image data: %zu of %zu bytes, Adler-32 %s", got, raw_n,
                 zi + 4 == zn && be32(z + zi) == tk_lab_adler32(1, raw, raw_n) ? "ok" : "wrong or misplaced");
        free(raw);
        goto fail;
    }
    for (int y = 0; y < im->h; y++) {
        if (raw[(size_t)y * row]) {
            snprintf(why, len, "row %d has filter %d", y, raw[(size_t)y * row]);
            free(raw);
            goto fail;
        }
        memcpy(im->index + (size_t)y * (size_t)im->w, raw + (size_t)y * row + 1, (size_t)im->w);
    }
    free(raw);
    free(z);
    return 0;
fail:
    free(z);
    free(im->index);
    im->index = NULL;
    return -1;
}

/* Writes through write_fn into memory and decodes the result. */
static int round_trip(int (*write_fn)(FILE *, const void *), const void *arg, image *im, char *why, size_t len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f)
        return -1;
    int rc = write_fn(f, arg);
    fclose(f);
    if (rc) {
        snprintf(why, len, "the writer failed");
        free(buf);
        return -1;
    }
    rc = decode((unsigned char *)buf, n, im, why, len);
    free(buf);
    return rc;
}

static const unsigned char *rgb_at(const image *im, int x, int y)
{
    return im->palette[im->index[(size_t)y * (size_t)im->w + (size_t)x]];
}

static void test_checksums(void)
{
    /* the check values of the CRC-32 in the PNG/zlib specifications and of Adler-32 */
    CHECK(tk_lab_crc32(0, "123456789", 9) == 0xcbf43926u, "crc32 check value: %08x", tk_lab_crc32(0, "123456789", 9));
    CHECK(tk_lab_adler32(1, "Wikipedia", 9) == 0x11e60398u, "adler32 of 'Wikipedia': %08x",
          tk_lab_adler32(1, "Wikipedia", 9));
    /* in pieces as in one go; Adler-32 past its 5552-byte reduction step
     * against the sums taken modulo 65521 at every byte */
    enum { N = 20000 };
    unsigned char *x = malloc(N);
    if (!x)
        return;
    for (int i = 0; i < N; i++)
        x[i] = (unsigned char)(tk_lab_mix64((uint64_t)i) >> 7);
    CHECK(tk_lab_crc32(tk_lab_crc32(0, x, 777), x + 777, N - 777) == tk_lab_crc32(0, x, N), "crc32 in pieces");
    uint32_t a = 1, b = 0;
    for (int i = 0; i < N; i++) {
        a = (a + x[i]) % 65521;
        b = (b + a) % 65521;
    }
    CHECK(tk_lab_adler32(1, x, N) == (b << 16 | a), "adler32 of %d bytes: %08x, by the definition %08x", N,
          tk_lab_adler32(1, x, N), b << 16 | a);
    CHECK(tk_lab_adler32(tk_lab_adler32(1, x, 6000), x + 6000, N - 6000) == (b << 16 | a), "adler32 in pieces");
    free(x);
}

typedef struct raw_image {
    int w, h, ncolors;
    const unsigned char *index;
    const unsigned char (*palette)[3];
} raw_image;

static int write_raw(FILE *f, const void *arg)
{
    const raw_image *r = arg;
    return tk_lab_png_write(f, r->w, r->h, r->index, r->palette, r->ncolors);
}

static void test_png_round_trip(void)
{
    /* a small picture in one stored block, and one of 300 x 300 (90,300
     * bytes of rows) that needs two */
    static const int sizes[][2] = { { 7, 3 }, { 300, 300 }, { 1, 1 } };
    unsigned char palette[5][3] = { { 1, 2, 3 }, { 250, 0, 0 }, { 0, 250, 0 }, { 0, 0, 250 }, { 9, 99, 199 } };
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int w = sizes[s][0], h = sizes[s][1];
        unsigned char *px = malloc((size_t)w * (size_t)h);
        if (!px)
            return;
        for (int i = 0; i < w * h; i++)
            px[i] = (unsigned char)(tk_lab_mix64((uint64_t)i + 11) % 5);
        raw_image r = { w, h, 5, px, (const unsigned char (*)[3])palette };
        image im;
        char why[256] = "";
        int rc = round_trip(write_raw, &r, &im, why, sizeof why);
        CHECK(rc == 0, "%dx%d: %s", w, h, why);
        if (rc == 0) {
            CHECK(im.w == w && im.h == h && im.ncolors == 5, "%dx%d decoded as %dx%d with %d colours", w, h, im.w,
                  im.h, im.ncolors);
            CHECK(!memcmp(im.index, px, (size_t)w * (size_t)h), "%dx%d: the pixels differ", w, h);
            CHECK(!memcmp(im.palette, palette, sizeof palette), "%dx%d: the palette differs", w, h);
            free(im.index);
        }
        free(px);
    }
    /* refusals: no pixels, no colours, too many colours */
    FILE *f = tmpfile();
    unsigned char one = 0;
    CHECK(f && tk_lab_png_write(f, 0, 1, &one, (const unsigned char (*)[3])palette, 5) == -1, "0 x 1 accepted");
    CHECK(f && tk_lab_png_write(f, 1, 1, &one, (const unsigned char (*)[3])palette, 0) == -1, "no colours accepted");
    CHECK(f && tk_lab_png_write(f, 1, 1, &one, (const unsigned char (*)[3])palette, 257) == -1,
          "257 colours accepted");
    if (f)
        fclose(f);
}

typedef struct map_pic {
    const tk_lab_map *m;
    const char *title;
} map_pic;

static int write_map(FILE *f, const void *arg)
{
    const map_pic *p = arg;
    return tk_lab_errmap_png(f, p->m, p->title);
}

/* Checks every cell of the picture of m: its centre has the colour of its
 * relative error (grey when unchecked), its top-left pixel the outline
 * colour exactly when the cell failed. Returns the cells that are wrong. */
static int check_cells(const image *im, const tk_lab_map *m, const char *what)
{
    tk_lab_errmap_geom g;
    tk_lab_errmap_layout(m, &g);
    unsigned char outline[3];
    tk_lab_errmap_outline_rgb(outline);
    int wrong = 0;
    CHECK(im->w >= g.width && im->h == g.height, "%s: picture %dx%d, layout %dx%d", what, im->w, im->h, g.width,
          g.height);
    if (im->w < g.width || im->h != g.height)
        return 1;
    for (int i = 0; i < m->rows; i++)
        for (int j = 0; j < m->cols; j++) {
            char ch = m->cell[i * m->cols + j];
            unsigned char want[3];
            tk_lab_errmap_rgb(ch == ' ' ? -1.0 : m->rel[i * m->cols + j], want);
            int x = g.x0 + j * g.cell, y = g.y0 + i * g.cell;
            const unsigned char *centre = rgb_at(im, x + g.cell / 2, y + g.cell / 2);
            const unsigned char *corner = rgb_at(im, x, y);
            int failed = ch != '.' && ch != ' ';
            int ok = !memcmp(centre, want, 3) && !memcmp(corner, failed ? outline : want, 3);
            CHECK(ok, "%s: cell (%d, %d) '%c' rel %g: centre %d,%d,%d (want %d,%d,%d), corner %d,%d,%d (%s)", what, i,
                  j, ch, (double)m->rel[i * m->cols + j], centre[0], centre[1], centre[2], want[0], want[1], want[2],
                  corner[0], corner[1], corner[2], failed ? "outlined" : "plain");
            wrong += !ok;
        }
    return wrong;
}

/* A map filled by hand: every kind of cell. */
static void test_errmap_cells(void)
{
    tk_lab_map m;
    memset(&m, 0, sizeof m);
    m.rows = 3;
    m.cols = 4;
    m.cell_rows = m.unit_rows = 128;
    m.cell_cols = m.unit_cols = 256;
    const char cells[] = ".....3N .0..";
    const float rel[] = { 1e-8f, 3e-6f, 2e-5f, 4e-4f, 5e-3f, 0.5f, INFINITY, -1.0f, 0.07f, 2.0f, 1e-7f, 0.0f };
    memcpy(m.cell, cells, 12);
    memcpy(m.rel, rel, sizeof rel);
    /* distinct decades get distinct colours; NaN and unchecked their own */
    unsigned char c1[3], c2[3];
    for (int e = -7; e <= -1; e++) {
        tk_lab_errmap_rgb(3.0 * pow(10.0, e), c1);
        tk_lab_errmap_rgb(3.0 * pow(10.0, e + 1), c2);
        CHECK(memcmp(c1, c2, 3) != 0, "decades 3e%d and 3e%d share a colour", e, e + 1);
    }
    tk_lab_errmap_rgb(INFINITY, c1);
    tk_lab_errmap_rgb(-1.0, c2);
    CHECK(memcmp(c1, c2, 3) != 0, "NaN and unchecked share a colour");
    map_pic p = { &m, "k99_test 384x1024x64 row NN fp32" };
    image im;
    char why[256] = "";
    int rc = round_trip(write_map, &p, &im, why, sizeof why);
    CHECK(rc == 0, "decoding the error map: %s", why);
    if (rc)
        return;
    check_cells(&im, &m, "hand-made map");
    free(im.index);
}

/* verify's path without the GPU: tk_lab_compare of a C with one planted
 * element, then its picture. */
static void test_errmap_of_planted_bug(void)
{
    enum { M = 1000, N = 1300, K = 64 };
    float *want = malloc((size_t)M * N * 4), *got = malloc((size_t)M * N * 4), *s = malloc((size_t)M * N * 4);
    if (!want || !got || !s) {
        free(want); free(got); free(s);
        return;
    }
    tk_lab_fill(want, TK_F32, (size_t)M * N, 9);
    for (size_t i = 0; i < (size_t)M * N; i++) {
        s[i] = 8.0f;                        /* sum |a||b|: a tolerance of a few 1e-6 */
        got[i] = want[i] * (1.0f + 1e-7f);  /* an honest fp32 rounding */
    }
    const int64_t pr = 700, pc = 1100;      /* tile (5, 4) of 128 x 256 */
    got[pr * N + pc] = want[pr * N + pc] + 1.0f + fabsf(want[pr * N + pc]);
    tk_lab_cmp_spec sp = { 0 };
    sp.layout = TK_ROW_MAJOR;
    sp.m = M; sp.n = N; sp.k = K;
    sp.alpha = 1.0f; sp.out = TK_F32;
    sp.got = (tk_lab_mat){ got, TK_F32, N };
    sp.want = (tk_lab_mat){ want, TK_F32, N };
    sp.s = (tk_lab_mat){ s, TK_F32, N };
    sp.tile_rows = 128; sp.tile_cols = 256;
    tk_lab_report *r = malloc(sizeof *r);
    if (!r) {
        free(want); free(got); free(s);
        return;
    }
    int bad = tk_lab_compare(&sp, r);
    CHECK(bad == 1 && r->over == 1, "the planted element: compare %d, %lld over", bad, (long long)r->over);
    const tk_lab_map *m = &r->tiles;
    CHECK(m->rows == 8 && m->cols == 6 && m->unit_rows == 128 && m->unit_cols == 256, "map %dx%d of %lldx%lld",
          m->rows, m->cols, (long long)m->unit_rows, (long long)m->unit_cols);
    int at = (int)(pr / 128) * m->cols + (int)(pc / 256);
    CHECK(m->cell[at] != '.' && m->rel[at] >= 1.0f, "planted tile: '%c' rel %g", m->cell[at], (double)m->rel[at]);
    for (int c = 0; c < m->rows * m->cols; c++)
        if (c != at)
            CHECK(m->cell[c] == '.' && m->rel[c] >= 0.0f && m->rel[c] < 1e-5f, "tile %d: '%c' rel %g", c, m->cell[c],
                  (double)m->rel[c]);
    map_pic p = { m, "planted 1000x1300x64" };
    image im;
    char why[256] = "";
    int rc = round_trip(write_map, &p, &im, why, sizeof why);
    CHECK(rc == 0, "decoding the error map: %s", why);
    if (rc == 0) {
        check_cells(&im, m, "planted bug");
        /* the planted tile is in the darkest red, the rest in one cool colour */
        unsigned char worst[3], ok[3];
        tk_lab_errmap_rgb(2.0, worst);
        tk_lab_errmap_rgb(m->rel[0], ok);
        tk_lab_errmap_geom g;
        tk_lab_errmap_layout(m, &g);
        const unsigned char *px = rgb_at(&im, g.x0 + 4 * g.cell + g.cell / 2, g.y0 + 5 * g.cell + g.cell / 2);
        CHECK(!memcmp(px, worst, 3) && memcmp(worst, ok, 3), "planted tile's colour %d,%d,%d", px[0], px[1], px[2]);
        free(im.index);
    }
    /* a large C: the map merges tiles, the axes count tiles */
    tk_lab_map big;
    memset(&big, 0, sizeof big);
    big.rows = big.cols = 64;
    big.unit_rows = big.unit_cols = 128;
    big.cell_rows = big.cell_cols = 256;   /* 2 x 2 tiles per cell */
    memset(big.cell, '.', sizeof big.cell);
    for (int c = 0; c < 64 * 64; c++)
        big.rel[c] = 1e-6f;
    big.cell[64 * 10 + 20] = '2';
    big.rel[64 * 10 + 20] = 0.3f;
    p = (map_pic){ &big, "merged" };
    rc = round_trip(write_map, &p, &im, why, sizeof why);
    CHECK(rc == 0, "decoding the merged map: %s", why);
    if (rc == 0) {
        check_cells(&im, &big, "merged map");
        free(im.index);
    }
    free(r);
    free(want); free(got); free(s);
}

void tk_tests(void)
{
    TK_TEST(test_checksums);
    TK_TEST(test_png_round_trip);
    TK_TEST(test_errmap_cells);
    TK_TEST(test_errmap_of_planted_bug);
}
