/* The text kernels in C: the compiled twin of loopwatch/_kernels_py.py.

   Every function here gives the same result as its pure-Python twin, bit for bit (tests/test_kernels.py checks
   them against each other with hypothesis and on the corpus), so fingerprints and sketches stored by one are read
   by the other. Inputs are untrusted text (tool outputs, model replies): every read is bounded by the length of
   the buffer, nothing is written outside memory allocated here, and benchmarks/fuzz_kernels.py runs these
   functions under AddressSanitizer and UBSan.

   Where an input falls outside what the C code handles (a negative or huge hash, a size that is not a power of
   two), the pure-Python twin is called, so the answer (or the error) is the same. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* -- CRC-32 (zlib's: the IEEE polynomial, reflected) ------------------------------------------------------- */

static uint32_t crc_table[256];

static void crc_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[n] = c;
    }
}

/* A CRC is carried as its running register (inverted); crc_final turns it into zlib.crc32's value. */
#define CRC_START 0xFFFFFFFFu
#define CRC_BYTE(c, b) (crc_table[((c) ^ (uint8_t)(b)) & 0xFFu] ^ ((c) >> 8))
#define CRC_FINAL(c) ((c) ^ 0xFFFFFFFFu)

/* -- ASCII tables ------------------------------------------------------------------------------------------ */

static unsigned char ascii_lower[256];
static unsigned char byte_space[256];  /* bytes.split(): " \t\n\r\x0b\x0c" */
static unsigned char byte_blank[256];  /* lines_of drops " \t\r\x0b\x0c" */
static unsigned char byte_word[256];   /* the re module's \w for bytes: [A-Za-z0-9_] */

static void tables_init(void) {
    for (int c = 0; c < 256; c++) {
        ascii_lower[c] = (unsigned char)((c >= 'A' && c <= 'Z') ? c + 32 : c);
        byte_word[c] = (unsigned char)((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                                       c == '_');
    }
    const char *spaces = " \t\n\r\x0b\x0c";
    for (const char *s = spaces; *s; s++) byte_space[(unsigned char)*s] = 1;
    const char *blanks = " \t\r\x0b\x0c";
    for (const char *s = blanks; *s; s++) byte_blank[(unsigned char)*s] = 1;
}

/* -- the pure-Python twin, for inputs the C code leaves to it ----------------------------------------------- */

static PyObject *pure_module = NULL;

static PyObject *call_pure(const char *name, PyObject *args) {
    if (pure_module == NULL) {
        pure_module = PyImport_ImportModule("loopwatch._kernels_py");
        if (pure_module == NULL) return NULL;
    }
    PyObject *func = PyObject_GetAttrString(pure_module, name);
    if (func == NULL) return NULL;
    PyObject *result = PyObject_CallObject(func, args);
    Py_DECREF(func);
    return result;
}

/* -- error_lines ------------------------------------------------------------------------------------------- */

typedef struct {
    const char *word;
    Py_ssize_t len;
    int guarded; /* "error" and "fail": not right after a word "0 " or "no " */
} keyword;

#define KW(s, g) {s, (Py_ssize_t)(sizeof(s) - 1), g}
static const keyword keywords[] = {
    KW("error", 1),     KW("fail", 1),     KW("exception", 0), KW("traceback", 0), KW("fatal", 0),
    KW("denied", 0),    KW("not found", 0), KW("no such", 0),  KW("cannot", 0),    KW("can't", 0),
    KW("unable", 0),    KW("invalid", 0),  KW("refused", 0),   KW("timed out", 0), KW("timeout", 0),
    KW("abort", 0),     KW("panic", 0),    KW("missing", 0),   KW("unknown", 0),   KW("undefined", 0),
    KW("unsupported", 0), KW("not allowed", 0),
};
#define N_KEYWORDS ((int)(sizeof(keywords) / sizeof(keywords[0])))
static unsigned char keyword_pair[256][256]; /* their lowercase first two bytes: where a keyword may start */
/* Is "error"/"fail" at p excluded by the look-behinds (?<!\b0 ) and (?<!\bno ) (ASCII case-insensitive)? */
static int guarded_out(const unsigned char *s, Py_ssize_t p) {
    if (p >= 2 && s[p - 1] == ' ' && s[p - 2] == '0' && (p == 2 || !byte_word[s[p - 3]])) return 1;
    if (p >= 3 && s[p - 1] == ' ' && ascii_lower[s[p - 2]] == 'o' && ascii_lower[s[p - 3]] == 'n' &&
        (p == 3 || !byte_word[s[p - 4]]))
        return 1;
    return 0;
}

/* Does the line s[start:end] hold a keyword (the regular expression's alternation matching somewhere in it)?
   Each position costs one look-up of its two bytes; only where a keyword may start are the keywords compared. */
static int line_has_error(const unsigned char *s, Py_ssize_t start, Py_ssize_t end) {
    for (Py_ssize_t p = start; p + 1 < end; p++) {
        unsigned char first = ascii_lower[s[p]], second = ascii_lower[s[p + 1]];
        if (!keyword_pair[first][second]) continue;
        for (int k = 0; k < N_KEYWORDS; k++) {
            const keyword *kw = &keywords[k];
            if ((unsigned char)kw->word[0] != first || (unsigned char)kw->word[1] != second || kw->len > end - p)
                continue;
            Py_ssize_t i = 2;
            while (i < kw->len && ascii_lower[s[p + i]] == (unsigned char)kw->word[i]) i++;
            if (i == kw->len && !(kw->guarded && guarded_out(s, p))) return 1;
        }
    }
    return 0;
}

PyDoc_STRVAR(error_lines_doc, "error_lines(data: bytes) -> list[bytes]\n--\n\n"
                              "The lines of ``data`` that say something went wrong (see loopwatch._kernels_py).");

static PyObject *error_lines(PyObject *self, PyObject *arg) {
    if (!PyBytes_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "error_lines() expects bytes, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(arg);
    Py_ssize_t n = PyBytes_GET_SIZE(arg);
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    Py_ssize_t start = 0;
    for (;;) {
        const unsigned char *nl = memchr(s + start, '\n', (size_t)(n - start));
        Py_ssize_t end = nl ? (Py_ssize_t)(nl - s) : n;
        if (line_has_error(s, start, end)) {
            PyObject *line = PyBytes_FromStringAndSize((const char *)s + start, end - start);
            if (line == NULL || PyList_Append(out, line) < 0) {
                Py_XDECREF(line);
                Py_DECREF(out);
                return NULL;
            }
            Py_DECREF(line);
        }
        if (nl == NULL) break;
        start = end + 1;
    }
    return out;
}

/* -- word_hashes ------------------------------------------------------------------------------------------- */

PyDoc_STRVAR(word_hashes_doc, "word_hashes(data: bytes) -> list[int]\n--\n\n"
                              "CRC-32s of the ASCII-lowercased, whitespace-separated words of ``data``, in order.");

static PyObject *word_hashes(PyObject *self, PyObject *arg) {
    if (!PyBytes_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "word_hashes() expects bytes, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(arg);
    Py_ssize_t n = PyBytes_GET_SIZE(arg);
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    Py_ssize_t p = 0;
    while (p < n) {
        while (p < n && byte_space[s[p]]) p++;
        if (p >= n) break;
        uint32_t c = CRC_START;
        while (p < n && !byte_space[s[p]]) {
            c = CRC_BYTE(c, ascii_lower[s[p]]);
            p++;
        }
        PyObject *value = PyLong_FromUnsignedLong(CRC_FINAL(c));
        if (value == NULL || PyList_Append(out, value) < 0) {
            Py_XDECREF(value);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(value);
    }
    return out;
}

/* -- line_hashes ------------------------------------------------------------------------------------------- */

#define LINE_BYTES 2000

static int set_add_crc(PyObject *set, uint32_t crc) {
    PyObject *value = PyLong_FromUnsignedLong(crc);
    if (value == NULL) return -1;
    int rc = PySet_Add(set, value);
    Py_DECREF(value);
    return rc;
}

PyDoc_STRVAR(line_hashes_doc,
             "line_hashes(data: bytes) -> frozenset[int]\n--\n\n"
             "CRC-32s of the distinct lines of the first 2,000 bytes of ``data``, ASCII-lowercased and without "
             "blanks, the empty line's CRC (0) left out.");

static PyObject *line_hashes(PyObject *self, PyObject *arg) {
    if (!PyBytes_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "line_hashes() expects bytes, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(arg);
    Py_ssize_t n = PyBytes_GET_SIZE(arg);
    if (n > LINE_BYTES) n = LINE_BYTES;
    PyObject *out = PyFrozenSet_New(NULL);
    if (out == NULL) return NULL;
    uint32_t c = CRC_START;
    for (Py_ssize_t p = 0; p <= n; p++) {
        if (p == n || s[p] == '\n') {
            uint32_t crc = CRC_FINAL(c);
            if (crc != 0 && set_add_crc(out, crc) < 0) {
                Py_DECREF(out);
                return NULL;
            }
            c = CRC_START;
        } else if (!byte_blank[s[p]]) {
            c = CRC_BYTE(c, ascii_lower[s[p]]);
        }
    }
    return out;
}

/* -- alnum_word_hashes ------------------------------------------------------------------------------------- */

static uint32_t crc_code_point(uint32_t c, Py_UCS4 ch) {
    /* the UTF-8 bytes of a code point (never a surrogate here: surrogates are not letters or digits) */
    if (ch < 0x80) return CRC_BYTE(c, ch);
    if (ch < 0x800) {
        c = CRC_BYTE(c, 0xC0 | (ch >> 6));
        return CRC_BYTE(c, 0x80 | (ch & 0x3F));
    }
    if (ch < 0x10000) {
        c = CRC_BYTE(c, 0xE0 | (ch >> 12));
        c = CRC_BYTE(c, 0x80 | ((ch >> 6) & 0x3F));
        return CRC_BYTE(c, 0x80 | (ch & 0x3F));
    }
    c = CRC_BYTE(c, 0xF0 | (ch >> 18));
    c = CRC_BYTE(c, 0x80 | ((ch >> 12) & 0x3F));
    c = CRC_BYTE(c, 0x80 | ((ch >> 6) & 0x3F));
    return CRC_BYTE(c, 0x80 | (ch & 0x3F));
}

PyDoc_STRVAR(alnum_word_hashes_doc,
             "alnum_word_hashes(text: str, limit: int) -> frozenset[int]\n--\n\n"
             "CRC-32s of the first ``limit`` distinct words (runs of letters and digits) of ``text.lower()``.");

static PyObject *alnum_word_hashes(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "alnum_word_hashes() takes exactly 2 arguments");
        return NULL;
    }
    if (!PyUnicode_Check(args[0])) {
        PyErr_Format(PyExc_TypeError, "alnum_word_hashes() expects str, not %.100s", Py_TYPE(args[0])->tp_name);
        return NULL;
    }
    Py_ssize_t limit = PyLong_AsSsize_t(args[1]);
    if (limit == -1 && PyErr_Occurred()) return NULL;
    if (limit < 0) {
        PyErr_SetString(PyExc_ValueError, "limit must be >= 0");
        return NULL;
    }
    PyObject *text = args[0];
    int ascii = PyUnicode_IS_ASCII(text);
    PyObject *lowered = NULL;
    if (!ascii) { /* str.lower() itself: Unicode's full case mapping (final sigma, dotted I...) */
        lowered = PyObject_CallMethod(text, "lower", NULL);
        if (lowered == NULL) return NULL;
        text = lowered;
    }
    PyObject *seen = PySet_New(NULL);
    if (seen == NULL) {
        Py_XDECREF(lowered);
        return NULL;
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    Py_ssize_t p = 0;
    while (p < n && PySet_GET_SIZE(seen) < limit) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, p);
        if (!Py_UNICODE_ISALNUM(ch)) {
            p++;
            continue;
        }
        uint32_t c = CRC_START;
        while (p < n) {
            ch = PyUnicode_READ(kind, data, p);
            if (!Py_UNICODE_ISALNUM(ch)) break;
            c = ascii ? CRC_BYTE(c, ascii_lower[ch]) : crc_code_point(c, ch);
            p++;
        }
        if (set_add_crc(seen, CRC_FINAL(c)) < 0) {
            Py_DECREF(seen);
            Py_XDECREF(lowered);
            return NULL;
        }
    }
    Py_XDECREF(lowered);
    PyObject *out = PyFrozenSet_New(seen);
    Py_DECREF(seen);
    return out;
}

/* -- fold, bottom_k, sketch_of ----------------------------------------------------------------------------- */

#define MAX_BITS 4096
#define MAX_WORDS (MAX_BITS / 64)

/* bits a power of two from 64 to MAX_BITS: what the C code folds (the twin takes the rest) */
static int bits_supported(Py_ssize_t bits) { return bits >= 64 && bits <= MAX_BITS && (bits & (bits - 1)) == 0; }

/* The items of an iterable as 64-bit values: the low 64 bits of each int (``exact``: 0 unless every item is
   an int from 0 to 2**64 - 1). Returns the count, -1 on a Python error, -2 when an item is not an int (the
   twin decides). ``*values`` is malloc'ed (free it). */
static Py_ssize_t collect(PyObject *seq, int exact, uint64_t **values) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    *values = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)(n ? n : 1));
    if (*values == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = items[i];
        if (!PyLong_CheckExact(item) && !PyBool_Check(item)) return -2;
        if (exact) {
            unsigned long long v = PyLong_AsUnsignedLongLong(item);
            if (v == (unsigned long long)-1 && PyErr_Occurred()) {
                PyErr_Clear();
                return -2;
            }
            (*values)[i] = (uint64_t)v;
        } else {
            unsigned long long v = PyLong_AsUnsignedLongLongMask(item);
            if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
            (*values)[i] = (uint64_t)v;
        }
    }
    return n;
}

static PyObject *words_to_int(const uint64_t *words, Py_ssize_t nwords) {
    unsigned char buf[MAX_BITS / 8];
    for (Py_ssize_t w = 0; w < nwords; w++)
        for (int b = 0; b < 8; b++) buf[w * 8 + b] = (unsigned char)(words[w] >> (8 * b));
#if PY_VERSION_HEX >= 0x030D0000
    return PyLong_FromUnsignedNativeBytes(buf, (size_t)(nwords * 8),
                                          Py_ASNATIVEBYTES_LITTLE_ENDIAN | Py_ASNATIVEBYTES_UNSIGNED_BUFFER);
#else
    return _PyLong_FromByteArray(buf, (size_t)(nwords * 8), 1, 0);
#endif
}

static const char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* binascii.b2a_base64(value.to_bytes(nwords * 8, "big"), newline=False) as str */
static PyObject *words_to_text(const uint64_t *words, Py_ssize_t nwords) {
    unsigned char raw[MAX_BITS / 8];
    char text[(MAX_BITS / 8 + 2) / 3 * 4];
    Py_ssize_t nbytes = nwords * 8;
    for (Py_ssize_t i = 0; i < nbytes; i++) {
        Py_ssize_t from_low = nbytes - 1 - i; /* big-endian: the first byte is the highest */
        raw[i] = (unsigned char)(words[from_low / 8] >> (8 * (from_low % 8)));
    }
    Py_ssize_t o = 0, i = 0;
    for (; i + 2 < nbytes; i += 3) {
        uint32_t v = ((uint32_t)raw[i] << 16) | ((uint32_t)raw[i + 1] << 8) | raw[i + 2];
        text[o++] = b64_alphabet[(v >> 18) & 63];
        text[o++] = b64_alphabet[(v >> 12) & 63];
        text[o++] = b64_alphabet[(v >> 6) & 63];
        text[o++] = b64_alphabet[v & 63];
    }
    if (nbytes - i == 1) {
        uint32_t v = (uint32_t)raw[i] << 16;
        text[o++] = b64_alphabet[(v >> 18) & 63];
        text[o++] = b64_alphabet[(v >> 12) & 63];
        text[o++] = '=';
        text[o++] = '=';
    } else if (nbytes - i == 2) {
        uint32_t v = ((uint32_t)raw[i] << 16) | ((uint32_t)raw[i + 1] << 8);
        text[o++] = b64_alphabet[(v >> 18) & 63];
        text[o++] = b64_alphabet[(v >> 12) & 63];
        text[o++] = b64_alphabet[(v >> 6) & 63];
        text[o++] = '=';
    }
    return PyUnicode_FromStringAndSize(text, o);
}

static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The k smallest distinct values folded into words[0:nwords]. */
static void fold_bottom_k(uint64_t *values, Py_ssize_t n, Py_ssize_t k, uint64_t *words, Py_ssize_t nwords) {
    uint64_t mask = (uint64_t)nwords * 64 - 1;
    memset(words, 0, sizeof(uint64_t) * (size_t)nwords);
    qsort(values, (size_t)n, sizeof(uint64_t), compare_u64);
    Py_ssize_t taken = 0;
    for (Py_ssize_t i = 0; i < n && taken < k; i++) {
        if (i > 0 && values[i] == values[i - 1]) continue;
        uint64_t bit = values[i] & mask;
        words[bit >> 6] |= (uint64_t)1 << (bit & 63);
        taken++;
    }
}

/* parse (hashes, [k,] bits); returns the hashes as a list or tuple (new reference) or NULL */
static PyObject *parse_sizes(PyObject *const *args, Py_ssize_t nargs, int with_k, const char *name, Py_ssize_t *k,
                             Py_ssize_t *bits) {
    Py_ssize_t want = with_k ? 3 : 2;
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s() takes exactly %zd arguments", name, want);
        return NULL;
    }
    /* a size that is not an int, or too large for C, is left to the twin (k = -1 and bits = 0 send it there) */
    if (with_k) {
        *k = PyLong_Check(args[1]) ? PyLong_AsSsize_t(args[1]) : -1;
        if (*k == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            *k = -1;
        }
    }
    *bits = PyLong_Check(args[want - 1]) ? PyLong_AsSsize_t(args[want - 1]) : 0;
    if (*bits == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        *bits = 0;
    }
    return PySequence_Fast(args[0], "hashes must be iterable");
}

static PyObject *pure_with(const char *name, PyObject *seq, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *call_args = PyTuple_New(nargs);
    if (call_args == NULL) return NULL;
    Py_INCREF(seq);
    PyTuple_SET_ITEM(call_args, 0, seq);
    for (Py_ssize_t i = 1; i < nargs; i++) {
        Py_INCREF(args[i]);
        PyTuple_SET_ITEM(call_args, i, args[i]);
    }
    PyObject *result = call_pure(name, call_args);
    Py_DECREF(call_args);
    return result;
}

enum { AS_INT, AS_TEXT };

static PyObject *sketch_kernel(PyObject *const *args, Py_ssize_t nargs, int with_k, int output, const char *name) {
    Py_ssize_t k = PY_SSIZE_T_MAX, bits = 0;
    PyObject *seq = parse_sizes(args, nargs, with_k, name, &k, &bits);
    if (seq == NULL) return NULL;
    if (!bits_supported(bits) || k < 0) {
        PyObject *result = pure_with(name, seq, args, nargs);
        Py_DECREF(seq);
        return result;
    }
    uint64_t *values = NULL;
    Py_ssize_t n = collect(seq, with_k, &values);
    if (n == -2) {
        free(values);
        PyObject *result = pure_with(name, seq, args, nargs);
        Py_DECREF(seq);
        return result;
    }
    Py_DECREF(seq);
    if (n < 0) {
        free(values);
        return NULL;
    }
    uint64_t words[MAX_WORDS];
    Py_ssize_t nwords = bits / 64;
    if (with_k) {
        fold_bottom_k(values, n, k, words, nwords);
    } else {
        uint64_t mask = (uint64_t)bits - 1;
        memset(words, 0, sizeof(words));
        for (Py_ssize_t i = 0; i < n; i++) {
            uint64_t bit = values[i] & mask;
            words[bit >> 6] |= (uint64_t)1 << (bit & 63);
        }
    }
    free(values);
    return output == AS_TEXT ? words_to_text(words, nwords) : words_to_int(words, nwords);
}

PyDoc_STRVAR(fold_doc, "fold(hashes: Iterable[int], bits: int) -> int\n--\n\n"
                       "The set of ``hashes`` folded into ``bits`` bits, as an integer.");

static PyObject *fold(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return sketch_kernel(args, nargs, 0, AS_INT, "fold");
}

PyDoc_STRVAR(bottom_k_doc, "bottom_k(hashes: Iterable[int], k: int, bits: int) -> int\n--\n\n"
                           "The k smallest distinct ``hashes`` folded into ``bits`` bits.");

static PyObject *bottom_k(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return sketch_kernel(args, nargs, 1, AS_INT, "bottom_k");
}

PyDoc_STRVAR(sketch_of_doc, "sketch_of(hashes: Iterable[int], k: int, bits: int) -> str\n--\n\n"
                            "bottom_k(hashes, k, bits) as base64 text of its bits // 8 big-endian bytes.");

static PyObject *sketch_of(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return sketch_kernel(args, nargs, 1, AS_TEXT, "sketch_of");
}

/* -- module ------------------------------------------------------------------------------------------------ */

static PyMethodDef methods[] = {
    {"error_lines", (PyCFunction)error_lines, METH_O, error_lines_doc},
    {"word_hashes", (PyCFunction)word_hashes, METH_O, word_hashes_doc},
    {"line_hashes", (PyCFunction)line_hashes, METH_O, line_hashes_doc},
    {"alnum_word_hashes", (PyCFunction)(void (*)(void))alnum_word_hashes, METH_FASTCALL, alnum_word_hashes_doc},
    {"fold", (PyCFunction)(void (*)(void))fold, METH_FASTCALL, fold_doc},
    {"bottom_k", (PyCFunction)(void (*)(void))bottom_k, METH_FASTCALL, bottom_k_doc},
    {"sketch_of", (PyCFunction)(void (*)(void))sketch_of, METH_FASTCALL, sketch_of_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "loopwatch._kernels_c",
    "The text kernels compiled (see loopwatch._kernels_py for their pure-Python twins).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernels_c(void) {
    crc_init();
    tables_init();
    for (int k = 0; k < N_KEYWORDS; k++)
        keyword_pair[(unsigned char)keywords[k].word[0]][(unsigned char)keywords[k].word[1]] = 1;
    return PyModule_Create(&module);
}
