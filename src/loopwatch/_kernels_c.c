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
static unsigned char byte_alnum[256];  /* [A-Za-z0-9] */

static void tables_init(void) {
    for (int c = 0; c < 256; c++) {
        ascii_lower[c] = (unsigned char)((c >= 'A' && c <= 'Z') ? c + 32 : c);
        byte_word[c] = (unsigned char)((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                                       c == '_');
        byte_alnum[c] = (unsigned char)(byte_word[c] && c != '_');
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

/* Is the keyword at s[p:after] joined into a name: right after '-', '_', '.' or '/', or right before '-', '_' or
   '=' (a flag, an identifier, a path, a setting: the look-around (?<![-_./]) ... (?![-_=]))? */
static int joined(const unsigned char *s, Py_ssize_t p, Py_ssize_t after, Py_ssize_t end) {
    if (p > 0) {
        unsigned char before = s[p - 1];
        if (before == '-' || before == '_' || before == '.' || before == '/') return 1;
    }
    if (after < end) {
        unsigned char next = s[after];
        if (next == '-' || next == '_' || next == '=') return 1;
    }
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
            if (i == kw->len && !(kw->guarded && guarded_out(s, p)) && !joined(s, p, p + kw->len, end)) return 1;
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

/* str.isalnum() of one character (the re module's [^\W_]), without a call for ASCII */
#define ALNUM(ch) ((ch) < 128 ? byte_alnum[(ch)] : Py_UNICODE_ISALNUM(ch))

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
        if (!ALNUM(ch)) {
            p++;
            continue;
        }
        uint32_t c = CRC_START;
        while (p < n) {
            ch = PyUnicode_READ(kind, data, p);
            if (!ALNUM(ch)) break;
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

#define SMALL_K 128

/* The k smallest distinct values folded into words[0:nwords]. For a small k they are kept sorted as they come (most
   values are larger than the k-th smallest so far and cost one comparison); otherwise all are sorted. */
static void fold_bottom_k(uint64_t *values, Py_ssize_t n, Py_ssize_t k, uint64_t *words, Py_ssize_t nwords) {
    uint64_t mask = (uint64_t)nwords * 64 - 1;
    memset(words, 0, sizeof(uint64_t) * (size_t)nwords);
    Py_ssize_t taken = 0;
    if (k > 0 && k <= SMALL_K && k < n) {
        uint64_t best[SMALL_K];
        for (Py_ssize_t i = 0; i < n; i++) {
            uint64_t v = values[i];
            if (taken == k && v >= best[k - 1]) continue;
            Py_ssize_t lo = 0, hi = taken; /* the first place whose value is >= v */
            while (lo < hi) {
                Py_ssize_t mid = (lo + hi) / 2;
                if (best[mid] < v)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            if (lo < taken && best[lo] == v) continue;
            Py_ssize_t last = taken < k ? taken : k - 1;
            memmove(best + lo + 1, best + lo, sizeof(uint64_t) * (size_t)(last - lo));
            best[lo] = v;
            if (taken < k) taken++;
        }
        for (Py_ssize_t i = 0; i < taken; i++) words[(best[i] & mask) >> 6] |= (uint64_t)1 << (best[i] & mask & 63);
        return;
    }
    qsort(values, (size_t)n, sizeof(uint64_t), compare_u64);
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

/* -- masked_bytes: loopwatch.masking's volatile parts removed -------------------------------------------------

   The same scan as masking.volatile_spans (see its docstrings for what each kind is), written out: each regular
   expression it tries at an anchor is a loop here, with the regular expression's backtracking worked out by hand
   (the comments give the expression). Only the union of the spans matters for the masked text, so spans are
   collected, sorted and cut out; their kinds are not kept. */

#define IS_DIGIT(c) ((c) >= '0' && (c) <= '9')
#define IS_LETTER(c) (((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z'))
#define IS_ALNUM(c) (IS_DIGIT(c) || IS_LETTER(c))
#define IS_HEX(c) (IS_DIGIT(c) || ((c) >= 'a' && (c) <= 'f') || ((c) >= 'A' && (c) <= 'F'))
#define IS_LOWER(c) ((c) >= 'a' && (c) <= 'z')
#define IS_UNIT_START(c) ((c) == 's' || (c) == 'm' || (c) == 'u' || (c) == 'n' || (c) == 0xC2)
/* the re module's \s for bytes: " \t\n\r\x0b\x0c" */
#define IS_RE_SPACE(c) ((c) == ' ' || ((c) >= '\t' && (c) <= '\r'))

typedef struct {
    Py_ssize_t *v; /* start, end pairs */
    Py_ssize_t n, cap;
} span_list;

static int add_span(span_list *spans, Py_ssize_t start, Py_ssize_t end) {
    if (spans->n + 2 > spans->cap) {
        Py_ssize_t cap = spans->cap ? spans->cap * 2 : 64;
        Py_ssize_t *grown = (Py_ssize_t *)realloc(spans->v, sizeof(Py_ssize_t) * (size_t)cap);
        if (grown == NULL) return -1;
        spans->v = grown;
        spans->cap = cap;
    }
    spans->v[spans->n++] = start;
    spans->v[spans->n++] = end;
    return 0;
}

/* bytes.find(needle, start) */
static Py_ssize_t find_bytes(const unsigned char *s, Py_ssize_t n, Py_ssize_t from, const char *needle) {
    Py_ssize_t m = (Py_ssize_t)strlen(needle);
    for (Py_ssize_t p = from; p + m <= n;) {
        const unsigned char *hit = memchr(s + p, (unsigned char)needle[0], (size_t)(n - m + 1 - p));
        if (hit == NULL) return -1;
        p = (Py_ssize_t)(hit - s);
        if (memcmp(s + p, needle, (size_t)m) == 0) return p;
        p++;
    }
    return -1;
}

/* masking._word_edge: no letter or digit right before start or at end */
static int word_edge(const unsigned char *s, Py_ssize_t n, Py_ssize_t start, Py_ssize_t end) {
    return (start == 0 || !IS_ALNUM(s[start - 1])) && (end >= n || !IS_ALNUM(s[end]));
}

/* the shape "0:00:00" (a digit, ":", two digits, ":", two digits) from ``from`` on */
static Py_ssize_t find_clock(const unsigned char *s, Py_ssize_t n, Py_ssize_t from) {
    for (Py_ssize_t p = from; p + 7 <= n; p++) {
        const unsigned char *colon = memchr(s + p + 1, ':', (size_t)(n - 6 - p));
        if (colon == NULL) return -1;
        p = (Py_ssize_t)(colon - s) - 1;
        if (IS_DIGIT(s[p]) && IS_DIGIT(s[p + 2]) && IS_DIGIT(s[p + 3]) && s[p + 4] == ':' && IS_DIGIT(s[p + 5]) &&
            IS_DIGIT(s[p + 6]))
            return p;
    }
    return -1;
}

/* \d{4}-\d\d-\d\d[T ] at s[0:11] */
static int date_at(const unsigned char *s) {
    return IS_DIGIT(s[0]) && IS_DIGIT(s[1]) && IS_DIGIT(s[2]) && IS_DIGIT(s[3]) && s[4] == '-' && IS_DIGIT(s[5]) &&
           IS_DIGIT(s[6]) && s[7] == '-' && IS_DIGIT(s[8]) && IS_DIGIT(s[9]) && (s[10] == 'T' || s[10] == ' ');
}

static int mask_times(const unsigned char *s, Py_ssize_t n, span_list *spans) {
    Py_ssize_t at = find_clock(s, n, 0);
    while (at >= 0) {
        Py_ssize_t start = (at > 0 && IS_DIGIT(s[at - 1])) ? at - 1 : at;
        if (start >= 11 && date_at(s + start - 11)) start -= 11;
        /* _TIME from start: [date] \d?\d:\d\d:\d\d, then (?:[.,]\d+)? and (?:Z|[+-]\d\d:?\d\d)? */
        Py_ssize_t p = at + 7;
        if (p + 1 < n && (s[p] == '.' || s[p] == ',') && IS_DIGIT(s[p + 1])) {
            p += 2;
            while (p < n && IS_DIGIT(s[p])) p++;
        }
        if (p < n && s[p] == 'Z') {
            p++;
        } else if (p + 2 < n && (s[p] == '+' || s[p] == '-') && IS_DIGIT(s[p + 1]) && IS_DIGIT(s[p + 2])) {
            if (p + 5 < n && s[p + 3] == ':' && IS_DIGIT(s[p + 4]) && IS_DIGIT(s[p + 5]))
                p += 6;
            else if (p + 4 < n && IS_DIGIT(s[p + 3]) && IS_DIGIT(s[p + 4]))
                p += 5;
        }
        if (word_edge(s, n, start, p) && add_span(spans, start, p) < 0) return -1;
        at = find_clock(s, n, p);
    }
    return 0;
}

/* the shape "0L" (gap 0) or "0_L" (gap 1): a digit, a space when gap is 1, then a byte a unit starts with */
static Py_ssize_t find_duration(const unsigned char *s, Py_ssize_t n, Py_ssize_t from, int gap) {
    for (Py_ssize_t p = from; p + 2 + gap <= n; p++) {
        if (IS_DIGIT(s[p]) && (!gap || s[p + 1] == ' ') && IS_UNIT_START(s[p + 1 + gap])) return p;
    }
    return -1;
}

static const char *const time_units[] = {"ns",  "us",   "\xc2\xb5s", "ms",     "s",      "sec",     "secs",
                                         "second", "seconds", "min", "mins", "minute", "minutes"};

static int is_time_unit(const unsigned char *s, Py_ssize_t len) {
    for (size_t i = 0; i < sizeof(time_units) / sizeof(time_units[0]); i++)
        if ((Py_ssize_t)strlen(time_units[i]) == len && memcmp(s, time_units[i], (size_t)len) == 0) return 1;
    return 0;
}

static int mask_durations(const unsigned char *s, Py_ssize_t n, span_list *spans) {
    for (int gap = 0; gap <= 1; gap++) {
        Py_ssize_t at = find_duration(s, n, 0, gap);
        while (at >= 0) {
            Py_ssize_t unit_at = at + 1 + gap, end = unit_at + 1;
            unsigned char first = s[unit_at];
            if (unit_at + 1 < n && IS_LETTER(s[unit_at + 1])) {
                unsigned char second = s[unit_at + 1];
                int starts_unit = (first == 's' && second == 'e') || (first == 'm' && second == 's') ||
                                  (first == 'u' && second == 's') || (first == 'n' && second == 's') ||
                                  (first == 'm' && second == 'i');
                if (!starts_unit) { /* "12 src", "3 new": a word, not a unit */
                    at = find_duration(s, n, end, gap);
                    continue;
                }
            }
            /* _UNIT: (?:\xc2\xb5)?[a-z]+ */
            Py_ssize_t q = unit_at;
            if (first == 0xC2) q = (q + 2 < n && s[q + 1] == 0xB5 && IS_LOWER(s[q + 2])) ? q + 2 : -1;
            if (q >= 0 && IS_LOWER(s[q])) {
                while (q < n && IS_LOWER(s[q])) q++;
                end = q;
                if (is_time_unit(s + unit_at, end - unit_at) && (end >= n || !IS_LETTER(s[end]))) {
                    /* _NUMBER_BEFORE: the leftmost \d+(?:\.\d+)? ending at the anchor's digit, in 24 bytes */
                    Py_ssize_t floor = at - 24 > 0 ? at - 24 : 0, start = at;
                    while (start > floor && IS_DIGIT(s[start - 1])) start--;
                    if (start - 2 >= floor && s[start - 1] == '.' && IS_DIGIT(s[start - 2])) {
                        start -= 2;
                        while (start > floor && IS_DIGIT(s[start - 1])) start--;
                    }
                    if ((start == 0 || !IS_LETTER(s[start - 1])) && add_span(spans, start, end) < 0) return -1;
                }
            }
            at = find_duration(s, n, end, gap);
        }
    }
    return 0;
}

/* six hex characters in a row */
static Py_ssize_t find_hex6(const unsigned char *s, Py_ssize_t n, Py_ssize_t from) {
    Py_ssize_t run = 0;
    for (Py_ssize_t p = from; p < n; p++) {
        run = IS_HEX(s[p]) ? run + 1 : 0;
        if (run == 6) return p - 5;
    }
    return -1;
}

static int hex_span(const unsigned char *s, Py_ssize_t n, Py_ssize_t at, Py_ssize_t len) {
    if (at + len > n) return 0;
    for (Py_ssize_t i = 0; i < len; i++)
        if (!IS_HEX(s[at + i])) return 0;
    return 1;
}

static int uuid_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t at) {
    return at + 36 <= n && hex_span(s, n, at, 8) && s[at + 8] == '-' && hex_span(s, n, at + 9, 4) &&
           s[at + 13] == '-' && hex_span(s, n, at + 14, 4) && s[at + 18] == '-' && hex_span(s, n, at + 19, 4) &&
           s[at + 23] == '-' && hex_span(s, n, at + 24, 12);
}

static int mask_hex_runs(const unsigned char *s, Py_ssize_t n, span_list *spans) {
    Py_ssize_t at = find_hex6(s, n, 0);
    while (at >= 0) {
        if (uuid_at(s, n, at) && word_edge(s, n, at, at + 36)) {
            if (add_span(spans, at, at + 36) < 0) return -1;
            at = find_hex6(s, n, at + 36);
            continue;
        }
        Py_ssize_t end = at;
        while (end < n && IS_HEX(s[end])) end++;
        if (at >= 2 && s[at - 2] == '0' && (s[at - 1] == 'x' || s[at - 1] == 'X') && word_edge(s, n, at - 2, end)) {
            if (add_span(spans, at - 2, end) < 0) return -1;
        } else if (word_edge(s, n, at, end)) {
            int digits_only = 1, changes = 0;
            for (Py_ssize_t i = at; i < end; i++) {
                if (!IS_DIGIT(s[i])) digits_only = 0;
                if (i > at && IS_DIGIT(s[i]) != IS_DIGIT(s[i - 1])) changes++;
            }
            int keep = digits_only ? end - at >= 10 : changes >= 2;
            if (keep && add_span(spans, at, end) < 0) return -1;
        }
        at = find_hex6(s, n, end);
    }
    return 0;
}

/* _SHELL_LINE at q: " (?:line )?\d+:" ; the end of the match, or -1 */
static Py_ssize_t shell_line_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t q) {
    if (q >= n || s[q] != ' ') return -1;
    q++;
    if (q + 5 <= n && memcmp(s + q, "line ", 5) == 0) q += 5;
    if (q >= n || !IS_DIGIT(s[q])) return -1;
    while (q < n && IS_DIGIT(s[q])) q++;
    return (q < n && s[q] == ':') ? q + 1 : -1;
}

/* _PID at at, after the word of ``wlen`` bytes: [ =:#]{1,3}\d+ ; the end of the match, or -1 */
static Py_ssize_t pid_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t at, Py_ssize_t wlen) {
    Py_ssize_t q = at + wlen, seps = 0;
    while (q < n && seps < 4 && (s[q] == ' ' || s[q] == '=' || s[q] == ':' || s[q] == '#')) q++, seps++;
    if (seps < 1 || seps > 3 || q >= n || !IS_DIGIT(s[q])) return -1;
    while (q < n && IS_DIGIT(s[q])) q++;
    return q;
}

/* _TMP_PATH at at: (?:/tmp|/var/folders|/private/var|/var/tmp)/[^\s'":,)\]]* ; the end of the match, or -1 */
static Py_ssize_t tmp_path_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t at) {
    static const char *const roots[] = {"/tmp/", "/var/folders/", "/private/var/", "/var/tmp/"};
    for (int i = 0; i < 4; i++) {
        Py_ssize_t len = (Py_ssize_t)strlen(roots[i]);
        if (at + len <= n && memcmp(s + at, roots[i], (size_t)len) == 0) {
            Py_ssize_t q = at + len;
            while (q < n && !IS_RE_SPACE(s[q]) && s[q] != '\'' && s[q] != '"' && s[q] != ':' && s[q] != ',' &&
                   s[q] != ')' && s[q] != ']')
                q++;
            return q;
        }
    }
    return -1;
}

/* _TMP_NAME at at: tmp(?:[a-z0-9_]{8}|\.[A-Za-z0-9]{6,})(?![A-Za-z0-9]) ; the end of the match, or -1 */
static Py_ssize_t tmp_name_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t at) {
    Py_ssize_t q = at + 3;
    if (q + 8 <= n) {
        Py_ssize_t i = 0;
        while (i < 8 && (IS_LOWER(s[q + i]) || IS_DIGIT(s[q + i]) || s[q + i] == '_')) i++;
        if (i == 8 && (q + 8 >= n || !IS_ALNUM(s[q + 8]))) return q + 8;
    }
    if (q < n && s[q] == '.') {
        Py_ssize_t r = q + 1;
        while (r < n && IS_ALNUM(s[r])) r++;
        if (r - (q + 1) >= 6) return r;
    }
    return -1;
}

enum { SHELL_LINE, PID, TMP_PATH, TMP_NAME };

/* masking._anchored (and _shell_lines: a shell's span starts after its "sh:" and the scan goes on from there) */
static int anchored(const unsigned char *s, Py_ssize_t n, Py_ssize_t offset, const char *anchor, int kind,
                    span_list *spans) {
    Py_ssize_t alen = (Py_ssize_t)strlen(anchor);
    Py_ssize_t at = find_bytes(s, n, 0, anchor);
    while (at >= 0) {
        Py_ssize_t end = -1, start = at;
        switch (kind) {
            case SHELL_LINE:
                start = at + alen;
                end = shell_line_at(s, n, start);
                break;
            case PID:
                end = pid_at(s, n, at, anchor[alen - 1] == ' ' ? alen - 1 : alen);
                break;
            case TMP_PATH:
                end = tmp_path_at(s, n, at);
                break;
            default:
                end = tmp_name_at(s, n, at);
        }
        int before = at == 0 || !IS_LETTER(s[at - 1]);
        if (end >= 0 && before && add_span(spans, start + offset, end + offset) < 0) return -1;
        if (kind == SHELL_LINE)
            at = find_bytes(s, n, at + alen, anchor);
        else
            at = find_bytes(s, n, (end >= 0 && before) ? end : at + 1, anchor);
    }
    return 0;
}

/* masking._rare: process ids, shell line numbers and temporary paths in s[0:n], a part of the text at offset */
static int mask_rare(const unsigned char *s, Py_ssize_t n, Py_ssize_t offset, span_list *spans) {
    static const char *const shells[] = {"bash:", "sh:", "zsh:", "dash:"};
    static const char *const pids[] = {"pid", "PID", "Pid", "process ", "Process "};
    static const char *const tmp_roots[] = {"/tmp/", "/var/folders/", "/private/var/", "/var/tmp/"};
    /* one pass for what each kind needs somewhere in the text before it is looked for (as masking._rare does) */
    int has_shell = 0, has_pid = 0, has_tmp = 0; /* "sh:", "pid"/"PID"/"Pid" or "rocess ", "tmp" in any case */
    for (Py_ssize_t p = 0; p + 3 <= n; p++) {
        unsigned char c = ascii_lower[s[p]];
        if (c == 's')
            has_shell |= s[p] == 's' && s[p + 1] == 'h' && s[p + 2] == ':';
        else if (c == 'p')
            has_pid |= ascii_lower[s[p + 1]] == 'i' && ascii_lower[s[p + 2]] == 'd';
        else if (c == 't')
            has_tmp |= ascii_lower[s[p + 1]] == 'm' && ascii_lower[s[p + 2]] == 'p';
        else if (c == 'r')
            has_pid |= p + 7 <= n && memcmp(s + p, "rocess ", 7) == 0;
    }
    for (int i = 0; i < 4 && has_shell; i++)
        if (anchored(s, n, offset, shells[i], SHELL_LINE, spans) < 0) return -1;
    for (int i = 0; i < 5 && has_pid; i++)
        if (anchored(s, n, offset, pids[i], PID, spans) < 0) return -1;
    if (has_tmp) {
        for (int i = 0; i < 4; i++)
            if (anchored(s, n, offset, tmp_roots[i], TMP_PATH, spans) < 0) return -1;
        return anchored(s, n, offset, "tmp", TMP_NAME, spans);
    }
    return anchored(s, n, offset, "/var/", TMP_PATH, spans);
}

#define RARE_EDGE 1024

static int compare_spans(const void *a, const void *b) {
    const Py_ssize_t *x = (const Py_ssize_t *)a, *y = (const Py_ssize_t *)b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

PyDoc_STRVAR(masked_bytes_doc, "masked_bytes(data: bytes) -> bytes\n--\n\n"
                               "``data`` without its volatile parts (see loopwatch.masking.volatile_spans).");

static PyObject *masked_bytes(PyObject *self, PyObject *arg) {
    if (!PyBytes_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "masked_bytes() expects bytes, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(arg);
    Py_ssize_t n = PyBytes_GET_SIZE(arg);
    span_list spans = {NULL, 0, 0};
    int failed = mask_times(s, n, &spans) < 0 || mask_durations(s, n, &spans) < 0 || mask_hex_runs(s, n, &spans) < 0;
    if (!failed) {
        if (n <= 2 * RARE_EDGE)
            failed = mask_rare(s, n, 0, &spans) < 0;
        else
            failed = mask_rare(s, RARE_EDGE, 0, &spans) < 0 || mask_rare(s + n - RARE_EDGE, RARE_EDGE, n - RARE_EDGE,
                                                                         &spans) < 0;
    }
    if (failed) {
        free(spans.v);
        return PyErr_NoMemory();
    }
    if (spans.n == 0) {
        Py_INCREF(arg);
        return arg;
    }
    qsort(spans.v, (size_t)(spans.n / 2), 2 * sizeof(Py_ssize_t), compare_spans);
    PyObject *out = PyBytes_FromStringAndSize(NULL, n);
    if (out == NULL) {
        free(spans.v);
        return NULL;
    }
    char *o = PyBytes_AS_STRING(out);
    Py_ssize_t kept = 0, cut = 0; /* bytes before ``cut`` are copied or removed */
    for (Py_ssize_t i = 0; i < spans.n; i += 2) {
        Py_ssize_t start = spans.v[i], end = spans.v[i + 1];
        if (start > cut) {
            memcpy(o + kept, s + cut, (size_t)(start - cut));
            kept += start - cut;
        }
        if (end > cut) cut = end;
    }
    if (n > cut) {
        memcpy(o + kept, s + cut, (size_t)(n - cut));
        kept += n - cut;
    }
    free(spans.v);
    if (_PyBytes_Resize(&out, kept) < 0) return NULL;
    return out;
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
    {"masked_bytes", (PyCFunction)masked_bytes, METH_O, masked_bytes_doc},
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
