/* Compiled Kineto trace reader: scans the bytes of a trace's ``traceEvents`` array block by block and appends
 * the fields the engine reads to growable C columns, with no Python object per event.
 *
 * It is the C twin of stepscope.traces.typed + columns.ChunkColumns for the common shape of a trace. It never
 * guesses: whatever it cannot turn into exactly the values the Python path computes (a value of an odd type
 * in a field the engine reads, a duplicated key, an escaped key, a number beyond int64 or double range, any
 * JSON it does not accept) raises ``Unsupported`` and the caller reads the whole file with the Python path,
 * which then gives its own result or error. The columns hold the table's types (ts/dur in int64 ns, device int32,
 * launch figures float32), so none is converted into a second one; what needs the whole table (kinds, the GPU-only
 * columns' -1 / NaN elsewhere, code renumbering) is done by stepscope.traces.compiled in NumPy, in these columns'
 * own memory.
 *
 * Builder.feed(block) parses the whole events at the head of ``block`` (which starts just after the array's
 * ``[`` or after the last event consumed) and returns (bytes consumed, array ended); the caller keeps the
 * unconsumed tail, reads more and feeds tail + more. Memory is one block plus the columns.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h> /* mremap: Python.h defines _GNU_SOURCE */
#define BUF_MAPS 1
#endif

enum { ST_OK = 0, ST_MORE = 1, ST_BAD = 2, ST_ERR = 3, ST_DEEP = 4 };
/* Levels of nesting an event may hold, the event object being level 1: stepscope.traces.jsonstream.MAX_DEPTH (what
 * orjson parses inside a chunk's [...]); deeper raises TooDeep, the same one-line refusal as the Python reader's. The
 * recursion is a few hundred bytes a level: well within any thread's stack. */
#define MAX_DEPTH 1023
/* Names and categories longer than this many characters are cut (stepscope.traces.notes.MAX_NAME_CHARS). */
#define MAX_NAME_CHARS 65536
/* Levels of lists orjson.dumps writes (the Python reader's Input Dims text); deeper reads as the text "null". */
#define DIMS_MAX_LEVELS 254
#define MISSING_ARG (-(INT64_C(1) << 62))
#define MAX_US 4.5e15

static PyObject *Unsupported;
static PyObject *TooDeep;

/* ---------------------------------------------------------------- growable buffers */

/* A buffer that grows by doubling. On Linux one of MAP_MIN bytes or more is its own anonymous mapping, grown by
 * mremap (no copy: the pages move; those of the spare capacity are never touched, so never resident) and given
 * back whole when freed, whatever the allocator's settings; below that, and elsewhere, malloc's memory. So the
 * columns never sit in the heap, where a freed one leaves a hole that later, smaller blocks fill. */
typedef struct {
    char *p;
    size_t n, cap;
    int mapped;
} Buf;

#define MAP_MIN ((size_t)128 * 1024)

static int buf_reserve(Buf *b, size_t extra) {
    if (b->n + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + extra) cap *= 2;
#ifdef BUF_MAPS
    if (cap >= MAP_MIN) { /* a power of two from 4096: whole pages */
        void *q;
        if (b->mapped) q = mremap(b->p, b->cap, cap, MREMAP_MAYMOVE);
        else {
            q = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (q != MAP_FAILED) {
                if (b->n) memcpy(q, b->p, b->n);
                free(b->p);
            }
        }
        if (q == MAP_FAILED) return -1;
        b->p = q;
        b->cap = cap;
        b->mapped = 1;
        return 0;
    }
#endif
    char *q = realloc(b->p, cap);
    if (!q) return -1;
    b->p = q;
    b->cap = cap;
    return 0;
}

static int buf_put(Buf *b, const void *src, size_t n) {
    if (!n) return 0; /* an empty buffer's p is NULL: memcpy(NULL, src, 0) is undefined behaviour */
    if (buf_reserve(b, n)) return -1;
    memcpy(b->p + b->n, src, n);
    b->n += n;
    return 0;
}

/* Give back the memory of p (cap bytes, mapped or from malloc). */
static void mem_free(char *p, size_t cap, int mapped) {
#ifdef BUF_MAPS
    if (mapped) {
        munmap(p, cap);
        return;
    }
#endif
    (void)cap;
    (void)mapped;
    free(p);
}

/* Shrink to n bytes (at least 1) in place where the memory allows it; returns 0 on out of memory. */
static int buf_fit(Buf *b) {
#ifdef BUF_MAPS
    if (b->mapped) {
        long page = sysconf(_SC_PAGESIZE);
        size_t want = b->n ? (b->n + (size_t)page - 1) / (size_t)page * (size_t)page : (size_t)page;
        if (want < b->cap && mremap(b->p, b->cap, want, 0) != MAP_FAILED) b->cap = want; /* in place */
        return 1;
    }
#endif
    size_t want = b->n ? b->n : 1;
    char *q = realloc(b->p, want); /* give back the spare capacity */
    if (q) {
        b->p = q;
        b->cap = want;
    }
    return b->p != NULL;
}

static void buf_free(Buf *b) {
    if (b->p) mem_free(b->p, b->cap, b->mapped);
    b->p = NULL;
    b->n = b->cap = 0;
    b->mapped = 0;
}

/* ---------------------------------------------------------------- string interning (first-seen codes) */

typedef struct {
    uint32_t *slots; /* code + 1, 0 = empty */
    size_t nslots;
    Buf arena;       /* the strings, back to back */
    Buf offs;        /* uint64 start of each string, count + 1 entries once finished */
    Buf hashes;      /* uint64 hash of each code */
    uint32_t count;
} Intern;

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 32;
    return h;
}

static const char *intern_str(const Intern *t, uint32_t code, size_t *len) {
    const uint64_t *offs = (const uint64_t *)t->offs.p;
    uint64_t start = offs[code];
    uint64_t end = code + 1 < t->count ? offs[code + 1] : t->arena.n;
    *len = (size_t)(end - start);
    return t->arena.p ? t->arena.p + start : ""; /* only empty strings so far: no arena yet */
}

static int intern_grow(Intern *t) {
    size_t n = t->nslots ? t->nslots * 2 : 1024;
    uint32_t *slots = calloc(n, sizeof(uint32_t));
    if (!slots) return -1;
    const uint64_t *hashes = (const uint64_t *)t->hashes.p;
    for (uint32_t c = 0; c < t->count; c++) {
        size_t i = hashes[c] & (n - 1);
        while (slots[i]) i = (i + 1) & (n - 1);
        slots[i] = c + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = n;
    return 0;
}

/* The code of string s (added at the end if new); -1 on out of memory. */
static int64_t intern(Intern *t, const char *s, size_t n) {
    if ((t->count + 1) * 2 > t->nslots && intern_grow(t)) return -1;
    uint64_t h = hash_bytes(s, n);
    size_t mask = t->nslots - 1, i = h & mask;
    const uint64_t *hashes = (const uint64_t *)t->hashes.p;
    while (t->slots[i]) {
        uint32_t c = t->slots[i] - 1;
        if (hashes[c] == h) {
            size_t len;
            const char *have = intern_str(t, c, &len);
            if (len == n && memcmp(have, s, n) == 0) return c;
        }
        i = (i + 1) & mask;
    }
    uint64_t off = t->arena.n;
    if (buf_put(&t->arena, s, n) || buf_put(&t->offs, &off, 8) || buf_put(&t->hashes, &h, 8)) return -1;
    t->slots[i] = ++t->count;
    return t->count - 1;
}

static void intern_free(Intern *t) {
    free(t->slots);
    t->slots = NULL;
    t->nslots = 0;
    buf_free(&t->arena);
    buf_free(&t->offs);
    buf_free(&t->hashes);
    t->count = 0;
}

/* ---------------------------------------------------------------- columns */

enum {
    C_TS, C_DUR, C_CAT, C_NAME, C_PID, C_TID, C_CORR, C_EXT, C_STREAM, C_DEVICE, C_BYTES, C_FLAGS,
    C_BPSM, C_WPSM, C_OCC, C_GRID, C_BLOCK, C_DIMS, C_COLL, C_WRONG, C_OPT, C_BW,
    S_ROW, S_STREAM, S_REC, /* a side table: the events with a wait_on_* arg (sync records) */
    F_ID, F_START, F_TS, F_PID, F_TID, N_COLS
};
static const char *const COL_NAMES[N_COLS] = {
    "ts", "dur", "cat", "name", "pid", "tid", "correlation", "external_id", "stream", "device", "bytes", "flags",
    "blocks_per_sm", "warps_per_sm", "occupancy", "grid", "block", "dims", "coll", "wrong", "optype", "bandwidth",
    "wait_row", "wait_stream", "wait_record", "flow_id", "flow_start", "flow_ts", "flow_pid", "flow_tid"};
enum { T_NAME, T_CAT, T_DIMS, T_COLL, T_OPT, N_TABLES };
static const char *const TABLE_NAMES[N_TABLES] = {"name", "cat", "dims", "coll", "optype"};

/* ---------------------------------------------------------------- one event's fields */

typedef struct {
    const char *s;
    size_t n;
    int esc;
} Span;

enum { NUM_COLL = 9 };
static const char *const COLL_KEYS[NUM_COLL] = {
    "Collective name", "In msg nelems", "Out msg nelems", "Group size", "dtype", "Process Group Ranks",
    "Process Group Name", "Src Rank", "Dst Rank"};

typedef struct {
    uint64_t seen;   /* known keys met (a second one is refused) */
    int sem;         /* a value of a type the columns cannot take exactly: fall back if the event is used */
    int ph_kind;     /* 0 other, 1 X, 2 s, 3 f, 4 instant (i or I) */
    double ts, dur;
    Span cat, name;
    int has_cat, has_name;
    int64_t pid, tid, id;
    int64_t corr, ext, stream, device, bytes;
    uint8_t flags; /* 1 device, 2 stream, 4 correlation: each a JSON integer */
    double bpsm, wpsm, occ;
    double bw; /* "memory bandwidth (GB/s)" of a memcpy / memset */
    int64_t wait_stream, wait_rec; /* wait_on_stream, wait_on_cuda_event_record_corr_id (-1: absent) */
    int has_wait;
    int64_t grid, block;
    int has_dims;
    int dims_depth; /* levels of lists in Input Dims: past DIMS_MAX_LEVELS its text is "null", as orjson.dumps fails */
    int has_coll;
    Span coll[NUM_COLL];
    Span opt[2]; /* raw JSON of "Input type" and "Concrete Inputs" (s NULL where absent) */
    uint16_t wrong; /* W_* bits: a value of the wrong type (an array or object) read as not measured */
} Ev;

/* The bits of the "wrong" column, one per figure (stepscope.traces.compiled counts those of the rows that read it). */
enum { W_PID = 1, W_TID = 2, W_CORR = 4, W_EXT = 8, W_STREAM = 16, W_DEVICE = 32, W_BYTES = 64, W_BPSM = 128,
       W_WPSM = 256, W_OCC = 512, W_BW = 1024 };

typedef struct {
    PyObject_HEAD
    Buf cols[N_COLS];
    Intern tables[N_TABLES];
    Buf scratch, scratch2, dims;
    int64_t count, flow_count, dropped, cut;
    int state; /* 0: before the first element, 1: after an element, 2: after a comma, 3: array ended */
} Builder;

typedef struct {
    const char *p, *end;
    Builder *b;
} Cur;

#define WS(c)                                                                                       \
    while ((c)->p < (c)->end && (*(c)->p == ' ' || *(c)->p == '\n' || *(c)->p == '\r' || *(c)->p == '\t')) \
    (c)->p++
#define CHECK(x)                     \
    do {                             \
        int r_ = (x);                \
        if (r_ != ST_OK) return r_;   \
    } while (0)

/* ---------------------------------------------------------------- strings */

/* At a '"': the raw content (validated: escapes, control characters, UTF-8) and whether it has escapes. */
static int scan_string(Cur *c, Span *out) {
    const unsigned char *p = (const unsigned char *)c->p + 1, *end = (const unsigned char *)c->end;
    const unsigned char *start = p;
    int esc = 0;
    for (;;) {
        while (p < end && *p >= 0x20 && *p != '"' && *p != '\\' && *p < 0x80) p++;
        if (p >= end) return ST_MORE;
        unsigned char ch = *p;
        if (ch == '"') break;
        if (ch < 0x20) return ST_BAD;
        if (ch == '\\') {
            esc = 1;
            if (p + 1 >= end) return ST_MORE;
            unsigned char e = p[1];
            if (e == 'u') {
                if (p + 6 > end) return ST_MORE;
                unsigned v = 0;
                for (int k = 2; k < 6; k++) {
                    unsigned char h = p[k];
                    v <<= 4;
                    if (h >= '0' && h <= '9') v |= h - '0';
                    else if ((h | 32) >= 'a' && (h | 32) <= 'f') v |= (h | 32) - 'a' + 10;
                    else return ST_BAD;
                }
                p += 6;
                if (v >= 0xDC00 && v <= 0xDFFF) return ST_BAD; /* lone low surrogate */
                if (v >= 0xD800 && v <= 0xDBFF) {              /* needs its low half */
                    if (p + 6 > end) return ST_MORE;
                    if (p[0] != '\\' || p[1] != 'u') return ST_BAD;
                    unsigned w = 0;
                    for (int k = 2; k < 6; k++) {
                        unsigned char h = p[k];
                        w <<= 4;
                        if (h >= '0' && h <= '9') w |= h - '0';
                        else if ((h | 32) >= 'a' && (h | 32) <= 'f') w |= (h | 32) - 'a' + 10;
                        else return ST_BAD;
                    }
                    if (w < 0xDC00 || w > 0xDFFF) return ST_BAD;
                    p += 6;
                }
                continue;
            }
            if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
                p += 2;
                continue;
            }
            return ST_BAD;
        }
        /* UTF-8 lead byte: validate the sequence (no overlongs, no surrogates, <= U+10FFFF) */
        int need;
        unsigned lo = 0x80, hi = 0xBF;
        if (ch >= 0xC2 && ch <= 0xDF) need = 1;
        else if (ch >= 0xE0 && ch <= 0xEF) {
            need = 2;
            if (ch == 0xE0) lo = 0xA0;
            if (ch == 0xED) hi = 0x9F;
        } else if (ch >= 0xF0 && ch <= 0xF4) {
            need = 3;
            if (ch == 0xF0) lo = 0x90;
            if (ch == 0xF4) hi = 0x8F;
        } else return ST_BAD;
        if (p + need >= end) return ST_MORE;
        if (p[1] < lo || p[1] > hi) return ST_BAD;
        for (int k = 2; k <= need; k++)
            if (p[k] < 0x80 || p[k] > 0xBF) return ST_BAD;
        p += need + 1;
    }
    out->s = (const char *)start;
    out->n = (size_t)(p - start);
    out->esc = esc;
    c->p = (const char *)p + 1;
    return ST_OK;
}

static unsigned hex4(const char *h) {
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned char x = (unsigned char)h[k];
        v = (v << 4) | (x <= '9' ? x - '0' : (x | 32) - 'a' + 10);
    }
    return v;
}

/* The UTF-8 bytes of a validated string's content (escapes decoded) in *out (a scratch buffer). */
static int decode_string(const Span *s, Buf *out, const char **res, size_t *len) {
    if (!s->esc) {
        *res = s->s;
        *len = s->n;
        return 0;
    }
    out->n = 0;
    if (buf_reserve(out, s->n)) return -1;
    const char *p = s->s, *end = s->s + s->n;
    char *o = out->p;
    while (p < end) {
        if (*p != '\\') {
            *o++ = *p++;
            continue;
        }
        char e = p[1];
        if (e != 'u') {
            *o++ = e == 'b' ? '\b' : e == 'f' ? '\f' : e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e;
            p += 2;
            continue;
        }
        unsigned v = hex4(p + 2);
        p += 6;
        if (v >= 0xD800 && v <= 0xDBFF) {
            v = 0x10000 + ((v - 0xD800) << 10) + (hex4(p + 2) - 0xDC00);
            p += 6;
        }
        if (v < 0x80) *o++ = (char)v;
        else if (v < 0x800) {
            *o++ = (char)(0xC0 | (v >> 6));
            *o++ = (char)(0x80 | (v & 0x3F));
        } else if (v < 0x10000) {
            *o++ = (char)(0xE0 | (v >> 12));
            *o++ = (char)(0x80 | ((v >> 6) & 0x3F));
            *o++ = (char)(0x80 | (v & 0x3F));
        } else {
            *o++ = (char)(0xF0 | (v >> 18));
            *o++ = (char)(0x80 | ((v >> 12) & 0x3F));
            *o++ = (char)(0x80 | ((v >> 6) & 0x3F));
            *o++ = (char)(0x80 | (v & 0x3F));
        }
    }
    *res = out->p;
    *len = (size_t)(o - out->p);
    return 0;
}

/* ---------------------------------------------------------------- numbers */

typedef struct {
    const char *s;
    size_t n;
    int neg, is_int, many; /* many: more than 19 significant digits */
    uint64_t mant;         /* significant digits as an integer (when !many) */
    int exp10;             /* value = mant * 10^exp10 */
    int int_ok;            /* is_int and the value fits int64 */
    int64_t ival;
} Num;

static int scan_number(Cur *c, Num *out) {
    const char *p = c->p, *end = c->end;
    memset(out, 0, sizeof *out);
    out->s = p;
    if (p < end && *p == '-') {
        out->neg = 1;
        p++;
    }
    if (p >= end) return ST_MORE;
    int digits = 0;
    uint64_t mant = 0;
    long exp10 = 0;
    if (*p == '0') {
        p++;
        if (p < end && *p >= '0' && *p <= '9') return ST_BAD; /* leading zero */
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') {
            if (digits < 19) mant = mant * 10 + (uint64_t)(*p - '0');
            else {
                out->many = 1;
                exp10++;
            }
            digits++;
            p++;
        }
    } else return ST_BAD;
    out->is_int = 1;
    if (p < end && *p == '.') {
        out->is_int = 0;
        p++;
        if (p >= end) return ST_MORE;
        if (*p < '0' || *p > '9') return ST_BAD;
        while (p < end && *p >= '0' && *p <= '9') {
            if (mant == 0 && *p == '0') exp10--; /* leading zeros of the fraction */
            else if (digits < 19) {
                mant = mant * 10 + (uint64_t)(*p - '0');
                exp10--;
                digits++;
            } else out->many = 1;
            p++;
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        out->is_int = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end) return ST_MORE;
        if (*p < '0' || *p > '9') return ST_BAD;
        const char *q = p;
        long e = 0;
        int eneg = q[-1] == '-';
        while (p < end && *p >= '0' && *p <= '9') {
            if (e < 100000) e = e * 10 + (*p - '0');
            p++;
        }
        exp10 += eneg ? -e : e;
    }
    if (p >= end) return ST_MORE; /* a number can only end at a delimiter: more may follow */
    /* beyond double range (the leading digit's exponent): orjson refuses what msgspec skips, Python decides */
    if (mant && (digits < 19 ? digits : 19) - 1 + exp10 >= 308) return ST_BAD;
    if (exp10 > 400 || exp10 < -400) return ST_BAD;
    out->mant = mant;
    out->exp10 = (int)exp10;
    out->n = (size_t)(p - out->s);
    if (out->is_int && !out->many) {
        if (!out->neg && mant <= (uint64_t)INT64_MAX) {
            out->int_ok = 1;
            out->ival = (int64_t)mant;
        } else if (out->neg && mant <= (uint64_t)INT64_MAX + 1) {
            out->int_ok = 1;
            out->ival = mant == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mant;
        }
    }
    if (out->is_int && !out->int_ok) return ST_BAD; /* an integer beyond 64 bits: the parsers differ */
    c->p = p;
    return ST_OK;
}

#if LDBL_MANT_DIG == 64
static const long double P10L[28] = {
    1e0L, 1e1L, 1e2L, 1e3L, 1e4L, 1e5L, 1e6L, 1e7L, 1e8L, 1e9L, 1e10L, 1e11L, 1e12L, 1e13L,
    1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L, 1e20L, 1e21L, 1e22L, 1e23L, 1e24L, 1e25L, 1e26L, 1e27L};
#endif

/* The double nearest the number (round half to even, as every correct parser gives); -1 on error. */
static int num_double(const Num *x, double *out) {
    if (!x->many) {
        if (x->mant == 0) {
            *out = x->neg ? -0.0 : 0.0;
            return 0;
        }
        if (x->exp10 == 0 && x->mant <= (UINT64_C(1) << 53)) {
            *out = x->neg ? -(double)x->mant : (double)x->mant;
            return 0;
        }
#if LDBL_MANT_DIG == 64
        /* One correctly rounded x87 operation on exact operands (mant < 2^64, 10^k exact for k <= 27) gives the
         * value to 64 bits; rounding that to 53 bits is the correct rounding unless it sits exactly on a
         * half-way point between two doubles, which goes to the exact parser below. */
        if (x->exp10 >= -27 && x->exp10 <= 27) {
            long double v = (long double)x->mant;
            v = x->exp10 < 0 ? v / P10L[-x->exp10] : v * P10L[x->exp10];
            int e;
            long double m = frexpl(v, &e);
            uint64_t bits = (uint64_t)ldexpl(m, 64);
            if ((bits & 0x7FF) != 0x400) {
                double d = (double)v;
                *out = x->neg ? -d : d;
                return 0;
            }
        }
#endif
    }
    char tmp[512];
    if (x->n >= sizeof tmp) return -1;
    memcpy(tmp, x->s, x->n);
    tmp[x->n] = 0;
    double d = PyOS_string_to_double(tmp, NULL, NULL);
    if (d == -1.0 && PyErr_Occurred()) return -1;
    if (!isfinite(d)) return -1;
    *out = d;
    return 0;
}

/* ---------------------------------------------------------------- skipping and copying values */

static int skip_value(Cur *c, int depth);

static int expect_lit(Cur *c, const char *lit, size_t n) {
    size_t have = (size_t)(c->end - c->p);
    if (memcmp(c->p, lit, have < n ? have : n) != 0) return ST_BAD;
    if (have < n) return ST_MORE;
    c->p += n;
    return ST_OK;
}

/* depth: the level of the container at c->p (the event object is 1). */
static int skip_container(Cur *c, int depth, char close) {
    if (depth > MAX_DEPTH) return ST_DEEP;
    c->p++;
    WS(c);
    if (c->p >= c->end) return ST_MORE;
    if (*c->p == close) {
        c->p++;
        return ST_OK;
    }
    for (;;) {
        if (close == '}') {
            if (*c->p != '"') return ST_BAD;
            Span k;
            CHECK(scan_string(c, &k));
            WS(c);
            if (c->p >= c->end) return ST_MORE;
            if (*c->p != ':') return ST_BAD;
            c->p++;
        }
        CHECK(skip_value(c, depth + 1));
        WS(c);
        if (c->p >= c->end) return ST_MORE;
        if (*c->p == close) {
            c->p++;
            return ST_OK;
        }
        if (*c->p != ',') return ST_BAD;
        c->p++;
        WS(c);
        if (c->p >= c->end) return ST_MORE;
    }
}

static int skip_value(Cur *c, int depth) {
    WS(c);
    if (c->p >= c->end) return ST_MORE;
    switch (*c->p) {
    case '{': return skip_container(c, depth, '}');
    case '[': return skip_container(c, depth, ']');
    case '"': {
        Span s;
        return scan_string(c, &s);
    }
    case 't': return expect_lit(c, "true", 4);
    case 'f': return expect_lit(c, "false", 5);
    case 'n': return expect_lit(c, "null", 4);
    default: {
        Num x;
        return scan_number(c, &x);
    }
    }
}

/* ---------------------------------------------------------------- typed fields */

/* int(s, 0) as the Python path calls it on a string id; -1 where it raises or does not fit int64. *ambiguous is
 * set where int(s, 0) raises but int(s) does not (a decimal with leading zeros, "07"): the Python path reads such
 * a string with NumPy's int(s) or with int(s, 0) depending on the other values of its chunk. */
static int64_t int_of_string(const char *s, size_t n, int *ambiguous) {
    if (n >= 3 && n <= 17 && s[0] == '0' && s[1] == 'x') {
        int64_t v = 0;
        size_t i = 2;
        for (; i < n; i++) {
            char h = s[i];
            int d = h >= '0' && h <= '9' ? h - '0' : (h | 32) >= 'a' && (h | 32) <= 'f' ? (h | 32) - 'a' + 10 : -1;
            if (d < 0) break;
            v = v * 16 + d;
        }
        if (i == n) return v;
    } else if (n >= 1 && n <= 18 && s[0] >= '1' && s[0] <= '9') {
        int64_t v = 0;
        size_t i = 0;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) v = v * 10 + (s[i] - '0');
        if (i == n) return v;
    } else if (n == 1 && s[0] == '0') return 0;
    PyObject *u = PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, NULL);
    if (!u) {
        PyErr_Clear();
        return -1;
    }
    PyObject *v = PyLong_FromUnicodeObject(u, 0);
    if (!v) {
        PyErr_Clear();
        PyObject *dec = PyLong_FromUnicodeObject(u, 10);
        if (dec) *ambiguous = 1;
        else PyErr_Clear();
        Py_XDECREF(dec);
        Py_DECREF(u);
        return -1;
    }
    Py_DECREF(u);
    int overflow = 0;
    long long r = PyLong_AsLongLongAndOverflow(v, &overflow);
    Py_DECREF(v);
    if (overflow || (r == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return -1;
    }
    return (int64_t)r;
}

/* An integer field (pid, tid, id, an integer arg) at nesting level lvl: int, a string int(s, 0) reads, null (-1); an
 * array or object is of the wrong type: -1, and the bit `wrong` set. */
static int int_field(Cur *c, Ev *ev, int64_t *val, int *is_int, int is_arg, int lvl, uint16_t wrong) {
    WS(c);
    if (c->p >= c->end) return ST_MORE;
    char ch = *c->p;
    if (ch == '"') {
        Span s;
        CHECK(scan_string(c, &s));
        const char *d;
        size_t n;
        if (decode_string(&s, &c->b->scratch2, &d, &n)) return ST_ERR;
        int ambiguous = 0;
        *val = int_of_string(d, n, &ambiguous);
        if (ambiguous || (is_arg && *val == MISSING_ARG)) ev->sem = 1;
        return ST_OK;
    }
    if (ch == 'n') {
        CHECK(expect_lit(c, "null", 4));
        *val = -1;
        return ST_OK;
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        Num x;
        CHECK(scan_number(c, &x));
        if (!x.int_ok || (is_arg && x.ival == MISSING_ARG)) ev->sem = 1;
        *val = x.ival;
        if (is_int) *is_int = 1;
        return ST_OK;
    }
    if (ch == '[' || ch == '{') {
        *val = -1;
        ev->wrong |= wrong;
        return skip_value(c, lvl);
    }
    ev->sem = 1;
    return skip_value(c, lvl);
}

/* A float field (ts, dur, a float arg) at nesting level lvl: a number, or null (NaN); an array or object is of the
 * wrong type: NaN, and the bit `wrong` set (none for ts and dur: the event is dropped, counted as such). */
static int float_field(Cur *c, Ev *ev, double *val, int lvl, uint16_t wrong) {
    WS(c);
    if (c->p >= c->end) return ST_MORE;
    char ch = *c->p;
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        Num x;
        CHECK(scan_number(c, &x));
        if (num_double(&x, val)) {
            if (PyErr_Occurred()) return ST_ERR;
            ev->sem = 1;
        }
        return ST_OK;
    }
    if (ch == 'n') {
        CHECK(expect_lit(c, "null", 4));
        *val = NAN;
        return ST_OK;
    }
    if (ch == '[' || ch == '{') {
        *val = NAN;
        ev->wrong |= wrong;
        return skip_value(c, lvl);
    }
    ev->sem = 1;
    return skip_value(c, lvl);
}

static int string_field(Cur *c, Ev *ev, Span *s, int *has) {
    WS(c);
    if (c->p >= c->end) return ST_MORE;
    if (*c->p == '"') {
        CHECK(scan_string(c, s));
        *has = 1;
        return ST_OK;
    }
    ev->sem = 1;
    return skip_value(c, 2); /* a top-level field's value: level 2 */
}

/* grid / block: the product of a list of integers; -1 for an empty list or a value that is not a list. */
static int product_field(Cur *c, Ev *ev, int64_t *val) {
    WS(c);
    if (c->p >= c->end) return ST_MORE;
    if (*c->p != '[') {
        *val = -1;
        return skip_value(c, 3);
    }
    c->p++;
    WS(c);
    if (c->p >= c->end) return ST_MORE;
    if (*c->p == ']') {
        c->p++;
        *val = -1;
        return ST_OK;
    }
    int64_t prod = 1;
    for (;;) {
        WS(c);
        if (c->p >= c->end) return ST_MORE;
        char ch = *c->p;
        if (ch == '-' || (ch >= '0' && ch <= '9')) {
            Num x;
            CHECK(scan_number(c, &x));
            if (!x.int_ok || __builtin_mul_overflow(prod, x.ival, &prod)) ev->sem = 1;
        } else {
            ev->sem = 1;
            CHECK(skip_value(c, 4));
        }
        WS(c);
        if (c->p >= c->end) return ST_MORE;
        if (*c->p == ']') {
            c->p++;
            break;
        }
        if (*c->p != ',') return ST_BAD;
        c->p++;
    }
    *val = prod;
    return ST_OK;
}

/* Input Dims: the value written as compact JSON (what orjson.dumps gives) into out; lists, integers, true,
 * false and null only (anything else marks the event for the Python path). */
static int canon_value(Cur *c, Ev *ev, Buf *out, int depth) {
    WS(c);
    if (c->p >= c->end) return ST_MORE;
    char ch = *c->p;
    if (ch == '[' && depth > MAX_DEPTH) return ST_DEEP;
    if (ch == '[' && depth - 2 > ev->dims_depth) ev->dims_depth = depth - 2; /* Input Dims itself: depth 3, level 1 */
    const char *start = c->p;
    if (ch == '[') {
        c->p++;
        if (buf_put(out, "[", 1)) return ST_ERR;
        WS(c);
        if (c->p >= c->end) return ST_MORE;
        if (*c->p == ']') {
            c->p++;
            return buf_put(out, "]", 1) ? ST_ERR : ST_OK;
        }
        for (;;) {
            CHECK(canon_value(c, ev, out, depth + 1));
            WS(c);
            if (c->p >= c->end) return ST_MORE;
            if (*c->p == ']') {
                c->p++;
                return buf_put(out, "]", 1) ? ST_ERR : ST_OK;
            }
            if (*c->p != ',') return ST_BAD;
            c->p++;
            if (buf_put(out, ",", 1)) return ST_ERR;
        }
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        Num x;
        CHECK(scan_number(c, &x));
        if (!x.int_ok || (x.neg && x.ival == 0)) ev->sem = 1;
        return buf_put(out, start, (size_t)(c->p - start)) ? ST_ERR : ST_OK;
    }
    if (ch == 't' || ch == 'f' || ch == 'n') {
        CHECK(skip_value(c, depth));
        return buf_put(out, start, (size_t)(c->p - start)) ? ST_ERR : ST_OK;
    }
    ev->sem = 1;
    return skip_value(c, depth);
}

/* ---------------------------------------------------------------- keys */

static int key_is(const Span *k, const char *name) {
    size_t n = strlen(name);
    return k->n == n && memcmp(k->s, name, n) == 0;
}

enum {
    K_PH, K_TS, K_DUR, K_CAT, K_NAME, K_PID, K_TID, K_ARGS, K_ID,
    A_CORR, A_EXT, A_STREAM, A_DEVICE, A_BYTES, A_BPSM, A_WPSM, A_OCC, A_GRID, A_BLOCK, A_DIMS, A_ITYPE, A_CONCRETE,
    A_BW, A_WSTREAM, A_WREC, A_COLL0
};

static int seen_once(Ev *ev, int key) {
    uint64_t bit = UINT64_C(1) << key;
    if (ev->seen & bit) return 0;
    ev->seen |= bit;
    return 1;
}

static int parse_args(Cur *c, Ev *ev) {
    WS(c);
    if (c->p >= c->end) return ST_MORE;
    if (*c->p != '{') return skip_value(c, 2); /* args that are not an object read as no args */
    c->p++;
    WS(c);
    if (c->p >= c->end) return ST_MORE;
    if (*c->p == '}') {
        c->p++;
        return ST_OK;
    }
    for (;;) {
        if (*c->p != '"') return ST_BAD;
        Span k;
        CHECK(scan_string(c, &k));
        WS(c);
        if (c->p >= c->end) return ST_MORE;
        if (*c->p != ':') return ST_BAD;
        c->p++;
        if (k.esc) return ST_BAD; /* an escaped key could spell a known one */
        int key = -1;
        switch (k.n) {
        case 4: key = key_is(&k, "grid") ? A_GRID : -1; break;
        case 5: key = key_is(&k, "bytes") ? A_BYTES : key_is(&k, "block") ? A_BLOCK : -1; break;
        case 6: key = key_is(&k, "stream") ? A_STREAM : key_is(&k, "device") ? A_DEVICE : -1; break;
        case 10: key = key_is(&k, "Input Dims") ? A_DIMS : key_is(&k, "Input type") ? A_ITYPE : -1; break;
        case 14: key = key_is(&k, "wait_on_stream") ? A_WSTREAM : -1; break;
        case 15: key = key_is(&k, "Concrete Inputs") ? A_CONCRETE : -1; break;
        case 33: key = key_is(&k, "wait_on_cuda_event_record_corr_id") ? A_WREC : -1; break;
        case 11: key = key_is(&k, "correlation") ? A_CORR : key_is(&k, "External id") ? A_EXT : -1; break;
        case 12: key = key_is(&k, "warps per SM") ? A_WPSM : -1; break;
        case 13: key = key_is(&k, "blocks per SM") ? A_BPSM : -1; break;
        case 23: key = key_is(&k, "memory bandwidth (GB/s)") ? A_BW : -1; break;
        case 25: key = key_is(&k, "est. achieved occupancy %") ? A_OCC : -1; break;
        default: break;
        }
        if (key < 0)
            for (int i = 0; i < NUM_COLL; i++)
                if (key_is(&k, COLL_KEYS[i])) key = A_COLL0 + i;
        if (key >= 0 && !seen_once(ev, key)) return ST_BAD;
        switch (key) {
        case A_CORR: {
            int is = 0;
            CHECK(int_field(c, ev, &ev->corr, &is, 1, 3, W_CORR));
            if (is) ev->flags |= 4;
            break;
        }
        case A_EXT: CHECK(int_field(c, ev, &ev->ext, NULL, 1, 3, W_EXT)); break;
        case A_STREAM: {
            int is = 0;
            CHECK(int_field(c, ev, &ev->stream, &is, 1, 3, W_STREAM));
            if (is) ev->flags |= 2;
            break;
        }
        case A_DEVICE: {
            int is = 0;
            CHECK(int_field(c, ev, &ev->device, &is, 1, 3, W_DEVICE));
            if (is) ev->flags |= 1;
            break;
        }
        case A_BYTES: CHECK(int_field(c, ev, &ev->bytes, NULL, 1, 3, W_BYTES)); break;
        case A_BPSM: CHECK(float_field(c, ev, &ev->bpsm, 3, W_BPSM)); break;
        case A_WPSM: CHECK(float_field(c, ev, &ev->wpsm, 3, W_WPSM)); break;
        case A_OCC: CHECK(float_field(c, ev, &ev->occ, 3, W_OCC)); break;
        case A_BW: CHECK(float_field(c, ev, &ev->bw, 3, W_BW)); break;
        case A_WSTREAM: /* not counted as of the wrong type (an array or object: absent), as the Python reader */
            CHECK(int_field(c, ev, &ev->wait_stream, NULL, 1, 3, 0));
            ev->has_wait = 1;
            break;
        case A_WREC:
            CHECK(int_field(c, ev, &ev->wait_rec, NULL, 1, 3, 0));
            ev->has_wait = 1;
            break;
        case A_GRID: CHECK(product_field(c, ev, &ev->grid)); break;
        case A_BLOCK: CHECK(product_field(c, ev, &ev->block)); break;
        case A_DIMS: {
            WS(c);
            if (c->p >= c->end) return ST_MORE;
            if (*c->p == 'n') {
                CHECK(expect_lit(c, "null", 4));
            } else {
                c->b->dims.n = 0;
                CHECK(canon_value(c, ev, &c->b->dims, 3));
                ev->has_dims = 1;
                if (ev->dims_depth > DIMS_MAX_LEVELS) {
                    c->b->dims.n = 0;
                    if (buf_put(&c->b->dims, "null", 4)) return ST_ERR;
                }
            }
            break;
        }
        case -1: CHECK(skip_value(c, 3)); break;
        case A_ITYPE:
        case A_CONCRETE: { /* raw JSON, parsed by orjson per distinct pair (stepscope.traces.compiled) */
            WS(c);
            const char *start = c->p;
            CHECK(skip_value(c, 3));
            Span *s = &ev->opt[key - A_ITYPE];
            s->s = start;
            s->n = (size_t)(c->p - start);
            break;
        }
        default: { /* a collective arg: its raw JSON, parsed by orjson per distinct key */
            WS(c);
            const char *start = c->p;
            CHECK(skip_value(c, 3));
            Span *s = &ev->coll[key - A_COLL0];
            s->s = start;
            s->n = (size_t)(c->p - start);
            if (key == A_COLL0) ev->has_coll = 1;
        }
        }
        WS(c);
        if (c->p >= c->end) return ST_MORE;
        if (*c->p == '}') {
            c->p++;
            return ST_OK;
        }
        if (*c->p != ',') return ST_BAD;
        c->p++;
        WS(c);
        if (c->p >= c->end) return ST_MORE;
    }
}

#define PUSH(col, T, v)                                                     \
    do {                                                                    \
        T v_ = (v);                                                         \
        if (buf_put(&b->cols[col], &v_, sizeof(T))) return ST_ERR;          \
    } while (0)

/* Float µs -> int64 ns as stepscope.traces.columns.us_to_ns: the whole µs and the rounded fraction apart, so an
 * epoch-sized value loses nothing to float64 rounding (|us| < MAX_US: the product fits int64). */
static int64_t us_to_ns(double us) {
    double whole = floor(us);
    return (int64_t)whole * 1000 + (int64_t)rint((us - whole) * 1000.0);
}

/* A kernel's launch figure as its float32 column holds it: NaN where absent or beyond float32 (not measured). */
static float launch_figure(double v) {
    return fabs(v) < 3e38 ? (float)v : NAN;
}

/* The byte length of the first `chars` characters of valid UTF-8 (all of it if shorter). */
static size_t utf8_prefix(const char *s, size_t n, size_t chars) {
    size_t i = 0;
    for (; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80 && chars-- == 0) break; /* a lead byte past the last kept one */
    return i;
}

static int intern_span(Builder *b, int table, const Span *s, int has, int32_t *code) {
    const char *d = "";
    size_t n = 0;
    if (has && decode_string(s, &b->scratch, &d, &n)) return ST_ERR;
    if (n > MAX_NAME_CHARS) { /* bytes >= characters: only a string this long can be past the cap */
        size_t keep = utf8_prefix(d, n, MAX_NAME_CHARS);
        if (keep < n) {
            n = keep;
            b->cut++;
        }
    }
    int64_t r = intern(&b->tables[table], d, n);
    if (r < 0) return ST_ERR;
    *code = (int32_t)r;
    return ST_OK;
}

static int commit(Builder *b, Ev *ev) {
    int flow = 0;
    if (ev->ph_kind == 2 || ev->ph_kind == 3) {
        if (!ev->has_cat) return ev->sem ? ST_BAD : ST_OK; /* no string cat: a flow only by Python's reading */
        const char *d;
        size_t n;
        if (decode_string(&ev->cat, &b->scratch, &d, &n)) return ST_ERR;
        flow = (n == 4 && memcmp(d, "ac2g", 4) == 0) || (n == 16 && memcmp(d, "async_cpu_to_gpu", 16) == 0);
        if (!flow) return ST_OK;
    } else if (ev->ph_kind == 4) {
        /* an allocation record ("[memory]" instant): the Python reader keeps these, so it reads the file */
        const char *d;
        size_t n;
        if (ev->has_name) {
            if (decode_string(&ev->name, &b->scratch, &d, &n)) return ST_ERR;
            if (n == 8 && memcmp(d, "[memory]", 8) == 0) return ST_BAD;
        }
        if (ev->has_cat) {
            if (decode_string(&ev->cat, &b->scratch, &d, &n)) return ST_ERR;
            if (n == 8 && memcmp(d, "[memory]", 8) == 0) return ST_BAD;
        }
        return ST_OK;
    } else if (ev->ph_kind != 1) return ST_OK;
    if (ev->sem) return ST_BAD;
    if (flow) {
        PUSH(F_ID, int64_t, ev->id);
        PUSH(F_START, uint8_t, ev->ph_kind == 2);
        /* NaN (no ts), infinite or absurd: -1 µs, as the Python reader's nan_to_num */
        PUSH(F_TS, int64_t, us_to_ns(fabs(ev->ts) < MAX_US ? ev->ts : -1.0));
        PUSH(F_PID, int64_t, ev->pid);
        PUSH(F_TID, int64_t, ev->tid);
        b->flow_count++;
        return ST_OK;
    }
    if (!(fabs(ev->ts) < MAX_US && fabs(ev->dur) < MAX_US)) { /* NaN, absent or absurd: dropped, counted */
        b->dropped++;
        return ST_OK;
    }
    int32_t cat, name, dims = -1, coll = -1, opt = -1;
    CHECK(intern_span(b, T_CAT, &ev->cat, ev->has_cat, &cat));
    CHECK(intern_span(b, T_NAME, &ev->name, ev->has_name, &name));
    if (ev->has_dims) {
        int64_t r = intern(&b->tables[T_DIMS], b->dims.p ? b->dims.p : "", b->dims.n);
        if (r < 0) return ST_ERR;
        dims = (int32_t)r;
    }
    if (ev->has_coll) { /* the JSON array of the nine values, null where absent */
        Buf *k = &b->scratch;
        k->n = 0;
        if (buf_put(k, "[", 1)) return ST_ERR;
        for (int i = 0; i < NUM_COLL; i++) {
            if (i && buf_put(k, ",", 1)) return ST_ERR;
            if (ev->coll[i].s ? buf_put(k, ev->coll[i].s, ev->coll[i].n) : buf_put(k, "null", 4)) return ST_ERR;
        }
        if (buf_put(k, "]", 1)) return ST_ERR;
        int64_t r = intern(&b->tables[T_COLL], k->p, k->n);
        if (r < 0) return ST_ERR;
        coll = (int32_t)r;
    }
    if (ev->opt[0].s || ev->opt[1].s) { /* [Input type, Concrete Inputs], null where absent */
        Buf *k = &b->scratch;
        k->n = 0;
        if (buf_put(k, "[", 1)) return ST_ERR;
        for (int i = 0; i < 2; i++) {
            if (i && buf_put(k, ",", 1)) return ST_ERR;
            if (ev->opt[i].s ? buf_put(k, ev->opt[i].s, ev->opt[i].n) : buf_put(k, "null", 4)) return ST_ERR;
        }
        if (buf_put(k, "]", 1)) return ST_ERR;
        int64_t r = intern(&b->tables[T_OPT], k->p, k->n);
        if (r < 0) return ST_ERR;
        opt = (int32_t)r;
    }
    PUSH(C_TS, int64_t, us_to_ns(ev->ts));
    PUSH(C_DUR, int64_t, (int64_t)rint(ev->dur * 1000.0));
    PUSH(C_CAT, int32_t, cat);
    PUSH(C_NAME, int32_t, name);
    PUSH(C_PID, int64_t, ev->pid);
    PUSH(C_TID, int64_t, ev->tid);
    PUSH(C_CORR, int64_t, ev->corr);
    PUSH(C_EXT, int64_t, ev->ext);
    PUSH(C_STREAM, int64_t, ev->stream);
    PUSH(C_DEVICE, int32_t, (int32_t)ev->device); /* wraps as NumPy's int64 -> int32 assignment does */
    PUSH(C_BYTES, int64_t, ev->bytes);
    PUSH(C_FLAGS, uint8_t, ev->flags);
    PUSH(C_BPSM, float, launch_figure(ev->bpsm));
    PUSH(C_WPSM, float, launch_figure(ev->wpsm));
    PUSH(C_OCC, float, launch_figure(ev->occ));
    PUSH(C_GRID, int64_t, ev->grid);
    PUSH(C_BLOCK, int64_t, ev->block);
    PUSH(C_DIMS, int32_t, dims);
    PUSH(C_COLL, int32_t, coll);
    PUSH(C_WRONG, uint16_t, ev->wrong);
    PUSH(C_OPT, int32_t, opt);
    PUSH(C_BW, double, isfinite(ev->bw) ? ev->bw : NAN);
    if (ev->has_wait && (ev->wait_stream >= 0 || ev->wait_rec >= 0)) {
        PUSH(S_ROW, int64_t, b->count);
        PUSH(S_STREAM, int64_t, ev->wait_stream);
        PUSH(S_REC, int64_t, ev->wait_rec);
    }
    b->count++;
    return ST_OK;
}

/* At a '{': one event, committed to the columns only once it is whole. */
static int parse_event(Cur *c) {
    Ev ev;
    memset(&ev, 0, sizeof ev);
    ev.ts = ev.dur = ev.bpsm = ev.wpsm = ev.occ = ev.bw = NAN;
    ev.pid = ev.tid = ev.id = ev.corr = ev.ext = ev.stream = ev.device = ev.bytes = ev.grid = ev.block = -1;
    ev.wait_stream = ev.wait_rec = -1;
    c->p++;
    WS(c);
    if (c->p >= c->end) return ST_MORE;
    if (*c->p == '}') {
        c->p++;
        return ST_OK;
    }
    for (;;) {
        if (*c->p != '"') return ST_BAD;
        Span k;
        CHECK(scan_string(c, &k));
        WS(c);
        if (c->p >= c->end) return ST_MORE;
        if (*c->p != ':') return ST_BAD;
        c->p++;
        if (k.esc) return ST_BAD;
        int key = -1;
        switch (k.n) {
        case 2: key = key_is(&k, "ph") ? K_PH : key_is(&k, "ts") ? K_TS : key_is(&k, "id") ? K_ID : -1; break;
        case 3:
            key = key_is(&k, "dur") ? K_DUR : key_is(&k, "cat") ? K_CAT : key_is(&k, "pid") ? K_PID
                : key_is(&k, "tid") ? K_TID : -1;
            break;
        case 4: key = key_is(&k, "name") ? K_NAME : key_is(&k, "args") ? K_ARGS : -1; break;
        default: break;
        }
        if (key >= 0 && !seen_once(&ev, key)) return ST_BAD;
        switch (key) {
        case K_PH: {
            WS(c);
            if (c->p >= c->end) return ST_MORE;
            if (*c->p == '"') {
                Span s;
                CHECK(scan_string(c, &s));
                if (s.esc) return ST_BAD;
                if (s.n == 1)
                    ev.ph_kind = s.s[0] == 'X' ? 1 : s.s[0] == 's' ? 2 : s.s[0] == 'f' ? 3
                               : (s.s[0] == 'i' || s.s[0] == 'I') ? 4 : 0;
            } else CHECK(skip_value(c, 2)); /* not a string: neither X nor a flow */
            break;
        }
        case K_TS: CHECK(float_field(c, &ev, &ev.ts, 2, 0)); break;
        case K_DUR: CHECK(float_field(c, &ev, &ev.dur, 2, 0)); break;
        case K_CAT: CHECK(string_field(c, &ev, &ev.cat, &ev.has_cat)); break;
        case K_NAME: CHECK(string_field(c, &ev, &ev.name, &ev.has_name)); break;
        case K_PID: CHECK(int_field(c, &ev, &ev.pid, NULL, 0, 2, W_PID)); break;
        case K_TID: CHECK(int_field(c, &ev, &ev.tid, NULL, 0, 2, W_TID)); break;
        case K_ID: CHECK(int_field(c, &ev, &ev.id, NULL, 0, 2, 0)); break;
        case K_ARGS: CHECK(parse_args(c, &ev)); break;
        default: CHECK(skip_value(c, 2));
        }
        WS(c);
        if (c->p >= c->end) return ST_MORE;
        if (*c->p == '}') {
            c->p++;
            break;
        }
        if (*c->p != ',') return ST_BAD;
        c->p++;
        WS(c);
        if (c->p >= c->end) return ST_MORE;
    }
    return commit(c->b, &ev);
}

/* ---------------------------------------------------------------- the Python type */

static PyObject *builder_feed(Builder *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    Cur c = {(const char *)view.buf, (const char *)view.buf + view.len, self};
    const char *consumed = c.p;
    int r = ST_MORE;
    while (self->state != 3) {
        WS(&c);
        if (c.p >= c.end) {
            consumed = c.p;
            r = ST_MORE;
            break;
        }
        char ch = *c.p;
        if (self->state != 2 && ch == ']') {
            c.p++;
            consumed = c.p;
            self->state = 3;
            break;
        }
        if (self->state == 1) {
            if (ch != ',') {
                r = ST_BAD;
                break;
            }
            c.p++;
            self->state = 2;
            consumed = c.p;
            continue;
        }
        if (ch != '{') {
            r = ST_BAD;
            break;
        }
        /* a part-event writes nothing: it is committed to the columns only at its end */
        r = parse_event(&c);
        if (r == ST_MORE) break;
        if (r != ST_OK) break;
        self->state = 1;
        consumed = c.p;
    }
    Py_ssize_t n = (Py_ssize_t)(consumed - (const char *)view.buf);
    PyBuffer_Release(&view);
    if (r == ST_ERR) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return NULL;
    }
    if (r == ST_DEEP) {
        PyErr_Format(TooDeep, "brackets nested more than %d deep", MAX_DEPTH);
        return NULL;
    }
    if (r == ST_BAD && self->state != 3) {
        PyErr_Format(Unsupported, "an event the compiled reader leaves to the Python reader (near byte %zd of "
                     "the block)", n);
        return NULL;
    }
    return Py_BuildValue("(nO)", n, self->state == 3 ? Py_True : Py_False);
}

static int name_index(PyObject *name, const char *const *names, int count) {
    const char *s = PyUnicode_AsUTF8(name);
    if (!s) return -1;
    for (int i = 0; i < count; i++)
        if (strcmp(s, names[i]) == 0) return i;
    PyErr_Format(PyExc_KeyError, "%s", s);
    return -1;
}

/* A column handed over to Python: owns its memory, exposes it as a writable buffer (np.frombuffer, no copy). */
typedef struct {
    PyObject_HEAD
    char *p;
    Py_ssize_t n;
    size_t cap;
    int mapped;
} Column;

static int column_getbuffer(Column *self, Py_buffer *view, int flags) {
    return PyBuffer_FillInfo(view, (PyObject *)self, self->p, self->n, 0, flags);
}

static void column_dealloc(Column *self) {
    if (self->p) mem_free(self->p, self->cap, self->mapped);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyBufferProcs column_as_buffer = {(getbufferproc)column_getbuffer, NULL};

static PyTypeObject ColumnType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stepscope.traces._kineto_reader.Column",
    .tp_basicsize = sizeof(Column),
    .tp_dealloc = (destructor)column_dealloc,
    .tp_as_buffer = &column_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The memory of one column, handed over by Builder.take (a writable buffer).",
};

/* One column, handed over without a copy (the builder keeps no part of it: each column is taken once). */
static PyObject *builder_take(Builder *self, PyObject *name) {
    int i = name_index(name, COL_NAMES, N_COLS);
    if (i < 0) return NULL;
    Column *out = PyObject_New(Column, &ColumnType);
    if (!out) return NULL;
    Buf *b = &self->cols[i];
    int ok = buf_fit(b);
    out->p = b->p;
    out->n = (Py_ssize_t)b->n;
    out->cap = b->cap;
    out->mapped = b->mapped;
    b->p = NULL;
    b->n = b->cap = 0;
    b->mapped = 0;
    if (!ok) {
        Py_DECREF(out);
        return PyErr_NoMemory();
    }
    return (PyObject *)out;
}

/* The strings of one table in code order: str for names, categories and shapes, bytes for collective keys. */
static PyObject *builder_strings(Builder *self, PyObject *name) {
    int i = name_index(name, TABLE_NAMES, N_TABLES);
    if (i < 0) return NULL;
    Intern *t = &self->tables[i];
    PyObject *out = PyList_New(t->count);
    if (!out) return NULL;
    for (uint32_t code = 0; code < t->count; code++) {
        size_t n;
        const char *s = intern_str(t, code, &n);
        PyObject *v = i == T_COLL || i == T_OPT ? PyBytes_FromStringAndSize(s, (Py_ssize_t)n)
                                  : PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, NULL);
        if (!v) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, code, v);
    }
    return out;
}

static PyObject *builder_counts(Builder *self, PyObject *Py_UNUSED(ignored)) {
    return Py_BuildValue("(LLLL)", (long long)self->count, (long long)self->flow_count, (long long)self->dropped,
                         (long long)self->cut);
}

static void builder_dealloc(Builder *self) {
    for (int i = 0; i < N_COLS; i++) buf_free(&self->cols[i]);
    for (int i = 0; i < N_TABLES; i++) intern_free(&self->tables[i]);
    buf_free(&self->scratch);
    buf_free(&self->scratch2);
    buf_free(&self->dims);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef builder_methods[] = {
    {"feed", (PyCFunction)builder_feed, METH_O,
     "feed(block) -> (consumed, ended): parse the whole events at the head of block into the columns."},
    {"take", (PyCFunction)builder_take, METH_O, "take(column) -> the column's memory, handed over (a buffer)."},
    {"strings", (PyCFunction)builder_strings, METH_O, "strings(table) -> the table's values in code order."},
    {"counts", (PyCFunction)builder_counts, METH_NOARGS, "counts() -> (events, flows, dropped, cut strings)."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject BuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stepscope.traces._kineto_reader.Builder",
    .tp_basicsize = sizeof(Builder),
    .tp_dealloc = (destructor)builder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Columns of the complete (X) and flow (s/f) events of a Kineto trace, built block by block.",
    .tp_methods = builder_methods,
    .tp_new = PyType_GenericNew,
};

/* The reader's number parser on its own (a JSON number followed by a delimiter), for the tests of its rounding:
 * the columns hold the numbers only once converted (ns, float32), where a misread last bit can hide. */
static PyObject *parse_float(PyObject *Py_UNUSED(module), PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    Cur c = {(const char *)view.buf, (const char *)view.buf + view.len, NULL};
    Num x;
    double d = 0.0;
    int r = scan_number(&c, &x);
    int bad = r != ST_OK || num_double(&x, &d);
    PyBuffer_Release(&view);
    if (PyErr_Occurred()) return NULL;
    if (bad) {
        PyErr_SetString(Unsupported, "not a number the reader takes (or no delimiter after it)");
        return NULL;
    }
    return PyFloat_FromDouble(d);
}

#ifdef STEPSCOPE_SANITIZER_CONTROL
/* The positive controls of `make sanitize` (built only there): each does on purpose what the sanitizers must catch,
 * so a run that reports nothing proves they were watching. "asan": a heap read one byte past a block; "ubsan": a
 * signed overflow; "nullcopy": memcpy from an empty Buf's NULL pointer, as buf_put did before. */
static PyObject *sanitizer_control(PyObject *Py_UNUSED(module), PyObject *arg) {
    const char *kind = PyUnicode_AsUTF8(arg);
    if (!kind) return NULL;
    if (strcmp(kind, "asan") == 0) {
        char *volatile p = malloc(8);
        volatile char c = p[8];
        free(p);
        return PyLong_FromLong(c);
    }
    if (strcmp(kind, "ubsan") == 0) {
        volatile int64_t big = INT64_MAX;
        volatile int64_t one = (int64_t)strlen(kind) - 4;
        return PyLong_FromLongLong((long long)(big + one));
    }
    if (strcmp(kind, "nullcopy") == 0) {
        Buf b = {0};
        char *volatile dst = b.p;
        volatile size_t n = 0;
        memcpy(dst, "", n);
        Py_RETURN_NONE;
    }
    PyErr_SetString(PyExc_ValueError, "asan, ubsan or nullcopy");
    return NULL;
}
#endif

static PyMethodDef module_methods[] = {
    {"parse_float", (PyCFunction)parse_float, METH_O,
     "parse_float(text) -> the double the reader reads for a JSON number (text ends with a delimiter)."},
#ifdef STEPSCOPE_SANITIZER_CONTROL
    {"sanitizer_control", (PyCFunction)sanitizer_control, METH_O, "sanitizer_control(kind): a bug on purpose."},
#endif
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kineto_reader",
                                    "Compiled reader of Kineto trace events (see stepscope.traces.compiled).", -1,
                                    module_methods};

PyMODINIT_FUNC PyInit__kineto_reader(void) {
    if (PyType_Ready(&BuilderType) < 0 || PyType_Ready(&ColumnType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Unsupported = PyErr_NewExceptionWithDoc("stepscope.traces._kineto_reader.Unsupported",
                                            "The trace holds what the compiled reader leaves to the Python reader.",
                                            PyExc_Exception, NULL);
    if (!Unsupported || PyModule_AddObject(m, "Unsupported", Unsupported) < 0) return NULL;
    TooDeep = PyErr_NewExceptionWithDoc("stepscope.traces._kineto_reader.TooDeep",
                                        "An event nested deeper than the bound every reader keeps.", PyExc_Exception,
                                        NULL);
    if (!TooDeep || PyModule_AddObject(m, "TooDeep", TooDeep) < 0) return NULL;
    /* 3: the columns hold the table's types (ts/dur int64 ns, device int32, launch figures float32), a "wrong"
     * column of type bits, and counts() gives the strings cut */
    if (PyModule_AddIntConstant(m, "LAYOUT", 5) < 0) return NULL;
    Py_INCREF(&BuilderType);
    if (PyModule_AddObject(m, "Builder", (PyObject *)&BuilderType) < 0) return NULL;
    return m;
}
