/* The compiled region (stepscope.collect._region.region): the same semantics as the Python reference
 * class PyRegion in regions.py, line for line, at a fraction of its cost (issue 20: enter + exit <= 0.5 us).
 *
 * What it reads stays per call: the current session (session._CURRENT), its active / disabled flags, its
 * step, step_index and region_row, the thread's region stack (regions._tls.stack). What it keeps from bind()
 * never changes in a process: the regions module's globals and the session module's dict (the dicts
 * themselves, read on each use, so a monkeypatched global is seen). The clock is CLOCK_MONOTONIC, the clock
 * of time.perf_counter_ns on Linux, so its stamps compare with Python's (tests/collect/test_region_impls.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <time.h>

static PyObject *g_regions;   /* regions.py's globals() */
static PyObject *g_sessions;  /* stepscope.collect.core.session.__dict__ */
static PyObject *s_current, *s_active, *s_disabled, *s_tls, *s_stack, *s_stack_fn, *s_session_for_api;
static PyObject *s_step, *s_start, *s_step_index, *s_region_row, *s_wrap, *s_slash, *s_empty, *s_append;

typedef struct {
    PyObject_HEAD
    PyObject *name;
    PyObject *path;
    PyObject *session;
    PyObject *stack;
    long long t0;
} Region;

static inline long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static PyObject *global(PyObject *dict, PyObject *key) { /* borrowed; NULL with NameError */
    PyObject *v = PyDict_GetItemWithError(dict, key);
    if (v == NULL && !PyErr_Occurred()) PyErr_Format(PyExc_NameError, "name '%U' is not defined", key);
    return v;
}

static int bound(void) {
    if (g_regions != NULL) return 0;
    PyObject *m = PyImport_ImportModule("stepscope.collect.regions");  /* its import calls bind() */
    Py_XDECREF(m);
    if (m == NULL) return -1;
    if (g_regions == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "stepscope.collect._region is not bound to regions.py");
        return -1;
    }
    return 0;
}

static int attr_true(PyObject *o, PyObject *name) { /* truth of o.name; -1 on error */
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL) return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

/* Not GC-tracked: a region refers to a session, a stack list and strs, none of which refers back to it. */
static void Region_dealloc(Region *self) {
    Py_CLEAR(self->name);
    Py_CLEAR(self->path);
    Py_CLEAR(self->session);
    Py_CLEAR(self->stack);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Region_init(Region *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"name", NULL};
    PyObject *name;
    if (kwds == NULL && PyTuple_GET_SIZE(args) == 1) {
        name = PyTuple_GET_ITEM(args, 0);
    } else if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:region", kwlist, &name)) {
        return -1;
    }
    /* f"{name}": the object itself for an exact str, format(name, "") otherwise */
    PyObject *s = PyUnicode_CheckExact(name) ? Py_NewRef(name) : PyObject_Format(name, s_empty);
    if (s == NULL) return -1;
    Py_XSETREF(self->name, s);
    return 0;
}

static PyTypeObject RegionType;

/* region(name) without an argument tuple (the usual call); a subclass, or keywords, take tp_new + tp_init. */
static PyObject *Region_vectorcall(PyTypeObject *type, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (type != &RegionType || nargs != 1 || kwnames != NULL) {
        PyObject *tuple = PyTuple_New(nargs), *kw = NULL, *r = NULL;
        if (tuple == NULL) return NULL;
        for (Py_ssize_t i = 0; i < nargs; i++) PyTuple_SET_ITEM(tuple, i, Py_NewRef(args[i]));
        if (kwnames != NULL) {
            kw = PyDict_New();
            for (Py_ssize_t i = 0; kw != NULL && i < PyTuple_GET_SIZE(kwnames); i++) {
                if (PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) < 0) Py_CLEAR(kw);
            }
            if (kw == NULL) goto out;
        }
        r = PyType_Type.tp_call((PyObject *)type, tuple, kw);
    out:
        Py_DECREF(tuple);
        Py_XDECREF(kw);
        return r;
    }
    PyObject *name = args[0];
    /* f"{name}": the object itself for an exact str, format(name, "") otherwise */
    PyObject *s = PyUnicode_CheckExact(name) ? Py_NewRef(name) : PyObject_Format(name, s_empty);
    if (s == NULL) return NULL;
    Region *self = PyObject_New(Region, &RegionType);
    if (self == NULL) {
        Py_DECREF(s);
        return NULL;
    }
    self->name = s;
    self->path = self->session = self->stack = NULL;
    self->t0 = 0;
    return (PyObject *)self;
}

/* The thread's stack, kept per OS thread after the first lookup while regions._tls is the same object
 * (a region's stack is only ever made by regions._stack(), once per thread; a thread that ends leaves its
 * empty list and a reference to _tls behind). */
static _Thread_local PyObject *tl_stack;
static _Thread_local PyObject *tl_tls;

static PyObject *thread_stack(void) { /* new reference: _tls.stack, made by regions._stack() at first use */
    PyObject *tls = global(g_regions, s_tls);
    if (tls == NULL) return NULL;
    if (tls == tl_tls && tl_stack != NULL) return Py_NewRef(tl_stack);
    PyObject *stack = PyObject_GetAttr(tls, s_stack);
    if (stack == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
        PyErr_Clear();
        PyObject *fn = global(g_regions, s_stack_fn);
        if (fn == NULL || (stack = PyObject_CallNoArgs(fn)) == NULL) return NULL;
    }
    Py_XSETREF(tl_stack, Py_NewRef(stack));
    Py_XSETREF(tl_tls, Py_NewRef(tls));  /* held: its address is not reused while it is compared */
    return stack;
}

static PyObject *join_path(PyObject *parent, PyObject *name) { /* parent + "/" + name */
    if (PyUnicode_CheckExact(parent) && PyUnicode_CheckExact(name)) {
        PyObject *items[2] = {parent, name};
        return _PyUnicode_JoinArray(s_slash, items, 2);
    }
    PyObject *a = PyNumber_Add(parent, s_slash);
    if (a == NULL) return NULL;
    PyObject *r = PyNumber_Add(a, name);
    Py_DECREF(a);
    return r;
}

static PyObject *Region_enter(Region *self, PyObject *Py_UNUSED(ignored)) {
    if (bound() < 0) return NULL;
    PyObject *s = global(g_sessions, s_current);
    if (s == NULL) return NULL;
    Py_INCREF(s);
    int fallback = s == Py_None;
    if (!fallback) {
        int active = attr_true(s, s_active);
        if (active < 0) goto fail_s;
        fallback = !active;
    }
    if (!fallback) {
        int disabled = attr_true(s, s_disabled);
        if (disabled < 0) goto fail_s;
        fallback = disabled;
    }
    if (fallback) { /* standalone use: find or create one */
        PyObject *fn = global(g_regions, s_session_for_api);
        if (fn == NULL) goto fail_s;
        Py_SETREF(s, PyObject_CallNoArgs(fn));
        if (s == NULL) return NULL;
    }
    Py_XSETREF(self->session, s);

    PyObject *stack = thread_stack();
    if (stack == NULL) return NULL;
    PyObject *name = self->name;
    if (name == NULL) {
        Py_DECREF(stack);
        PyErr_SetString(PyExc_AttributeError, "name");
        return NULL;
    }
    PyObject *path;
    if (PyList_CheckExact(stack)) {
        Py_ssize_t n = PyList_GET_SIZE(stack);
        path = n ? join_path(PyList_GET_ITEM(stack, n - 1), name) : Py_NewRef(name);
        if (path == NULL || PyList_Append(stack, path) < 0) goto fail_stack;
    } else {
        int nonempty = PyObject_IsTrue(stack);
        if (nonempty < 0) { Py_DECREF(stack); return NULL; }
        if (nonempty) {
            PyObject *last = PySequence_GetItem(stack, -1);
            if (last == NULL) { Py_DECREF(stack); return NULL; }
            path = join_path(last, name);
            Py_DECREF(last);
        } else {
            path = Py_NewRef(name);
        }
        if (path == NULL) goto fail_stack;
        PyObject *r = PyObject_CallMethodOneArg(stack, s_append, path);
        if (r == NULL) goto fail_stack;
        Py_DECREF(r);
    }
    Py_XSETREF(self->path, path);
    Py_XSETREF(self->stack, stack);  /* the entering thread's: __exit__ runs in the same thread */
    self->t0 = now_ns();
    return Py_NewRef(self);

fail_stack:
    Py_XDECREF(path);
    Py_DECREF(stack);
    return NULL;
fail_s:
    Py_DECREF(s);
    return NULL;
}

static PyObject *Region_exit(Region *self, PyObject *const *args, Py_ssize_t nargs) {
    long long t1 = now_ns();
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "__exit__ expected 3 arguments, got %zd", nargs);
        return NULL;
    }
    PyObject *stack = self->stack;
    if (stack == NULL) {
        PyErr_SetString(PyExc_AttributeError, "_stack");
        return NULL;
    }
    Py_ssize_t depth;
    if (PyList_CheckExact(stack)) {
        Py_ssize_t n = PyList_GET_SIZE(stack);
        if (n) { /* stack.pop(): the list keeps its allocation, as list.pop does for a small shrink */
            PyObject *last = PyList_GET_ITEM(stack, n - 1);
            Py_SET_SIZE(stack, n - 1);
            Py_DECREF(last);
        }
        depth = n ? n - 1 : 0;
    } else {
        int nonempty = PyObject_IsTrue(stack);
        if (nonempty < 0) return NULL;
        if (nonempty) {
            PyObject *r = PyObject_CallMethod(stack, "pop", NULL);
            if (r == NULL) return NULL;
            Py_DECREF(r);
        }
        depth = PyObject_Size(stack);
        if (depth < 0) return NULL;
    }
    PyObject *s = self->session;
    if (s == NULL) {
        PyErr_SetString(PyExc_AttributeError, "_session");
        return NULL;
    }
    if (s == Py_None) Py_RETURN_NONE;
    int disabled = attr_true(s, s_disabled);
    if (disabled < 0) return NULL;
    if (disabled) Py_RETURN_NONE;
    Py_INCREF(s);  /* region_row may run code that drops self->session */
    PyObject *t0 = NULL, *st = NULL, *start = NULL, *index = NULL, *row = NULL, *append = NULL, *r = NULL;
    if ((t0 = PyLong_FromLongLong(self->t0)) == NULL) goto done;
    if ((st = PyObject_GetAttr(s, s_step)) == NULL) goto done;
    if ((start = PyObject_GetAttr(st, s_start)) == NULL) goto done;
    if (start == Py_None && PyObject_SetAttr(st, s_start, t0) < 0) goto done;
    if ((append = PyObject_GetAttr(s, s_region_row)) == NULL) goto done;
    if ((index = PyObject_GetAttr(s, s_step_index)) == NULL) goto done;
    if ((row = PyTuple_New(5)) == NULL) goto done;
    PyTuple_SET_ITEM(row, 0, Py_NewRef(self->path ? self->path : Py_None));
    PyTuple_SET_ITEM(row, 1, Py_NewRef(index));
    PyTuple_SET_ITEM(row, 2, Py_NewRef(t0));
    PyObject *t1o = PyLong_FromLongLong(t1), *d = PyLong_FromSsize_t(depth);
    if (t1o == NULL || d == NULL) {
        Py_XDECREF(t1o);
        Py_XDECREF(d);
        goto done;
    }
    PyTuple_SET_ITEM(row, 3, t1o);
    PyTuple_SET_ITEM(row, 4, d);
    r = PyObject_CallOneArg(append, row);
done:
    Py_XDECREF(t0);
    Py_XDECREF(st);
    Py_XDECREF(start);
    Py_XDECREF(index);
    Py_XDECREF(row);
    Py_XDECREF(append);
    Py_DECREF(s);
    if (r == NULL) return NULL;
    Py_DECREF(r);
    Py_RETURN_NONE;
}

static PyObject *Region_call(Region *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"fn", NULL};
    PyObject *fn;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:__call__", kwlist, &fn)) return NULL;
    if (bound() < 0) return NULL;
    PyObject *wrap = global(g_regions, s_wrap);
    if (wrap == NULL) return NULL;
    if (self->name == NULL) {
        PyErr_SetString(PyExc_AttributeError, "name");
        return NULL;
    }
    return PyObject_CallFunctionObjArgs(wrap, (PyObject *)Py_TYPE(self), self->name, fn, NULL);
}

static PyMethodDef Region_methods[] = {
    {"__enter__", (PyCFunction)Region_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))Region_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Region_members[] = {
    {"name", T_OBJECT_EX, offsetof(Region, name), 0, "the region's name (a str)"},
    {"_path", T_OBJECT_EX, offsetof(Region, path), READONLY, NULL},
    {"_session", T_OBJECT_EX, offsetof(Region, session), READONLY, NULL},
    {"_stack", T_OBJECT_EX, offsetof(Region, stack), READONLY, NULL},
    {"_t0", T_LONGLONG, offsetof(Region, t0), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject RegionType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepscope.collect._region.region",
    .tp_doc = "Time a block: ``with region(\"name\"):`` or ``@region(\"name\")`` (compiled; see regions.PyRegion).",
    .tp_basicsize = sizeof(Region),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Region_init,
    .tp_dealloc = (destructor)Region_dealloc,
    .tp_vectorcall = (vectorcallfunc)Region_vectorcall,
    .tp_call = (ternaryfunc)Region_call,
    .tp_methods = Region_methods,
    .tp_members = Region_members,
};

static PyObject *bind(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *regions, *sessions;
    if (!PyArg_ParseTuple(args, "O!O!:bind", &PyDict_Type, &regions, &PyDict_Type, &sessions)) return NULL;
    Py_XSETREF(g_regions, Py_NewRef(regions));
    Py_XSETREF(g_sessions, Py_NewRef(sessions));
    Py_RETURN_NONE;
}

static PyObject *clock_ns(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromLongLong(now_ns());
}

static PyMethodDef module_methods[] = {
    {"bind", bind, METH_VARARGS,
     "bind(regions_globals, session_module_dict): where the compiled region reads what it reads per call."},
    {"clock_ns", clock_ns, METH_NOARGS, "The region clock now (ns): CLOCK_MONOTONIC, as time.perf_counter_ns."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "stepscope.collect._region", "The compiled region (see regions.py).", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL

PyMODINIT_FUNC PyInit__region(void) {
    INTERN(s_current, "_CURRENT");
    INTERN(s_active, "active");
    INTERN(s_disabled, "disabled");
    INTERN(s_tls, "_tls");
    INTERN(s_stack, "stack");
    INTERN(s_stack_fn, "_stack");
    INTERN(s_session_for_api, "session_for_api");
    INTERN(s_step, "step");
    INTERN(s_start, "start");
    INTERN(s_step_index, "step_index");
    INTERN(s_region_row, "region_row");
    INTERN(s_wrap, "_wrap");
    INTERN(s_slash, "/");
    INTERN(s_empty, "");
    INTERN(s_append, "append");
    if (PyType_Ready(&RegionType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "region", (PyObject *)&RegionType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
