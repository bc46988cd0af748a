/* The watched models' forward pre- and post-hook and the torch.autograd.backward wrapper, compiled
 * (stepscope.collect._hooks; shared parts in _hooks.h). */
#include "_hooks.h"

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
    PyObject *opts = sget(self->session, S_OPTIONS);
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
    if (tensor && (n = rows_of(x)) == NULL) tensor = PyErr_Occurred() ? -1 : 0;
    if (tensor == 0) n = PyObject_CallOneArg(self->batch_size, args);
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
        PyObject *st = sget(self->session, S_STEP);
        if (st == NULL) return NULL;
        if (start_if_unset(st, t) < 0) goto fail;
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
    PyObject *st = sget(self->session, S_STEP);
    if (st == NULL) return -1;
    Num d = {0, NULL};
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
    PyObject *source = sget(self->session, S_STEP_SOURCE);
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

/* call(module, impl, args, kwargs): the hooks around impl(*args, **kwargs), the watched model's call made from its
 * _compiled_call_impl (modelcall.py, timed_slot): pre, the call, then post also when the call raises (the hooks'
 * always_call), the call's exception kept. No module hook is registered, so torch takes its fast path. */
static PyObject *Forward_call(Forward *self, PyObject *const *a, Py_ssize_t nargs) {
    if (nargs != 4 || !PyTuple_Check(a[2]) || !PyDict_Check(a[3])) {
        PyErr_SetString(PyExc_TypeError, "call(module, impl, args: tuple, kwargs: dict)");
        return NULL;
    }
    PyObject *pre_args[2] = {a[0], a[2]};
    PyObject *r = Forward_pre(self, pre_args, 2);
    if (r == NULL) return NULL;
    Py_DECREF(r);
    PyObject *out = PyObject_Call(a[1], a[2], PyDict_GET_SIZE(a[3]) ? a[3] : NULL);
    if (out == NULL) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        if (post_body(self, a[0]) < 0) PyErr_Clear(); /* the call's own error is the one to raise */
        PyErr_Restore(et, ev, tb);
        return NULL;
    }
    if (post_body(self, a[0]) < 0 &&
        warn_caught(self->session, s_module_watch, "model forward timing failed") < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

static PyMethodDef Forward_methods[] = {
    {"call", (PyCFunction)(void (*)(void))Forward_call, METH_FASTCALL,
     "call(module, impl, args, kwargs): pre, impl(*args, **kwargs), post (also when it raises); its result."},
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

PyTypeObject ForwardType = {
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
    PyObject *st = sget(self->session, S_STEP);
    if (st == NULL) return -1;
    Num d = {0, NULL};
    int e = own_time(st0, a0, st, t0, t1, &d);
    if (e == 0) {
        e = add_positive(st, F_BACKWARD, &d);
        num_clear(&d);
    }
    if (e == 0) e = start_if_unset(st, t0);
    Py_DECREF(st);
    if (e < 0) return -1;
    int active = strue(self->session, S_ACTIVE);
    if (active != 0) return active < 0 ? -1 : 0;
    int disabled = strue(self->session, S_DISABLED);
    if (disabled != 0) return disabled < 0 ? -1 : 0;
    PyObject *r = PyObject_CallMethodNoArgs(self->session, s_activate);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

static PyObject *Backward_call(Backward *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    PyObject *st0 = sget(self->session, S_STEP);
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

PyTypeObject BackwardType = {
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

