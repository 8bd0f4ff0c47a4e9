/* lab_png.c - a PNG writer small enough to read in one sitting, for the
 * lab's pictures (the verify error map). An 8-bit palette image whose
 * pixel rows go out in a zlib stream of stored deflate blocks: nothing is
 * compressed, so no zlib is needed (a fresh Debian with gcc has no zlib
 * headers), and the CRC-32 and Adler-32 the format asks for are computed
 * here. The lab's pictures are a few hundred pixels a side at one byte per
 * pixel, a few hundred KB.
 *
 * The format (PNG specification, RFC 1950 zlib, RFC 1951 deflate):
 *   signature, IHDR (size, bit depth 8, colour type 3 = palette), PLTE (RGB
 *   triples), IDAT (the zlib stream), IEND; each chunk is length, type,
 *   data, CRC-32 of type and data (big-endian). The image data are the rows,
 *   each led by its filter byte (0: none). The zlib stream: header 0x78 0x01,
 *   deflate blocks, Adler-32 of the data (big-endian); a stored block is a
 *   header byte (1 on the last block), its length and the length's one's
 *   complement (16 bits each, little-endian), then the bytes as they are. */
#include <stdlib.h>
#include <string.h>
#include "lab.h"

#define STORED_MAX 65535    /* bytes in one stored block */

/* CRC-32 of the PNG and zlib specifications (reflected polynomial
 * 0xedb88320), bit by bit: a few MB per picture at most, no table needed. */
uint32_t tk_lab_crc32(uint32_t crc, const void *data, size_t n)
{
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int b = 0; b < 8; b++)
            crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

/* Adler-32 of zlib: two sums modulo 65521, the largest prime below 2^16;
 * reduced every 5552 bytes, the most that cannot overflow 32 bits. */
uint32_t tk_lab_adler32(uint32_t adler, const void *data, size_t n)
{
    const unsigned char *p = data;
    uint32_t a = adler & 0xffff, b = adler >> 16;
    while (n) {
        size_t chunk = n < 5552 ? n : 5552;
        n -= chunk;
        while (chunk--) {
            a += *p++;
            b += a;
        }
        a %= 65521;
        b %= 65521;
    }
    return (b << 16) | a;
}

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* One chunk: length, type, data, CRC of type and data. */
static int chunk(FILE *f, const char *type, const unsigned char *data, size_t n)
{
    unsigned char head[8], tail[4];
    put32(head, (uint32_t)n);
    memcpy(head + 4, type, 4);
    uint32_t crc = tk_lab_crc32(tk_lab_crc32(0, type, 4), data, n);
    put32(tail, crc);
    return fwrite(head, 1, 8, f) == 8 && (n == 0 || fwrite(data, 1, n, f) == n) && fwrite(tail, 1, 4, f) == 4 ? 0
                                                                                                             : -1;
}

int tk_lab_png_write(FILE *f, int w, int h, const unsigned char *index, const unsigned char (*palette)[3],
                     int ncolors)
{
    if (w <= 0 || h <= 0 || ncolors < 1 || ncolors > 256)
        return -1;
    /* the raw image data: each row led by its filter byte */
    size_t row = (size_t)w + 1, raw_n = row * (size_t)h;
    size_t blocks = (raw_n + STORED_MAX - 1) / STORED_MAX;
    size_t z_n = 2 + raw_n + 5 * blocks + 4;
    unsigned char *raw = malloc(raw_n), *z = malloc(z_n);
    int rc = -1;
    if (!raw || !z)
        goto out;
    for (int y = 0; y < h; y++) {
        raw[(size_t)y * row] = 0;
        memcpy(raw + (size_t)y * row + 1, index + (size_t)y * (size_t)w, (size_t)w);
    }
    /* zlib header: deflate with a 32K window (0x78), no preset dictionary,
     * the check bits making 0x7801 a multiple of 31 */
    size_t at = 0;
    z[at++] = 0x78;
    z[at++] = 0x01;
    for (size_t done = 0; done < raw_n;) {
        size_t n = raw_n - done < STORED_MAX ? raw_n - done : STORED_MAX;
        z[at++] = done + n == raw_n;   /* BFINAL on the last block, BTYPE 00 (stored) */
        z[at++] = (unsigned char)n;
        z[at++] = (unsigned char)(n >> 8);
        z[at++] = (unsigned char)~n;
        z[at++] = (unsigned char)(~n >> 8);
        memcpy(z + at, raw + done, n);
        at += n;
        done += n;
    }
    put32(z + at, tk_lab_adler32(1, raw, raw_n));
    at += 4;
    static const unsigned char sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
    unsigned char ihdr[13], plte[3 * 256];
    put32(ihdr, (uint32_t)w);
    put32(ihdr + 4, (uint32_t)h);
    ihdr[8] = 8;    /* bits per palette index */
    ihdr[9] = 3;    /* colour type: palette */
    ihdr[10] = ihdr[11] = ihdr[12] = 0;   /* deflate, adaptive filtering, no interlace */
    for (int i = 0; i < ncolors; i++)
        memcpy(plte + 3 * i, palette[i], 3);
    if (fwrite(sig, 1, 8, f) == 8 && !chunk(f, "IHDR", ihdr, 13) && !chunk(f, "PLTE", plte, 3 * (size_t)ncolors) &&
        !chunk(f, "IDAT", z, at) && !chunk(f, "IEND", NULL, 0))
        rc = ferror(f) ? -1 : 0;
out:
    free(raw);
    free(z);
    return rc;
}
