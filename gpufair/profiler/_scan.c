/*
 * gpufair.profiler._scan: one pass over a log buffer that splits lines, reads every number and
 * hashes each line's skeleton (the line with its numbers replaced by a shape marker).
 *
 * Why: the profiler groups lines by skeleton so that one regex match per *distinct* line shape
 * suffices; the numbers of all lines come from this scanner. Python's `re` alone tops out far
 * below the rate at which training logs are written. gpufair/profiler/scan.py holds a pure
 * Python twin with identical lines, tokens and values, and the same skeleton partition.
 *
 * Token: the leftmost maximal match of [0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?  (ASCII only).
 * Value: exactly Python's float(token): Clinger's fast path where it is provably exact, else
 * PyOS_string_to_double (the routine float() uses; correctly rounded, locale-independent).
 * Skeleton: FNV-1a 64 of the line with each token replaced by 0xFF <shape> (1 integer,
 * 2 fraction, 3 exponent) and each literal 0xFF byte by 0xFF 0x00, so the encoding stays
 * injective even on input that is not UTF-8.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <float.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Outputs are written in place through typed pointers into bytes objects. */
_Static_assert(offsetof(PyBytesObject, ob_sval) % 8 == 0, "bytes payload must be 8-aligned");

#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL
#define FNV(h, b) (((h) ^ (uint64_t)(b)) * FNV_PRIME)

#define IS_DIGIT(c) ((unsigned)((c) - '0') < 10u)

/* Clinger's fast path: m <= 2^53 is exact, 10^k for k <= 22 is exact, so one IEEE multiply or
 * divide rounds correctly. Only valid when doubles are evaluated in double precision. */
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0 && FLT_RADIX == 2 && DBL_MANT_DIG == 53
#define SCAN_FAST_PATH 1
#else
#define SCAN_FAST_PATH 0
#endif

#define MANT_LIMIT (1ULL << 53)
#define EXP_CAP 10000 /* larger exponents stop accumulating and go to the slow path */

static const double POW10[23] = {
    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
};

typedef struct {
    char small[128];
    char *big;           /* PyMem buffer for long tokens, reused */
    Py_ssize_t big_size;
} Scratch;

/* float(token) for a token the fast path declined. Returns -1.0 with an exception set on error
 * (a token is never negative, so -1.0 is unambiguous). */
static double
slow_value(Scratch *sc, const unsigned char *tok, Py_ssize_t len)
{
    char *buf;
    if (len < (Py_ssize_t)sizeof(sc->small)) {
        buf = sc->small;
    }
    else {
        if (len >= sc->big_size) {
            Py_ssize_t want = len + 1;
            char *nb = PyMem_Realloc(sc->big, (size_t)want);
            if (nb == NULL) {
                PyErr_NoMemory();
                return -1.0;
            }
            sc->big = nb;
            sc->big_size = want;
        }
        buf = sc->big;
    }
    memcpy(buf, tok, (size_t)len);
    buf[len] = '\0';
    /* overflow_exception NULL: overflow yields inf, as float() does */
    return PyOS_string_to_double(buf, NULL, NULL);
}

static PyObject *
scan(PyObject *Py_UNUSED(module), PyObject *arg)
{
    Py_buffer view;
    PyObject *ends_o = NULL, *skel_o = NULL, *offs_o = NULL, *vals_o = NULL, *result = NULL;
    Scratch sc;
    sc.big = NULL;
    sc.big_size = 0;

    if (PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "scan() needs a bytes-like object, not str");
        return NULL;
    }
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const unsigned char *s = (const unsigned char *)view.buf;
    const Py_ssize_t n = view.len;

    /* Upper bounds: lines <= newlines + 1; a token is always followed by a non-digit or the
     * end of its line, so tokens <= n/2 + 1. */
    Py_ssize_t newlines = 0;
    {
        const unsigned char *p = s, *e = s + n;
        while (p < e && (p = memchr(p, '\n', (size_t)(e - p))) != NULL) {
            newlines++;
            p++;
        }
    }
    const Py_ssize_t max_lines = newlines + 1;
    const Py_ssize_t max_tokens = n / 2 + 1;
    if (max_lines > PY_SSIZE_T_MAX / 8 - 1) {
        PyErr_NoMemory();
        goto done;
    }
    /* values grow on demand: typical logs have one token per ~8 bytes */
    Py_ssize_t cap = n / 8 + 16;
    if (cap > max_tokens) {
        cap = max_tokens;
    }

    ends_o = PyBytes_FromStringAndSize(NULL, max_lines * 8);
    skel_o = PyBytes_FromStringAndSize(NULL, max_lines * 8);
    offs_o = PyBytes_FromStringAndSize(NULL, (max_lines + 1) * 8);
    vals_o = PyBytes_FromStringAndSize(NULL, cap * 8);
    if (ends_o == NULL || skel_o == NULL || offs_o == NULL || vals_o == NULL) {
        goto done;
    }
    int64_t *ends = (int64_t *)PyBytes_AS_STRING(ends_o);
    uint64_t *skel = (uint64_t *)PyBytes_AS_STRING(skel_o);
    int64_t *offs = (int64_t *)PyBytes_AS_STRING(offs_o);
    double *vals = (double *)PyBytes_AS_STRING(vals_o);

    Py_ssize_t line = 0, ntok = 0, i = 0;
    uint64_t h = FNV_OFFSET;
    offs[0] = 0;

    while (i < n) {
        const unsigned char c = s[i];
        if (!IS_DIGIT(c)) {
            if (c == '\n') {
                ends[line] = (int64_t)i;
                skel[line] = h;
                line++;
                offs[line] = (int64_t)ntok;
                h = FNV_OFFSET;
            }
            else if (c == 0xFF) {
                h = FNV(FNV(h, 0xFF), 0x00);
            }
            else {
                h = FNV(h, c);
            }
            i++;
            continue;
        }

        /* a token starts at i */
        const Py_ssize_t start = i;
        uint64_t m = 0;
        int inexact = 0; /* the fast path cannot be exact */
        Py_ssize_t nfrac = 0;
        int64_t exp = 0;
        unsigned shape = 1;

        do {
            if (m <= MANT_LIMIT) { /* beyond it m only marks "too long" */
                m = m * 10 + (uint64_t)(s[i] - '0');
            }
            i++;
        } while (i < n && IS_DIGIT(s[i]));

        if (i + 1 < n && s[i] == '.' && IS_DIGIT(s[i + 1])) {
            shape = 2;
            i++;
            do {
                if (m <= MANT_LIMIT) { /* beyond it m only marks "too long" */
                    m = m * 10 + (uint64_t)(s[i] - '0');
                }
                nfrac++;
                i++;
            } while (i < n && IS_DIGIT(s[i]));
        }

        if (i < n && (s[i] | 0x20) == 'e') {
            Py_ssize_t k = i + 1;
            int neg = 0;
            if (k < n && (s[k] == '+' || s[k] == '-')) {
                neg = s[k] == '-';
                k++;
            }
            if (k < n && IS_DIGIT(s[k])) {
                shape = 3;
                do {
                    if (exp < EXP_CAP) {
                        exp = exp * 10 + (s[k] - '0');
                    }
                    else {
                        inexact = 1; /* clamped: only the slow path knows the value */
                    }
                    k++;
                } while (k < n && IS_DIGIT(s[k]));
                if (neg) {
                    exp = -exp;
                }
                i = k;
            }
        }
        if (m > MANT_LIMIT) {
            inexact = 1;
        }

        double v = 0.0;
        int fast = 0;
        if (!inexact) {
            if (m == 0) {
                v = 0.0;
                fast = 1;
            }
#if SCAN_FAST_PATH
            else {
                const int64_t e10 = exp - (int64_t)nfrac;
                if (e10 >= 0 && e10 <= 22) {
                    v = (double)m * POW10[e10];
                    fast = 1;
                }
                else if (e10 < 0 && e10 >= -22) {
                    v = (double)m / POW10[-e10];
                    fast = 1;
                }
            }
#endif
        }
        if (!fast) {
            v = slow_value(&sc, s + start, i - start);
            if (v == -1.0 && PyErr_Occurred()) {
                goto done;
            }
        }

        if (ntok == cap) {
            Py_ssize_t newcap = cap * 2;
            if (newcap > max_tokens) {
                newcap = max_tokens;
            }
            if (newcap <= ntok) { /* cannot happen: the bound is proven above */
                PyErr_SetString(PyExc_RuntimeError, "token bound exceeded");
                goto done;
            }
            if (_PyBytes_Resize(&vals_o, newcap * 8) < 0) {
                goto done; /* on failure vals_o is NULL and freed */
            }
            vals = (double *)PyBytes_AS_STRING(vals_o);
            cap = newcap;
        }
        vals[ntok++] = v;
        h = FNV(FNV(h, 0xFF), shape);
    }
    if (n > 0 && s[n - 1] != '\n') {
        ends[line] = (int64_t)n;
        skel[line] = h;
        line++;
        offs[line] = (int64_t)ntok;
    }

    if (_PyBytes_Resize(&ends_o, line * 8) < 0 || _PyBytes_Resize(&skel_o, line * 8) < 0 ||
        _PyBytes_Resize(&offs_o, (line + 1) * 8) < 0 || _PyBytes_Resize(&vals_o, ntok * 8) < 0) {
        goto done;
    }
    result = PyTuple_Pack(4, ends_o, skel_o, offs_o, vals_o);

done:
    Py_XDECREF(ends_o);
    Py_XDECREF(skel_o);
    Py_XDECREF(offs_o);
    Py_XDECREF(vals_o);
    PyMem_Free(sc.big);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef scan_methods[] = {
    {"scan", scan, METH_O,
     "scan(data) -> (line_ends, skeletons, token_offsets, values)\n\n"
     "Native int64/uint64/int64/float64 arrays as bytes; see gpufair.profiler.scan."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef scan_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "gpufair.profiler._scan",
    .m_doc = "Native line tokenizer for the log profiler (see gpufair.profiler.scan).",
    .m_size = -1,
    .m_methods = scan_methods,
};

PyMODINIT_FUNC
PyInit__scan(void)
{
    return PyModule_Create(&scan_module);
}
