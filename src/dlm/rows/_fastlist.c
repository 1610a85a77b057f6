/* Folder listings for the source walk, with the system calls on native threads.
 *
 * list_dirs(folders, threads) lists each folder (readdir), sorts its names by their
 * bytes, and lstat-s every entry (fstatat relative to the open folder), on `threads`
 * POSIX threads with the GIL released. Python objects are built only afterwards, on
 * the calling thread. Deciding what the entries mean (patterns, caps, links) stays in
 * Python (dlm.rows.listing); this module only makes the calls a Python loop makes one
 * at a time, which on a warm tree are most of a walk's time.
 *
 * Result, one item per folder, in order: an int (the errno of opening or reading the
 * folder) or a list of entries, each a tuple
 *     (name, d_type, errno, mode, size, mtime_ns, ctime_ns, ino, dev)
 * `name` is decoded as os.scandir decodes it (the file system encoding,
 * surrogateescape). `errno` is that of the entry's lstat (0: the stat fields hold);
 * `d_type` is readdir's (DT_UNKNOWN = 0 where the file system gives none).
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
} Listing;

typedef struct {
    Listing *jobs;
    size_t n_jobs;
    size_t next;
    pthread_mutex_t lock;
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
        size_t i = q->next++;
        pthread_mutex_unlock(&q->lock);
        if (i >= q->n_jobs) return NULL;
        list_one(&q->jobs[i]);
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

static PyObject *entry_tuple(const char *name, const Entry *e) {
    PyObject *py_name = PyUnicode_DecodeFSDefault(name);
    if (!py_name) return NULL;
    if (e->err)
        return Py_BuildValue("(NiiOOOOOO)", py_name, (int)e->d_type, e->err, Py_None, Py_None,
                             Py_None, Py_None, Py_None, Py_None);
    const struct stat *st = &e->st;
    return Py_BuildValue("(NiilNNNNN)", py_name, (int)e->d_type, 0, (long)st->st_mode,
                         PyLong_FromLongLong((long long)st->st_size),
                         ns_time(st->st_mtim.tv_sec, st->st_mtim.tv_nsec),
                         ns_time(st->st_ctim.tv_sec, st->st_ctim.tv_nsec),
                         PyLong_FromUnsignedLongLong((unsigned long long)st->st_ino),
                         PyLong_FromUnsignedLongLong((unsigned long long)st->st_dev));
}

static PyObject *listing_object(const Listing *job) {
    if (job->err) return PyLong_FromLong(job->err);
    PyObject *out = PyList_New((Py_ssize_t)job->n);
    if (!out) return NULL;
    for (size_t i = 0; i < job->n; i++) {
        PyObject *t = entry_tuple(job->sorted[i].name, &job->entries[i]);
        if (!t) { Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, (Py_ssize_t)i, t);
    }
    return out;
}

static PyObject *list_dirs(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *folders;
    int threads;
    if (!PyArg_ParseTuple(args, "Oi:list_dirs", &folders, &threads)) return NULL;
    PyObject *seq = PySequence_Fast(folders, "folders must be a sequence of str");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *encoded = PyList_New(n);
    Listing *jobs = calloc(n ? (size_t)n : 1, sizeof(Listing));
    PyObject *result = NULL;
    if (!encoded || !jobs) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = PyUnicode_EncodeFSDefault(PySequence_Fast_GET_ITEM(seq, i));
        if (!b) goto done;
        PyList_SET_ITEM(encoded, i, b);
        jobs[i].path = PyBytes_AS_STRING(b);
    }
    Queue q = {jobs, (size_t)n, 0, PTHREAD_MUTEX_INITIALIZER};
    if (threads < 1) threads = 1;
    if (threads > 64) threads = 64;
    if ((Py_ssize_t)threads > n) threads = n > 0 ? (int)n : 1;
    Py_BEGIN_ALLOW_THREADS
    pthread_t tids[64];
    int started = 0;
    for (int t = 1; t < threads; t++)
        if (pthread_create(&tids[started], NULL, worker, &q) == 0) started++;
    worker(&q);
    for (int t = 0; t < started; t++) pthread_join(tids[t], NULL);
    Py_END_ALLOW_THREADS
    result = PyList_New(n);
    if (!result) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = listing_object(&jobs[i]);
        if (!item) { Py_CLEAR(result); goto done; }
        PyList_SET_ITEM(result, i, item);
    }
done:
    if (jobs) {
        for (Py_ssize_t i = 0; i < n; i++) {
            free(jobs[i].names);
            free(jobs[i].sorted);
            free(jobs[i].entries);
        }
        free(jobs);
    }
    Py_XDECREF(encoded);
    Py_DECREF(seq);
    return result;
}

static PyMethodDef methods[] = {
    {"list_dirs", list_dirs, METH_VARARGS,
     "list_dirs(folders, threads) -> list: each folder's sorted entries with their lstat, "
     "or the errno of listing it (see the module source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastlist", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fastlist(void) { return PyModule_Create(&module); }
