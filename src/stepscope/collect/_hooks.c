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

enum { F_DATA_WAIT, F_FORWARD, F_BACKWARD, F_OPTIMIZER, F_COMM, F_START, F_SAMPLES, F_FETCHED, NF };
static const char *field_names[NF] = {"data_wait", "forward", "backward", "optimizer", "comm",
                                      "start", "samples", "fetched"};
static PyObject *s_field[NF];
static Py_ssize_t g_offset[NF];
static PyTypeObject *g_step_type; /* StepState, once bound */
static PyObject *s_step, *s_options, *s_samples_per_step, *s_sampled, *s_shape, *s_dim, *s_training,
    *s_step_source, *s_optimizer, *s_active, *s_disabled, *s_activate, *s_warn_once, *s_module_samples,
    *s_module_watch, *s_backward, *g_zero;

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
    memcpy(g_offset, off, sizeof off);
    Py_XSETREF(g_step_type, (PyTypeObject *)Py_NewRef(step_type));
    Py_RETURN_NONE;
}

static PyObject *clock_ns(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromLongLong(now_ns());
}

static PyMethodDef module_methods[] = {
    {"bind", bind, METH_O, "bind(StepState): read and write its fields through its slots."},
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
    if ((g_zero = PyLong_FromLong(0)) == NULL) return NULL;
    if (PyType_Ready(&ForwardType) < 0 || PyType_Ready(&BackwardType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "ForwardHooks", (PyObject *)&ForwardType) < 0 ||
        PyModule_AddObjectRef(m, "Backward", (PyObject *)&BackwardType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
