/* Folder listings for the source walk, with the system calls on native threads.
 *
 * decide_dirs lists each folder (readdir), sorts its names by their bytes and lstat-s
 * every entry (fstatat relative to the open folder), on `threads` POSIX threads that
 * never take the GIL. Meanwhile the calling thread turns each listed folder, in order,
 * into the listing dlm.rows.listing.list_folder makes of it: the same Item tuples, the
 * include/exclude patterns applied by calling the walk's own match functions. Links
 * and entries whose lstat failed are handed to a Python function (`odd`), so what is
 * decided about them is written once, in Python. Each run of consecutive files becomes one ROWS item, and
 * the subfolders to list next come back beside each listing. On a warm tree the system
 * calls and one Python frame per entry are most of a walk's time; here the calls run on
 * all cores and no frame is made per entry but the pattern match.
 *
 * Names are decoded as os.scandir decodes them (the file system encoding,
 * surrogateescape). Items come in the names' byte order, which is str order for names
 * that decode; a folder holding any non-ASCII name is sorted again with the caller's
 * key, as list_folder sorts.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    int err;
    unsigned char d_type;
    struct stat st;
} Entry;

typedef struct {
    const char *name;
    unsigned char d_type;
} Name;

typedef struct {
    const char *path;
    int err;           /* opening or reading the folder */
    size_t n;          /* entries */
    char *names;       /* NUL-terminated names, back to back, in readdir order */
    Name *sorted;      /* the names by their bytes */
    Entry *entries;    /* in sorted order */
    int done;          /* listed: read and written under the queue's lock */
} Listing;

typedef struct {
    Listing *jobs;
    size_t n_jobs;
    size_t next;       /* the next job a worker takes */
    pthread_mutex_t lock;
    pthread_cond_t listed;
} Queue;

static int by_name(const void *a, const void *b) {
    return strcmp(((const Name *)a)->name, ((const Name *)b)->name);
}

static int grow(void **buf, size_t *cap, size_t need, size_t item) {
    if (need <= *cap) return 0;
    size_t cap2 = *cap ? *cap : 64;
    while (cap2 < need) cap2 *= 2;
    void *p = realloc(*buf, cap2 * item);
    if (!p) return ENOMEM;
    *buf = p;
    *cap = cap2;
    return 0;
}

static void list_one(Listing *job) {
    int fd = open(job->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) { job->err = errno; return; }
    DIR *dir = fdopendir(fd);
    if (!dir) { job->err = errno; close(fd); return; }
    size_t names_cap = 0, names_len = 0, types_cap = 0, n = 0;
    unsigned char *types = NULL;
    for (;;) {
        errno = 0;
        struct dirent *ent = readdir(dir);
        if (!ent) { job->err = errno; break; }
        const char *name = ent->d_name;
        if (name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0))) continue;
        size_t len = strlen(name) + 1;
        if (grow((void **)&job->names, &names_cap, names_len + len, 1) ||
            grow((void **)&types, &types_cap, n + 1, 1)) {
            job->err = ENOMEM;
            break;
        }
        memcpy(job->names + names_len, name, len);
        types[n++] = ent->d_type;
        names_len += len;
    }
    if (!job->err && n) {
        job->sorted = malloc(n * sizeof(Name));
        job->entries = calloc(n, sizeof(Entry));
        if (!job->sorted || !job->entries) {
            job->err = ENOMEM;
        } else {
            const char *p = job->names;
            for (size_t i = 0; i < n; i++, p += strlen(p) + 1) {
                job->sorted[i].name = p;
                job->sorted[i].d_type = types[i];
            }
            qsort(job->sorted, n, sizeof(Name), by_name);
            int dfd = dirfd(dir);
            for (size_t i = 0; i < n; i++) {
                Entry *e = &job->entries[i];
                e->d_type = job->sorted[i].d_type;
                if (fstatat(dfd, job->sorted[i].name, &e->st, AT_SYMLINK_NOFOLLOW) != 0) e->err = errno;
            }
        }
    }
    free(types);
    job->n = job->err ? 0 : n;
    closedir(dir);
}

static void *worker(void *arg) {
    Queue *q = arg;
    for (;;) {
        pthread_mutex_lock(&q->lock);
        size_t i = q->next < q->n_jobs ? q->next++ : q->n_jobs;
        pthread_mutex_unlock(&q->lock);
        if (i >= q->n_jobs) return NULL;
        list_one(&q->jobs[i]);
        pthread_mutex_lock(&q->lock);
        q->jobs[i].done = 1;
        pthread_cond_broadcast(&q->listed);
        pthread_mutex_unlock(&q->lock);
    }
}

static PyObject *ns_time(time_t sec, long nsec) {
    /* as os.stat's st_*_ns: sec * 10**9 + nsec, exact for any sec */
    if (sec > -9000000000LL && sec < 9000000000LL)
        return PyLong_FromLongLong((long long)sec * 1000000000LL + nsec);
    PyObject *s = PyLong_FromLongLong((long long)sec), *g = PyLong_FromLong(1000000000L);
    PyObject *ns = PyLong_FromLong(nsec), *m = NULL, *r = NULL;
    if (s && g && ns && (m = PyNumber_Multiply(s, g))) r = PyNumber_Add(m, ns);
    Py_XDECREF(s); Py_XDECREF(g); Py_XDECREF(ns); Py_XDECREF(m);
    return r;
}

/* Folders being listed by worker threads while the calling thread decides the ones
 * already listed, in order (start_jobs, wait_job, stop_jobs). */
typedef struct {
    Queue q;
    PyObject *encoded;  /* the paths as bytes, alive while the workers read them */
    pthread_t tids[64];
    int started;
} Pool;

static Pool *start_jobs(PyObject *seq, int threads) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    Pool *pool = calloc(1, sizeof(Pool));
    Listing *jobs = calloc(n ? (size_t)n : 1, sizeof(Listing));
    PyObject *encoded = PyList_New(n);
    if (!pool || !jobs || !encoded) {
        free(pool);
        free(jobs);
        Py_XDECREF(encoded);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = PyUnicode_EncodeFSDefault(PySequence_Fast_GET_ITEM(seq, i));
        if (!b) { Py_DECREF(encoded); free(jobs); free(pool); return NULL; }
        PyList_SET_ITEM(encoded, i, b);
        jobs[i].path = PyBytes_AS_STRING(b);
    }
    pool->encoded = encoded;
    pool->q.jobs = jobs;
    pool->q.n_jobs = (size_t)n;
    pthread_mutex_init(&pool->q.lock, NULL);
    pthread_cond_init(&pool->q.listed, NULL);
    if (threads < 1) threads = 1;
    if (threads > 64) threads = 64;
    if ((Py_ssize_t)threads > n) threads = (int)n;
    for (int t = 0; t < threads; t++)
        if (pthread_create(&pool->tids[pool->started], NULL, worker, &pool->q) == 0) pool->started++;
    return pool;
}

/* Job i, listed: waits for the workers with the GIL released (or lists it here when no
 * worker thread could be started). */
static Listing *wait_job(Pool *pool, size_t i) {
    Queue *q = &pool->q;
    Listing *job = &q->jobs[i];
    if (pool->started) {  /* already listed: no need to let the GIL go */
        pthread_mutex_lock(&q->lock);
        int done = job->done;
        pthread_mutex_unlock(&q->lock);
        if (done) return job;
    }
    Py_BEGIN_ALLOW_THREADS
    if (!pool->started) {
        list_one(job);
    } else {
        pthread_mutex_lock(&q->lock);
        while (!job->done) pthread_cond_wait(&q->listed, &q->lock);
        pthread_mutex_unlock(&q->lock);
    }
    Py_END_ALLOW_THREADS
    return job;
}

/* Workers take no new job, finish the one in hand and are joined; everything freed. */
static void stop_jobs(Pool *pool) {
    if (!pool) return;
    Queue *q = &pool->q;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&q->lock);
    q->next = q->n_jobs;
    pthread_mutex_unlock(&q->lock);
    for (int t = 0; t < pool->started; t++) pthread_join(pool->tids[t], NULL);
    Py_END_ALLOW_THREADS
    for (size_t i = 0; i < q->n_jobs; i++) {
        free(q->jobs[i].names);
        free(q->jobs[i].sorted);
        free(q->jobs[i].entries);
    }
    free(q->jobs);
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->listed);
    Py_DECREF(pool->encoded);
    free(pool);
}

/* What decide_dirs decides with; see its docstring. */
typedef struct {
    PyObject *take_file, *take_folder, *source_index, *max_bytes_obj, *odd, *name_key;
    PyTypeObject *row_type;
    long long max_bytes;
    PyObject *too_large, *not_a_file, *slash;
} Rules;

enum { ROW = 0, SKIP = 1, DIR_ = 2, LINK_DIR = 3, LINK_FILE = 4, ROWS = 5 };

static int taken(PyObject *match, PyObject *rel) {
    if (match == Py_None) return 1;  /* every path taken: no call */
    PyObject *got = PyObject_CallOneArg(match, rel);
    if (!got) return -1;
    int truth = PyObject_IsTrue(got);
    Py_DECREF(got);
    return truth;
}

static PyObject *item4(int kind, PyObject *name, PyObject *path, PyObject *last) {
    /* steals name, path and last */
    PyObject *t = PyTuple_New(4);
    if (!t) { Py_DECREF(name); Py_DECREF(path); Py_DECREF(last); return NULL; }
    PyTuple_SET_ITEM(t, 0, PyLong_FromLong(kind));
    PyTuple_SET_ITEM(t, 1, name);
    PyTuple_SET_ITEM(t, 2, path);
    PyTuple_SET_ITEM(t, 3, last);
    return t;
}

static PyObject *file_row(const Rules *r, PyObject *path, PyObject *rel, const struct stat *st) {
    /* the fields as a plain tuple, then the row through tuple.__new__(row_type, fields):
     * the tuple type's own constructor sets whatever per-tuple state the running
     * CPython keeps (such as a cached hash), which a bare tp_alloc would leave zeroed */
    PyObject *fields = PyTuple_New(8);
    if (!fields) return NULL;
    PyObject *items[8] = {
        Py_NewRef(r->source_index), Py_NewRef(path), Py_NewRef(rel),
        PyLong_FromLongLong((long long)st->st_size),
        ns_time(st->st_mtim.tv_sec, st->st_mtim.tv_nsec),
        ns_time(st->st_ctim.tv_sec, st->st_ctim.tv_nsec),
        PyLong_FromUnsignedLongLong((unsigned long long)st->st_ino), Py_NewRef(r->max_bytes_obj)};
    int ok = 1;
    for (int k = 0; k < 8; k++) {
        if (!items[k]) ok = 0;
        PyTuple_SET_ITEM(fields, k, items[k]);  /* a NULL item is skipped by the dealloc */
    }
    if (!ok) { Py_DECREF(fields); return NULL; }
    PyObject *args = PyTuple_Pack(1, fields);
    Py_DECREF(fields);
    if (!args) return NULL;
    PyObject *row = PyTuple_Type.tp_new(r->row_type, args, NULL);
    Py_DECREF(args);
    if (!row) return NULL;
    /* str and int fields cannot form a cycle: untracked, no collection ever scans the row
     * (the collector untracks such exact tuples itself, but not a tuple subclass's) */
    if (PyObject_GC_IsTracked(row)) PyObject_GC_UnTrack(row);
    return row;
}

/* What `odd` returned, if it is None or an item it may make: a 4-tuple whose kind is
 * SKIP, LINK_DIR or LINK_FILE and whose name and path are str (the listing reads
 * them without further checks). Steals `got`; NULL with TypeError otherwise. */
static PyObject *checked_odd(PyObject *got) {
    if (!got || got == Py_None) return got;
    if (PyTuple_Check(got) && PyTuple_GET_SIZE(got) == 4 && PyLong_CheckExact(PyTuple_GET_ITEM(got, 0)) &&
        PyUnicode_Check(PyTuple_GET_ITEM(got, 1)) && PyUnicode_Check(PyTuple_GET_ITEM(got, 2))) {
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(got, 0));
        if (kind == SKIP || kind == LINK_DIR || kind == LINK_FILE) return got;
    }
    PyErr_Format(PyExc_TypeError, "odd() must return None or a (kind, name, path, last) tuple with kind "
                 "SKIP, LINK_DIR or LINK_FILE and str name and path, not %R", got);
    Py_DECREF(got);
    return NULL;
}

/* One entry's item: a new reference, Py_None when the patterns drop it, NULL on error. */
static PyObject *decide_entry(const Rules *r, PyObject *base, PyObject *prefix, const char *raw_name, const Entry *e) {
    PyObject *name = PyUnicode_DecodeFSDefault(raw_name);
    if (!name) return NULL;
    const struct stat *st = &e->st;
    if (e->err || S_ISLNK(st->st_mode)) {
        PyObject *got = PyObject_CallFunction(r->odd, "OiiOO", name, (int)e->d_type, e->err, base, prefix);
        Py_DECREF(name);
        return checked_odd(got);
    }
    PyObject *rel = PyUnicode_Concat(prefix, name);
    PyObject *path = rel ? PyUnicode_Concat(base, name) : NULL;
    PyObject *out = NULL;
    if (!path) goto fail;
    if (S_ISDIR(st->st_mode)) {
        PyObject *rel_slash = PyUnicode_Concat(rel, r->slash);
        int t = rel_slash ? taken(r->take_folder, rel_slash) : -1;
        Py_XDECREF(rel_slash);
        if (t < 0) goto fail;
        if (!t) { out = Py_NewRef(Py_None); goto fail; }
        PyObject *key = Py_BuildValue("(NN)", PyLong_FromUnsignedLongLong((unsigned long long)st->st_dev),
                                      PyLong_FromUnsignedLongLong((unsigned long long)st->st_ino));
        if (!key) goto fail;
        Py_DECREF(rel);
        return item4(DIR_, name, path, key);
    }
    int t = taken(r->take_file, rel);
    if (t < 0) goto fail;
    if (!t) { out = Py_NewRef(Py_None); goto fail; }
    if (!S_ISREG(st->st_mode)) {
        Py_DECREF(rel);
        return item4(SKIP, name, path, Py_NewRef(r->not_a_file));
    }
    if ((long long)st->st_size > r->max_bytes) {
        Py_DECREF(rel);
        return item4(SKIP, name, path, Py_NewRef(r->too_large));
    }
    PyObject *row = file_row(r, path, rel, st);
    if (!row) goto fail;
    Py_DECREF(rel);
    return item4(ROW, name, path, row);
fail:
    Py_DECREF(name);
    Py_XDECREF(rel);
    Py_XDECREF(path);
    return out;
}

static int non_ascii(const char *name) {
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        if (*c >= 0x80) return 1;
    return 0;
}

/* Consecutive ROW items become one (ROWS, None, None, [row, ...]); the subfolders to
 * list next are collected as (path, rel_prefix + name + "/"). Steals `items`. */
static PyObject *coalesced(PyObject *items, PyObject *prefix, PyObject *slash) {
    PyObject *out = PyList_New(0), *subs = PyList_New(0), *run = NULL;
    if (!out || !subs) goto fail;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(items); i++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        long kind = PyLong_AsLong(PyTuple_GET_ITEM(item, 0));
        if (kind == ROW) {
            if (!run) {
                run = PyList_New(0);
                PyObject *block = run ? Py_BuildValue("(lOOO)", (long)ROWS, Py_None, Py_None, run) : NULL;
                int bad = !block || PyList_Append(out, block) < 0;
                Py_XDECREF(block);
                Py_XDECREF(run);  /* the block holds it */
                if (bad) goto fail;
            }
            if (PyList_Append(run, PyTuple_GET_ITEM(item, 3)) < 0) goto fail;
            continue;
        }
        run = NULL;
        if (PyList_Append(out, item) < 0) goto fail;
        if (kind == DIR_) {
            PyObject *rel = PyUnicode_Concat(prefix, PyTuple_GET_ITEM(item, 1));
            PyObject *child = rel ? PyUnicode_Concat(rel, slash) : NULL;
            PyObject *sub = child ? PyTuple_Pack(2, PyTuple_GET_ITEM(item, 2), child) : NULL;
            int bad = !sub || PyList_Append(subs, sub) < 0;
            Py_XDECREF(rel); Py_XDECREF(child); Py_XDECREF(sub);
            if (bad) goto fail;
        }
    }
    Py_DECREF(items);
    PyObject *pair = PyTuple_Pack(2, out, subs);
    Py_DECREF(out);
    Py_DECREF(subs);
    return pair;
fail:
    Py_DECREF(items);
    Py_XDECREF(out);
    Py_XDECREF(subs);
    return NULL;
}

static PyObject *decided_listing(const Rules *r, const Listing *job, PyObject *base, PyObject *prefix) {
    if (job->err == ENOMEM) return PyErr_NoMemory();  /* as os.scandir raises it: not an unreadable folder */
    if (job->err) return PyLong_FromLong(job->err);
    PyObject *items = PyList_New(0);
    if (!items) return NULL;
    int resort = 0;
    for (size_t i = 0; i < job->n; i++) {
        const char *name = job->sorted[i].name;
        resort = resort || non_ascii(name);
        PyObject *item = decide_entry(r, base, prefix, name, &job->entries[i]);
        if (!item) { Py_DECREF(items); return NULL; }
        int bad = item != Py_None && PyList_Append(items, item) < 0;
        Py_DECREF(item);
        if (bad) { Py_DECREF(items); return NULL; }
    }
    if (resort) {  /* str order, as list_folder sorts: it differs from byte order for undecodable names */
        PyObject *sort = PyObject_GetAttrString(items, "sort"), *kw = Py_BuildValue("{sO}", "key", r->name_key);
        PyObject *empty = PyTuple_New(0);
        PyObject *done = sort && kw && empty ? PyObject_Call(sort, empty, kw) : NULL;
        Py_XDECREF(sort); Py_XDECREF(kw); Py_XDECREF(empty);
        if (!done) { Py_DECREF(items); return NULL; }
        Py_DECREF(done);
    }
    return coalesced(items, prefix, r->slash);
}

static PyObject *decide_dirs(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *bases, *prefixes;
    int threads;
    Rules r = {0};
    if (!PyArg_ParseTuple(args, "OOiOOOLO!OO:decide_dirs", &bases, &prefixes, &threads, &r.take_file,
                          &r.take_folder, &r.source_index, &r.max_bytes, &PyType_Type, &r.row_type, &r.odd,
                          &r.name_key))
        return NULL;
    if (!PyType_IsSubtype(r.row_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "row_type must be a tuple subclass");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(bases, "bases must be a sequence of str");
    PyObject *pre = seq ? PySequence_Fast(prefixes, "prefixes must be a sequence of str") : NULL;
    PyObject *result = NULL;
    Pool *pool = NULL;
    Py_ssize_t n = seq ? PySequence_Fast_GET_SIZE(seq) : 0;
    if (!pre) goto done;
    if (PySequence_Fast_GET_SIZE(pre) != n) {
        PyErr_SetString(PyExc_ValueError, "bases and prefixes differ in length");
        goto done;
    }
    r.max_bytes_obj = PyLong_FromLongLong(r.max_bytes);
    r.too_large = PyUnicode_FromString("too-large");
    r.not_a_file = PyUnicode_FromString("not-a-file");
    r.slash = PyUnicode_FromString("/");
    if (!r.max_bytes_obj || !r.too_large || !r.not_a_file || !r.slash) goto done;
    pool = start_jobs(seq, threads);
    result = pool ? PyList_New(n) : NULL;
    for (Py_ssize_t i = 0; result && i < n; i++) {
        PyObject *item = decided_listing(&r, wait_job(pool, (size_t)i), PySequence_Fast_GET_ITEM(seq, i),
                                         PySequence_Fast_GET_ITEM(pre, i));
        if (!item) { Py_CLEAR(result); break; }
        PyList_SET_ITEM(result, i, item);
    }
done:
    stop_jobs(pool);
    Py_XDECREF(r.max_bytes_obj);
    Py_XDECREF(r.too_large);
    Py_XDECREF(r.not_a_file);
    Py_XDECREF(r.slash);
    Py_XDECREF(pre);
    Py_XDECREF(seq);
    return result;
}

static PyMethodDef methods[] = {
    {"decide_dirs", decide_dirs, METH_VARARGS,
     "decide_dirs(bases, prefixes, threads, take_file, take_folder, source_index, max_bytes, row_type, odd, "
     "name_key) -> list (take_file None: every file taken): for each folder, the errno of listing it or (items, subfolders): its listing as "
     "dlm.rows.listing.list_folder makes it with each run of ROW items as one ROWS item, and "
     "(path, rel_prefix) of each DIR item; links and entries whose lstat failed are decided by "
     "odd(name, d_type, errno, base, rel_prefix) (None: dropped)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastlist", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fastlist(void) { return PyModule_Create(&module); }
