/* The watched models' forward pre- and post-hook and the torch.autograd.backward wrapper, compiled
 * (stepscope.collect._hooks; shared parts in _hooks.h). */
#include "_hooks.h"

/* -- the watched models' forward pre- and post-hook -------------------------------------------------------- */
typedef struct {
    PyObject_HEAD
    PyObject *session, *watch, *tensor, *is_grad_enabled, *batch_size, *mark_validation;
    Py_ssize_t depth;
    long long t0, cum0; /* the open span's entry: its clock read and g_hot.cum (own_ns) */
    int open;           /* a span is open (the Python hooks' st0 is not None) */
    int logged;         /* it was entered in log mode: the step's start is left to its event */
    int called_training; /* the model's training flag when its outermost forward was entered */
} Forward;

static int Forward_traverse(Forward *self, visitproc visit, void *arg) {
    Py_VISIT(self->session);
    Py_VISIT(self->watch);
    Py_VISIT(self->tensor);
    Py_VISIT(self->is_grad_enabled);
    Py_VISIT(self->batch_size);
    Py_VISIT(self->mark_validation);
    return 0;
}

static int Forward_clear(Forward *self) {
    Py_CLEAR(self->session);
    Py_CLEAR(self->watch);
    Py_CLEAR(self->tensor);
    Py_CLEAR(self->is_grad_enabled);
    Py_CLEAR(self->batch_size);
    Py_CLEAR(self->mark_validation);
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
    self->called_training = 1;
    self->open = self->logged = 0;
    self->t0 = self->cum0 = 0;
    return 0;
}

/* args[:n] as a new tuple (what the Python pre-hook is given as args) */
static PyObject *tuple_of(PyObject *const *args, Py_ssize_t n) {
    PyObject *t = PyTuple_New(n);
    if (t == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) PyTuple_SET_ITEM(t, i, Py_NewRef(args[i]));
    return t;
}

COLD static PyObject *first_of(PyObject *args) { /* args[0] if args else None, args not a tuple */
    int nonempty = PyObject_IsTrue(args);
    if (nonempty < 0) return NULL;
    return nonempty ? PyObject_GetItem(args, g_zero) : Py_NewRef(Py_None);
}

/* batch_size(args), args the hook's args object or argv[:n] made a tuple */
COLD static PyObject *samples_by_batch_size(Forward *self, PyObject *args, PyObject *const *argv, Py_ssize_t n) {
    PyObject *a = args != NULL ? Py_NewRef(args) : tuple_of(argv, n);
    PyObject *rows = a != NULL ? PyObject_CallOneArg(self->batch_size, a) : NULL;
    Py_XDECREF(a);
    return rows;
}

/* The samples of the step from the first forward argument (the try block of the Python pre-hook). The arguments
 * are the hook's args object, or (args NULL) the call slot's argv[:n], made a tuple only when batch_size is
 * called with them. */
static int read_samples(Forward *self, PyObject *st, PyObject *args, PyObject *const *argv, Py_ssize_t n) {
    PyObject *opts = sget(self->session, S_OPTIONS);
    if (UNLIKELY(opts == NULL)) return -1;
    int none = is_none_attr(opts, s_samples_per_step);
    Py_DECREF(opts);
    if (none <= 0) return none;
    if (UNLIKELY(PyObject_SetAttr(self->watch, s_sampled, st) < 0)) return -1;
    PyObject *x;
    if (args != NULL && PyTuple_CheckExact(args)) {
        argv = &PyTuple_GET_ITEM(args, 0);
        n = PyTuple_GET_SIZE(args);
    }
    if (LIKELY(args == NULL || PyTuple_CheckExact(args))) x = Py_NewRef(n > 0 ? argv[0] : Py_None);
    else if ((x = first_of(args)) == NULL) return -1;
    PyObject *rows = NULL;
    int tensor = (PyObject *)Py_TYPE(x) == self->tensor;
    if (LIKELY(tensor) && (rows = rows_of(x)) == NULL) tensor = PyErr_Occurred() ? -1 : 0;
    if (UNLIKELY(tensor == 0)) rows = samples_by_batch_size(self, args, argv, n);
    Py_DECREF(x);
    if (UNLIKELY(rows == NULL)) return -1;
    int truth = PyObject_IsTrue(rows);
    int e = truth > 0 ? set_field(st, F_SAMPLES, rows) : truth;
    Py_DECREF(rows);
    return e;
}

/* module.training at the outermost forward's entry, where the model's attributes are warm (Python has just
 * read its call slot); one that cannot be read is reported once and taken as training. 1, 0, or -1 with an
 * exception that is not an Exception. */
static int training_at_entry(Forward *self, PyObject *module) {
    int training = attr_true(module, s_training);
    if (LIKELY(training >= 0)) return training;
    return warn_caught(self->session, s_module_watch, "model forward timing failed") < 0 ? -1 : 1;
}

/* The outermost forward's entry at t outside log mode (or before a batch came this step): the step's start, and
 * its samples from the first argument when no batch came (the Python pre-hook's body, less the span's entry, which
 * pre_enter keeps): 0, or -1 with an exception. */
COLD static int pre_enter_step(Forward *self, long long t, PyObject *args, PyObject *const *argv, Py_ssize_t n) {
    if (UNLIKELY(hot_sync() < 0)) return -1;
    PyObject *st = sget(self->session, S_STEP);
    if (UNLIKELY(st == NULL)) return -1;
    int rc = -1;
    if (UNLIKELY(start_if_unset(st, t) < 0)) goto done;
    PyObject *fetched = get_field(st, F_FETCHED);
    if (UNLIKELY(fetched == NULL)) goto done;
    int f = PyObject_IsTrue(fetched);
    Py_DECREF(fetched);
    if (UNLIKELY(f < 0)) goto done;
    if (!f) {
        PyObject *sampled = PyObject_GetAttr(self->watch, s_sampled);
        if (UNLIKELY(sampled == NULL)) goto done;
        int other = sampled != st;
        Py_DECREF(sampled);
        if (other && read_samples(self, st, args, argv, n) < 0 &&
            warn_caught(self->session, s_module_samples, "reading the batch size from the forward input failed") < 0)
            goto done;
    }
    rc = 0;
done:
    Py_DECREF(st);
    return rc;
}

/* The Python pre-hook's body, its arguments as read_samples takes them: 0, or -1 with an exception. */
static int pre_enter(Forward *self, PyObject *module, PyObject *args, PyObject *const *argv, Py_ssize_t n) {
    if (self->depth == 0) {
        int training = training_at_entry(self, module);
        if (UNLIKELY(training < 0)) return -1;
        self->called_training = training;
        long long t = now_ns();
        self->logged = log_on(self->session) && g_hot.fetched; /* log mode, a batch came: nothing to read */
        if (UNLIKELY(!self->logged) && pre_enter_step(self, t, args, argv, n) < 0) return -1;
        self->t0 = t;
        self->cum0 = g_hot.cum;
        self->open = 1;
    }
    self->depth += 1;
    return 0;
}

static PyObject *Forward_pre(Forward *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "pre() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    if (UNLIKELY(pre_enter(self, args[0], args[1], NULL, 0) < 0)) return NULL;
    Py_RETURN_NONE;
}

/* The rest of the validation-step check after an eval-mode forward that ended at t1 (post_body). */
COLD static int validation_check(Forward *self, long long t1) {
    if (hot_sync() < 0) return -1; /* it reads the session: the log's events first */
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

/* post_body's own time added to the step outside log mode (a span entered in it: with the step's start) */
COLD static int forward_done(Forward *self, long long d) {
    if (hot_sync() < 0) return -1;
    PyObject *st = sget(self->session, S_STEP);
    if (UNLIKELY(st == NULL)) return -1;
    int e = self->logged ? start_if_unset(st, self->t0) : 0;
    if (e == 0) e = attribute(st, F_FORWARD, d);
    Py_DECREF(st);
    return e;
}

/* The body of the Python post-hook's try block. */
static int post_body(Forward *self) {
    self->depth -= 1;
    if (self->depth || !self->open) return 0;
    long long t1 = now_ns(), d = own_ns(self->cum0, self->t0, t1);
    self->open = 0;
    int e = LIKELY(log_on(self->session)) ? log_phase(EV_FORWARD, self->t0, d) : forward_done(self, d);
    if (UNLIKELY(e < 0)) return -1;
    /* not training (at entry) and session.step_source == "optimizer" and not is_grad_enabled() */
    if (LIKELY(self->called_training)) return 0;
    return validation_check(self, t1);
}

static PyObject *Forward_post(Forward *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "post() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    if (post_body(self) < 0 &&
        warn_caught(self->session, s_module_watch, "model forward timing failed") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Forward_slot(Forward *self, PyObject *const *args, Py_ssize_t nargs); /* with TimedCall, below */

static PyMethodDef Forward_methods[] = {
    {"slot", (PyCFunction)(void (*)(void))Forward_slot, METH_FASTCALL,
     "slot(model, impl): the TimedCall to put in the model's call slot (modelcall.py): these hooks around impl."},
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

/* -- the object in a watched model's call slot ---------------------------------------------------------------
 * ForwardHooks.slot(model, impl)(*args, **kwargs): the hooks' pre, impl(*args, **kwargs), then the post also when
 * impl raises (the hooks' always_call), impl's exception kept. Module._wrapped_call_impl calls it in place of
 * _call_impl (modelcall.py), so no module hook is registered and torch runs its fast path; a C object with a
 * vectorcall, so the arguments are passed on as torch gave them, with no Python frame and no tuple made. */
typedef struct {
    PyObject_HEAD
    Forward *hooks;
    PyObject *model, *impl;
    vectorcallfunc vectorcall;
} TimedCall;

static PyObject *TimedCall_call(TimedCall *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Forward *h = self->hooks;
    if (pre_enter(h, self->model, NULL, args, PyVectorcall_NARGS(nargsf)) < 0) return NULL;
    PyObject *out = PyObject_Vectorcall(self->impl, args, nargsf, kwnames);
    if (UNLIKELY(out == NULL)) {
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        if (UNLIKELY(post_body(h) < 0)) PyErr_Clear(); /* the call's own error is the one to raise */
        PyErr_Restore(et, ev, tb);
        return NULL;
    }
    if (post_body(h) < 0 && warn_caught(h->session, s_module_watch, "model forward timing failed") < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

static int TimedCall_traverse(TimedCall *self, visitproc visit, void *arg) {
    Py_VISIT(self->hooks);
    Py_VISIT(self->model);
    Py_VISIT(self->impl);
    return 0;
}

static int TimedCall_clear(TimedCall *self) {
    Py_CLEAR(self->hooks);
    Py_CLEAR(self->model);
    Py_CLEAR(self->impl);
    return 0;
}

static void TimedCall_dealloc(TimedCall *self) {
    PyObject_GC_UnTrack(self);
    TimedCall_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *timed_call_new(Forward *hooks, PyObject *model, PyObject *impl) {
    TimedCall *self = PyObject_GC_New(TimedCall, &TimedCallType);
    if (self == NULL) return NULL;
    self->hooks = (Forward *)Py_NewRef(hooks);
    self->model = Py_NewRef(model);
    self->impl = Py_NewRef(impl);
    self->vectorcall = (vectorcallfunc)TimedCall_call;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static PyObject *Forward_slot(Forward *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "slot() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    return timed_call_new(self, args[0], args[1]);
}

static PyMemberDef TimedCall_members[] = {
    {"hooks", T_OBJECT_EX, offsetof(TimedCall, hooks), READONLY, "the ForwardHooks it runs"},
    {"model", T_OBJECT_EX, offsetof(TimedCall, model), READONLY, "the watched model"},
    {"impl", T_OBJECT_EX, offsetof(TimedCall, impl), READONLY,
     "what it calls (_call_impl, or the slot's previous value)"},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(TimedCall, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject TimedCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepscope.collect._hooks.TimedCall",
    .tp_doc = "A watched model's call slot (ForwardHooks.slot(model, impl) makes it): the ForwardHooks' pre and "
              "post around impl(*args, **kwargs) (modelcall.py).",
    .tp_basicsize = sizeof(TimedCall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_dealloc = (destructor)TimedCall_dealloc,
    .tp_traverse = (traverseproc)TimedCall_traverse,
    .tp_clear = (inquiry)TimedCall_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(TimedCall, vectorcall),
    .tp_members = TimedCall_members,
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

COLD static int activate_unless_disabled(PyObject *session) { /* an inactive session: activate() unless disabled */
    int disabled = strue(session, S_DISABLED);
    if (disabled != 0) return disabled < 0 ? -1 : 0;
    PyObject *r = PyObject_CallMethodNoArgs(session, s_activate);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* The finally block of the Python wrapper, inside its try, outside log mode. */
COLD static int backward_done(Backward *self, long long t0, long long d) {
    if (hot_sync() < 0) return -1;
    PyObject *st = sget(self->session, S_STEP);
    if (UNLIKELY(st == NULL)) return -1;
    int e = attribute(st, F_BACKWARD, d);
    if (e == 0) e = start_if_unset(st, t0);
    Py_DECREF(st);
    if (UNLIKELY(e < 0)) return -1;
    int active = strue(self->session, S_ACTIVE);
    if (LIKELY(active != 0)) return active < 0 ? -1 : 0;
    return activate_unless_disabled(self->session);
}

/* The wrapper's timing after backward ran (in log mode an event: the session is active there) */
static int backward_timed(Backward *self, long long cum0, long long t0) {
    long long t1 = now_ns(), d = own_ns(cum0, t0, t1);
    return LIKELY(log_on(self->session)) ? log_phase(EV_BACKWARD, t0, d) : backward_done(self, t0, d);
}

static PyObject *Backward_call(Backward *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (UNLIKELY(!log_on(self->session)) && session_has_step(self->session) < 0) return NULL;
    long long cum0 = g_hot.cum, t0 = now_ns();
    PyObject *orig = Py_NewRef(self->orig);
    PyObject *out = PyObject_Vectorcall(orig, args, nargsf, kwnames);
    Py_DECREF(orig);
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb); /* backward's own exception, if any: raised again after the timing */
    if (backward_timed(self, cum0, t0) < 0 && warn_caught(self->session, s_backward, "backward timing failed") < 0) {
        Py_XDECREF(out); /* the finally block raised: its exception replaces backward's result */
        Py_XDECREF(et);
        Py_XDECREF(ev);
        Py_XDECREF(tb);
        out = NULL;
    } else {
        PyErr_Restore(et, ev, tb);
    }
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

