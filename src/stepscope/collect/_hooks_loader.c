/* The DataLoader iterators' __next__ wrapper, compiled (stepscope.collect._hooks; shared parts in _hooks.h).
 * Its reference is the Python __next__ of loader.py (install_loader_hooks), line for line; the branches taken
 * once a pass (the pass's end, its epoch while provisional, its first batch) are that file's Python helpers,
 * called from here. Installed as _BaseDataLoaderIter.__next__: a method descriptor (CPython calls it unbound,
 * the iterator first, from next() without a bound method), bound like a function when read from an iterator. */
#include "_hooks.h"

typedef struct {
    PyObject_HEAD
    PyObject *session, *orig, *tensor, *batch_size, *batch_tokens, *pass_end, *open_epoch, *first_of_pass;
    /* the last iterator's pass: a weak reference to the iterator (NULL: none) and its _stepscope_pass. Reading
     * the attribute touches the iterator's type cache, dict keys and values, all cold after a step's work
     * (~1 us of a real step); one pointer compare through the weak reference does not. forget() (called by
     * loader.py's __iter__, which sets the attribute) drops it: a persistent-workers loader reuses its iterator. */
    PyObject *last_it, *last_pass;
    vectorcallfunc vectorcall;
} Loader;

static PyObject *s_pass_attr, *s_loader_warn;

/* -- PassState: one pass of a DataLoader (one iterator), its attribute _stepscope_pass (loader.py's __iter__) -- */
typedef struct {
    PyObject_HEAD
    PyObject *key, *token, *epoch; /* the loader's id, the pass's number, its epoch once confirmed (None) */
    Py_ssize_t batches;            /* batches it yielded so far */
} Pass;

static int Pass_traverse(Pass *self, visitproc visit, void *arg) {
    Py_VISIT(self->key);
    Py_VISIT(self->token);
    Py_VISIT(self->epoch);
    return 0;
}

static int Pass_clear(Pass *self) {
    Py_CLEAR(self->key);
    Py_CLEAR(self->token);
    Py_CLEAR(self->epoch);
    return 0;
}

static void Pass_dealloc(Pass *self) {
    PyObject_GC_UnTrack(self);
    Pass_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Pass_init(Pass *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"key", "token", NULL};
    PyObject *key, *token;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:PassState", kwlist, &key, &token)) return -1;
    Py_XSETREF(self->key, Py_NewRef(key));
    Py_XSETREF(self->token, Py_NewRef(token));
    Py_XSETREF(self->epoch, Py_NewRef(Py_None));
    self->batches = 0;
    return 0;
}

static PyMemberDef Pass_members[] = {
    {"key", T_OBJECT_EX, offsetof(Pass, key), READONLY, "the loader's id"},
    {"token", T_OBJECT_EX, offsetof(Pass, token), READONLY, "the pass's number in this process"},
    {"epoch", T_OBJECT, offsetof(Pass, epoch), 0, "its epoch once confirmed (None: not yet)"},
    {"batches", T_PYSSIZET, offsetof(Pass, batches), 0, "batches it yielded so far"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject PassType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepscope.collect._hooks.PassState",
    .tp_doc = "PassState(key, token): one DataLoader pass as the loader hooks count it, compiled "
              "(reference: pystate.PyPassState).",
    .tp_basicsize = sizeof(Pass),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Pass_init,
    .tp_dealloc = (destructor)Pass_dealloc,
    .tp_traverse = (traverseproc)Pass_traverse,
    .tp_clear = (inquiry)Pass_clear,
    .tp_members = Pass_members,
};

static int Loader_traverse(Loader *self, visitproc visit, void *arg) {
    Py_VISIT(self->session);
    Py_VISIT(self->orig);
    Py_VISIT(self->tensor);
    Py_VISIT(self->batch_size);
    Py_VISIT(self->batch_tokens);
    Py_VISIT(self->pass_end);
    Py_VISIT(self->open_epoch);
    Py_VISIT(self->first_of_pass);
    Py_VISIT(self->last_it);
    Py_VISIT(self->last_pass);
    return 0;
}

static int Loader_clear(Loader *self) {
    Py_CLEAR(self->session);
    Py_CLEAR(self->orig);
    Py_CLEAR(self->tensor);
    Py_CLEAR(self->batch_size);
    Py_CLEAR(self->batch_tokens);
    Py_CLEAR(self->pass_end);
    Py_CLEAR(self->open_epoch);
    Py_CLEAR(self->first_of_pass);
    Py_CLEAR(self->last_it);
    Py_CLEAR(self->last_pass);
    return 0;
}

static void Loader_dealloc(Loader *self) {
    PyObject_GC_UnTrack(self);
    Loader_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* getattr(o, name, None): a new reference, NULL with an exception other than AttributeError */
static PyObject *attr_or_none(PyObject *o, PyObject *name) {
    PyObject *v;
#if PY_VERSION_HEX >= 0x030D0000
    if (PyObject_GetOptionalAttr(o, name, &v) < 0) return NULL;
#else
    if (_PyObject_LookupAttr(o, name, &v) < 0) return NULL;
#endif
    return v != NULL ? v : Py_NewRef(Py_None);
}

/* the iterator's _stepscope_pass (a new reference, None where it has none): from the last iterator's, when
 * this is that iterator still alive, else read and kept (an iterator without weak references: read each time) */
COLD static PyObject *pass_read(Loader *self, PyObject *it) { /* pass_of of an iterator met for the first time */
    PyObject *ps = attr_or_none(it, s_pass_attr);
    if (ps == NULL) return NULL;
    PyObject *ref = PyWeakref_NewRef(it, NULL);
    if (ref == NULL) {
        PyErr_Clear(); /* no weak references to this iterator: nothing kept */
        Py_CLEAR(self->last_it);
        Py_CLEAR(self->last_pass);
        return ps;
    }
    Py_XSETREF(self->last_it, ref);
    Py_XSETREF(self->last_pass, Py_NewRef(ps));
    return ps;
}

static PyObject *pass_of(Loader *self, PyObject *it) {
    if (LIKELY(self->last_it != NULL)) {
#if PY_VERSION_HEX >= 0x030D0000
        PyObject *alive;
        if (UNLIKELY(PyWeakref_GetRef(self->last_it, &alive) < 0)) return NULL;
        Py_XDECREF(alive); /* compared by address only */
#else
        PyObject *alive = PyWeakref_GET_OBJECT(self->last_it);
#endif
        if (LIKELY(alive == it)) return Py_NewRef(self->last_pass);
    }
    return pass_read(self, it);
}

/* st.<field> += x (x borrowed), exact ints and floats summed directly, Python's number protocol otherwise */
static int add_to(PyObject *st, int f, PyObject *x) {
    PyObject *cur = get_field(st, f);
    if (UNLIKELY(cur == NULL)) return -1;
    PyObject *r;
    if (PyFloat_CheckExact(cur) && PyFloat_CheckExact(x)) {
        r = PyFloat_FromDouble(PyFloat_AS_DOUBLE(cur) + PyFloat_AS_DOUBLE(x));
    } else {
        r = PyNumber_InPlaceAdd(cur, x);
    }
    Py_DECREF(cur);
    if (UNLIKELY(r == NULL)) return -1;
    int e = set_field(st, f, r);
    Py_DECREF(r);
    return e;
}

/* Session.add_fetch written out, for a batch fetched from t0 to t1 with n samples (NULL: none counted): the step's
 * start, fetched (samples read from a forward input before the batch came give way to the batches'), the data
 * wait (counted in g_hot.cum unless it was when the fetch was logged) and the samples. The per-batch path's, and
 * a logged fetch's when it is applied (_hooks_log.c). 0, or -1 with an exception. */
int add_fetch(PyObject *st, long long t0, long long t1, PyObject *n, int counted) {
    if (UNLIKELY(start_if_unset(st, t0) < 0)) return -1;
    PyObject *f = get_field(st, F_FETCHED);
    if (UNLIKELY(f == NULL)) return -1;
    int was = PyObject_IsTrue(f);
    Py_DECREF(f);
    if (UNLIKELY(was < 0)) return -1;
    if (!was && (set_field(st, F_FETCHED, Py_True) < 0 || set_field(st, F_SAMPLES, g_float_zero) < 0)) return -1;
    Num wait = {t1 - t0, NULL};
    if (UNLIKELY(add_num(st, F_DATA_WAIT, &wait) < 0)) return -1;
    if (!counted) g_hot.cum += t1 - t0;
    return n != NULL ? add_to(st, F_SAMPLES, n) : 0;
}

COLD static PyObject *samples_by_batch_size(Loader *self, PyObject *batch) { /* batch_size(batch) */
    return PyObject_CallOneArg(self->batch_size, batch);
}

/* The batch's samples (batch_size's common case written out: a tensor, or a list / tuple that starts with
 * one; batch_size() otherwise): a new reference (a float, or None) */
static PyObject *samples_of(Loader *self, PyObject *batch) {
    PyObject *t = batch;
    if ((PyList_CheckExact(batch) && PyList_GET_SIZE(batch) > 0)) t = PyList_GET_ITEM(batch, 0);
    else if (PyTuple_CheckExact(batch) && PyTuple_GET_SIZE(batch) > 0) t = PyTuple_GET_ITEM(batch, 0);
    Py_INCREF(t);
    PyObject *n = NULL;
    int tensor = (PyObject *)Py_TYPE(t) == self->tensor;
    if (tensor && (n = rows_of(t)) == NULL) tensor = PyErr_Occurred() ? -1 : 0;
    if (tensor == 0) n = samples_by_batch_size(self, batch);
    Py_DECREF(t);
    return n;
}

COLD static PyObject *open_epoch(Loader *self, PyObject *it, Pass *p, Py_ssize_t nb) { /* open_epoch(it, key, nb) */
    PyObject *nbo = PyLong_FromSsize_t(nb);
    if (nbo == NULL) return NULL;
    PyObject *a[3] = {it, p->key != NULL ? p->key : Py_None, nbo};
    PyObject *epoch = PyObject_Vectorcall(self->open_epoch, a, 3, NULL);
    Py_DECREF(nbo);
    return epoch;
}

COLD static int activate(PyObject *s) { /* session.activate() (a session not yet active): its truth, or -1 */
    PyObject *r = PyObject_CallMethodNoArgs(s, s_activate);
    if (r == NULL) return -1;
    int on = PyObject_IsTrue(r);
    Py_DECREF(r);
    return on;
}

/* first_of_pass(it, p.key, st, n): the pass's first batch */
COLD static int first_of_pass(Loader *self, PyObject *it, Pass *p, PyObject *st, PyObject *n) {
    PyObject *a[4] = {it, p->key != NULL ? p->key : Py_None, st, n};
    PyObject *r = PyObject_Vectorcall(self->first_of_pass, a, 4, NULL);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* The Python __next__'s try block after the batch came (t0, t1 its clock reads): 0, or -1 with the
 * exception set (its early returns: 0). */
COLD static int fetched(Loader *self, PyObject *it, PyObject *batch, long long t0, long long t1) {
    PyObject *s = self->session;
    int rc = -1;
    PyObject *st = sget(s, S_STEP), *ps = NULL, *n = NULL;
    Pass *p = NULL;
    Py_ssize_t nb = 0;
    if (UNLIKELY(st == NULL)) return -1;
    if ((ps = pass_of(self, it)) == NULL) goto done;
    if (Py_IS_TYPE(ps, &PassType)) p = (Pass *)ps; /* else (None, or not ours): no pass counted */
    if (p != NULL) { /* count the batch on its pass; the pass's epoch (provisional until confirmed) */
        nb = ++p->batches;
        PyObject *epoch = Py_NewRef(p->epoch != NULL ? p->epoch : Py_None);
        if (UNLIKELY(epoch == Py_None)) {
            Py_DECREF(epoch);
            if ((epoch = open_epoch(self, it, p, nb)) == NULL) goto done;
        }
        int e = set_field(st, F_EPOCH, epoch); /* the step in progress only: see Session.mark_step */
        Py_DECREF(epoch);
        if (UNLIKELY(e < 0)) goto done;
    }
    int api = strue(s, S_API_FETCH); /* stepscope.steps() times this fetch itself */
    if (UNLIKELY(api != 0)) {
        rc = api < 0 ? -1 : 0;
        goto done;
    }
    int active = strue(s, S_ACTIVE);
    if (UNLIKELY(active < 0)) goto done;
    if (UNLIKELY(!active)) {
        int on = activate(s);
        if (on <= 0) {
            rc = on;
            goto done;
        }
    }
    if ((n = samples_of(self, batch)) == NULL) goto done;
    int truth = PyObject_IsTrue(n);
    if (UNLIKELY(truth < 0)) goto done;
    if (UNLIKELY(p != NULL && nb == 1) && first_of_pass(self, it, p, st, truth ? n : g_float_zero) < 0) goto done;
    if (UNLIKELY(add_fetch(st, t0, t1, truth ? n : NULL, 0) < 0)) goto done;
    if (PyDict_Check(batch)) {
        PyObject *tokens = PyObject_CallOneArg(self->batch_tokens, batch);
        if (UNLIKELY(tokens == NULL)) goto done;
        int any = PyObject_IsTrue(tokens);
        int e = any > 0 ? add_to(st, F_TOKENS, tokens) : any;
        Py_DECREF(tokens);
        if (UNLIKELY(e < 0)) goto done;
    }
    rc = 0;
done:
    Py_XDECREF(n);
    Py_XDECREF(ps);
    Py_DECREF(st);
    return rc;
}

/* Log mode's fetch (_hooks.h): a batch whose first tensor has rows, of a pass past its first batch with its epoch
 * known (or of no pass), logged as an event; what fetched() does with it is applied later, in the same order.
 * 1, or 0 for any other case (fetched() does it), or -1 with an exception. */
static int fetch_logged(Loader *self, PyObject *it, PyObject *batch, long long t0, long long t1) {
    PyObject *t = batch;
    if (PyList_CheckExact(batch) && PyList_GET_SIZE(batch) > 0) t = PyList_GET_ITEM(batch, 0);
    else if (PyTuple_CheckExact(batch) && PyTuple_GET_SIZE(batch) > 0) t = PyTuple_GET_ITEM(batch, 0);
    if ((PyObject *)Py_TYPE(t) != self->tensor) return 0;
    PyTypeObject *base = Py_TYPE(t)->tp_base;
    lenfunc len = base != NULL && base->tp_as_mapping != NULL ? base->tp_as_mapping->mp_length : NULL;
    Py_ssize_t rows = len != NULL ? len(t) : 0;
    if (UNLIKELY(rows <= 0)) {
        if (rows < 0) PyErr_Clear(); /* left to fetched(), which tells an error from no rows */
        return 0;
    }
    PyObject *ps = pass_of(self, it);
    if (UNLIKELY(ps == NULL)) return -1;
    Pass *p = ps == Py_None ? NULL : (Pass *)ps; /* None: an iterator made before the hooks, no pass counted */
    if (UNLIKELY(p != NULL && (!Py_IS_TYPE(ps, &PassType) || p->epoch == NULL || p->epoch == Py_None ||
                               p->batches < 1))) {
        Py_DECREF(ps);
        return 0;
    }
    Event *e = hot_append(EV_FETCH, t0, t1);
    if (UNLIKELY(e == NULL)) {
        Py_DECREF(ps);
        return -1;
    }
    e->rows = (double)rows;
    e->ref = p != NULL ? Py_NewRef(p->epoch) : NULL;
    if (p != NULL) p->batches += 1;
    g_hot.cum += t1 - t0;
    g_hot.fetched = 1;
    Py_DECREF(ps);
    return 1;
}

COLD static PyObject *pass_ended(Loader *self, PyObject *it) { /* __next__ raised: NULL, its exception set */
    if (PyErr_ExceptionMatches(PyExc_StopIteration)) { /* the pass ended: pass_end(it), then raise again */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        PyObject *r = PyObject_CallOneArg(self->pass_end, it);
        if (r == NULL) { /* pass_end catches Exception: what got through replaces StopIteration */
            Py_XDECREF(et);
            Py_XDECREF(ev);
            Py_XDECREF(tb);
            return NULL;
        }
        Py_DECREF(r);
        PyErr_Restore(et, ev, tb);
    }
    return NULL;
}

static PyObject *Loader_call(Loader *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (UNLIKELY(nargs != 1 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames)))) {
        PyErr_Format(PyExc_TypeError, "__next__() takes 1 argument (%zd given)", nargs);
        return NULL;
    }
    PyObject *it = args[0];
    long long t0 = now_ns();
    PyObject *batch = PyObject_CallOneArg(self->orig, it);
    if (UNLIKELY(batch == NULL)) return pass_ended(self, it);
    long long t1 = now_ns();
    if (LIKELY(log_on(self->session))) {
        int logged = fetch_logged(self, it, batch, t0, t1);
        if (LIKELY(logged > 0)) return batch;
        if (UNLIKELY(logged < 0)) goto failed;
    }
    if (UNLIKELY(hot_sync() < 0)) {
        Py_DECREF(batch);
        return NULL;
    }
    int disabled = strue(self->session, S_DISABLED); /* outside the Python body's try, as there */
    if (UNLIKELY(disabled != 0)) {
        if (disabled > 0) return batch;
        Py_DECREF(batch);
        return NULL;
    }
    if (fetched(self, it, batch, t0, t1) == 0) return batch;
failed:
    if (UNLIKELY(warn_caught(self->session, s_loader_warn, "DataLoader timing failed") < 0)) {
        Py_DECREF(batch);
        return NULL;
    }
    return batch;
}

static PyObject *Loader_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"session", "orig", "tensor_type", "batch_size", "batch_tokens", "pass_end",
                             "open_epoch", "first_of_pass", NULL};
    PyObject *o[8];
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOOO:LoaderNext", kwlist, &o[0], &o[1], &o[2], &o[3],
                                     &o[4], &o[5], &o[6], &o[7]))
        return NULL;
    Loader *self = (Loader *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->session = Py_NewRef(o[0]);
    self->orig = Py_NewRef(o[1]);
    self->tensor = Py_NewRef(o[2]);
    self->batch_size = Py_NewRef(o[3]);
    self->batch_tokens = Py_NewRef(o[4]);
    self->pass_end = Py_NewRef(o[5]);
    self->open_epoch = Py_NewRef(o[6]);
    self->first_of_pass = Py_NewRef(o[7]);
    self->vectorcall = (vectorcallfunc)Loader_call;
    return (PyObject *)self;
}

/* read from an iterator (it.__next__): bound to it, as a function would be */
static PyObject *Loader_get(PyObject *self, PyObject *obj, PyObject *Py_UNUSED(type)) {
    if (obj == NULL || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *Loader_get_wrapped(Loader *self, void *Py_UNUSED(closure)) {
    return Py_NewRef(self->orig);
}

static PyObject *Loader_forget(Loader *self, PyObject *Py_UNUSED(ignored)) {
    Py_CLEAR(self->last_it);
    Py_CLEAR(self->last_pass);
    Py_RETURN_NONE;
}

static PyMethodDef Loader_methods[] = {
    {"forget", (PyCFunction)Loader_forget, METH_NOARGS,
     "forget(): read the next iterator's _stepscope_pass again (loader.py's __iter__ has just set one)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Loader_getset[] = {
    {"__wrapped__", (getter)Loader_get_wrapped, NULL, "the __next__ it wraps (torch's)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef Loader_members[] = {
    {"orig_next", T_OBJECT_EX, offsetof(Loader, orig), 0, "the __next__ called (torch's; the Python body's orig_next)"},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Loader, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject LoaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepscope.collect._hooks.LoaderNext",
    .tp_doc = "LoaderNext(session, orig, tensor_type, batch_size, batch_tokens, pass_end, open_epoch, "
              "first_of_pass): the DataLoader iterators' __next__ timed as data wait, compiled (loader.py).",
    .tp_basicsize = sizeof(Loader),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_new = Loader_new,
    .tp_dealloc = (destructor)Loader_dealloc,
    .tp_traverse = (traverseproc)Loader_traverse,
    .tp_clear = (inquiry)Loader_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Loader, vectorcall),
    .tp_descr_get = Loader_get,
    .tp_members = Loader_members,
    .tp_methods = Loader_methods,
    .tp_getset = Loader_getset,
};

int loader_names(void) {
#define NAME(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return -1
    NAME(s_pass_attr, "_stepscope_pass");
    NAME(s_loader_warn, "loader");
#undef NAME
    return 0;
}
