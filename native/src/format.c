/* format.c: Arrow IPC streaming format, read by hand: the flatbuffers
 * through flatbuf.h, whose every access is bounds-checked. */
#include <stdio.h>
#include <string.h>

#include "flatbuf.h"
#include "format.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "funnel reads little-endian Arrow data on little-endian hosts only"
#endif

/* ------------------------------------------------------------ flatbuffer */

/* The reader is flatbuf.h's, the device parser's too (dpath.h). */

/* A string in field `slot`: position of its bytes, *len their count (0
 * when absent). */
static uint32_t fb_string(struct funnel__fb *r, struct funnel__fb_table t, int slot, uint32_t *len) {
  return funnel__fb_vector(r, t, slot, 1, len);
}

static const char *string_copy(const struct funnel__fb *r, uint32_t at, uint32_t len,
                               struct funnel__arena *arena) {
  char *s = funnel__arena_alloc(arena, (size_t)len + 1);
  if (s == NULL) return NULL;
  if (len > 0) memcpy(s, r->p + at, len);
  s[len] = '\0';
  return s;
}

/* Index of the first byte of s[0, n) that does not continue valid UTF-8,
 * or n. Strict, as Arrow Java's decoder (flatbuffers' Utf8Safe) is: no
 * overlong forms, no surrogates, nothing past U+10FFFF, no sequence cut
 * short. */
static uint32_t utf8_prefix(const uint8_t *s, uint32_t n) {
  uint32_t i = 0;
  while (i < n) {
    const uint8_t c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    uint32_t len;
    uint8_t lo = 0x80, hi = 0xBF; /* the range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;      /* overlong */
      else if (c == 0xED) hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;      /* overlong */
      else if (c == 0xF4) hi = 0x8F; /* past U+10FFFF */
    } else return i;
    if (n - i < len || s[i + 1] < lo || s[i + 1] > hi) return i;
    for (uint32_t k = 2; k < len; k++)
      if ((s[i + k] & 0xC0) != 0x80) return i;
    i += len;
  }
  return n;
}

/* "partition 3" or "reader schema", for messages about a schema */
static const char *where(int64_t index, char buf[32]) {
  if (index < 0) return "reader schema";
  snprintf(buf, 32, "partition %lld", (long long)index);
  return buf;
}

/* Fails unless the string of `len` bytes at `at` is valid UTF-8, as Arrow
 * Java needs every string of a schema to be (it throws on the first bad
 * byte), and, when `what` is carried by funnel as a C string (`nul_ok`
 * false), holds no NUL. `what` names it: "column 2 name". */
static int text_check(const struct funnel__fb *r, uint32_t at, uint32_t len, bool nul_ok, int64_t index,
                      int64_t column, const char *what, struct funnel_error *error) {
  char wbuf[32];
  const uint32_t bad = utf8_prefix(r->p + at, len);
  if (bad < len)
    return funnel__error_set(error, FUNNEL_ERR_MALFORMED, index, column, r->at + at + bad,
                             "%s: %s is not valid UTF-8 at byte %lld", where(index, wbuf), what,
                             (long long)(r->at + at + bad));
  const uint8_t *nul = nul_ok || len == 0 ? NULL : memchr(r->p + at, 0, len);
  if (nul != NULL)
    return funnel__error_set(error, FUNNEL_ERR_UNSUPPORTED, index, column,
                             r->at + (nul - r->p),
                             "%s: %s holds a NUL byte at byte %lld, which funnel cannot carry",
                             where(index, wbuf), what, (long long)(r->at + (nul - r->p)));
  return FUNNEL_OK;
}

/* Checks the custom_metadata vector (KeyValue tables) in field `slot` of
 * `t` as Arrow Java reads it: every table and string inside the metadata,
 * every key and value valid UTF-8. funnel keeps none of it; the schema
 * message it hands on carries it. `column` is -1 for the schema's own. */
static int metadata_check(struct funnel__fb *r, struct funnel__fb_table t, int slot, int64_t index, int64_t column,
                          int64_t offset, struct funnel_error *error) {
  char wbuf[32], what[64];
  uint32_t n = 0;
  const uint32_t first = funnel__fb_vector(r, t, slot, 4, &n);
  for (uint32_t i = 0; i < n && !r->bad; i++) {
    const struct funnel__fb_table kv = funnel__fb_vector_table(r, first, i);
    for (int k = 0; k < 2 && !r->bad; k++) {
      uint32_t len = 0;
      const uint32_t at = fb_string(r, kv, k, &len);
      if (r->bad) break;
      if (column < 0) snprintf(what, sizeof(what), "schema metadata %s %u", k ? "value" : "key", i);
      else snprintf(what, sizeof(what), "column %lld metadata %s %u", (long long)column,
                    k ? "value" : "key", i);
      FUNNEL_RETURN_NOT_OK(text_check(r, at, len, true, index, column, what, error));
    }
  }
  if (r->bad) {
    if (column < 0)
      return funnel__error_set(error, FUNNEL_ERR_MALFORMED, index, -1, offset,
                               "%s: corrupt custom_metadata of the Schema at offset %lld",
                               where(index, wbuf), (long long)offset);
    return funnel__error_set(error, FUNNEL_ERR_MALFORMED, index, column, offset,
                             "%s: corrupt custom_metadata of column %lld", where(index, wbuf),
                             (long long)column);
  }
  return FUNNEL_OK;
}

/* ---------------------------------------------------------------- framing */

enum { HDR_NONE = 0, HDR_SCHEMA = 1, HDR_DICTIONARY = 2, HDR_RECORD_BATCH = 3,
       HDR_TENSOR = 4, HDR_SPARSE_TENSOR = 5 };

static const char *header_name(int h) {
  switch (h) {
    case HDR_SCHEMA: return "Schema";
    case HDR_DICTIONARY: return "DictionaryBatch";
    case HDR_RECORD_BATCH: return "RecordBatch";
    case HDR_TENSOR: return "Tensor";
    case HDR_SPARSE_TENSOR: return "SparseTensor";
    default: return "unknown";
  }
}

struct message {
  int64_t offset;       /* message start */
  int64_t meta;         /* flatbuffer start */
  int64_t meta_length;
  int64_t body;
  int64_t body_length;
  int64_t end;          /* where the next message starts */
  bool eos;
  int header_type;
  struct funnel__fb fb;
  struct funnel__fb_table header;
};

/* Reads the message at `pos`. `index` is the partition, for errors. */
static int message_read(const uint8_t *bytes, int64_t length, int64_t pos,
                        int64_t index, struct message *m,
                        struct funnel_error *error) {
  char wbuf[32];
  memset(m, 0, sizeof(*m));
  m->offset = pos;
  int64_t left = length - pos;
  if (left < 4)
    return funnel__error_set(error, FUNNEL_ERR_MALFORMED, index, -1, pos,
                             "%s: truncated message header at offset %lld "
                             "(%lld bytes left, need at least 4)",
                             where(index, wbuf), (long long)pos, (long long)left);
  int64_t hdr = 4;
  int32_t meta_len = (int32_t)funnel__ld32(bytes + pos);
  if (funnel__ld32(bytes + pos) == 0xFFFFFFFFu) {
    if (left < 8)
      return funnel__error_set(error, FUNNEL_ERR_MALFORMED, index, -1, pos,
                               "%s: truncated message header at offset %lld "
                               "(continuation marker without a length)",
                               where(index, wbuf), (long long)pos);
    meta_len = (int32_t)funnel__ld32(bytes + pos + 4);
    hdr = 8;
  }
  if (meta_len == 0) {
    m->eos = true;
    m->end = pos + hdr;
    return FUNNEL_OK;
  }
  if (meta_len < 0 || meta_len > left - hdr)
    return funnel__error_set(error, FUNNEL_ERR_MALFORMED, index, -1, pos,
                             "%s: message at offset %lld declares %d bytes of "
                             "metadata but %lld bytes follow",
                             where(index, wbuf), (long long)pos, (int)meta_len,
                             (long long)(left - hdr));
  m->meta = pos + hdr;
  m->meta_length = meta_len;
  m->fb.p = bytes + m->meta;
  m->fb.n = (uint32_t)meta_len;
  m->fb.at = m->meta;

  struct funnel__fb *r = &m->fb;
  struct funnel__fb_table msg = {0, 0, 0, 0};
  if (funnel__fb_in(r, 0, 4)) msg = funnel__fb_table_at(r, funnel__ld32(r->p));
  int16_t version = funnel__fb_i16(r, msg, 0, 0);
  m->header_type = funnel__fb_u8(r, msg, 1, 0);
  uint32_t header = funnel__fb_ref(r, msg, 2);
  m->body_length = funnel__fb_i64(r, msg, 3, 0);
  if (!r->bad && header != 0) m->header = funnel__fb_table_at(r, header);
  if (r->bad || header == 0)
    return funnel__error_set(error, FUNNEL_ERR_MALFORMED, index, -1, pos,
                             "%s: corrupt Message flatbuffer at offset %lld "
                             "(%lld bytes of metadata)",
                             where(index, wbuf), (long long)pos, (long long)meta_len);
  /* MetadataVersion: V1 = 0 ... V5 = 4, the last Arrow defines (Arrow
   * Java's stream reader throws on any other) */
  if (version < 3 || version > 4) {
    char vbuf[48];
    if (version >= 0 && version < 3) snprintf(vbuf, sizeof(vbuf), "V%d", version + 1);
    else snprintf(vbuf, sizeof(vbuf), "%d, which Arrow does not define", version);
    return funnel__error_set(error, FUNNEL_ERR_UNSUPPORTED, index, -1, pos,
                             "%s: message at offset %lld has metadata version %s; funnel "
                             "reads V4 and V5",
                             where(index, wbuf), (long long)pos, vbuf);
  }
  m->body = m->meta + meta_len;
  if (m->body_length < 0 || m->body_length > length - m->body)
    return funnel__error_set(error, FUNNEL_ERR_MALFORMED, index, -1, pos,
                             "%s: %s message at offset %lld has a %lld-byte body "
                             "but only %lld bytes follow",
                             where(index, wbuf), header_name(m->header_type), (long long)pos,
                             (long long)m->body_length, (long long)(length - m->body));
  m->end = m->body + m->body_length;
  return FUNNEL_OK;
}

/* ----------------------------------------------------------------- schema */

enum {
  T_NONE = 0, T_NULL, T_INT, T_FLOAT, T_BINARY, T_UTF8, T_BOOL, T_DECIMAL,
  T_DATE, T_TIME, T_TIMESTAMP, T_INTERVAL, T_LIST, T_STRUCT, T_UNION,
  T_FIXED_SIZE_BINARY, T_FIXED_SIZE_LIST, T_MAP, T_DURATION, T_LARGE_BINARY,
  T_LARGE_UTF8, T_LARGE_LIST, T_RUN_END_ENCODED, T_BINARY_VIEW, T_UTF8_VIEW,
  T_LIST_VIEW, T_LARGE_LIST_VIEW
};

static const char *const arrow_type_names[] = {
  "NONE", "Null", "Int", "FloatingPoint", "Binary", "Utf8", "Bool", "Decimal",
  "Date", "Time", "Timestamp", "Interval", "List", "Struct", "Union",
  "FixedSizeBinary", "FixedSizeList", "Map", "Duration", "LargeBinary",
  "LargeUtf8", "LargeList", "RunEndEncoded", "BinaryView", "Utf8View",
  "ListView", "LargeListView"};

#define FIELD_ERROR(code, fmt, ...)                                    \
  funnel__error_set(error, (code), index, column, offset,              \
                    "%s: column %d '%s': " fmt, where(index, wbuf), column, f->path, __VA_ARGS__)

/* The schema's nodes as they are parsed, depth first. */
struct nodes {
  struct funnel__field *v;
  int n, cap;
};

/* A new node at the end of `ns`, zeroed; NULL when out of memory. */
static struct funnel__field *node_add(struct nodes *ns, struct funnel__arena *arena) {
  if (ns->n == ns->cap) {
    const int cap = ns->cap ? 2 * ns->cap : 16;
    struct funnel__field *v = funnel__arena_alloc(arena, (size_t)cap * sizeof(*v));
    if (v == NULL) return NULL;
    if (ns->n) memcpy(v, ns->v, (size_t)ns->n * sizeof(*v));
    ns->v = v;
    ns->cap = cap;
  }
  struct funnel__field *f = &ns->v[ns->n++];
  memset(f, 0, sizeof(*f));
  return f;
}

/* "parent.name", or the name alone at the top. */
static const char *path_of(const char *parent, const char *name, struct funnel__arena *arena) {
  if (parent == NULL) return name;
  const size_t a = strlen(parent), b = strlen(name);
  char *p = funnel__arena_alloc(arena, a + b + 2);
  if (p == NULL) return NULL;
  memcpy(p, parent, a);
  p[a] = '.';
  memcpy(p + a + 1, name, b + 1);
  return p;
}

/* Appends the node of a Field table to `ns`, then its children's, depth
 * first; `parent` is the parent node's index (-1 at the top). `index` is
 * the partition (-1: the reader's schema), `offset` the message's offset,
 * for errors. A node's column number in messages is its index in `ns`. */
static int field_parse(struct funnel__fb *r, struct funnel__fb_table ft, int parent, int depth,
                       int64_t index, int64_t offset, struct funnel__arena *arena,
                       struct nodes *ns, struct funnel_error *error) {
  char wbuf[32], what[48];
  const int column = ns->n;
  struct funnel__field *f = node_add(ns, arena);
  if (f == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  f->name = "";
  f->path = "";
  f->timezone = "";
  f->parent = parent;
  uint32_t name_len = 0;
  const uint32_t name_at = fb_string(r, ft, 0, &name_len);
  f->nullable = funnel__fb_u8(r, ft, 1, 0) != 0;
  int tt = funnel__fb_u8(r, ft, 2, T_NONE);
  uint32_t type_pos = funnel__fb_ref(r, ft, 3);
  uint32_t dict_pos = funnel__fb_ref(r, ft, 4);
  uint32_t n_children = 0;
  const uint32_t children = funnel__fb_vector(r, ft, 5, 4, &n_children);
  struct funnel__fb_table ty = {0, 0, 0, 0};
  if (!r->bad && type_pos != 0) ty = funnel__fb_table_at(r, type_pos);
  if (r->bad)
    return funnel__error_set(error, FUNNEL_ERR_MALFORMED, index, column, offset,
                             "%s: corrupt Field flatbuffer for column %d",
                             where(index, wbuf), column);
  /* before anything prints the name */
  snprintf(what, sizeof(what), "column %d name", column);
  FUNNEL_RETURN_NOT_OK(text_check(r, name_at, name_len, false, index, column, what, error));
  f->name = string_copy(r, name_at, name_len, arena);
  f->path = f->name == NULL ? NULL
            : path_of(parent >= 0 ? ns->v[parent].path : NULL, f->name, arena);
  if (f->path == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  FUNNEL_RETURN_NOT_OK(metadata_check(r, ft, 6, index, column, offset, error));
  const char *tname = tt >= 0 && tt <= T_LARGE_LIST_VIEW ? arrow_type_names[tt] : "unknown";
  if (dict_pos != 0)
    return FIELD_ERROR(FUNNEL_ERR_UNSUPPORTED, "dictionary-encoded %s is not supported", tname);
  /* the union's table: Arrow Java reads its fields without looking */
  if (type_pos == 0 && tt != T_NONE && tt <= T_LARGE_LIST_VIEW)
    return FIELD_ERROR(FUNNEL_ERR_MALFORMED, "%s field has no type table", tname);

  int64_t bits = 0;
  switch (tt) {
    case T_INT: {
      bits = funnel__fb_i32(r, ty, 0, 0);
      bool is_signed = funnel__fb_u8(r, ty, 1, 0) != 0;
      static const int ids[2][4] = {
          {FUNNEL_TYPE_UINT8, FUNNEL_TYPE_UINT16, FUNNEL_TYPE_UINT32, FUNNEL_TYPE_UINT64},
          {FUNNEL_TYPE_INT8, FUNNEL_TYPE_INT16, FUNNEL_TYPE_INT32, FUNNEL_TYPE_INT64}};
      int k = bits == 8 ? 0 : bits == 16 ? 1 : bits == 32 ? 2 : bits == 64 ? 3 : -1;
      if (k < 0) return FIELD_ERROR(FUNNEL_ERR_MALFORMED, "Int with bit width %lld", (long long)bits);
      f->type_id = ids[is_signed][k];
      f->byte_width = (int)(bits / 8);
      break;
    }
    case T_FLOAT: {
      int precision = funnel__fb_i16(r, ty, 0, 0);
      if (precision == 1) { f->type_id = FUNNEL_TYPE_FLOAT32; f->byte_width = 4; }
      else if (precision == 2) { f->type_id = FUNNEL_TYPE_FLOAT64; f->byte_width = 8; }
      else if (precision == 0) return FIELD_ERROR(FUNNEL_ERR_UNSUPPORTED, "type %s is not supported", "float16");
      else return FIELD_ERROR(FUNNEL_ERR_MALFORMED, "FloatingPoint with precision %d", precision);
      break;
    }
    case T_BOOL: f->type_id = FUNNEL_TYPE_BOOL; break;
    case T_DATE: {
      int unit = funnel__fb_i16(r, ty, 0, 1);
      if (unit == 0) { f->type_id = FUNNEL_TYPE_DATE32; f->byte_width = 4; }
      else if (unit == 1) { f->type_id = FUNNEL_TYPE_DATE64; f->byte_width = 8; }
      else return FIELD_ERROR(FUNNEL_ERR_MALFORMED, "Date with unit %d", unit);
      break;
    }
    case T_TIMESTAMP: {
      int unit = funnel__fb_i16(r, ty, 0, 0);
      if (unit < 0 || unit > 3) return FIELD_ERROR(FUNNEL_ERR_MALFORMED, "Timestamp with unit %d", unit);
      f->type_id = FUNNEL_TYPE_TIMESTAMP;
      f->byte_width = 8;
      f->time_unit = unit;
      uint32_t tz_len = 0;
      const uint32_t tz_at = fb_string(r, ty, 1, &tz_len);
      if (r->bad) break;
      snprintf(what, sizeof(what), "column %d timezone", column);
      FUNNEL_RETURN_NOT_OK(text_check(r, tz_at, tz_len, false, index, column, what, error));
      f->timezone = string_copy(r, tz_at, tz_len, arena);
      if (f->timezone == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
      break;
    }
    case T_DECIMAL: {
      f->precision = funnel__fb_i32(r, ty, 0, 0);
      f->scale = funnel__fb_i32(r, ty, 1, 0);
      bits = funnel__fb_i32(r, ty, 2, 128);
      if (bits != 128)
        return FIELD_ERROR(FUNNEL_ERR_UNSUPPORTED, "type decimal%lld is not supported", (long long)bits);
      if (f->precision < 1 || f->precision > 38) /* as Arrow C++ reads decimal128 */
        return FIELD_ERROR(FUNNEL_ERR_MALFORMED, "decimal128 with precision %d (Arrow allows 1 to 38)",
                           f->precision);
      f->type_id = FUNNEL_TYPE_DECIMAL128;
      f->byte_width = 16;
      break;
    }
    case T_FIXED_SIZE_BINARY: {
      int32_t w = funnel__fb_i32(r, ty, 0, 0);
      if (w < 0) return FIELD_ERROR(FUNNEL_ERR_MALFORMED, "FixedSizeBinary with byte width %d", (int)w);
      if (w == 0) /* Arrow Java divides by the width */
        return FIELD_ERROR(FUNNEL_ERR_UNSUPPORTED, "%s",
                           "fixed_size_binary(0) is not supported: Arrow Java cannot hold it");
      f->type_id = FUNNEL_TYPE_FIXED_SIZE_BINARY;
      f->byte_width = w;
      break;
    }
    case T_LIST:
    case T_LARGE_LIST:
      f->type_id = tt == T_LIST ? FUNNEL_TYPE_LIST : FUNNEL_TYPE_LARGE_LIST;
      f->nested = FUNNEL__NESTED_LIST;
      f->offset_width = tt == T_LIST ? 4 : 8;
      break;
    case T_MAP:
      f->type_id = FUNNEL_TYPE_MAP;
      f->nested = FUNNEL__NESTED_LIST;
      f->offset_width = 4;
      f->keys_sorted = funnel__fb_u8(r, ty, 0, 0) != 0;
      break;
    case T_FIXED_SIZE_LIST: {
      const int32_t n = funnel__fb_i32(r, ty, 0, 0);
      if (n < 0) return FIELD_ERROR(FUNNEL_ERR_MALFORMED, "FixedSizeList with list size %d", (int)n);
      if (n == 0)
        return FIELD_ERROR(FUNNEL_ERR_UNSUPPORTED, "%s",
                           "fixed_size_list of size 0 is not supported");
      f->type_id = FUNNEL_TYPE_FIXED_SIZE_LIST;
      f->nested = FUNNEL__NESTED_FIXED;
      f->list_size = n;
      break;
    }
    case T_STRUCT:
      f->type_id = FUNNEL_TYPE_STRUCT;
      f->nested = FUNNEL__NESTED_STRUCT;
      break;
    case T_UTF8: f->type_id = FUNNEL_TYPE_UTF8; f->offset_width = 4; break;
    case T_BINARY: f->type_id = FUNNEL_TYPE_BINARY; f->offset_width = 4; break;
    case T_LARGE_UTF8: f->type_id = FUNNEL_TYPE_LARGE_UTF8; f->offset_width = 8; break;
    case T_LARGE_BINARY: f->type_id = FUNNEL_TYPE_LARGE_BINARY; f->offset_width = 8; break;
    default:
      if (tt == T_NONE || tt > T_LARGE_LIST_VIEW)
        return FIELD_ERROR(FUNNEL_ERR_MALFORMED, "unknown type tag %d", tt);
      return FIELD_ERROR(FUNNEL_ERR_UNSUPPORTED, "type %s is not supported", tname);
  }
  if (r->bad)
    return FIELD_ERROR(FUNNEL_ERR_MALFORMED, "corrupt %s type table", tname);
  const uint32_t want = f->nested == FUNNEL__NESTED_NONE     ? 0
                        : f->nested == FUNNEL__NESTED_STRUCT ? n_children
                                                             : 1;
  if (n_children != want)
    return FIELD_ERROR(FUNNEL_ERR_MALFORMED, "%s field has %u children, not %u", tname,
                       n_children, want);
  f->n_buffers = f->nested == FUNNEL__NESTED_LIST   ? 2
                 : f->nested != FUNNEL__NESTED_NONE ? 1
                 : f->offset_width != 0             ? 3
                                                    : 2;
  f->n_children = (int)n_children;
  if (n_children > 0 && depth >= FUNNEL__MAX_DEPTH)
    return FIELD_ERROR(FUNNEL_ERR_MALFORMED, "nested more than %d deep", FUNNEL__MAX_DEPTH);
  for (uint32_t i = 0; i < n_children; i++) {
    struct funnel__fb_table ct = funnel__fb_vector_table(r, children, i);
    if (r->bad) /* f may have moved: the array grows */
      return funnel__error_set(error, FUNNEL_ERR_MALFORMED, index, column, offset,
                               "%s: column %d '%s': corrupt Field flatbuffer for child %u",
                               where(index, wbuf), column, ns->v[column].path, i);
    FUNNEL_RETURN_NOT_OK(field_parse(r, ct, column, depth + 1, index, offset, arena, ns, error));
  }
  f = &ns->v[column];
  if (f->type_id == FUNNEL_TYPE_MAP) {
    /* entries: a struct of a key that is never null and a value */
    const struct funnel__field *e = &ns->v[column + 1];
    if (e->type_id != FUNNEL_TYPE_STRUCT || e->n_children != 2 || e->nullable)
      return FIELD_ERROR(FUNNEL_ERR_MALFORMED, "%s",
                         "map's child is not a non-nullable struct of a key and a value");
    if (ns->v[column + 2].nullable)
      return FIELD_ERROR(FUNNEL_ERR_MALFORMED, "%s", "map's keys are nullable");
  }
  return FUNNEL_OK;
}

/* Parses the Schema header of message `m`. */
static int schema_from_message(const uint8_t *bytes, const struct message *m,
                               int64_t index, struct funnel__arena *arena,
                               struct funnel__schema *out,
                               struct funnel_error *error) {
  char wbuf[32];
  struct funnel__fb r = m->fb;
  int16_t endianness = funnel__fb_i16(&r, m->header, 0, 0);
  uint32_t n = 0;
  uint32_t first = funnel__fb_vector(&r, m->header, 1, 4, &n);
  if (r.bad)
    return funnel__error_set(error, FUNNEL_ERR_MALFORMED, index, -1, m->offset,
                             "%s: corrupt Schema flatbuffer at offset %lld",
                             where(index, wbuf), (long long)m->offset);
  if (endianness != 0)
    return funnel__error_set(error, FUNNEL_ERR_UNSUPPORTED, index, -1, m->offset,
                             "%s: big-endian data is not supported", where(index, wbuf));
  if (n > INT32_MAX / 4)
    return funnel__error_set(error, FUNNEL_ERR_MALFORMED, index, -1, m->offset,
                             "%s: Schema with %u fields", where(index, wbuf), n);
  FUNNEL_RETURN_NOT_OK(metadata_check(&r, m->header, 2, index, -1, m->offset, error));
  struct nodes ns = {NULL, 0, 0};
  uint8_t *ipc = funnel__arena_alloc(arena, (size_t)(m->end - m->offset));
  if (ipc == NULL || (n == 0 && node_add(&ns, arena) == NULL))
    return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  if (n == 0) ns.n = 0; /* room for one, as before: callers index fields[0] of nothing */
  bool nested = false;
  for (uint32_t i = 0; i < n; i++) {
    struct funnel__fb_table ft = funnel__fb_vector_table(&r, first, i);
    if (r.bad)
      return funnel__error_set(error, FUNNEL_ERR_MALFORMED, index, (int64_t)ns.n, m->offset,
                               "%s: corrupt Field flatbuffer for column %u",
                               where(index, wbuf), i);
    FUNNEL_RETURN_NOT_OK(field_parse(&r, ft, -1, 0, index, m->offset, arena, &ns, error));
  }
  for (int i = 0; i < ns.n; i++) nested |= ns.v[i].nested != FUNNEL__NESTED_NONE;
  memcpy(ipc, bytes + m->offset, (size_t)(m->end - m->offset));
  out->n_fields = ns.n;
  out->fields = ns.v;
  out->n_top = (int)n;
  out->nested = nested;
  out->ipc = ipc;
  out->ipc_length = m->end - m->offset;
  return FUNNEL_OK;
}

int funnel__schema_parse(const uint8_t *bytes, int64_t length,
                         struct funnel__arena *arena, struct funnel__schema *out,
                         struct funnel_error *error) {
  struct message m;
  FUNNEL_RETURN_NOT_OK(message_read(bytes, length, 0, -1, &m, error));
  if (m.eos || m.header_type != HDR_SCHEMA)
    return FUNNEL_ERR(error, FUNNEL_ERR_INVALID_ARGUMENT,
                      "reader schema: the first message is %s, not a Schema",
                      m.eos ? "an end-of-stream marker" : header_name(m.header_type));
  return schema_from_message(bytes, &m, -1, arena, out, error);
}

/* -------------------------------------------------------------- partition */

/* A compressed batch's decoded layout (funnel__batch.dbuffers): each
 * buffer's declared length, read from its prefix and checked against what
 * its codec can make of its bytes; the buffers FUNNEL__ALIGN aligned. */
static int decoded_layout(const uint8_t *bytes, const struct message *m,
                          const struct funnel__schema *schema, int64_t index,
                          struct funnel__arena *arena, struct funnel__batch *b,
                          struct funnel_error *error) {
  uint8_t *out = funnel__arena_alloc(arena, 16 * (size_t)(b->n_buffers ? b->n_buffers : 1));
  if (out == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  int64_t at = 0;
  /* the field of buffer k and its buffer j there, while the buffers are
   * the schema's (for the counts of frames of values) */
  int32_t n_schema = 0;
  for (int i = 0; schema != NULL && i < schema->n_fields; i++) n_schema += schema->fields[i].n_buffers;
  const bool counted = b->codec != FUNNEL__CODEC_NONE && n_schema == b->n_buffers;
  int field = 0, j = 0;
  for (int32_t k = 0; k < b->n_buffers; k++) {
    const int64_t off = (int64_t)funnel__ld64(b->buffers + 16 * k);
    const int64_t len = (int64_t)funnel__ld64(b->buffers + 16 * k + 8);
    bool value = false;
    if (counted) {
      while (j >= schema->fields[field].n_buffers) field++, j = 0;
      value = funnel__buffer_holds_values(&schema->fields[field], j++);
    }
    int64_t want = 0;
    const char *bad = NULL;
    if (len > 0 && len < 8) bad = "too few bytes for the 8-byte uncompressed length";
    bool frame = false;
    if (len >= 8) {
      want = (int64_t)funnel__ld64(bytes + m->body + off);
      frame = len > 8 && want > 0;
      if (want == -1) want = len - 8; /* the bytes follow uncompressed */
      else if (want < 0) bad = "a negative uncompressed length";
      else if (want > funnel__codec_max_decoded(b->codec, len - 8))
        bad = "more uncompressed bytes than the codec can expand them to";
    }
    if (bad != NULL) { /* named only now: most reads never get here */
      const char *kind;
      const int col = funnel__buffer_column(schema, b->n_buffers, k, &kind);
      char what[96];
      if (col >= 0)
        snprintf(what, sizeof(what), "column %d '%s', buffer %d (%s)", col,
                 schema->fields[col].path, k, kind);
      else
        snprintf(what, sizeof(what), "buffer %d", k);
      return funnel__error_set(error, FUNNEL_ERR_MALFORMED, index, col, m->body + off,
                               "partition %lld: RecordBatch at offset %lld (%s body), %s at "
                               "offset %lld: %lld bytes declare %lld uncompressed: %s",
                               (long long)index, (long long)m->offset,
                               funnel__codec_name(b->codec), what, (long long)(m->body + off),
                               (long long)len,
                               len >= 8 ? (long long)funnel__ld64(bytes + m->body + off) : 0LL,
                               bad);
    }
    if (len >= 8) b->zbytes += len;
    const int64_t entry[2] = {at, want};
    memcpy(out + 16 * k, entry, 16);
    if (funnel__add_overflows(at, funnel__align_up(want, FUNNEL__ALIGN), &at) ||
        at > FUNNEL__MAX_OUTPUT_BYTES)
      return funnel__error_set(error, FUNNEL_ERR_LIMIT, index, -1, m->body + off,
                               "partition %lld: RecordBatch at offset %lld: its buffers "
                               "declare more than %lld uncompressed bytes",
                               (long long)index, (long long)m->offset,
                               (long long)FUNNEL__MAX_OUTPUT_BYTES);
    /* a frame of values, its length checked (the sums are at most `at`) */
    if (value && frame) {
      b->value_frames++;
      b->value_zbytes += len - 8;
      b->value_bytes += want;
    }
  }
  b->dbuffers = out;
  b->dbody_length = at;
  return FUNNEL_OK;
}

static int batch_from_message(const uint8_t *bytes, const struct message *m, int64_t index,
                              const struct funnel__schema *schema, struct funnel__arena *arena,
                              struct funnel__batch *b, struct funnel_error *error) {
  struct funnel__fb r = m->fb;
  b->message_offset = m->offset;
  b->codec = FUNNEL__CODEC_NONE;
  b->rows = funnel__fb_i64(&r, m->header, 0, 0);
  uint32_t n_nodes = 0, n_buffers = 0;
  uint32_t nodes = funnel__fb_vector(&r, m->header, 1, 16, &n_nodes);
  uint32_t buffers = funnel__fb_vector(&r, m->header, 2, 16, &n_buffers);
  uint32_t compression = funnel__fb_ref(&r, m->header, 3);
  int codec = -1, method = 0;
  if (!r.bad && compression != 0) {
    struct funnel__fb_table ct = funnel__fb_table_at(&r, compression);
    codec = (int8_t)funnel__fb_u8(&r, ct, 0, 0);
    method = (int8_t)funnel__fb_u8(&r, ct, 1, 0);
  }
  if (r.bad)
    return funnel__error_set(error, FUNNEL_ERR_MALFORMED, index, -1, m->offset,
                             "partition %lld: corrupt RecordBatch flatbuffer at offset %lld",
                             (long long)index, (long long)m->offset);
  if (compression != 0 && (codec < 0 || codec > FUNNEL__CODEC_ZSTD || method != 0))
    return funnel__error_set(error, FUNNEL_ERR_MALFORMED, index, -1, m->offset,
                             "partition %lld: RecordBatch at offset %lld has a compressed body "
                             "of codec %d, method %d (Arrow defines codecs 0 LZ4_FRAME and 1 "
                             "ZSTD, and method 0 BUFFER)",
                             (long long)index, (long long)m->offset, codec, method);
  if (compression != 0) b->codec = codec;
  if (b->rows < 0 || b->rows > FUNNEL__MAX_ROWS)
    return funnel__error_set(error, b->rows < 0 ? FUNNEL_ERR_MALFORMED : FUNNEL_ERR_LIMIT, index,
                             -1, m->offset,
                             "partition %lld: RecordBatch at offset %lld has length %lld (at most "
                             "%lld rows are read)",
                             (long long)index, (long long)m->offset, (long long)b->rows,
                             (long long)FUNNEL__MAX_ROWS);
  b->body = m->body;
  b->body_length = m->body_length;
  b->n_nodes = (int32_t)n_nodes;
  b->n_buffers = (int32_t)n_buffers;
  b->nodes = r.p + nodes;
  b->buffers = r.p + buffers;
  for (uint32_t i = 0; i < n_buffers; i++) {
    int64_t off = (int64_t)funnel__ld64(b->buffers + 16 * i);
    int64_t len = (int64_t)funnel__ld64(b->buffers + 16 * i + 8);
    int64_t end;
    if (off < 0 || len < 0 || funnel__add_overflows(off, len, &end) || end > b->body_length)
      return funnel__error_set(error, FUNNEL_ERR_MALFORMED, index, -1, m->offset,
                               "partition %lld: RecordBatch at offset %lld: buffer %u "
                               "(offset %lld, length %lld) is outside the %lld-byte body",
                               (long long)index, (long long)m->offset, i, (long long)off,
                               (long long)len, (long long)b->body_length);
  }
  if (b->codec != FUNNEL__CODEC_NONE)
    return decoded_layout(bytes, m, schema, index, arena, b, error);
  return FUNNEL_OK;
}

/* Checks the pieces of a bound batch whose checks read little
 * (funnel__piece_check, at most FUNNEL__CHECK_INLINE_BYTES: its offsets
 * are in cache from the binding); marks it checked when every piece
 * passes. */
static void check_small_batch(const struct funnel__schema *schema,
                              const struct funnel__partition *part, struct funnel__batch *batch,
                              int64_t index) {
  int64_t per_row = 0; /* bytes read per row: offsets, and a validity bit */
  for (int i = 0; i < schema->n_fields; i++) per_row += schema->fields[i].offset_width + 1;
  if (batch->rows > FUNNEL__CHECK_INLINE_BYTES / (per_row > 0 ? per_row : 1)) return;
  for (int i = 0; i < schema->n_fields; i++)
    if (funnel__piece_check(schema, part, batch, i, index, NULL) != FUNNEL_OK) return;
  batch->checked = schema;
}

/* When a batch of the partition is compressed, where each batch's body goes
 * in the partition's decoded image (an uncompressed one's is copied as it
 * is), and the image's size. */
static void image_layout(struct funnel__partition *part) {
  bool any = false;
  for (int64_t i = 0; i < part->n_batches; i++)
    any |= part->batches[i].codec != FUNNEL__CODEC_NONE;
  if (!any) return;
  int64_t at = 0; /* each at most FUNNEL__MAX_OUTPUT_BYTES: no overflow before the check */
  for (int64_t i = 0; i < part->n_batches; i++) {
    struct funnel__batch *b = &part->batches[i];
    if (b->codec == FUNNEL__CODEC_NONE) {
      b->dbuffers = b->buffers;
      b->dbody_length = b->body_length;
    }
    b->dbody = at;
    at = funnel__align_up(at + b->dbody_length, FUNNEL__ALIGN);
    if (at > FUNNEL__MAX_OUTPUT_BYTES) at = FUNNEL__MAX_OUTPUT_BYTES + 1;
  }
  /* at least one aligned word, so that a partition of empty compressed
   * batches (no bytes to decode) is decoded, and its batches bound, too */
  part->image_length = at > 0 ? at : FUNNEL__ALIGN;
}

int funnel__partition_parse(const uint8_t *bytes, int64_t length, int64_t index,
                            struct funnel__arena *arena, struct funnel__partition *out,
                            struct funnel_error *error) {
  return funnel__partition_parse_known(bytes, length, index, NULL, arena, out, error);
}

int funnel__first_batch_codec(const uint8_t *bytes, int64_t length) {
  int64_t pos = 0;
  for (int k = 0; k < 4 && pos < length; k++) { /* a Schema or two, then the batch */
    struct message m;
    if (message_read(bytes, length, pos, 0, &m, NULL) != FUNNEL_OK) return FUNNEL__CODEC_NONE;
    if (m.eos) return FUNNEL__CODEC_NO_BATCH;
    if (m.header_type == HDR_RECORD_BATCH) {
      struct funnel__fb r = m.fb;
      const uint32_t compression = funnel__fb_ref(&r, m.header, 3);
      if (r.bad || compression == 0) return FUNNEL__CODEC_NONE;
      const int codec = funnel__fb_u8(&r, funnel__fb_table_at(&r, compression), 0, 0);
      return r.bad || codec > FUNNEL__CODEC_ZSTD ? FUNNEL__CODEC_NONE : codec;
    }
    pos = m.end;
  }
  return pos >= length ? FUNNEL__CODEC_NO_BATCH : FUNNEL__CODEC_NONE;
}

/* The partition's Schema message at `offset` is `s`: the partition's
 * schema, or one that must equal it. */
static int note_schema(struct funnel__partition *out, const struct funnel__schema *s,
                       int64_t offset, int64_t index, struct funnel_error *error) {
  if (out->schema == NULL) {
    out->schema = s;
    out->schema_offset = offset;
    return FUNNEL_OK;
  }
  char why[256];
  const int at = s == out->schema ? -1 : funnel__schema_diff(out->schema, s, why, sizeof(why));
  if (at >= 0)
    return funnel__error_set(error, FUNNEL_ERR_SCHEMA_MISMATCH, index, at, offset,
                             "partition %lld: the Schema at offset %lld differs from "
                             "the partition's first: %s",
                             (long long)index, (long long)offset, why);
  return FUNNEL_OK;
}

int funnel__partition_parse_known(const uint8_t *bytes, int64_t length, int64_t index,
                                  const struct funnel__schema *known,
                                  struct funnel__arena *arena, struct funnel__partition *out,
                                  struct funnel_error *error) {
  memset(out, 0, sizeof(*out));
  out->bytes = bytes;
  out->length = length;
  out->schema_offset = -1;
  int64_t capacity = 0;
  int64_t pos = 0, end = length;
  /* The IPC file format is a stream between the magic and the footer:
   * "ARROW1", 2 bytes of padding, the stream, the footer, its int32 size,
   * "ARROW1". A file written as a partition reads like its stream. */
  static const char magic[6] = {'A', 'R', 'R', 'O', 'W', '1'};
  if (length >= 8 && memcmp(bytes, magic, 6) == 0) {
    int32_t footer = length >= 18 ? (int32_t)funnel__ld32(bytes + length - 10) : -1;
    if (length < 18 || memcmp(bytes + length - 6, magic, 6) != 0 || footer < 0 ||
        footer > length - 18)
      return funnel__error_set(error, FUNNEL_ERR_MALFORMED, index, -1, 0,
                               "partition %lld: starts like an Arrow IPC file but has no valid "
                               "footer (%lld bytes)", (long long)index, (long long)length);
    pos = 8;
    end = length - 10 - footer;
  }
  while (pos < end) {
    if (known != NULL && end - pos >= known->ipc_length &&
        memcmp(bytes + pos, known->ipc, (size_t)known->ipc_length) == 0) {
      /* byte for byte the Schema message every partition usually repeats:
       * reading it would find what it found where it was first read */
      FUNNEL_RETURN_NOT_OK(note_schema(out, known, pos, index, error));
      pos += known->ipc_length;
      continue;
    }
    struct message m;
    FUNNEL_RETURN_NOT_OK(message_read(bytes, end, pos, index, &m, error));
    pos = m.end;
    if (m.eos) continue; /* another stream may follow */
    switch (m.header_type) {
      case HDR_SCHEMA: {
        /* not byte for byte the known one */
        struct funnel__schema *parsed = funnel__arena_alloc(arena, sizeof(*parsed));
        if (parsed == NULL)
          return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
        FUNNEL_RETURN_NOT_OK(schema_from_message(bytes, &m, index, arena, parsed, error));
        FUNNEL_RETURN_NOT_OK(note_schema(out, parsed, m.offset, index, error));
        break;
      }
      case HDR_RECORD_BATCH: {
        if (out->n_batches == capacity) {
          int64_t cap = capacity ? 2 * capacity : 4;
          struct funnel__batch *nb = funnel__arena_alloc(arena, (size_t)cap * sizeof(*nb));
          if (nb == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
          if (out->n_batches) memcpy(nb, out->batches, (size_t)out->n_batches * sizeof(*nb));
          out->batches = nb;
          capacity = cap;
        }
        struct funnel__batch *b = &out->batches[out->n_batches];
        memset(b, 0, sizeof(*b));
        FUNNEL_RETURN_NOT_OK(batch_from_message(bytes, &m, index,
                                                out->schema != NULL ? out->schema : known,
                                                arena, b, error));
        if (funnel__add_overflows(out->rows, b->rows, &out->rows))
          return funnel__error_set(error, FUNNEL_ERR_LIMIT, index, -1, m.offset,
                                   "partition %lld: row count overflows", (long long)index);
        out->n_batches++;
        break;
      }
      case HDR_DICTIONARY:
        return funnel__error_set(error, FUNNEL_ERR_UNSUPPORTED, index, -1, m.offset,
                                 "partition %lld: DictionaryBatch at offset %lld: dictionary "
                                 "encoding is not supported",
                                 (long long)index, (long long)m.offset);
      default:
        return funnel__error_set(error, m.header_type == HDR_TENSOR || m.header_type == HDR_SPARSE_TENSOR
                                            ? FUNNEL_ERR_UNSUPPORTED : FUNNEL_ERR_MALFORMED,
                                 index, -1, m.offset,
                                 "partition %lld: message at offset %lld has header type %d (%s), "
                                 "expected Schema or RecordBatch",
                                 (long long)index, (long long)m.offset, m.header_type,
                                 header_name(m.header_type));
    }
  }
  image_layout(out);
  /* the plan binds every batch to the read's schema, `known` when the
   * partition repeats it or has none: done here, while the headers are in
   * cache (a compressed partition's once it is decoded) */
  if (known != NULL) funnel__partition_bind(known, out, index, arena);
  return FUNNEL_OK;
}

void funnel__partition_bind(const struct funnel__schema *schema, struct funnel__partition *part,
                            int64_t index, struct funnel__arena *arena) {
  if (part->schema != NULL && part->schema != schema) return;
  if (part->image_length > 0 && !part->decoded) return;
  for (int64_t b = 0; b < part->n_batches; b++)
    if (funnel__batch_bind_ends(schema, part, &part->batches[b], index, arena, NULL) == FUNNEL_OK)
      check_small_batch(schema, part, &part->batches[b], index);
}

/* ------------------------------------------------------------------- bind */

/* The first k in [1, n] with offsets[k] < offsets[k - 1], or -1. With the
 * ends checked, non-decreasing offsets all lie inside the data buffer. */
static int64_t first_decrease32(const uint8_t *o, int64_t n) {
  int32_t prev = (int32_t)funnel__ld32(o);
  for (int64_t k = 1; k <= n; k++) {
    int32_t v = (int32_t)funnel__ld32(o + 4 * k);
    if (v < prev) return k;
    prev = v;
  }
  return -1;
}

static int64_t first_decrease64(const uint8_t *o, int64_t n) {
  int64_t prev = (int64_t)funnel__ld64(o);
  for (int64_t k = 1; k <= n; k++) {
    int64_t v = (int64_t)funnel__ld64(o + 8 * k);
    if (v < prev) return k;
    prev = v;
  }
  return -1;
}

/* Zero bits among the first n bits of `bits` (bit 0 the low bit of byte 0). */
static int64_t zero_bits(const uint8_t *bits, int64_t n) {
  int64_t ones = 0, k = 0;
  for (; k + 64 <= n; k += 64) ones += __builtin_popcountll(funnel__ld64(bits + k / 8));
  if (k < n) { /* the last 1 to 63 bits: their bytes, in one word */
    uint64_t v = 0;
    memcpy(&v, bits + k / 8, (size_t)((n - k + 7) / 8));
    ones += __builtin_popcountll(v & (~(uint64_t)0 >> (64 - (n - k))));
  }
  return n - ones;
}

/* Zero bits among bits [from, from + n) of `bits`. */
static int64_t zero_bits_from(const uint8_t *bits, int64_t from, int64_t n) {
  int64_t zeros = 0;
  const int64_t head = (8 - from % 8) % 8 < n ? (8 - from % 8) % 8 : n;
  for (int64_t k = 0; k < head; k++) zeros += ((bits[(from + k) / 8] >> ((from + k) % 8)) & 1) == 0;
  return zeros + (n > head ? zero_bits(bits + (from + head) / 8, n - head) : 0);
}

#define BIND_ERROR(code, at, fmt, ...)                                                  \
  funnel__error_set(error, (code), index, (int64_t)i, (at),                              \
                    "partition %lld: RecordBatch at offset %lld, column %d '%s': " fmt, \
                    (long long)index, (long long)batch->message_offset, i, f->path, __VA_ARGS__)

int funnel__batch_bind(const struct funnel__schema *schema,
                       const struct funnel__partition *part, struct funnel__batch *batch,
                       int64_t index, struct funnel__arena *arena,
                       struct funnel_error *error) {
  FUNNEL_RETURN_NOT_OK(funnel__batch_bind_ends(schema, part, batch, index, arena, error));
  for (int i = 0; i < schema->n_fields; i++)
    FUNNEL_RETURN_NOT_OK(funnel__piece_check(schema, part, batch, i, index, error));
  return FUNNEL_OK;
}

int funnel__piece_check(const struct funnel__schema *schema,
                         const struct funnel__partition *part,
                         const struct funnel__batch *batch, int i, int64_t index,
                         struct funnel_error *error) {
  const struct funnel__field *f = &schema->fields[i];
  const struct funnel__piece *p = &batch->pieces[i];
  if (p->validity_bits >= 0) {
    /* Arrow Java reads a validity buffer that has bytes whatever the null
     * count says, Arrow C++ drops it when the count is 0: a count the bits
     * contradict would be read two ways */
    const int64_t nulls = zero_bits(part->bytes + p->validity_bits, p->length);
    if (nulls != p->null_count)
      return BIND_ERROR(FUNNEL_ERR_MALFORMED, p->validity_bits,
                        "null count %lld, but the validity buffer at offset %lld holds %lld "
                        "nulls", (long long)p->null_count, (long long)p->validity_bits,
                        (long long)nulls);
  }
  if (f->offset_width == 0 || p->length == 0) return FUNNEL_OK;
  /* every offset, not just the ends: the table handed on must be valid
   * Arrow, whose consumers read values by these offsets */
  const int64_t at = p->offsets + p->start * f->offset_width;
  const uint8_t *o = part->bytes + at;
  const int64_t bad = f->offset_width == 4 ? first_decrease32(o, p->length)
                                           : first_decrease64(o, p->length);
  if (bad >= 0)
    return BIND_ERROR(FUNNEL_ERR_MALFORMED, at + bad * f->offset_width,
                      "offset %lld (at byte %lld) is smaller than the one before it",
                      (long long)(p->start + bad), (long long)(at + bad * f->offset_width));
  return FUNNEL_OK;
}

int funnel__batch_bind_ends(const struct funnel__schema *schema,
                            const struct funnel__partition *part, struct funnel__batch *batch,
                            int64_t index, struct funnel__arena *arena,
                            struct funnel_error *error) {
  if (batch->bound == schema) return FUNNEL_OK;
  if (batch->codec != FUNNEL__CODEC_NONE && !part->decoded)
    return funnel__error_set(error, FUNNEL_ERR_MALFORMED, index, -1, batch->message_offset,
                             "partition %lld: RecordBatch at offset %lld: its %s body was not "
                             "decoded", (long long)index, (long long)batch->message_offset,
                             funnel__codec_name(batch->codec));
  int64_t want_buffers = 0;
  for (int i = 0; i < schema->n_fields; i++) want_buffers += schema->fields[i].n_buffers;
  if (batch->n_nodes != schema->n_fields || batch->n_buffers != want_buffers)
    return funnel__error_set(error, FUNNEL_ERR_MALFORMED, index, -1, batch->message_offset,
                             "partition %lld: RecordBatch at offset %lld has %d field nodes and "
                             "%d buffers; the schema's %d columns need %d and %lld",
                             (long long)index, (long long)batch->message_offset, batch->n_nodes,
                             batch->n_buffers, schema->n_fields, schema->n_fields,
                             (long long)want_buffers);
  batch->pieces = funnel__arena_calloc(arena, (size_t)(schema->n_fields ? schema->n_fields : 1),
                                       sizeof(struct funnel__piece));
  if (batch->pieces == NULL) return FUNNEL_ERR(error, FUNNEL_ERR_HOST_OUT_OF_MEMORY, "out of host memory");
  const uint8_t *buf = batch->buffers;
  for (int i = 0; i < schema->n_fields; i++) {
    const struct funnel__field *f = &schema->fields[i];
    struct funnel__piece *p = &batch->pieces[i];
    const int64_t node_length = (int64_t)funnel__ld64(batch->nodes + 16 * i);
    const int64_t node_nulls = (int64_t)funnel__ld64(batch->nodes + 16 * i + 8);
    p->node_length = node_length;
    p->validity = p->validity_bits = p->offsets = p->data = -1;
    if (f->parent < 0 && node_length != batch->rows)
      return BIND_ERROR(FUNNEL_ERR_MALFORMED, batch->message_offset,
                        "field node length %lld differs from the batch length %lld",
                        (long long)node_length, (long long)batch->rows);
    if (node_length < 0 || node_nulls < 0 || node_nulls > node_length)
      return BIND_ERROR(FUNNEL_ERR_MALFORMED, batch->message_offset,
                        "null count %lld for %lld rows", (long long)node_nulls,
                        (long long)node_length);
    if (node_length > FUNNEL__MAX_ROWS) /* a child's: the batch's rows are checked already */
      return BIND_ERROR(FUNNEL_ERR_LIMIT, batch->message_offset,
                        "field node length %lld (at most %lld rows are read)",
                        (long long)node_length, (long long)FUNNEL__MAX_ROWS);
    /* the rows the table takes: all of a top-level column's; a child's
     * from its parent's (bound before it: the nodes are depth first) */
    int64_t start = 0, length = node_length;
    if (f->parent >= 0) {
      const struct funnel__field *pf = &schema->fields[f->parent];
      const struct funnel__piece *pp = &batch->pieces[f->parent];
      const char *whose = pf->path;
      if (pf->nested == FUNNEL__NESTED_LIST) {
        start = pp->first_offset;
        length = pp->last_offset - pp->first_offset;
      } else if (pf->nested == FUNNEL__NESTED_FIXED) {
        if (node_length / pf->list_size != pp->node_length || node_length % pf->list_size != 0)
          return BIND_ERROR(FUNNEL_ERR_MALFORMED, batch->message_offset,
                            "field node length %lld, but '%s' (fixed_size_list[%d]) has %lld "
                            "rows", (long long)node_length, whose, pf->list_size,
                            (long long)pp->node_length);
        start = pp->start * pf->list_size;
        length = pp->length * pf->list_size;
      } else {
        if (node_length != pp->node_length)
          return BIND_ERROR(FUNNEL_ERR_MALFORMED, batch->message_offset,
                            "field node length %lld differs from the %lld rows of its struct '%s'",
                            (long long)node_length, (long long)pp->node_length, whose);
        start = pp->start;
        length = pp->length;
      }
      if (start + length > node_length)
        return BIND_ERROR(FUNNEL_ERR_MALFORMED, batch->message_offset,
                          "field node length %lld, but the rows of '%s' reach row %lld",
                          (long long)node_length, whose, (long long)(start + length));
    }
    p->start = start;
    p->length = length;
    p->null_count = node_nulls;
    int64_t off[3], len[3];
    for (int k = 0; k < f->n_buffers; k++) {
      off[k] = batch->body + (int64_t)funnel__ld64(buf + 16 * k);
      len[k] = (int64_t)funnel__ld64(buf + 16 * k + 8);
    }
    buf += 16 * f->n_buffers;
    int64_t bitmap_bytes = (node_length + 7) / 8;
    if (node_nulls > 0 || len[0] > 0) {
      if (len[0] < bitmap_bytes)
        return BIND_ERROR(FUNNEL_ERR_MALFORMED, off[0],
                          "validity buffer of %lld bytes at offset %lld, %lld rows need %lld",
                          (long long)len[0], (long long)off[0], (long long)node_length,
                          (long long)bitmap_bytes);
      p->validity_bits = len[0] > 0 ? off[0] : -1; /* its count: funnel__piece_check */
      if (node_nulls > 0) p->validity = off[0];
    }
    if (length != node_length) {
      /* a part of the node: the nulls its bits hold (what a reader of
       * the table sees), counted here; the rest of the node is not read */
      p->null_count = p->validity_bits >= 0 ? zero_bits_from(part->bytes + p->validity_bits,
                                                             start, length)
                                            : 0;
      p->validity = p->null_count > 0 ? p->validity_bits : -1;
      p->validity_bits = -1;
    }
    if (p->null_count > 0 && f->parent >= 0 && schema->fields[f->parent].parent >= 0 &&
        schema->fields[schema->fields[f->parent].parent].type_id == FUNNEL_TYPE_MAP &&
        i == f->parent + 1)
      return BIND_ERROR(FUNNEL_ERR_MALFORMED, p->validity >= 0 ? p->validity : batch->message_offset,
                        "%lld of the map's keys are null", (long long)p->null_count);
    if (f->nested == FUNNEL__NESTED_FIXED || f->nested == FUNNEL__NESTED_STRUCT) continue;
    if (f->offset_width == 0) {
      int64_t need = bitmap_bytes;
      if (f->type_id != FUNNEL_TYPE_BOOL &&
          funnel__mul_overflows(node_length, f->byte_width, &need))
        return BIND_ERROR(FUNNEL_ERR_LIMIT, off[1], "%lld rows overflow", (long long)node_length);
      if (len[1] < need)
        return BIND_ERROR(FUNNEL_ERR_MALFORMED, off[1],
                          "data buffer of %lld bytes at offset %lld, %lld rows need %lld",
                          (long long)len[1], (long long)off[1], (long long)node_length,
                          (long long)need);
      p->data = off[1];
      continue;
    }
    p->offsets = off[1];
    if (f->nested == FUNNEL__NESTED_NONE) p->data = off[2];
    if (node_length == 0) continue; /* the offsets buffer may be empty */
    int64_t need;
    if (funnel__mul_overflows(node_length + 1, f->offset_width, &need) || len[1] < need)
      return BIND_ERROR(FUNNEL_ERR_MALFORMED, off[1],
                        "offsets buffer of %lld bytes at offset %lld, %lld rows need %lld",
                        (long long)len[1], (long long)off[1], (long long)node_length,
                        (long long)(node_length + 1) * f->offset_width);
    const uint8_t *o = part->bytes + off[1];
    const int64_t first_at = start * f->offset_width, last_at = (start + length) * f->offset_width;
    if (f->offset_width == 4) {
      p->first_offset = (int32_t)funnel__ld32(o + first_at);
      p->last_offset = (int32_t)funnel__ld32(o + last_at);
    } else {
      p->first_offset = (int64_t)funnel__ld64(o + first_at);
      p->last_offset = (int64_t)funnel__ld64(o + last_at);
    }
    if (f->nested == FUNNEL__NESTED_LIST) {
      /* the end: against the child's node, when the child is bound */
      if (p->first_offset < 0 || p->last_offset < p->first_offset)
        return BIND_ERROR(FUNNEL_ERR_MALFORMED, off[1] + first_at,
                          "offsets run from %lld to %lld", (long long)p->first_offset,
                          (long long)p->last_offset);
    } else if (p->first_offset < 0 || p->last_offset < p->first_offset ||
               p->last_offset > len[2]) {
      return BIND_ERROR(FUNNEL_ERR_MALFORMED, off[1] + first_at,
                        "offsets run from %lld to %lld, data buffer has %lld bytes",
                        (long long)p->first_offset, (long long)p->last_offset,
                        (long long)len[2]);
    }
  }
  batch->bound = schema;
  return FUNNEL_OK;
}

/* ------------------------------------------------------------------ types */

void funnel__field_type_string(const struct funnel__field *f, char *buf, size_t size) {
  static const char *const units[] = {"s", "ms", "us", "ns"};
  switch (f->type_id) {
    case FUNNEL_TYPE_TIMESTAMP:
      if (f->timezone[0])
        snprintf(buf, size, "timestamp[%s, tz=%s]", units[f->time_unit], f->timezone);
      else
        snprintf(buf, size, "timestamp[%s]", units[f->time_unit]);
      break;
    case FUNNEL_TYPE_DECIMAL128:
      snprintf(buf, size, "decimal128(%d, %d)", f->precision, f->scale);
      break;
    case FUNNEL_TYPE_FIXED_SIZE_BINARY:
      snprintf(buf, size, "fixed_size_binary[%d]", f->byte_width);
      break;
    case FUNNEL_TYPE_FIXED_SIZE_LIST:
      snprintf(buf, size, "fixed_size_list[%d]", f->list_size);
      break;
    case FUNNEL_TYPE_STRUCT:
      snprintf(buf, size, "struct (%d field%s)", f->n_children, f->n_children == 1 ? "" : "s");
      break;
    case FUNNEL_TYPE_MAP:
      snprintf(buf, size, "map%s", f->keys_sorted ? " (keys sorted)" : "");
      break;
    default:
      snprintf(buf, size, "%s", funnel_type_name(f->type_id));
  }
}

const char *funnel_type_name(int type_id) {
  switch (type_id) {
    case FUNNEL_TYPE_INT8: return "int8";
    case FUNNEL_TYPE_INT16: return "int16";
    case FUNNEL_TYPE_INT32: return "int32";
    case FUNNEL_TYPE_INT64: return "int64";
    case FUNNEL_TYPE_UINT8: return "uint8";
    case FUNNEL_TYPE_UINT16: return "uint16";
    case FUNNEL_TYPE_UINT32: return "uint32";
    case FUNNEL_TYPE_UINT64: return "uint64";
    case FUNNEL_TYPE_FLOAT32: return "float32";
    case FUNNEL_TYPE_FLOAT64: return "float64";
    case FUNNEL_TYPE_BOOL: return "bool";
    case FUNNEL_TYPE_DATE32: return "date32";
    case FUNNEL_TYPE_DATE64: return "date64";
    case FUNNEL_TYPE_TIMESTAMP: return "timestamp";
    case FUNNEL_TYPE_DECIMAL128: return "decimal128";
    case FUNNEL_TYPE_UTF8: return "utf8";
    case FUNNEL_TYPE_BINARY: return "binary";
    case FUNNEL_TYPE_LARGE_UTF8: return "large_utf8";
    case FUNNEL_TYPE_LARGE_BINARY: return "large_binary";
    case FUNNEL_TYPE_FIXED_SIZE_BINARY: return "fixed_size_binary";
    case FUNNEL_TYPE_LIST: return "list";
    case FUNNEL_TYPE_LARGE_LIST: return "large_list";
    case FUNNEL_TYPE_FIXED_SIZE_LIST: return "fixed_size_list";
    case FUNNEL_TYPE_STRUCT: return "struct";
    case FUNNEL_TYPE_MAP: return "map";
    default: return "unknown";
  }
}

int funnel__schema_diff(const struct funnel__schema *a, const struct funnel__schema *b,
                        char *why, size_t why_size) {
  int n = a->n_fields < b->n_fields ? a->n_fields : b->n_fields;
  for (int i = 0; i < n; i++) {
    const struct funnel__field *x = &a->fields[i], *y = &b->fields[i];
    if (x->type_id == y->type_id && x->nullable == y->nullable &&
        x->byte_width == y->byte_width && x->time_unit == y->time_unit &&
        x->precision == y->precision && x->scale == y->scale && strcmp(x->name, y->name) == 0 &&
        (x->type_id != FUNNEL_TYPE_TIMESTAMP || strcmp(x->timezone, y->timezone) == 0) &&
        x->parent == y->parent && x->n_children == y->n_children &&
        x->list_size == y->list_size && x->keys_sorted == y->keys_sorted)
      continue;
    /* the same type string is the same type: only what it prints matters */
    char tx[96], ty[96];
    funnel__field_type_string(x, tx, sizeof(tx));
    funnel__field_type_string(y, ty, sizeof(ty));
    bool same = strcmp(x->name, y->name) == 0 && strcmp(tx, ty) == 0 &&
                x->nullable == y->nullable && x->parent == y->parent;
    if (same) continue;
    if (why != NULL)
      snprintf(why, why_size, "column %d is '%s' %s%s, expected '%s' %s%s", i, y->path, ty,
               y->nullable ? "" : " not null", x->path, tx, x->nullable ? "" : " not null");
    return i;
  }
  if (a->n_fields != b->n_fields) {
    if (why != NULL)
      snprintf(why, why_size, "%d columns, expected %d", b->n_fields, a->n_fields);
    return n;
  }
  return -1;
}
