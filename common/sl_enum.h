/* sl_enum.h — one table per enumeration: the enum, its names and its "a|b|c" choice string
 * (for SL_OPT_CHOICE and SL_OPT_CHOICE_LIST options) are all generated from one X-macro list,
 * so that adding a value is one line and the three cannot drift apart.
 *
 *   #define DDP_VARIANTS(X) X(V_SYNC, "sync") X(V_BUCKETED, "bucketed") X(V_PS, "ps")
 *   SL_ENUM(ddp_variant, DDP_VARIANTS, NVARIANTS);        enum ddp_variant {V_SYNC, ..., NVARIANTS}
 *   static const char *const variant_names[] = SL_ENUM_NAMES(DDP_VARIANTS);
 *   ... SL_OPT_CHOICE_LIST, &opt_variants, 0, 0, SL_ENUM_CHOICES(DDP_VARIANTS), ...  "sync|bucketed|ps"
 *
 * An entry is X(IDENTIFIER, "name", ...): further fields (a size, a flag) may follow and are
 * ignored here; a list's own file can pick them out with its own X. */
#ifndef SL_ENUM_H
#define SL_ENUM_H

#define SL_ENUM_ID_(id, name, ...) id,
#define SL_ENUM_NAME_(id, name, ...) name,
#define SL_ENUM_BAR_(id, name, ...) "|" name

/* typedef enum { <ids>, count } type; */
#define SL_ENUM(type, LIST, count) typedef enum { LIST(SL_ENUM_ID_) count } type
/* { "a", "b", "c", } as an array initialiser */
#define SL_ENUM_NAMES(LIST) { LIST(SL_ENUM_NAME_) }
/* "a|b|c": the list as "|a|b|c" without its first bar (a constant expression) */
#define SL_ENUM_CHOICES(LIST) (&(LIST(SL_ENUM_BAR_))[1])

#endif
