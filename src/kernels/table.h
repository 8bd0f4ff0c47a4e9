/* table.h - a family's lines of table.def, for the file that instantiates
 * its core. TK_FAMILY_ROWS: with TK_MATCH_<family> defined as TK_T_PROBE,
 *
 *   #define TK_CONFIG(name, family, bm, bn, bk, wm, wn, swap, first, rank, description) \
 *       TK_T_WHEN(TK_MATCH_##family)(MY_ROW(bm, bn, swap))
 *   #include "table.def"
 *
 * expands MY_ROW for that family's lines and nothing for the others: the
 * family's template instances are then exactly its table lines. (The
 * preprocessor test: TK_MATCH_<family> expands to "~, 1" for the family
 * matched and stays a lone identifier for any other, so the second of
 * "TK_MATCH_<family>, 0" is 1 or 0.) */
#ifndef TK_KERNELS_TABLE_H
#define TK_KERNELS_TABLE_H

#define TK_T_PROBE ~, 1
#define TK_T_SECOND(a, b, ...) b
#define TK_T_IS(...) TK_T_SECOND(__VA_ARGS__, 0, ~)
#define TK_T_CAT_(a, b) a##b
#define TK_T_CAT(a, b) TK_T_CAT_(a, b)
#define TK_T_IF_1(...) __VA_ARGS__
#define TK_T_IF_0(...)
#define TK_T_WHEN(probe) TK_T_CAT(TK_T_IF_, TK_T_IS(probe))

#endif /* TK_KERNELS_TABLE_H */
