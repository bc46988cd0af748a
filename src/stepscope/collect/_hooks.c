/* The compiled hook bodies (stepscope.collect._hooks): the watched models' forward pre- and post-hook
 * (modules.py, ModuleWatch._model_hooks) and the torch.autograd.backward wrapper (hooks.py,
 * _install_backward_hook), with the same semantics as those Python functions, line for line: the same
 * own-time arithmetic (nesting.own_time written out), the same samples from the first tensor argument, the
 * same validation-step mark, the same errors caught and warned about once (session.warn_once), the same
 * errors let through. Issue 20: a real step pays several times the hooks' warm cost, because each Python
 * frame of ours runs with cold caches; a C body touches far fewer cache lines.
 *
 * A StepState's fields are read and written through its slots directly when the object is exactly the
 * StepState class given to bind() (else through getattr / setattr). Phase times are summed in C while
 * every field is an exact int that fits 64 bits, and with Python's number protocol otherwise, so any value
 * a Python hook accepts gives the same result. The clock is CLOCK_MONOTONIC, time.perf_counter_ns's on Linux.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <time.h>

enum { F_DATA_WAIT, F_FORWARD, F_BACKWARD, F_OPTIMIZER, F_COMM, F_START, F_SAMPLES, F_FETCHED, F_TOKENS,
       F_EPOCH, NF };
static const char *field_names[NF] = {"data_wait", "forward", "backward", "optimizer", "comm",
                                      "start", "samples", "fetched", "tokens", "epoch"};
static PyObject *s_field[NF];
static Py_ssize_t g_offset[NF];
static PyTypeObject *g_step_type; /* StepState, once bound */
static PyObject *s_step, *s_options, *s_samples_per_step, *s_sampled, *s_shape, *s_dim, *s_training,
    *s_step_source, *s_optimizer, *s_active, *s_disabled, *s_activate, *s_warn_once, *s_module_samples,
    *s_module_watch, *s_backward, *g_zero, *s_extras, *s_tokens_per_step, *s_buffers, *s_step_rows,
    *s_step_index, *s_epoch, *s_append, *s_optimizer_key, *g_float_zero, *g_one, *s_source;

static inline long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* -- StepState fields ------------------------------------------------------------------------------ */
static PyObject *get_field(PyObject *st, int f) { /* new reference; NULL with an exception */
    if (Py_TYPE(st) == g_step_type) {
        PyObject *v = *(PyObject **)((char *)st + g_offset[f]);
        if (v != NULL) return Py_NewRef(v);
    }
    return PyObject_GetAttr(st, s_field[f]);
}

static int set_field(PyObject *st, int f, PyObject *v) { /* v borrowed */
    if (Py_TYPE(st) == g_step_type) {
        PyObject **slot = (PyObject **)((char *)st + g_offset[f]);
        Py_XSETREF(*slot, Py_NewRef(v));
        return 0;
    }
    return PyObject_SetAttr(st, s_field[f], v);
}

/* -- numbers: a C long long while exact ints fit, a Python object otherwise ------------------------------ */
typedef struct {
    long long v;
    PyObject *o; /* NULL: v is the value; else a new reference to it */
} Num;

static PyObject *num_obj(Num *n) { /* new reference */
    return n->o != NULL ? Py_NewRef(n->o) : PyLong_FromLongLong(n->v);
}

static int num_from(PyObject *o, Num *out) { /* o borrowed */
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

/* a + b (op '+') or a - b (op '-'), each borrowed; *out a new Num */
static int num_op(Num *a, Num *b, char op, Num *out) {
    if (a->o == NULL && b->o == NULL) {
        long long r;
        int overflow = op == '+' ? __builtin_add_overflow(a->v, b->v, &r) : __builtin_sub_overflow(a->v, b->v, &r);
        if (!overflow) {
            out->v = r;
            out->o = NULL;
            return 0;
        }
    }
    PyObject *x = num_obj(a), *y = x ? num_obj(b) : NULL, *r = NULL;
    if (y != NULL) r = op == '+' ? PyNumber_Add(x, y) : PyNumber_Subtract(x, y);
    Py_XDECREF(x);
    Py_XDECREF(y);
    if (r == NULL) return -1;
    out->o = r;
    return 0;
}

static void num_clear(Num *n) { Py_CLEAR(n->o); }

/* a > b as Python compares them: 1, 0 or -1 */
static int num_gt(Num *a, Num *b) {
    if (a->o == NULL && b->o == NULL) return a->v > b->v;
    PyObject *x = num_obj(a), *y = x ? num_obj(b) : NULL;
    int r = y != NULL ? PyObject_RichCompareBool(x, y, Py_GT) : -1;
    Py_XDECREF(x);
    Py_XDECREF(y);
    return r;
}

/* st.data_wait + st.forward + st.backward + st.optimizer + st.comm, in that order */
static int attributed(PyObject *st, Num *out) {
    PyObject *v[5] = {NULL};
    int rc = -1;
    for (int i = 0; i < 5; i++) {
        if ((v[i] = get_field(st, F_DATA_WAIT + i)) == NULL) goto done;
    }
    Num acc;
    num_from(v[0], &acc);
    for (int i = 1; i < 5; i++) {
        Num x, r;
        num_from(v[i], &x);
        int e = num_op(&acc, &x, '+', &r);
        num_clear(&x);
        num_clear(&acc);
        if (e < 0) goto done;
        acc = r;
    }
    *out = acc;
    rc = 0;
done:
    for (int i = 0; i < 5; i++) Py_XDECREF(v[i]);
    return rc;
}

/* t1 - t0 - nested, where nested = attributed(st0) - a0 (+ attributed(st) when the step changed); *d new */
static int own_time(PyObject *st0, Num *a0, PyObject *st, long long t0, long long t1, Num *d) {
    Num n0, nested, wall = {t1 - t0, NULL};
    if (attributed(st0, &n0) < 0) return -1;
    int e = num_op(&n0, a0, '-', &nested);
    num_clear(&n0);
    if (e < 0) return -1;
    if (st != st0) {
        Num n1, sum;
        if (attributed(st, &n1) < 0) {
            num_clear(&nested);
            return -1;
        }
        e = num_op(&nested, &n1, '+', &sum);
        num_clear(&n1);
        num_clear(&nested);
        if (e < 0) return -1;
        nested = sum;
    }
    e = num_op(&wall, &nested, '-', d);
    num_clear(&nested);
    return e;
}

/* st.<field> += d when d > 0 (the Python hooks' "if t1 - t0 > nested: st.f += t1 - t0 - nested") */
static int add_positive(PyObject *st, int f, Num *d) {
    Num zero = {0, NULL};
    int gt = num_gt(d, &zero);
    if (gt <= 0) return gt;
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

/* The pending exception, if an Exception, reported through session.warn_once(key, f"{prefix} ({e})") and
 * cleared: 0. Anything else (a BaseException, or warn_once failing): -1 with it set. */
static int warn_caught(PyObject *session, PyObject *key, const char *prefix) {
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

static int is_none_attr(PyObject *o, PyObject *name) { /* o.name is None: 1, 0 or -1 */
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL) return -1;
    int r = v == Py_None;
    Py_DECREF(v);
    return r;
}

static int attr_true(PyObject *o, PyObject *name) { /* truth of o.name; -1 on error */
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL) return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

/* -- the watched models' forward pre- and post-hook -------------------------------------------------------- */
typedef struct {
    PyObject_HEAD
    PyObject *session, *watch, *tensor, *is_grad_enabled, *batch_size, *mark_validation;
    Py_ssize_t depth;
    PyObject *st0; /* NULL: no span open (the Python hooks' st0 = None) */
    Num a0;
    long long t0;
} Forward;

static int Forward_traverse(Forward *self, visitproc visit, void *arg) {
    Py_VISIT(self->session);
    Py_VISIT(self->watch);
    Py_VISIT(self->tensor);
    Py_VISIT(self->is_grad_enabled);
    Py_VISIT(self->batch_size);
    Py_VISIT(self->mark_validation);
    Py_VISIT(self->st0);
    Py_VISIT(self->a0.o);
    return 0;
}

static int Forward_clear(Forward *self) {
    Py_CLEAR(self->session);
    Py_CLEAR(self->watch);
    Py_CLEAR(self->tensor);
    Py_CLEAR(self->is_grad_enabled);
    Py_CLEAR(self->batch_size);
    Py_CLEAR(self->mark_validation);
    Py_CLEAR(self->st0);
    Py_CLEAR(self->a0.o);
    return 0;
}

static void Forward_dealloc(Forward *self) {
    PyObject_GC_UnTrack(self);
    Forward_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Forward_init(Forward *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"session", "watch", "tensor_type", "is_grad_enabled", "batch_size",
                             "mark_validation", NULL};
    PyObject *o[6];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOO:ForwardHooks", kwlist, &o[0], &o[1], &o[2], &o[3],
                                     &o[4], &o[5]))
        return -1;
    Py_XSETREF(self->session, Py_NewRef(o[0]));
    Py_XSETREF(self->watch, Py_NewRef(o[1]));
    Py_XSETREF(self->tensor, Py_NewRef(o[2]));
    Py_XSETREF(self->is_grad_enabled, Py_NewRef(o[3]));
    Py_XSETREF(self->batch_size, Py_NewRef(o[4]));
    Py_XSETREF(self->mark_validation, Py_NewRef(o[5]));
    self->depth = 0;
    Py_CLEAR(self->st0);
    Py_CLEAR(self->a0.o);
    self->a0.v = 0;
    self->t0 = 0;
    return 0;
}

/* The samples of the step from the first forward argument (the try block of the Python pre-hook). */
static int read_samples(Forward *self, PyObject *st, PyObject *args) {
    PyObject *opts = PyObject_GetAttr(self->session, s_options);
    if (opts == NULL) return -1;
    int none = is_none_attr(opts, s_samples_per_step);
    Py_DECREF(opts);
    if (none <= 0) return none;
    if (PyObject_SetAttr(self->watch, s_sampled, st) < 0) return -1;
    PyObject *x;
    int nonempty = PyTuple_CheckExact(args) ? PyTuple_GET_SIZE(args) > 0 : PyObject_IsTrue(args);
    if (nonempty < 0) return -1;
    if (!nonempty) {
        x = Py_NewRef(Py_None);
    } else if (PyTuple_CheckExact(args)) {
        x = Py_NewRef(PyTuple_GET_ITEM(args, 0));
    } else if ((x = PyObject_GetItem(args, g_zero)) == NULL) {
        return -1;
    }
    PyObject *n = NULL;
    int tensor = (PyObject *)Py_TYPE(x) == self->tensor;
    if (tensor) {
        PyObject *dim = PyObject_CallMethodNoArgs(x, s_dim);
        tensor = dim ? PyObject_IsTrue(dim) : -1;
        Py_XDECREF(dim);
    }
    if (tensor > 0) { /* float(x.shape[0]) */
        PyObject *shape = PyObject_GetAttr(x, s_shape);
        PyObject *first = shape ? PyObject_GetItem(shape, g_zero) : NULL;
        Py_XDECREF(shape);
        n = first ? PyNumber_Float(first) : NULL;
        Py_XDECREF(first);
    } else if (tensor == 0) {
        n = PyObject_CallOneArg(self->batch_size, args);
    }
    Py_DECREF(x);
    if (n == NULL) return -1;
    int truth = PyObject_IsTrue(n);
    int e = truth > 0 ? set_field(st, F_SAMPLES, n) : truth;
    Py_DECREF(n);
    return e;
}

static PyObject *Forward_pre(Forward *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "pre() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    if (self->depth == 0) {
        long long t = now_ns();
        PyObject *st = PyObject_GetAttr(self->session, s_step);
        if (st == NULL) return NULL;
        PyObject *start = get_field(st, F_START);
        if (start == NULL) goto fail;
        int unset = start == Py_None;
        Py_DECREF(start);
        if (unset) {
            PyObject *to = PyLong_FromLongLong(t);
            int e = to ? set_field(st, F_START, to) : -1;
            Py_XDECREF(to);
            if (e < 0) goto fail;
        }
        PyObject *fetched = get_field(st, F_FETCHED);
        if (fetched == NULL) goto fail;
        int f = PyObject_IsTrue(fetched);
        Py_DECREF(fetched);
        if (f < 0) goto fail;
        if (!f) {
            PyObject *sampled = PyObject_GetAttr(self->watch, s_sampled);
            if (sampled == NULL) goto fail;
            int other = sampled != st;
            Py_DECREF(sampled);
            if (other && read_samples(self, st, args[1]) < 0 &&
                warn_caught(self->session, s_module_samples, "reading the batch size from the forward input failed") < 0)
                goto fail;
        }
        Num a0;
        if (attributed(st, &a0) < 0) goto fail;
        Py_XSETREF(self->st0, st); /* the reference st held */
        num_clear(&self->a0);
        self->a0 = a0;
        self->t0 = t;
        goto entered;
    fail:
        Py_DECREF(st);
        return NULL;
    }
entered:
    self->depth += 1;
    Py_RETURN_NONE;
}

/* The body of the Python post-hook's try block. */
static int post_body(Forward *self, PyObject *module) {
    self->depth -= 1;
    if (self->depth || self->st0 == NULL) return 0;
    long long t1 = now_ns();
    PyObject *st = PyObject_GetAttr(self->session, s_step);
    if (st == NULL) return -1;
    Num d;
    int e = own_time(self->st0, &self->a0, st, self->t0, t1, &d);
    if (e == 0) {
        e = add_positive(st, F_FORWARD, &d);
        num_clear(&d);
    }
    Py_DECREF(st);
    if (e < 0) return -1;
    Py_CLEAR(self->st0);
    num_clear(&self->a0);
    /* not module.training and session.step_source == "optimizer" and not is_grad_enabled() */
    int training = attr_true(module, s_training);
    if (training != 0) return training < 0 ? -1 : 0;
    PyObject *source = PyObject_GetAttr(self->session, s_step_source);
    if (source == NULL) return -1;
    int opt = PyObject_RichCompareBool(source, s_optimizer, Py_EQ);
    Py_DECREF(source);
    if (opt <= 0) return opt;
    PyObject *grad = PyObject_CallNoArgs(self->is_grad_enabled);
    if (grad == NULL) return -1;
    int on = PyObject_IsTrue(grad);
    Py_DECREF(grad);
    if (on != 0) return on < 0 ? -1 : 0;
    PyObject *t = PyLong_FromLongLong(t1);
    PyObject *r = t ? PyObject_CallOneArg(self->mark_validation, t) : NULL;
    Py_XDECREF(t);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

static PyObject *Forward_post(Forward *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "post() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    if (post_body(self, args[0]) < 0 &&
        warn_caught(self->session, s_module_watch, "model forward timing failed") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef Forward_methods[] = {
    {"pre", (PyCFunction)(void (*)(void))Forward_pre, METH_FASTCALL,
     "pre(module, args): the forward pre-hook (modules.py, ModuleWatch._model_hooks: pre)."},
    {"post", (PyCFunction)(void (*)(void))Forward_post, METH_FASTCALL,
     "post(module, args, out): the forward post-hook (modules.py, ModuleWatch._model_hooks: post)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Forward_members[] = {
    {"depth", T_PYSSIZET, offsetof(Forward, depth), READONLY, "forward calls of watched models now open"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject ForwardType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepscope.collect._hooks.ForwardHooks",
    .tp_doc = "ForwardHooks(session, watch, tensor_type, is_grad_enabled, batch_size, mark_validation): the "
              "watched models' forward pre- and post-hook (bound methods pre, post), compiled.",
    .tp_basicsize = sizeof(Forward),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Forward_init,
    .tp_dealloc = (destructor)Forward_dealloc,
    .tp_traverse = (traverseproc)Forward_traverse,
    .tp_clear = (inquiry)Forward_clear,
    .tp_methods = Forward_methods,
    .tp_members = Forward_members,
};

/* -- the torch.autograd.backward wrapper ------------------------------------------------------------------ */
typedef struct {
    PyObject_HEAD
    PyObject *session, *orig;
    vectorcallfunc vectorcall;
} Backward;

static int Backward_traverse(Backward *self, visitproc visit, void *arg) {
    Py_VISIT(self->session);
    Py_VISIT(self->orig);
    return 0;
}

static int Backward_clear(Backward *self) {
    Py_CLEAR(self->session);
    Py_CLEAR(self->orig);
    return 0;
}

static void Backward_dealloc(Backward *self) {
    PyObject_GC_UnTrack(self);
    Backward_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The finally block of the Python wrapper, inside its try. */
static int backward_done(Backward *self, PyObject *st0, Num *a0, long long t0) {
    long long t1 = now_ns();
    PyObject *st = PyObject_GetAttr(self->session, s_step);
    if (st == NULL) return -1;
    Num d;
    int e = own_time(st0, a0, st, t0, t1, &d);
    if (e == 0) {
        e = add_positive(st, F_BACKWARD, &d);
        num_clear(&d);
    }
    if (e == 0) {
        PyObject *start = get_field(st, F_START);
        if (start == NULL) {
            e = -1;
        } else if (start == Py_None) {
            PyObject *to = PyLong_FromLongLong(t0);
            e = to ? set_field(st, F_START, to) : -1;
            Py_XDECREF(to);
        }
        Py_XDECREF(start);
    }
    Py_DECREF(st);
    if (e < 0) return -1;
    int active = attr_true(self->session, s_active);
    if (active != 0) return active < 0 ? -1 : 0;
    int disabled = attr_true(self->session, s_disabled);
    if (disabled != 0) return disabled < 0 ? -1 : 0;
    PyObject *r = PyObject_CallMethodNoArgs(self->session, s_activate);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

static PyObject *Backward_call(Backward *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    PyObject *st0 = PyObject_GetAttr(self->session, s_step);
    if (st0 == NULL) return NULL;
    Num a0;
    if (attributed(st0, &a0) < 0) {
        Py_DECREF(st0);
        return NULL;
    }
    long long t0 = now_ns();
    PyObject *orig = Py_NewRef(self->orig);
    PyObject *out = PyObject_Vectorcall(orig, args, nargsf, kwnames);
    Py_DECREF(orig);
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb); /* backward's own exception, if any: raised again after the timing */
    if (backward_done(self, st0, &a0, t0) < 0 && warn_caught(self->session, s_backward, "backward timing failed") < 0) {
        Py_XDECREF(out); /* the finally block raised: its exception replaces backward's result */
        Py_XDECREF(et);
        Py_XDECREF(ev);
        Py_XDECREF(tb);
        out = NULL;
    } else {
        PyErr_Restore(et, ev, tb);
    }
    num_clear(&a0);
    Py_DECREF(st0);
    return out;
}

static PyObject *Backward_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"session", "orig", NULL};
    PyObject *session, *orig;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:Backward", kwlist, &session, &orig)) return NULL;
    Backward *self = (Backward *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->session = Py_NewRef(session);
    self->orig = Py_NewRef(orig);
    self->vectorcall = (vectorcallfunc)Backward_call;
    return (PyObject *)self;
}

static PyObject *Backward_get_wrapped(Backward *self, void *Py_UNUSED(closure)) {
    return Py_NewRef(self->orig);
}

static PyGetSetDef Backward_getset[] = {
    {"__wrapped__", (getter)Backward_get_wrapped, NULL, "the torch.autograd.backward it wraps", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef Backward_members[] = {
    {"orig", T_OBJECT_EX, offsetof(Backward, orig), 0, "the function called (torch's backward)"},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Backward, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject BackwardType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepscope.collect._hooks.Backward",
    .tp_doc = "Backward(session, orig): torch.autograd.backward timed as the step's backward (own time), "
              "compiled (hooks.py, _install_backward_hook).",
    .tp_basicsize = sizeof(Backward),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = Backward_new,
    .tp_dealloc = (destructor)Backward_dealloc,
    .tp_traverse = (traverseproc)Backward_traverse,
    .tp_clear = (inquiry)Backward_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Backward, vectorcall),
    .tp_members = Backward_members,
    .tp_getset = Backward_getset,
};

/* -- the optimizer's step timer (hooks.py, _install_optimizer_hooks: timed) ---------------------------------- */
/* StepState(start, epoch) without running its __init__: the same ten slots, the same values (bind() checks
 * the class has exactly these slots; tests/collect/test_hook_impls.py compares the two). */
static PyObject *new_step_state(PyObject *start, PyObject *epoch) {
    if (g_step_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "stepscope.collect._hooks is not bound to StepState");
        return NULL;
    }
    PyObject *st = PyType_GenericAlloc(g_step_type, 0);
    if (st == NULL) return NULL;
    PyObject *values[NF] = {g_zero, g_zero, g_zero, g_zero, g_zero, start, g_float_zero, Py_False,
                            g_float_zero, epoch};
    for (int f = 0; f < NF; f++) set_field(st, f, values[f]);
    return st;
}

static PyObject *new_step_state_py(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "new_step_state(start, epoch)");
        return NULL;
    }
    return new_step_state(args[0], args[1]);
}

typedef struct {
    PyObject_HEAD
    PyObject *session, *nan, *rest, *marker;
    Py_ssize_t depth;
    int fault;
} Timer;

typedef struct {
    PyObject_HEAD
    Timer *timer;
    PyObject *orig;
    vectorcallfunc vectorcall;
} Step;

static int Timer_traverse(Timer *self, visitproc visit, void *arg) {
    Py_VISIT(self->session);
    Py_VISIT(self->nan);
    Py_VISIT(self->rest);
    Py_VISIT(self->marker);
    return 0;
}

static int Timer_clear(Timer *self) {
    Py_CLEAR(self->session);
    Py_CLEAR(self->nan);
    Py_CLEAR(self->rest);
    Py_CLEAR(self->marker);
    return 0;
}

static void Timer_dealloc(Timer *self) {
    PyObject_GC_UnTrack(self);
    Timer_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Timer_init(Timer *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"session", "nan", "fault", "rest", NULL};
    PyObject *session, *nan, *rest;
    int fault;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOpO:OptimizerTimer", kwlist, &session, &nan, &fault, &rest))
        return -1;
    Py_XSETREF(self->session, Py_NewRef(session));
    Py_XSETREF(self->nan, Py_NewRef(nan));
    Py_XSETREF(self->rest, Py_NewRef(rest));
    Py_XSETREF(self->marker, Py_NewRef(Py_None));
    self->fault = fault;
    self->depth = 0;
    return 0;
}

/* Session.mark_step's common case as the Python timer writes it out: 1 done, 0 not the common case (a step
 * source not yet the optimizer's, an inactive session, a per-step collector left), -1 error. */
static int mark_common(Timer *self, PyObject *st, long long t1) {
    PyObject *session = self->session;
    PyObject *source = PyObject_GetAttr(session, s_step_source);
    if (source == NULL) return -1;
    int c = PyObject_RichCompareBool(source, s_optimizer, Py_EQ);
    Py_DECREF(source);
    if (c <= 0) return c;
    if ((c = attr_true(session, s_active)) <= 0) return c;
    if ((c = attr_true(session, s_extras)) != 0) return c < 0 ? -1 : 0;
    int rc = -1;
    PyObject *o = NULL, *sps = NULL, *tps = NULL, *v[NF] = {NULL}, *t1o = NULL, *index = NULL, *row = NULL;
    PyObject *samples, *tokens, *buffers = NULL, *rows = NULL, *next = NULL, *epoch = NULL, *fresh = NULL;
    if ((o = PyObject_GetAttr(session, s_options)) == NULL) goto done;
    if ((sps = PyObject_GetAttr(o, s_samples_per_step)) == NULL) goto done;
    if ((tps = PyObject_GetAttr(o, s_tokens_per_step)) == NULL) goto done;
    for (int f = 0; f < NF; f++) {
        if ((v[f] = get_field(st, f)) == NULL) goto done;
    }
    int fetched = PyObject_IsTrue(v[F_FETCHED]);
    if (fetched < 0) goto done;
    if (sps != Py_None) {
        samples = sps;
    } else { /* st.samples if st.fetched or st.samples else nan */
        int any = fetched ? 1 : PyObject_IsTrue(v[F_SAMPLES]);
        if (any < 0) goto done;
        samples = any ? v[F_SAMPLES] : self->nan;
    }
    if (tps != Py_None) {
        tokens = tps;
    } else {
        int t = PyObject_IsTrue(v[F_TOKENS]);
        if (t < 0) goto done;
        tokens = t ? v[F_TOKENS] : self->nan;
    }
    PyObject *phase[4];
    for (int i = 0; i < 4; i++) { /* st.forward or nan, ... */
        int t = PyObject_IsTrue(v[F_FORWARD + i]);
        if (t < 0) goto done;
        phase[i] = t ? v[F_FORWARD + i] : self->nan;
    }
    if ((t1o = PyLong_FromLongLong(t1)) == NULL) goto done;
    if ((index = PyObject_GetAttr(session, s_step_index)) == NULL) goto done;
    PyObject *items[12] = {index, v[F_START] == Py_None ? t1o : v[F_START], t1o, samples, tokens,
                           fetched ? v[F_DATA_WAIT] : self->nan, phase[0], phase[1], phase[2], phase[3],
                           v[F_EPOCH], g_zero};
    if ((row = PyTuple_New(12)) == NULL) goto done;
    for (int i = 0; i < 12; i++) PyTuple_SET_ITEM(row, i, Py_NewRef(items[i]));
    if ((buffers = PyObject_GetAttr(session, s_buffers)) == NULL) goto done;
    if ((rows = PyObject_GetAttr(buffers, s_step_rows)) == NULL) goto done;
    if (PyList_CheckExact(rows)) {
        if (PyList_Append(rows, row) < 0) goto done;
    } else {
        PyObject *r = PyObject_CallMethodOneArg(rows, s_append, row);
        if (r == NULL) goto done;
        Py_DECREF(r);
    }
    if ((next = PyNumber_Add(index, g_one)) == NULL || PyObject_SetAttr(session, s_step_index, next) < 0) goto done;
    int known = PyObject_RichCompareBool(v[F_EPOCH], g_zero, Py_GE);
    if (known < 0 || (known && PyObject_SetAttr(session, s_epoch, v[F_EPOCH]) < 0)) goto done;
    if ((epoch = PyObject_GetAttr(session, s_epoch)) == NULL) goto done;
    if ((fresh = new_step_state(t1o, epoch)) == NULL || PyObject_SetAttr(session, s_step, fresh) < 0) goto done;
    rc = 1;
done:
    Py_XDECREF(o);
    Py_XDECREF(sps);
    Py_XDECREF(tps);
    for (int f = 0; f < NF; f++) Py_XDECREF(v[f]);
    Py_XDECREF(t1o);
    Py_XDECREF(index);
    Py_XDECREF(row);
    Py_XDECREF(buffers);
    Py_XDECREF(rows);
    Py_XDECREF(next);
    Py_XDECREF(epoch);
    Py_XDECREF(fresh);
    return rc;
}

/* The body of the Python timer's try block, after the step ran. */
static int timer_body(Timer *self, PyObject *st0, Num *a0, long long t0, long long t1, PyObject *const *args,
                      Py_ssize_t nargs) {
    if (self->fault) {
        PyErr_SetString(PyExc_RuntimeError, "injected fault (STEPSCOPE_DEBUG_FAULT=optimizer)");
        return -1;
    }
    PyObject *st = PyObject_GetAttr(self->session, s_step);
    if (st == NULL) return -1;
    Num d;
    int e = own_time(st0, a0, st, t0, t1, &d);
    if (e == 0) {
        e = add_positive(st, F_OPTIMIZER, &d);
        num_clear(&d);
    }
    if (e == 0 && nargs == 0) {
        PyErr_SetString(PyExc_IndexError, "tuple index out of range");
        e = -1;
    }
    if (e < 0) {
        Py_DECREF(st);
        return -1;
    }
    PyObject *opt = args[0];
    if (opt == self->marker) {
        int c = mark_common(self, st, t1);
        Py_DECREF(st);
        if (c != 0) return c < 0 ? -1 : 0;
        /* session.mark_step(t1, source="optimizer") */
        PyObject *meth = PyObject_GetAttrString(self->session, "mark_step");
        PyObject *t1o = meth ? PyLong_FromLongLong(t1) : NULL, *r = NULL;
        if (t1o != NULL) {
            PyObject *kw[2] = {t1o, s_optimizer}, *names = PyTuple_Pack(1, s_source);
            if (names != NULL) r = PyObject_Vectorcall(meth, kw, 1, names);
            Py_XDECREF(names);
        }
        Py_XDECREF(t1o);
        Py_XDECREF(meth);
        if (r == NULL) return -1;
        Py_DECREF(r);
        return 0;
    }
    Py_DECREF(st);
    PyObject *t1o = PyLong_FromLongLong(t1);
    PyObject *r = t1o ? PyObject_CallFunctionObjArgs(self->rest, opt, t1o, NULL) : NULL;
    Py_XDECREF(t1o);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

static PyObject *Step_call(Step *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Timer *tm = self->timer;
    PyObject *orig = Py_NewRef(self->orig);
    if (tm->depth) { /* a step inside a step (a subclass's super().step()): timed once */
        tm->depth += 1;
        PyObject *r = PyObject_Vectorcall(orig, args, nargsf, kwnames);
        tm->depth -= 1;
        Py_DECREF(orig);
        return r;
    }
    Py_INCREF(tm); /* the step may drop the wrapper (an undo) */
    PyObject *out = NULL, *st0 = PyObject_GetAttr(tm->session, s_step);
    Num a0 = {0, NULL};
    if (st0 == NULL || attributed(st0, &a0) < 0) goto done;
    tm->depth = 1;
    long long t0 = now_ns();
    out = PyObject_Vectorcall(orig, args, nargsf, kwnames);
    if (out == NULL) { /* a step that raises marks no step */
        tm->depth = 0;
        goto done;
    }
    long long t1 = now_ns();
    tm->depth = 0;
    int disabled = attr_true(tm->session, s_disabled);
    if (disabled != 0) {
        if (disabled < 0) Py_CLEAR(out);
        goto done;
    }
    if (timer_body(tm, st0, &a0, t0, t1, args, PyVectorcall_NARGS(nargsf)) < 0 &&
        warn_caught(tm->session, s_optimizer_key, "step marking failed") < 0)
        Py_CLEAR(out);
done:
    num_clear(&a0);
    Py_XDECREF(st0);
    Py_DECREF(tm);
    Py_DECREF(orig);
    return out;
}

static PyTypeObject StepType;

static PyObject *Timer_wrap(Timer *self, PyObject *orig) {
    Step *step = (Step *)StepType.tp_alloc(&StepType, 0);
    if (step == NULL) return NULL;
    step->timer = (Timer *)Py_NewRef(self);
    step->orig = Py_NewRef(orig);
    step->vectorcall = (vectorcallfunc)Step_call;
    return (PyObject *)step;
}

static PyMethodDef Timer_methods[] = {
    {"wrap", (PyCFunction)Timer_wrap, METH_O, "wrap(step): the timed step calling step (torch's real one)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Timer_members[] = {
    {"marker", T_OBJECT, offsetof(Timer, marker), 0, "the optimizer whose step marks the steps (None: none yet)"},
    {"depth", T_PYSSIZET, offsetof(Timer, depth), READONLY, "timed steps now running (nested ones included)"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject TimerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepscope.collect._hooks.OptimizerTimer",
    .tp_doc = "OptimizerTimer(session, nan, fault, rest): the optimizer step timer's state, shared by the timed "
              "steps wrap() makes; rest(opt, t1) handles a step of an optimizer other than the marker (hooks.py).",
    .tp_basicsize = sizeof(Timer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Timer_init,
    .tp_dealloc = (destructor)Timer_dealloc,
    .tp_traverse = (traverseproc)Timer_traverse,
    .tp_clear = (inquiry)Timer_clear,
    .tp_methods = Timer_methods,
    .tp_members = Timer_members,
};

static int Step_traverse(Step *self, visitproc visit, void *arg) {
    Py_VISIT(self->timer);
    Py_VISIT(self->orig);
    return 0;
}

static int Step_clear(Step *self) {
    Py_CLEAR(self->timer);
    Py_CLEAR(self->orig);
    return 0;
}

static void Step_dealloc(Step *self) {
    PyObject_GC_UnTrack(self);
    Step_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Step_get_true(Step *Py_UNUSED(self), void *Py_UNUSED(closure)) { Py_RETURN_TRUE; }

static PyObject *Step_get_wrapped(Step *self, void *Py_UNUSED(closure)) { return Py_NewRef(self->orig); }

static PyObject *Step_get_marker(Step *self, void *Py_UNUSED(closure)) {
    return Py_NewRef(self->timer->marker ? self->timer->marker : Py_None);
}

static PyGetSetDef Step_getset[] = {
    {"_stepscope_step", (getter)Step_get_true, NULL, "True: stepscope's timed step", NULL},
    {"__wrapped__", (getter)Step_get_wrapped, NULL, "the step it times", NULL},
    {"marker", (getter)Step_get_marker, NULL, "the timer's marking optimizer", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef Step_members[] = {
    {"orig", T_OBJECT_EX, offsetof(Step, orig), 0, "the step called (torch's real one)"},
    {"timer", T_OBJECT_EX, offsetof(Step, timer), READONLY, "the shared OptimizerTimer"},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Step, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject StepType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepscope.collect._hooks.OptimizerStep",
    .tp_doc = "A timed optimizer step (OptimizerTimer.wrap), compiled (hooks.py, _install_optimizer_hooks).",
    .tp_basicsize = sizeof(Step),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_dealloc = (destructor)Step_dealloc,
    .tp_traverse = (traverseproc)Step_traverse,
    .tp_clear = (inquiry)Step_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Step, vectorcall),
    .tp_members = Step_members,
    .tp_getset = Step_getset,
};

/* -- module ----------------------------------------------------------------------------------------------- */
static PyObject *bind(PyObject *Py_UNUSED(module), PyObject *step_type) {
    if (!PyType_Check(step_type)) {
        PyErr_SetString(PyExc_TypeError, "bind(StepState): a class");
        return NULL;
    }
    Py_ssize_t off[NF];
    for (int f = 0; f < NF; f++) { /* each field a slot: a member descriptor of an object pointer */
        PyObject *d = PyDict_GetItemWithError(((PyTypeObject *)step_type)->tp_dict, s_field[f]);
        if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type) ||
            ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "bind(StepState): %U is not an object slot", s_field[f]);
            return NULL;
        }
        off[f] = ((PyMemberDescrObject *)d)->d_member->offset;
    }
    PyObject *slots = PyObject_GetAttrString(step_type, "__slots__");
    Py_ssize_t n = slots ? PyObject_Length(slots) : -1;
    Py_XDECREF(slots);
    if (n < 0) return NULL;
    if (n != NF) { /* new_step_state() sets every slot: a field it does not know would be left unset */
        PyErr_Format(PyExc_TypeError, "bind(StepState): %zd slots, the compiled hooks know %d", n, NF);
        return NULL;
    }
    memcpy(g_offset, off, sizeof off);
    Py_XSETREF(g_step_type, (PyTypeObject *)Py_NewRef(step_type));
    Py_RETURN_NONE;
}

static PyObject *clock_ns(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromLongLong(now_ns());
}

static PyMethodDef module_methods[] = {
    {"bind", bind, METH_O, "bind(StepState): read and write its fields through its slots."},
    {"new_step_state", (PyCFunction)(void (*)(void))new_step_state_py, METH_FASTCALL,
     "new_step_state(start, epoch): a StepState made as the compiled step timer makes it (StepState(start, epoch))."},
    {"clock_ns", clock_ns, METH_NOARGS, "The hooks' clock now (ns): CLOCK_MONOTONIC, as time.perf_counter_ns."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "stepscope.collect._hooks", "The compiled hook bodies (see modules.py, hooks.py).", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL

PyMODINIT_FUNC PyInit__hooks(void) {
    for (int f = 0; f < NF; f++) INTERN(s_field[f], field_names[f]);
    INTERN(s_step, "step");
    INTERN(s_options, "options");
    INTERN(s_samples_per_step, "samples_per_step");
    INTERN(s_sampled, "sampled");
    INTERN(s_shape, "shape");
    INTERN(s_dim, "dim");
    INTERN(s_training, "training");
    INTERN(s_step_source, "step_source");
    INTERN(s_optimizer, "optimizer");
    INTERN(s_active, "active");
    INTERN(s_disabled, "disabled");
    INTERN(s_activate, "activate");
    INTERN(s_warn_once, "warn_once");
    INTERN(s_module_samples, "module-samples");
    INTERN(s_module_watch, "module-watch");
    INTERN(s_backward, "backward");
    if ((g_zero = PyLong_FromLong(0)) == NULL || (g_one = PyLong_FromLong(1)) == NULL) return NULL;
    if ((g_float_zero = PyFloat_FromDouble(0.0)) == NULL) return NULL;
    INTERN(s_extras, "extras");
    INTERN(s_tokens_per_step, "tokens_per_step");
    INTERN(s_buffers, "buffers");
    INTERN(s_step_rows, "step_rows");
    INTERN(s_step_index, "step_index");
    INTERN(s_epoch, "epoch");
    INTERN(s_append, "append");
    INTERN(s_optimizer_key, "optimizer");
    INTERN(s_source, "source");
    if (PyType_Ready(&ForwardType) < 0 || PyType_Ready(&BackwardType) < 0 || PyType_Ready(&TimerType) < 0 ||
        PyType_Ready(&StepType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "ForwardHooks", (PyObject *)&ForwardType) < 0 ||
        PyModule_AddObjectRef(m, "Backward", (PyObject *)&BackwardType) < 0 ||
        PyModule_AddObjectRef(m, "OptimizerTimer", (PyObject *)&TimerType) < 0 ||
        PyModule_AddObjectRef(m, "OptimizerStep", (PyObject *)&StepType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
