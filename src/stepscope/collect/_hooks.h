/* Shared by the compiled hook bodies' files (stepscope.collect._hooks): the StepState fields, the interned
 * names, the number helpers and the own-time arithmetic. _hooks.c holds the module and defines the names;
 * _hooks_phases.c the forward hooks and the backward wrapper; _hooks_optimizer.c the optimizer's step timer;
 * _hooks_loader.c the DataLoader iterators' __next__. */
#ifndef STEPSCOPE_HOOKS_H
#define STEPSCOPE_HOOKS_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <time.h>

/* Hot and cold paths (issue 20): each hook's common case is a few dozen instructions, but the error and slow
 * paths inlined into it spread it over several times as many cache lines, all cold after a long step. Slow
 * paths live in COLD functions (out of line, in .text.unlikely with GCC) and error branches are UNLIKELY, so
 * the common case lies in few lines (benchmarks/RESULTS.md, "tenth change"). */
#if defined(__GNUC__) || defined(__clang__)
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define COLD __attribute__((cold, noinline, unused))
#else
#define LIKELY(x) (x)
#define UNLIKELY(x) (x)
#define COLD
#endif

enum { F_DATA_WAIT, F_FORWARD, F_BACKWARD, F_OPTIMIZER, F_COMM, F_START, F_SAMPLES, F_FETCHED, F_TOKENS,
       F_EPOCH, NF };
extern const char *field_names[NF];
extern PyObject *s_field[NF];
/* the session's attributes the hooks read, kept in SessionCore's struct (Session's base class, _hooks_state.c) */
enum { S_STEP, S_ACTIVE, S_DISABLED, S_API_FETCH, S_STEP_SOURCE, S_EXTRAS, S_STEP_INDEX, S_EPOCH, S_OPTIONS,
       S_STEP_ROW, NS };
extern const char *core_names[NS];
extern PyObject *s_core[NS];
extern PyObject *s_samples_per_step, *s_sampled, *s_shape, *s_training, *s_optimizer, *s_activate, *s_warn_once,
    *s_module_samples, *s_module_watch, *s_backward, *g_zero, *s_tokens_per_step, *s_optimizer_key, *g_float_zero,
    *g_one, *s_source;

/* the types and the function each part defines (_hooks_phases.c, _hooks_optimizer.c, _hooks_state.c) for the module
 * (_hooks.c) */
extern PyTypeObject ForwardType, TimedCallType, BackwardType, TimerType, StepType, LoaderType, StateType, CoreType,
    PassType, StepLogType;
int loader_names(void); /* _hooks_loader.c's interned names: 0, or -1 with an exception */
PyObject *new_step_state_py(PyObject *m, PyObject *const *args, Py_ssize_t nargs);
PyObject *columns_py(PyObject *m, PyObject *const *args, Py_ssize_t nargs); /* buffers.py's rows -> columns */

/* -- the log (_hooks_log.c): the hooks' steady state, written as events and applied later ---------------------
 * Once the optimizer's timer has marked a common step (a training step of the optimizer's, the session active, no
 * per-step collector, the buffers' StepLog), the session is in log mode: until anything else reads or writes the
 * session or its step, the four hooks only read the clock and append an event here, and the events are applied to
 * the StepState and the StepLog (fold) when anything reads them: a Python read or write of the session's or the
 * step's attributes, the flush taking the rows, a hook leaving the steady state. Applying an event is what the hook
 * does in its other path, in the same order, so the rows are the same; the training thread no longer touches the
 * session, the step state, the options or the row (issue 20: each was cold cache lines after a step's work). */
enum { EV_FETCH, EV_FORWARD, EV_BACKWARD, EV_OPTIMIZER };

typedef struct {
    int kind;
    long long t0, t1; /* EV_FETCH: the fetch's clock reads; else t0 the entry (t1 for the optimizer), t1 own time */
    double rows;      /* EV_FETCH: the batch's first dimension */
    PyObject *ref;    /* EV_FETCH: the pass's epoch (a reference; NULL: no pass) */
} Event;

typedef struct {
    long long cum;         /* phase ns attributed so far, in this process: the own-time arithmetic (own_ns) */
    Event *ev;
    Py_ssize_t n, cap;     /* events pending */
    PyObject *session;     /* log mode's session (a reference), NULL: log mode is off */
    PyObject *timer;       /* its marking optimizer's timer (a reference) */
    PyObject *extras;      /* its per-step collectors' list (a reference): checked at each mark */
    int fetched;           /* a batch came this step (the forward reads samples from its input otherwise) */
    int folding;
} Hot;
extern Hot g_hot;

int hot_fold(void);                                   /* apply the pending events: 0, or -1 with an exception */
void hot_off(void);                                   /* log mode off (the pending events applied first) */
void hot_on(PyObject *session, PyObject *timer);      /* log mode on after a common mark (_hooks_optimizer.c) */
Event *hot_append_grow(void);                         /* hot_append past the array's end: NULL with MemoryError */
int timer_apply_mark(PyObject *timer, long long t1);  /* an EV_OPTIMIZER's mark (_hooks_optimizer.c) */
int add_fetch(PyObject *st, long long t0, long long t1, PyObject *n, int counted); /* _hooks_loader.c */
int log_names(void);                                  /* _hooks_log.c's interned names and fork handler */

static inline int hot_sync(void) { return LIKELY(g_hot.n == 0) || g_hot.folding ? 0 : hot_fold(); }

static inline int log_on(PyObject *session) { return g_hot.session == session && session != NULL; }

static inline Event *hot_append(int kind, long long t0, long long t1) {
    Event *e = LIKELY(g_hot.n < g_hot.cap) ? &g_hot.ev[g_hot.n++] : hot_append_grow();
    if (LIKELY(e != NULL)) {
        e->kind = kind;
        e->t0 = t0;
        e->t1 = t1;
    }
    return e;
}

/* a logged span's own time d, from t0: an event when d > 0 (as attribute() adds only then), counted in g_hot.cum;
 * 0, or -1 with an exception */
static inline int log_phase(int kind, long long t0, long long d) {
    if (d <= 0) return 0;
    if (UNLIKELY(hot_append(kind, t0, d) == NULL)) return -1;
    g_hot.cum += d;
    return 0;
}

/* own time of a span entered at t0 with g_hot.cum at cum0 and left at t1: its wall time less what was attributed
 * meanwhile (nesting.own_time: the phases' sums at entry and exit, here one process-wide counter) */
static inline long long own_ns(long long cum0, long long t0, long long t1) { return t1 - t0 - (g_hot.cum - cum0); }

static inline long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* -- numbers: a C long long while exact ints fit, a Python object otherwise ------------------------------ */
typedef struct {
    long long v;
    PyObject *o; /* NULL: v is the value; else a new reference to it */
} Num;

static inline PyObject *num_obj(Num *n) { /* new reference */
    return n->o != NULL ? Py_NewRef(n->o) : PyLong_FromLongLong(n->v);
}

static inline int num_from(PyObject *o, Num *out) { /* o borrowed */
    if (PyLong_CheckExact(o)) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (!overflow) {
            out->v = v;
            out->o = NULL;
            return 0;
        }
    }
    out->o = Py_NewRef(o);
    return 0;
}

/* num_op's Python arithmetic: an operand is not a C number, or the result overflows */
COLD static int num_op_obj(Num *a, Num *b, char op, Num *out) {
    PyObject *x = num_obj(a), *y = x ? num_obj(b) : NULL, *r = NULL;
    if (y != NULL) r = op == '+' ? PyNumber_Add(x, y) : PyNumber_Subtract(x, y);
    Py_XDECREF(x);
    Py_XDECREF(y);
    if (r == NULL) return -1;
    out->o = r;
    return 0;
}

/* a + b (op '+') or a - b (op '-'), each borrowed; *out a new Num */
static inline int num_op(Num *a, Num *b, char op, Num *out) {
    if (LIKELY(a->o == NULL && b->o == NULL)) {
        long long r;
        int overflow = op == '+' ? __builtin_add_overflow(a->v, b->v, &r) : __builtin_sub_overflow(a->v, b->v, &r);
        if (LIKELY(!overflow)) {
            out->v = r;
            out->o = NULL;
            return 0;
        }
    }
    return num_op_obj(a, b, op, out);
}

static void num_clear(Num *n) { Py_CLEAR(n->o); }

static inline void num_set(Num *n, PyObject *v) { /* *n = v (borrowed), the old value released */
    Num x;
    num_from(v, &x);
    num_clear(n);
    *n = x;
}

/* -- StepState fields: a StepState (_hooks_state.c) keeps each as a Num; any other object through getattr -- */
typedef struct {
    PyObject_HEAD
    Num f[NF];
} State;

/* a step row (Session.mark_step's 12 fields) in a session's StepLog, in place (_hooks_steplog.c): ints are made
 * when the flush takes the rows, off the training thread */
typedef struct {
    Num c[12];
} StepRowData;

typedef struct {
    PyObject_HEAD
    StepRowData *rows;
    Py_ssize_t n, cap;
    vectorcallfunc vectorcall;
} StepLog;

StepRowData *steplog_grow(StepLog *log); /* the next row after doubling the array; NULL with MemoryError */

static inline StepRowData *steplog_next(StepLog *log) { /* the next row, counted: the caller fills its 12 Nums */
    return log->n < log->cap ? &log->rows[log->n++] : steplog_grow(log);
}

static inline Num num_copy(Num *n) { /* a new Num of n's value */
    Num r = {n->v, n->o != NULL ? Py_NewRef(n->o) : NULL};
    return r;
}

void state_fill(State *st, PyObject *start, PyObject *epoch); /* every field as StepState(start, epoch) sets it */
void state_reset(State *st, long long t, PyObject *epoch); /* the step mark's new step: state_fill(st, t, epoch) */

static inline Num *state_fields(PyObject *st) { return Py_IS_TYPE(st, &StateType) ? ((State *)st)->f : NULL; }

static inline PyObject *get_field(PyObject *st, int f) { /* new reference; NULL with an exception */
    Num *F = state_fields(st);
    return F != NULL ? num_obj(&F[f]) : PyObject_GetAttr(st, s_field[f]);
}

static inline int set_field(PyObject *st, int f, PyObject *v) { /* v borrowed */
    Num *F = state_fields(st);
    if (F == NULL) return PyObject_SetAttr(st, s_field[f], v);
    num_set(&F[f], v);
    return 0;
}

COLD static int start_if_unset_attr(PyObject *st, long long t) { /* a step state of another type */
    PyObject *v = PyObject_GetAttr(st, s_field[F_START]);
    if (v == NULL) return -1;
    int unset = v == Py_None;
    Py_DECREF(v);
    if (!unset) return 0;
    PyObject *to = PyLong_FromLongLong(t);
    int e = to ? PyObject_SetAttr(st, s_field[F_START], to) : -1;
    Py_XDECREF(to);
    return e;
}

/* "if st.start is None: st.start = t" (every hook's first clock read of a step): 0, or -1 with an exception */
static inline int start_if_unset(PyObject *st, long long t) {
    Num *F = state_fields(st);
    if (UNLIKELY(F == NULL)) return start_if_unset_attr(st, t);
    if (F[F_START].o == Py_None) {
        num_clear(&F[F_START]);
        F[F_START] = (Num){t, NULL};
    }
    return 0;
}

static inline int num_true(Num *n) { return n->o == NULL ? n->v != 0 : PyObject_IsTrue(n->o); }

/* -- the session's attributes: SessionCore's struct, or getattr / setattr for any other object ------------- */
typedef struct {
    PyObject_HEAD
    PyObject *slot[NS];
} Core;

/* The last subclass of SessionCore a hook met (Session), held so that its address stays its own: the common
 * case is one pointer compare, not PyType_IsSubtype walking the class's MRO tuple (two more cold lines and
 * that function's code in each hook after a step: 0.5 us of the backward and of the optimizer's timer after
 * a `many` step, benchmarks/RESULTS.md "seventh change"). */
extern PyTypeObject *g_core_subtype;

COLD static PyObject **core_slots_subtype(PyObject *s) { /* core_slots of a class met for the first time */
    PyTypeObject *t = Py_TYPE(s);
    if (!PyType_IsSubtype(t, &CoreType)) return NULL;
    Py_XSETREF(g_core_subtype, (PyTypeObject *)Py_NewRef(t));
    return ((Core *)s)->slot;
}

static inline PyObject **core_slots(PyObject *s) {
    PyTypeObject *t = Py_TYPE(s);
    if (LIKELY(t == g_core_subtype || t == &CoreType)) return ((Core *)s)->slot;
    return core_slots_subtype(s);
}

static inline PyObject *sget(PyObject *s, int i) { /* s.<name>: a new reference; NULL with an exception */
    PyObject **slot = core_slots(s);
    if (LIKELY(slot != NULL && slot[i] != NULL)) return Py_NewRef(slot[i]);
    return PyObject_GetAttr(s, s_core[i]);
}

static inline int sset(PyObject *s, int i, PyObject *v) { /* s.<name> = v (borrowed) */
    PyObject **slot = core_slots(s);
    if (slot == NULL) return PyObject_SetAttr(s, s_core[i], v);
    Py_XSETREF(slot[i], Py_NewRef(v));
    return 0;
}

COLD static int strue_attr(PyObject *s, int i) { /* strue of a session of another type, or a deleted slot */
    PyObject *v = PyObject_GetAttr(s, s_core[i]);
    if (v == NULL) return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

static inline int strue(PyObject *s, int i) { /* truth of s.<name>; -1 on error */
    PyObject **slot = core_slots(s);
    PyObject *v = slot != NULL ? slot[i] : NULL;
    if (LIKELY(v == Py_True)) return 1;
    if (LIKELY(v == Py_False)) return 0;
    if (v != NULL) return PyObject_IsTrue(v);
    return strue_attr(s, i);
}

COLD static int num_gt_obj(Num *a, Num *b) { /* num_gt with an operand not a C number */
    PyObject *x = num_obj(a), *y = x ? num_obj(b) : NULL;
    int r = y != NULL ? PyObject_RichCompareBool(x, y, Py_GT) : -1;
    Py_XDECREF(x);
    Py_XDECREF(y);
    return r;
}

/* a > b as Python compares them: 1, 0 or -1 */
static inline int num_gt(Num *a, Num *b) {
    if (LIKELY(a->o == NULL && b->o == NULL)) return a->v > b->v;
    return num_gt_obj(a, b);
}

COLD static int add_num_obj(PyObject *st, int f, Num *d) { /* add_num past C numbers */
    PyObject *cur = get_field(st, f);
    if (cur == NULL) return -1;
    PyObject *r;
    if (PyLong_CheckExact(cur) && d->o == NULL) {
        Num c, s;
        num_from(cur, &c);
        if (num_op(&c, d, '+', &s) < 0) {
            num_clear(&c);
            Py_DECREF(cur);
            return -1;
        }
        num_clear(&c);
        r = num_obj(&s);
        num_clear(&s);
    } else {
        PyObject *x = num_obj(d);
        r = x ? PyNumber_InPlaceAdd(cur, x) : NULL;
        Py_XDECREF(x);
    }
    Py_DECREF(cur);
    if (r == NULL) return -1;
    int e = set_field(st, f, r);
    Py_DECREF(r);
    return e;
}

/* st.<field> += d: exact ints summed as C numbers, Python's number protocol otherwise */
static inline int add_num(PyObject *st, int f, Num *d) {
    Num *F = state_fields(st);
    long long sum;
    if (LIKELY(F != NULL && F[f].o == NULL && d->o == NULL && !__builtin_add_overflow(F[f].v, d->v, &sum))) {
        F[f].v = sum;
        return 0;
    }
    return add_num_obj(st, f, d);
}

/* st.<field> += d when d > 0 (the Python hooks' "if t1 - t0 > nested: st.f += t1 - t0 - nested") */
static inline int add_positive(PyObject *st, int f, Num *d) {
    Num zero = {0, NULL};
    int gt = num_gt(d, &zero);
    return gt <= 0 ? gt : add_num(st, f, d);
}

/* st.<phase> += d when d > 0 (a hook's own time), counted in g_hot.cum */
static inline int attribute(PyObject *st, int f, long long d) {
    if (d <= 0) return 0;
    Num x = {d, NULL};
    int e = add_num(st, f, &x);
    if (LIKELY(e == 0)) g_hot.cum += d;
    return e;
}

/* A hook's first read outside log mode: the Python bodies' enter(session) reads session.step (an error there is
 * raised before the call, as theirs is): 0, or -1 with an exception */
COLD static int session_has_step(PyObject *session) {
    if (hot_sync() < 0) return -1;
    PyObject *st = sget(session, S_STEP);
    Py_XDECREF(st);
    return st == NULL ? -1 : 0;
}

/* The pending exception, if an Exception, reported through session.warn_once(key, f"{prefix} ({e})") and
 * cleared: 0. Anything else (a BaseException, or warn_once failing): -1 with it set. */
COLD static int warn_caught(PyObject *session, PyObject *key, const char *prefix) {
    if (!PyErr_ExceptionMatches(PyExc_Exception)) return -1;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyErr_NormalizeException(&et, &ev, &tb);
    PyObject *text = ev != NULL ? PyUnicode_FromFormat("%s (%S)", prefix, ev) : NULL;
    Py_XDECREF(et);
    Py_XDECREF(ev);
    Py_XDECREF(tb);
    if (text == NULL) return -1;
    PyObject *r = PyObject_CallMethodObjArgs(session, s_warn_once, key, text, NULL);
    Py_DECREF(text);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

COLD static PyObject *rows_of_shape(PyObject *t) { /* rows_of by the shape */
    PyObject *shape = PyObject_GetAttr(t, s_shape);
    if (shape == NULL) return NULL;
    /* a torch.Size (a tuple) for a torch.Tensor; anything else is left to batch_size, as a 0-d tensor is */
    PyObject *r = PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) > 0 ? PyNumber_Float(PyTuple_GET_ITEM(shape, 0))
                                                                        : NULL;
    Py_DECREF(shape);
    return r;
}

/* float(t.shape[0]) for a torch.Tensor t that has a dimension (the hooks' samples): a new reference; NULL without
 * an exception for a 0-d tensor (or a shape that is not a tuple), NULL with one on error. The first dimension is
 * read by torch's C length of a tensor (TensorBase's mp_length, what len() of a TensorBase gives: shape[0], 0 for a
 * 0-d tensor, or a torch function's __len__ where one applies), which makes no object; the shape getter makes a
 * torch.Size, 1.2 us of a cold step (issue 20). 0 (a 0-d tensor or an empty first dimension) and an error are
 * left to the shape, which tells them apart as the Python hooks do. */
static inline PyObject *rows_of(PyObject *t) {
    PyTypeObject *base = Py_TYPE(t)->tp_base;
    lenfunc len = base != NULL && base->tp_as_mapping != NULL ? base->tp_as_mapping->mp_length : NULL;
    if (LIKELY(len != NULL)) {
        Py_ssize_t n = len(t);
        if (LIKELY(n > 0)) return PyFloat_FromDouble((double)n);
        if (n < 0) PyErr_Clear();
    }
    return rows_of_shape(t);
}

static inline int is_none_attr(PyObject *o, PyObject *name) { /* o.name is None: 1, 0 or -1 */
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL) return -1;
    int r = v == Py_None;
    Py_DECREF(v);
    return r;
}

static inline int attr_true(PyObject *o, PyObject *name) { /* truth of o.name; -1 on error */
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL) return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}


#endif
