/* The text kernels in C: the compiled twin of loopwatch/core/_kernels_py.py.

   Every function here gives the same result as its pure-Python twin, bit for bit (tests/test_kernels.py checks
   them against each other with hypothesis and on the corpus), so fingerprints and sketches stored by one are read
   by the other. Inputs are untrusted text (tool outputs, model replies): every read is bounded by the length of
   the buffer, nothing is written outside memory allocated here, and benchmarks/fuzz_kernels.py runs these
   functions under AddressSanitizer and UBSan.

   Where an input falls outside what the C code handles (a negative or huge hash, a size that is not a power of
   two), the pure-Python twin is called, so the answer (or the error) is the same.

   The file stays in one piece: it is one extension module (one translation unit that hatch_build.py compiles, with
   no build system to link several), and its kernels share the byte-class tables, the CRC-32 code and the 8-bytes-
   at-a-time readers defined once near the top. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* -- CRC-32 (zlib's: the IEEE polynomial, reflected) ------------------------------------------------------- */

static uint32_t crc_table[256];
static uint32_t crc_slices[8][256]; /* crc_slices[k][n]: n's CRC step followed by k zero bytes (slicing-by-8) */

static void crc_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[n] = c;
        crc_slices[0][n] = c;
    }
    for (int k = 1; k < 8; k++)
        for (uint32_t n = 0; n < 256; n++)
            crc_slices[k][n] = (crc_slices[k - 1][n] >> 8) ^ crc_table[crc_slices[k - 1][n] & 0xFFu];
}

/* A CRC is carried as its running register (inverted); crc_final turns it into zlib.crc32's value. */
#define CRC_START 0xFFFFFFFFu
#define CRC_BYTE(c, b) (crc_table[((c) ^ (uint8_t)(b)) & 0xFFu] ^ ((c) >> 8))
#define CRC_FINAL(c) ((c) ^ 0xFFFFFFFFu)

/* The little-endian 32-bit value of 4 bytes (one load where the machine is little-endian). */
static inline uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* start_through_zeros[k]: the running CRC from CRC_START after k zero bytes (k <= 8). */
static uint32_t start_through_zeros[9];

static void start_through_zeros_init(void) {
    uint32_t c = CRC_START;
    start_through_zeros[0] = c;
    for (int k = 1; k <= 8; k++) start_through_zeros[k] = c = CRC_BYTE(c, 0);
}

/* One slicing-by-8 step: the running CRC c through the 8 bytes of v, its lowest byte first. */
static inline uint32_t crc_step8(uint32_t c, uint64_t v) {
    const uint32_t lo = (uint32_t)v ^ c, hi = (uint32_t)(v >> 32);
    return crc_slices[7][lo & 0xFFu] ^ crc_slices[6][(lo >> 8) & 0xFFu] ^ crc_slices[5][(lo >> 16) & 0xFFu] ^
           crc_slices[4][lo >> 24] ^ crc_slices[3][hi & 0xFFu] ^ crc_slices[2][(hi >> 8) & 0xFFu] ^
           crc_slices[1][(hi >> 16) & 0xFFu] ^ crc_slices[0][hi >> 24];
}

/* The little-endian 64-bit value of 8 bytes. */
static inline uint64_t le64(const unsigned char *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

/* The running CRC from CRC_START through the last ``head`` bytes of v (1 to 8: its highest ones; the others are
   ignored), in one step: they are read as the end of 8 bytes with zeros before them. From a register of 0 zeros
   leave it 0, and a CRC is linear, so the register from CRC_START is the one from 0 XORed with CRC_START's through
   as many zeros. A run of any length is then hashed 8 bytes a step from its first byte, with none left over for a
   loop a byte at a time. */
static inline uint32_t crc_head(uint64_t v, int head) {
    return crc_step8(0, v & ~UINT64_C(0) << (8 * (8 - head))) ^ start_through_zeros[head];
}

/* zlib.crc32 of p[0:n], where the 7 bytes before p may be read too: its first (n - 1) % 8 + 1 bytes by crc_head,
   then 8 bytes a step (the 8 table look-ups of a step are independent of each other, so a step waits for one
   look-up where byte by byte it waits for eight in a row). */
static inline uint32_t crc_of_run(const unsigned char *p, Py_ssize_t n) {
    if (n == 0) return 0;
    const int head = (int)((n - 1) & 7) + 1;
    uint32_t c = crc_head(le64(p + head - 8), head);
    for (p += head, n -= head; n > 0; p += 8, n -= 8) c = crc_step8(c, le64(p));
    return CRC_FINAL(c);
}

/* -- ASCII tables ------------------------------------------------------------------------------------------ */

static unsigned char ascii_lower[256];
static unsigned char byte_space[256];  /* bytes.split(): " \t\n\r\x0b\x0c" */
static unsigned char byte_blank[256];  /* lines_of drops " \t\r\x0b\x0c" */
static unsigned char byte_word[256];   /* the re module's \w for bytes: [A-Za-z0-9_] */
static unsigned char byte_alnum[256];  /* [A-Za-z0-9] */
static unsigned char part_before[256]; /* what a part of a command follows: str.isspace() of Latin-1, ;&|( */

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

/* -- the processor's vector instructions, asked for at run time ------------------------------------------------

   On x86, what the processor has is asked once (cpu_features_init); each function that uses an instruction set is
   compiled for it alone, and the portable code does the same work, with the same result, where it is missing:
   - SSSE3 (x86 processors since 2006): blanks dropped 16 bytes at a time. A comparison finds the blanks, and a byte
     shuffle per 8 bytes, looked up by which of them are blanks, moves the others together. line_crcs lowercases
     and drops the blanks of a whole text this way before it cuts the lines (line by line, they are too short for
     it to pay: 0.94x);
   - POPCNT: best_similarity's bit counts, one instruction each instead of a library call;
   - AVX2: masked_bytes finds the digits and hex characters of 32 bytes in one comparison each; error_lines rules
     out 32 positions at a time where no keyword can start (find_error_avx2);
   - AVX-512 with VBMI2 (x86 processors since 2019 or 2022, not all): blanks dropped 64 bytes at a time, the kept bytes
     moved together by one compress instruction (blanks_dropped of a 4 KB output, the call included: 0.2 us, where
     SSSE3 takes 0.75); the SSSE3 code then does the last bytes. */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define X86_SIMD 1
#include <immintrin.h>

static int blanks_simd = 0;         /* SSSE3 */
static int popcnt_instruction = 0; /* the processor counts bits in one instruction (best_similarity) */
static int avx2_instructions = 0;  /* 32-byte comparisons (masked_bytes' scan, error_lines' filter) */
static int avx512_compress = 0;    /* AVX-512 F, BW and VBMI2: 64 bytes compared and compressed in one step */
static unsigned char blank_shuffles[256][8]; /* [which of 8 bytes are blanks]: the others' places, in order */
static unsigned char blank_kept[256];        /* [which of 8 bytes are blanks]: how many others (no popcnt needed) */

static void cpu_features_init(void) {
    __builtin_cpu_init();
    blanks_simd = __builtin_cpu_supports("ssse3");
    popcnt_instruction = __builtin_cpu_supports("popcnt");
    avx2_instructions = __builtin_cpu_supports("avx2");
    avx512_compress = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vbmi2") && __builtin_cpu_supports("popcnt");
    for (int m = 0; m < 256; m++) {
        int k = 0;
        for (int b = 0; b < 8; b++)
            if (!(m & (1 << b))) blank_shuffles[m][k++] = (unsigned char)b;
        blank_kept[m] = (unsigned char)k;
        for (; k < 8; k++) blank_shuffles[m][k] = 0x80; /* a zero byte, overwritten by what comes next */
    }
}

/* Which bytes of v are blanks of a line (space, tab, CR, VT, FF): 0xFF each. */
__attribute__((target("ssse3"), always_inline)) static inline __m128i line_blanks(__m128i v) {
    return _mm_or_si128(
        _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(' ')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\t'))),
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\r')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\x0b'))),
                     _mm_cmpeq_epi8(v, _mm_set1_epi8('\x0c'))));
}

/* Stores the bytes of v that ``dropped`` does not mark (bit i: byte i) at o + k, in order, and returns the new k.
   Every store writes 8 or 16 bytes at o + k: the caller's buffer has room for what it read. */
__attribute__((target("ssse3"), always_inline)) static inline Py_ssize_t stored_without(unsigned char *o, Py_ssize_t k,
                                                                                       __m128i v, unsigned dropped) {
    if (dropped == 0) {
        _mm_storeu_si128((__m128i *)(o + k), v);
        return k + 16;
    }
    const unsigned lo = dropped & 0xFFu, hi = dropped >> 8;
    __m128i order;
    memcpy(&order, blank_shuffles[lo], 8);
    _mm_storel_epi64((__m128i *)(o + k), _mm_shuffle_epi8(v, order));
    k += blank_kept[lo];
    memcpy(&order, blank_shuffles[hi], 8);
    _mm_storel_epi64((__m128i *)(o + k), _mm_shuffle_epi8(_mm_srli_si128(v, 8), order));
    return k + blank_kept[hi];
}

#define AVX512_COMPRESS "avx512f,avx512bw,avx512vbmi2,popcnt"

/* Which of 64 bytes are blanks (bit i: byte i): the controls from tab to CR (9 to 13) and the space, with the
   newline (10) or without it (``newline`` 0). */
__attribute__((target(AVX512_COMPRESS), always_inline)) static inline __mmask64 blanks64(__m512i v, int newline) {
    const __mmask64 controls = _mm512_cmple_epu8_mask(_mm512_sub_epi8(v, _mm512_set1_epi8(9)), _mm512_set1_epi8(4));
    const __mmask64 space = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(' '));
    return (newline ? controls : controls & ~_mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8('\n'))) | space;
}

/* Copies s[0:p) into o without its blanks (newlines among them, or kept as lines_of keeps them: ``lines``, which
   also lowercases ASCII letters), 64 bytes a step, for the largest p that leaves fewer than 64 bytes, and returns p.
   Each step stores 64 bytes at o + *kept, which never passes the bytes read: every store stays inside o's n. */
__attribute__((target(AVX512_COMPRESS))) static Py_ssize_t compressed64(const unsigned char *s, Py_ssize_t n,
                                                                          unsigned char *o, Py_ssize_t *kept,
                                                                          int lines) {
    const __m512i a = _mm512_set1_epi8('A'), z_span = _mm512_set1_epi8('Z' - 'A'), case_bit = _mm512_set1_epi8(32);
    Py_ssize_t p = 0, k = *kept;
    for (; p + 64 <= n; p += 64) {
        __m512i v = _mm512_loadu_si512((const void *)(s + p));
        const __mmask64 keep = ~blanks64(v, !lines);
        if (lines) v = _mm512_mask_add_epi8(v, _mm512_cmple_epu8_mask(_mm512_sub_epi8(v, a), z_span), v, case_bit);
        _mm512_storeu_si512((void *)(o + k), _mm512_maskz_compress_epi8(keep, v));
        k += __builtin_popcountll(keep);
    }
    *kept = k;
    return p;
}

/* Copies s[0:p) into o without its blanks (kept: *kept bytes) for the largest p that leaves 16 bytes or fewer, and
   returns p (64 bytes a step first where the processor compresses them). *kept never passes the bytes read: every
   store stays inside o's n. */
__attribute__((target("ssse3"))) static Py_ssize_t blanks_dropped_simd(const unsigned char *s, Py_ssize_t n,
                                                                      unsigned char *o, Py_ssize_t *kept) {
    Py_ssize_t p = avx512_compress ? compressed64(s, n, o, kept, 0) : 0, k = *kept;
    for (; p + 16 <= n; p += 16) {
        const __m128i v = _mm_loadu_si128((const __m128i *)(s + p));
        const __m128i blank = _mm_or_si128(line_blanks(v), _mm_cmpeq_epi8(v, _mm_set1_epi8('\n')));
        k = stored_without(o, k, v, (unsigned)_mm_movemask_epi8(blank));
    }
    *kept = k;
    return p;
}

/* Copies s[0:p) into o lowercased (ASCII) and without its blanks, newlines kept (what lines_of makes of it before
   it splits), for the largest p that leaves 16 bytes or fewer, and returns p (64 bytes a step first where the
   processor compresses them); stores as in blanks_dropped_simd. */
__attribute__((target("ssse3"))) static Py_ssize_t lowered_lines_simd(const unsigned char *s, Py_ssize_t n,
                                                                     unsigned char *o, Py_ssize_t *kept) {
    const __m128i before_a = _mm_set1_epi8('A' - 1), after_z = _mm_set1_epi8('Z' + 1), case_bit = _mm_set1_epi8(32);
    Py_ssize_t p = avx512_compress ? compressed64(s, n, o, kept, 1) : 0, k = *kept;
    for (; p + 16 <= n; p += 16) {
        const __m128i v = _mm_loadu_si128((const __m128i *)(s + p));
        /* signed comparisons: bytes from 0x80 up are negative, so never taken for A to Z */
        const __m128i upper = _mm_and_si128(_mm_cmpgt_epi8(v, before_a), _mm_cmpgt_epi8(after_z, v));
        const __m128i lowered = _mm_add_epi8(v, _mm_and_si128(upper, case_bit));
        k = stored_without(o, k, lowered, (unsigned)_mm_movemask_epi8(line_blanks(v)));
    }
    *kept = k;
    return p;
}
#endif

/* -- the pure-Python twin, for inputs the C code leaves to it ----------------------------------------------- */

static PyObject *pure_module = NULL;

static PyObject *call_pure(const char *name, PyObject *args) {
    if (pure_module == NULL) {
        pure_module = PyImport_ImportModule("loopwatch.core._kernels_py");
        if (pure_module == NULL) return NULL;
    }
    PyObject *func = PyObject_GetAttrString(pure_module, name);
    if (func == NULL) return NULL;
    PyObject *result = PyObject_CallObject(func, args);
    Py_DECREF(func);
    return result;
}

/* -- 8 bytes at a time ------------------------------------------------------------------------------------

   Where most bytes need no more than a test, 8 of them are tested at once as one 64-bit number: each test sets the
   top bit of the bytes it holds for (a comparison of each byte, with the carries kept inside their byte). */

#define ONES UINT64_C(0x0101010101010101)

/* The 64 bytes s[at:at + 64] to read: in place, or (fewer left before n) copied into ``padded`` with zeros after. */
static inline const unsigned char *block_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t at,
                                            unsigned char padded[64]) {
    if (at + 64 <= n) return s + at;
    memset(padded, 0, 64);
    if (at < n) memcpy(padded, s + at, (size_t)(n - at));
    return padded;
}

/* s[at:at + 8] as a number, s[at] its lowest byte (whatever the machine's byte order); bytes past n are zeros */
static inline uint64_t word_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t at) {
    uint64_t w = 0;
    if (at + 8 <= n)
        memcpy(&w, s + at, 8);
    else
        for (Py_ssize_t i = n - 1; i >= at; i--) w = w << 8 | s[i];
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    if (at + 8 <= n) w = __builtin_bswap64(w);
#endif
    return w;
}

/* the index (0 to 7) of the lowest byte whose top bit is set in bits (not 0) */
static inline int lowest_byte(uint64_t bits) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(bits) >> 3;
#else
    int i = 0;
    while (!(bits & 0x80)) bits >>= 8, i++;
    return i;
#endif
}

/* Which bytes of w are digits: the top bit of each byte of the result says. w ^ "00000000" turns the digits, and
   only them, into bytes 0 to 9; a byte of x is 10 or more when its top bit is set or when its low 7 bits plus 0x76
   carry into its top bit (at most 0x7F + 0x76: no carry crosses into the next byte). */
static inline uint64_t digit_bits(uint64_t w) {
    uint64_t x = w ^ (ONES * '0');
    uint64_t ten_or_more = (((x & (ONES * 0x7F)) + ONES * (0x80 - 10)) | x) & (ONES * 0x80);
    return ten_or_more ^ (ONES * 0x80);
}

/* w with its bytes A-Z lowercased: a byte below 0x80 is A-Z when adding 0x3F carries into its top bit and adding 0x25
   does not (at most 0x7F + 0x3F: no carry crosses into the next byte); its top bit, moved to 0x20, lowercases it */
static inline uint64_t lower_word(uint64_t w) {
    uint64_t low = w & (ONES * 0x7F);
    uint64_t upper = (low + ONES * (0x80 - 'A')) & ~(low + ONES * (0x7F - 'Z')) & ~w & (ONES * 0x80);
    return w | (upper >> 2);
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
_Static_assert(N_KEYWORDS <= 32, "a keyword is a bit of a 32-bit slot_keywords");

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

/* Every keyword is 4 bytes or longer. Their first 4 bytes (as a number, the first byte lowest) are kept in a table
   of 256 slots, each with the keywords that start with them: a prefix's slot is the top 8 bits of the prefix times
   prefix_multiplier, a number chosen at import so that no two prefixes share a slot (the first one tried does). So
   the 4 bytes at a position (lowercased) may start a keyword only if they are the prefix in their slot: a
   multiplication, a look-up and a comparison, and no branch. */
static uint32_t prefix_multiplier;
static uint32_t slot_prefix[256];   /* the prefix in each slot */
static uint32_t slot_keywords[256]; /* bit k: keywords[k] starts with the slot's prefix (0: no keyword does) */
#define PREFIX_SLOT(x) (((uint32_t)(x) * prefix_multiplier) >> 24)

static void keywords_init(void) {
    for (prefix_multiplier = UINT32_C(0x9E3779B1);; prefix_multiplier += 2) {
        memset(slot_prefix, 0, sizeof(slot_prefix));
        memset(slot_keywords, 0, sizeof(slot_keywords));
        int k = 0;
        for (; k < N_KEYWORDS; k++) {
            const unsigned char *w = (const unsigned char *)keywords[k].word;
            uint32_t prefix = (uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 | (uint32_t)w[3] << 24;
            uint32_t slot = PREFIX_SLOT(prefix);
            if (slot_keywords[slot] && slot_prefix[slot] != prefix) break; /* taken: try another multiplier */
            slot_prefix[slot] = prefix;
            slot_keywords[slot] |= UINT32_C(1) << k;
        }
        if (k == N_KEYWORDS) return;
    }
}

/* Does one of ``candidates`` (keywords whose first 4 bytes are those at p, lowercased) start at p, and count there
   (not negated, not joined into a name)? */
static int error_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t p, uint32_t candidates) {
    for (int k = 0; candidates; k++, candidates >>= 1) {
        if (!(candidates & 1)) continue;
        const keyword *kw = &keywords[k];
        if (kw->len > n - p) continue;
        Py_ssize_t i = 4;
        while (i < kw->len && ascii_lower[s[p + i]] == (unsigned char)kw->word[i]) i++;
        /* (a keyword holds no line end: the byte after it is the line's end, or a byte of the same line) */
        if (i == kw->len && !(kw->guarded && guarded_out(s, p)) && !joined(s, p, p + kw->len, n)) return 1;
    }
    return 0;
}

/* The first position at or after ``from`` where a keyword that counts starts, or -1. Five positions at a time: the
   8 bytes from the first, lowercased, hold the 4 bytes from each of them. */
static Py_ssize_t find_error_portable(const unsigned char *s, Py_ssize_t n, Py_ssize_t from) {
    for (Py_ssize_t p = from; p + 4 <= n; p += 5) {
        uint64_t w = lower_word(word_at(s, n, p));
#define FOUR(i) ((uint32_t)(w >> (8 * (i))))
#define HIT(i) ((uint32_t)(slot_prefix[PREFIX_SLOT(FOUR(i))] == FOUR(i)) << (i))
        uint32_t hits = HIT(0) | HIT(1) | HIT(2) | HIT(3) | HIT(4); /* most often 0 */
        for (int i = 0; hits; i++, hits >>= 1)
            if ((hits & 1) && error_at(s, n, p + i, slot_keywords[PREFIX_SLOT(FOUR(i))])) return p + i;
#undef HIT
#undef FOUR
    }
    return -1;
}

#ifdef X86_SIMD
/* find_error with AVX2: 32 positions a step, ruled out by the first 3 bytes of the keywords (a "Teddy" filter, as
   Hyperscan's and ripgrep's literal searches do). The keywords are put in 8 buckets (a bit each); for each of the 3
   bytes from a position, a table by the byte's low half and one by its high half (with 0x20 set: ASCII letters
   lowercased, and no byte of a keyword changed) give the buckets that byte may belong to, looked up for 32 bytes in
   one byte shuffle. A position whose 3 bytes leave a bucket standing is checked as find_error_portable checks it; most
   positions leave none (a few of a hundred do in text: a filter may let through, never keep out). */
static unsigned char teddy_low[3][16], teddy_high[3][16];

static void teddy_init(void) {
    static const char *const by_bucket[8] = {"e", "f", "t", "n", "cp", "u", "ird", "am"}; /* by first letter */
    memset(teddy_low, 0, sizeof(teddy_low));
    memset(teddy_high, 0, sizeof(teddy_high));
    for (int k = 0; k < N_KEYWORDS; k++) {
        const unsigned char *w = (const unsigned char *)keywords[k].word;
        int bucket = 0;
        while (bucket < 7 && !strchr(by_bucket[bucket], w[0])) bucket++;
        for (int i = 0; i < 3; i++) {
            teddy_low[i][w[i] & 0x0F] |= (unsigned char)(1u << bucket);
            teddy_high[i][w[i] >> 4] |= (unsigned char)(1u << bucket);
        }
    }
}

/* The buckets a byte may belong to, for each of the 32 bytes at ``at``: its low half's and its high half's tables
   (16 bytes each) looked up in one byte shuffle each, the byte first ORed with ``fold`` (0x20: ASCII letters
   lowercased). */
__attribute__((target("avx2"), always_inline)) static inline __m256i teddy_lookup(const unsigned char *at,
                                                                                 const unsigned char *low_table,
                                                                                 const unsigned char *high_table,
                                                                                 char fold) {
    const __m256i v = _mm256_or_si256(_mm256_loadu_si256((const __m256i *)at), _mm256_set1_epi8(fold));
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    const __m256i low = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)low_table));
    const __m256i high = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)high_table));
    return _mm256_and_si256(_mm256_shuffle_epi8(low, _mm256_and_si256(v, nibble)),
                            _mm256_shuffle_epi8(high, _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble)));
}

/* Of the 32 positions from ``at``, those whose first 3 bytes leave a bucket standing (a bit each): the candidates of
   a Teddy filter with tables ``low[3][16]`` and ``high[3][16]`` (``at`` must have 34 bytes). */
__attribute__((target("avx2"), always_inline)) static inline uint32_t teddy_candidates(const unsigned char *at,
                                                                                      unsigned char low[3][16],
                                                                                      unsigned char high[3][16],
                                                                                      char fold) {
    const __m256i buckets = _mm256_and_si256(
        _mm256_and_si256(teddy_lookup(at, low[0], high[0], fold), teddy_lookup(at + 1, low[1], high[1], fold)),
        teddy_lookup(at + 2, low[2], high[2], fold));
    return ~(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(buckets, _mm256_setzero_si256()));
}

__attribute__((target("avx2"))) static Py_ssize_t find_error_avx2(const unsigned char *s, Py_ssize_t n,
                                                                   Py_ssize_t from) {
    Py_ssize_t p = from;
    for (; p + 35 <= n; p += 32) { /* 32 positions, each with its 4 bytes in s */
        uint32_t left = teddy_candidates(s + p, teddy_low, teddy_high, 0x20);
        while (left) {
            const Py_ssize_t q = p + __builtin_ctz(left);
            left &= left - 1;
            const uint32_t four = (uint32_t)lower_word(word_at(s, n, q));
            if (slot_prefix[PREFIX_SLOT(four)] == four && error_at(s, n, q, slot_keywords[PREFIX_SLOT(four)]))
                return q;
        }
    }
    return find_error_portable(s, n, p);
}
#endif

static Py_ssize_t find_error(const unsigned char *s, Py_ssize_t n, Py_ssize_t from) {
#ifdef X86_SIMD
    if (avx2_instructions) return find_error_avx2(s, n, from);
#endif
    return find_error_portable(s, n, from);
}

PyDoc_STRVAR(error_lines_doc, "error_lines(data: bytes) -> list[bytes]\n--\n\n"
                              "The lines of ``data`` that say something went wrong (see loopwatch.core._kernels_py).");

/* The next error line at or after ``from``: 1 with its start and end (the line's, without its newline), or 0 when
   there is none. Each keyword that counts makes its line an error line, and the search goes on after that line. */
static int next_error_line(const unsigned char *s, Py_ssize_t n, Py_ssize_t from, Py_ssize_t *start, Py_ssize_t *end) {
    const Py_ssize_t at = from <= n ? find_error(s, n, from) : -1;
    if (at < 0) return 0;
    Py_ssize_t first = at;
    while (first > 0 && s[first - 1] != '\n') first--;
    const unsigned char *nl = memchr(s + at, '\n', (size_t)(n - at));
    *start = first;
    *end = nl ? (Py_ssize_t)(nl - s) : n;
    return 1;
}

static PyObject *error_lines(PyObject *self, PyObject *arg) {
    if (!PyBytes_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "error_lines() expects bytes, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(arg);
    Py_ssize_t n = PyBytes_GET_SIZE(arg), start, end;
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    for (Py_ssize_t from = 0; next_error_line(s, n, from, &start, &end); from = end + 1) {
        PyObject *line = PyBytes_FromStringAndSize((const char *)s + start, end - start);
        if (line == NULL || PyList_Append(out, line) < 0) {
            Py_XDECREF(line);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(line);
    }
    return out;
}

PyDoc_STRVAR(last_error_line_doc,
             "last_error_line(data: bytes) -> bytes | None\n--\n\n"
             "The last of error_lines(data), or None when there is none (the same scan, keeping only the last).");

static PyObject *last_error_line(PyObject *self, PyObject *arg) {
    if (!PyBytes_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "last_error_line() expects bytes, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(arg);
    Py_ssize_t n = PyBytes_GET_SIZE(arg), start, end, last_start = -1, last_end = 0;
    for (Py_ssize_t from = 0; next_error_line(s, n, from, &start, &end); from = end + 1) {
        last_start = start;
        last_end = end;
    }
    if (last_start < 0) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)s + last_start, last_end - last_start);
}

/* -- word_hashes ------------------------------------------------------------------------------------------- */

PyDoc_STRVAR(word_hashes_doc, "word_hashes(data: bytes) -> list[int]\n--\n\n"
                              "CRC-32s of the ASCII-lowercased, whitespace-separated words of ``data``, in order.");

/* The next word of s[*p:n] (split at ASCII whitespace, as bytes.split()): its CRC-32, ASCII-lowercased, into
   ``*crc``; returns its length, or 0 when no word is left. */
static inline Py_ssize_t next_space_word(const unsigned char *s, Py_ssize_t n, Py_ssize_t *at, uint32_t *crc) {
    Py_ssize_t p = *at;
    while (p < n && byte_space[s[p]]) p++;
    Py_ssize_t start = p;
    uint32_t c = CRC_START;
    while (p < n && !byte_space[s[p]]) c = CRC_BYTE(c, ascii_lower[s[p++]]);
    *at = p;
    *crc = CRC_FINAL(c);
    return p - start;
}

/* The CRC-32s of the words of ``arg`` (bytes.split()) of at least ``min_len`` bytes, ASCII-lowercased, in order. */
static PyObject *hash_words(PyObject *arg, const char *name, Py_ssize_t min_len) {
    if (!PyBytes_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "%s() expects bytes, not %.100s", name, Py_TYPE(arg)->tp_name);
        return NULL;
    }
    const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(arg);
    Py_ssize_t n = PyBytes_GET_SIZE(arg);
    PyObject *out = PyList_New(0);
    if (out == NULL) return NULL;
    Py_ssize_t p = 0, len;
    uint32_t crc;
    while ((len = next_space_word(s, n, &p, &crc)) > 0) {
        if (len < min_len) continue;
        PyObject *value = PyLong_FromUnsignedLong(crc);
        if (value == NULL || PyList_Append(out, value) < 0) {
            Py_XDECREF(value);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(value);
    }
    return out;
}

static PyObject *word_hashes(PyObject *self, PyObject *arg) { return hash_words(arg, "word_hashes", 1); }

PyDoc_STRVAR(long_word_hashes_doc,
             "long_word_hashes(data: bytes) -> list[int]\n--\n\n"
             "CRC-32s of the ASCII-lowercased words of ``data`` of two bytes or more (split at ASCII whitespace, as "
             "``bytes.split()``), in order, repeats kept.");

static PyObject *long_word_hashes(PyObject *self, PyObject *arg) { return hash_words(arg, "long_word_hashes", 2); }

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

/* Drops each quoted string of a line (``"..."``, ``'...'`` or a backquoted one, closed on its line) from
   text[0:kept] in place, as QUOTED.sub(b"", line) does to each line; returns the length left. A quote with no
   closing one after it on its line stays, and only one such quote of each kind per line is read to its end. */
static Py_ssize_t quotes_dropped(unsigned char *text, Py_ssize_t kept) {
    Py_ssize_t out = 0;
    for (Py_ssize_t p = 0; p < kept; p++) {
        const unsigned char c = text[p];
        if (c == '"' || c == '\'' || c == '`') {
            Py_ssize_t q = p + 1;
            while (q < kept && text[q] != c && text[q] != '\n') q++;
            if (q < kept && text[q] == c) {
                p = q; /* the string and both its quotes go */
                continue;
            }
        }
        text[out++] = c;
    }
    return out;
}

/* The CRCs of the lines of s[0..n) (n at most LINE_BYTES), each lowercased and without its blanks (``unquoted``:
   and without its quoted strings, quotes_dropped), in order, the empty lines' (0) left out: into crcs (room for
   n + 1); returns how many. The whole text is lowercased and its blanks dropped first, 16 bytes at a time where the
   processor can (lines one by one are too short for it: 0.94x), then cut at its newlines. */
static Py_ssize_t line_crcs(const unsigned char *s, Py_ssize_t n, uint32_t *crcs, int unquoted) {
    unsigned char buffer[8 + LINE_BYTES + 16];
    unsigned char *text = buffer + 8; /* s lowercased, its blanks dropped (stores may write 16 bytes past; and
                                         crc_of_run reads up to 8 bytes before a line) */
    memset(buffer, 0, 8);
    Py_ssize_t kept = 0, p = 0;
#ifdef X86_SIMD
    if (blanks_simd) p = lowered_lines_simd(s, n, text, &kept);
#endif
    for (; p < n; p++) { /* every byte written, a blank overwritten by the next: no branch to mispredict */
        text[kept] = ascii_lower[s[p]];
        kept += 1 - byte_blank[s[p]];
    }
    if (unquoted) kept = quotes_dropped(text, kept);
    Py_ssize_t count = 0;
    for (Py_ssize_t start = 0; start <= kept;) {
        const unsigned char *end = memchr(text + start, '\n', (size_t)(kept - start));
        const Py_ssize_t stop = end == NULL ? kept : end - text;
        const uint32_t crc = crc_of_run(text + start, stop - start);
        if (crc != 0) crcs[count++] = crc; /* 0: an empty line */
        start = stop + 1;
    }
    return count;
}

static PyObject *line_hashes(PyObject *self, PyObject *arg) {
    if (!PyBytes_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "line_hashes() expects bytes, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    Py_ssize_t n = PyBytes_GET_SIZE(arg);
    if (n > LINE_BYTES) n = LINE_BYTES;
    uint32_t crcs[LINE_BYTES + 1];
    const Py_ssize_t count = line_crcs((const unsigned char *)PyBytes_AS_STRING(arg), n, crcs, 0);
    PyObject *out = PyFrozenSet_New(NULL);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (set_add_crc(out, crcs[i]) < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

/* -- numbers_marked ---------------------------------------------------------------------------------------- */

/* the first digit at or after p, or n (8 bytes at a time) */
static Py_ssize_t next_digit(const unsigned char *s, Py_ssize_t n, Py_ssize_t p) {
    for (; p < n; p += 8) {
        uint64_t digits = digit_bits(word_at(s, n, p)); /* (the bytes past n are not digits) */
        if (digits) return p + lowest_byte(digits);
    }
    return n;
}

PyDoc_STRVAR(numbers_marked_doc, "numbers_marked(data: bytes) -> bytes\n--\n\n"
                                 "``data`` with each run of ASCII digits replaced by one ``#``.");

static PyObject *numbers_marked(PyObject *self, PyObject *arg) {
    if (!PyBytes_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "numbers_marked() expects bytes, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(arg);
    Py_ssize_t n = PyBytes_GET_SIZE(arg);
    Py_ssize_t digit = next_digit(s, n, 0);
    if (digit == n) {
        Py_INCREF(arg);
        return arg;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, n); /* never longer than data */
    if (out == NULL) return NULL;
    char *o = PyBytes_AS_STRING(out);
    Py_ssize_t kept = 0, p = 0;
    while (p < n) { /* s[p:digit] has no digit; a number starts at digit (or digit is n) */
        memcpy(o + kept, s + p, (size_t)(digit - p));
        kept += digit - p;
        if (digit == n) break;
        o[kept++] = '#';
        p = digit + 1;
        while (p < n && (unsigned)(s[p] - '0') < 10u) p++;
        digit = next_digit(s, n, p);
    }
    if (_PyBytes_Resize(&out, kept) < 0) return NULL;
    return out;
}

/* -- blanks_dropped ---------------------------------------------------------------------------------------- */

PyDoc_STRVAR(blanks_dropped_doc, "blanks_dropped(data: bytes) -> bytes\n--\n\n"
                                 "``data`` without its blanks (space, tab, CR, LF, VT, FF): "
                                 "``data.translate(None, b\" \\t\\r\\n\\x0b\\x0c\")``.");

static PyObject *blanks_dropped(PyObject *self, PyObject *arg) {
    if (!PyBytes_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "blanks_dropped() expects bytes, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(arg);
    Py_ssize_t n = PyBytes_GET_SIZE(arg);
    PyObject *out = PyBytes_FromStringAndSize(NULL, n); /* never longer than data */
    if (out == NULL) return NULL;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    Py_ssize_t kept = 0, p = 0;
#ifdef X86_SIMD
    if (blanks_simd) p = blanks_dropped_simd(s, n, o, &kept);
#endif
    for (; p < n; p++) { /* every byte written, a blank overwritten by the next: no branch */
        o[kept] = s[p];
        kept += 1 - byte_space[s[p]];
    }
    if (kept == n && PyBytes_CheckExact(arg)) { /* nothing dropped: the same object, as translate gives */
        Py_DECREF(out);
        Py_INCREF(arg);
        return arg;
    }
    if (_PyBytes_Resize(&out, kept) < 0) return NULL;
    return out;
}

/* -- alnum_word_pair --------------------------------------------------------------------------------------- */

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

/* A scan of a text's words (runs of letters and digits) for alnum_word_pair: the text is
   ``text.lower()`` (a new reference: str.lower() itself, Unicode's full case mapping (final sigma, dotted I...),
   when not ASCII; ASCII letters are lowered as they are hashed, 8 bytes at a time). */
typedef struct {
    PyObject *text;
    int ascii, kind;
    const void *data;
    Py_ssize_t n, p, limit;
    Py_ssize_t base; /* ASCII: where the block of 64 bytes whose letters and digits ``bits`` holds starts */
    uint64_t bits;   /* ASCII: those of them not read yet, bit i for byte base + i */
} WordScan;

/* Reads the arguments (text: str, limit: int >= 0) into ``scan``; -1 with an exception set on bad ones. */
static int word_scan_start(const char *name, PyObject *const *args, Py_ssize_t nargs, WordScan *scan) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "%s() takes exactly 2 arguments", name);
        return -1;
    }
    if (!PyUnicode_Check(args[0])) {
        PyErr_Format(PyExc_TypeError, "%s() expects str, not %.100s", name, Py_TYPE(args[0])->tp_name);
        return -1;
    }
    scan->limit = PyLong_AsSsize_t(args[1]);
    if (scan->limit == -1 && PyErr_Occurred()) return -1;
    if (scan->limit < 0) {
        PyErr_SetString(PyExc_ValueError, "limit must be >= 0");
        return -1;
    }
    scan->ascii = PyUnicode_IS_ASCII(args[0]);
    if (scan->ascii) {
        Py_INCREF(args[0]);
        scan->text = args[0];
    } else {
        scan->text = PyObject_CallMethod(args[0], "lower", NULL);
        if (scan->text == NULL) return -1;
    }
    scan->kind = PyUnicode_KIND(scan->text);
    scan->data = PyUnicode_DATA(scan->text);
    scan->n = PyUnicode_GET_LENGTH(scan->text);
    scan->p = 0;
    scan->base = -64;
    scan->bits = 0;
    return 0;
}

/* ASCII text is read 64 bytes at a time: which of them are letters or digits, as bits (AVX2: 32 bytes a comparison;
   else a table look-up a byte); each word's bounds are the runs of those bits (a count of trailing zeros each, no
   branch a byte), and its CRC is made 8 bytes at a time (ascii_word_crc). */
static uint64_t alnum_block_bytes(const unsigned char *p) {
    uint64_t bits = 0;
    for (int i = 0; i < 64; i++) bits |= (uint64_t)byte_alnum[p[i]] << i;
    return bits;
}

#ifdef X86_SIMD
__attribute__((target("avx2"))) static uint64_t alnum_block_avx2(const unsigned char *p) {
    const __m256i zero = _mm256_set1_epi8('0'), nine = _mm256_set1_epi8(9), case_bit = _mm256_set1_epi8(0x20),
                  a = _mm256_set1_epi8('a'), z = _mm256_set1_epi8(25);
    uint64_t bits = 0;
    for (int half = 0; half < 2; half++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(p + 32 * half));
        const __m256i from_zero = _mm256_sub_epi8(v, zero), from_a = _mm256_sub_epi8(_mm256_or_si256(v, case_bit), a);
        /* x <= k unsigned: min(x, k) == x */
        const __m256i digit = _mm256_cmpeq_epi8(_mm256_min_epu8(from_zero, nine), from_zero);
        const __m256i letter = _mm256_cmpeq_epi8(_mm256_min_epu8(from_a, z), from_a);
        bits |= (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_or_si256(digit, letter)) << (32 * half);
    }
    return bits;
}
#endif

/* The letters and digits of s[at:at + 64] as bits (bytes past n are neither). */
static uint64_t alnum_block(const unsigned char *s, Py_ssize_t n, Py_ssize_t at) {
    unsigned char padded[64];
    const unsigned char *p = block_at(s, n, at, padded);
#ifdef X86_SIMD
    if (avx2_instructions) return alnum_block_avx2(p);
#endif
    return alnum_block_bytes(p);
}

/* The bounds [*start, *end) of the next word of an ASCII scan: 1, or 0 when no word is left. */
static inline int ascii_word_next(WordScan *scan, Py_ssize_t *start, Py_ssize_t *end) {
    const unsigned char *s = (const unsigned char *)scan->data;
    while (scan->bits == 0) {
        scan->base += 64;
        if (scan->base >= scan->n) return 0;
        scan->bits = alnum_block(s, scan->n, scan->base);
    }
    const int first = __builtin_ctzll(scan->bits);
    *start = scan->base + first;
    uint64_t after = ~scan->bits & (~UINT64_C(0) << first); /* the bytes from the word on that are not in it */
    while (after == 0) {                                      /* the word goes on into the next block */
        scan->base += 64;
        if (scan->base >= scan->n) { /* to the end of the text */
            scan->bits = 0;
            *end = scan->n;
            return 1;
        }
        scan->bits = alnum_block(s, scan->n, scan->base);
        after = ~scan->bits;
    }
    const int last = __builtin_ctzll(after);
    *end = scan->base + last;
    scan->bits &= ~UINT64_C(0) << last;
    return 1;
}

/* The running CRC (from CRC_START) of the ASCII letters and digits s[start:end] lowercased, and whether they are all
   digits (*number), 8 bytes a step (the first ((end - start - 1) % 8) + 1 by crc_head). A letter or a digit is
   lowercased by setting its 0x20 bit (a digit has it), and is a digit when its 0x40 bit is clear. */
static inline uint32_t ascii_word_crc(const unsigned char *s, Py_ssize_t n, Py_ssize_t start, Py_ssize_t end,
                                      int *number) {
    const int head = (int)((end - start - 1) & 7) + 1;
    uint64_t v = 0;
    if (start + head >= 8) {
        v = word_at(s, n, start + head - 8);
    } else { /* the word starts in the text's first 8 bytes: nothing before it to read */
        for (int j = 0; j < head; j++) v |= (uint64_t)s[start + j] << (8 * (8 - head + j));
    }
    v |= ONES * 0x20;
    uint64_t letters = v & ~UINT64_C(0) << (8 * (8 - head)); /* the head's bytes only */
    uint32_t c = crc_head(v, head);
    for (Py_ssize_t at = start + head; at < end; at += 8) {
        v = word_at(s, n, at) | ONES * 0x20;
        letters |= v;
        c = crc_step8(c, v);
    }
    *number = !(letters & (ONES * 0x40));
    return c;
}

/* The CRC-32 of the next word into ``*crc``: 1, or 0 when no word is left. ``*number``: is the word made of ASCII
   digits only? */
static inline int word_scan_next(WordScan *scan, uint32_t *crc, int *number) {
    const Py_ssize_t n = scan->n;
    if (scan->ascii) {
        Py_ssize_t start, end;
        if (!ascii_word_next(scan, &start, &end)) return 0;
        *crc = CRC_FINAL(ascii_word_crc((const unsigned char *)scan->data, n, start, end, number));
        return 1;
    }
    const int kind = scan->kind;
    const void *data = scan->data;
    Py_ssize_t p = scan->p;
    uint32_t c = CRC_START;
    int digits = 1;
    while (p < n && !ALNUM(PyUnicode_READ(kind, data, p))) p++;
    if (p == n) {
        scan->p = p;
        return 0;
    }
    while (p < n) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, p);
        if (!ALNUM(ch)) break;
        digits &= (ch >= '0' && ch <= '9');
        c = crc_code_point(c, ch);
        p++;
    }
    scan->p = p;
    *crc = CRC_FINAL(c);
    *number = digits;
    return 1;
}

/* A set of CRC-32s by open addressing (linear probing), for telling a word seen before: one probe per word
   instead of a binary search whose branches a processor cannot predict. ``slots`` holds ``mask + 1`` entries (a
   power of two, at least twice the most it will hold), 0 for an empty one, else the CRC with bit 32 set. */
typedef struct {
    uint64_t *slots;
    size_t mask;
} CrcSet;

/* Add crc to the set: 1 when it was not there. */
static inline int crc_set_add(CrcSet *set, uint32_t crc) {
    const uint64_t key = (uint64_t)crc | ((uint64_t)1 << 32);
    size_t i = (size_t)crc & set->mask; /* a CRC-32 is already well mixed */
    for (;;) {
        const uint64_t slot = set->slots[i];
        if (slot == key) return 0;
        if (slot == 0) {
            set->slots[i] = key;
            return 1;
        }
        i = (i + 1) & set->mask;
    }
}

/* Is crc in the set? */
static inline int crc_set_has(const CrcSet *set, uint32_t crc) {
    const uint64_t key = (uint64_t)crc | ((uint64_t)1 << 32);
    for (size_t i = (size_t)crc & set->mask;; i = (i + 1) & set->mask) {
        const uint64_t slot = set->slots[i];
        if (slot == key) return 1;
        if (slot == 0) return 0;
    }
}

/* Sort vals[0..count) in place. Insertion sort alone mispredicts a branch at most of its steps on random values;
   a first pass that places each value by its top bits (CRCs are spread evenly, so each bucket holds few) leaves it
   almost nothing to move: three times faster at 64 values. About one bucket a value (32 to 256 of them: the top 5
   to 8 bits), so that a short list does not pay for 256 empty buckets. */
static void sort_crcs(uint32_t *vals, Py_ssize_t count) {
    if (count > 16) {
        uint32_t small[256];
        uint32_t *placed = count <= 256 ? small : (uint32_t *)malloc(sizeof(uint32_t) * (size_t)count);
        if (placed != NULL) { /* without the memory, insertion sort alone gives the same order */
            int shift = 27; /* 32 buckets */
            while (shift > 24 && ((Py_ssize_t)1 << (32 - shift)) < count) shift--;
            const int buckets = 1 << (32 - shift);
            Py_ssize_t starts[256];
            memset(starts, 0, sizeof(Py_ssize_t) * (size_t)buckets);
            for (Py_ssize_t i = 0; i < count; i++) starts[vals[i] >> shift]++;
            Py_ssize_t at = 0;
            for (int b = 0; b < buckets; b++) {
                const Py_ssize_t size = starts[b];
                starts[b] = at;
                at += size;
            }
            for (Py_ssize_t i = 0; i < count; i++) placed[starts[vals[i] >> shift]++] = vals[i];
            memcpy(vals, placed, sizeof(uint32_t) * (size_t)count);
            if (placed != small) free(placed);
        }
    }
    for (Py_ssize_t i = 1; i < count; i++) {
        const uint32_t v = vals[i];
        Py_ssize_t j = i;
        while (j > 0 && vals[j - 1] > v) {
            vals[j] = vals[j - 1];
            j--;
        }
        vals[j] = v;
    }
}

PyDoc_STRVAR(alnum_word_pair_doc,
             "alnum_word_pair(text: str, limit: int) -> tuple[bytes, bytes]\n--\n\n"
             "CRC-32s (of the UTF-8 bytes) of the first ``limit`` distinct words (runs of letters and digits) of "
             "``text.lower()``, sorted and packed 4 bytes each in the machine's order (``array('I')``); and, in the "
             "same pass, those of the first ``limit`` distinct words not made of ASCII digits only. One bytes object "
             "twice when the two are equal.");

static PyObject *alnum_word_pair(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    WordScan scan;
    if (word_scan_start("alnum_word_pair", args, nargs, &scan) < 0) return NULL;
    Py_ssize_t room = scan.limit < scan.n / 2 + 1 ? scan.limit : scan.n / 2 + 1;
    size_t slots = 4; /* per set: a power of two, at least twice ``room`` */
    while (slots < 2 * (size_t)room) slots *= 2;
    uint32_t small[128];
    uint64_t small_slots[2 * 128];
    uint32_t *vals = room <= 64 ? small : (uint32_t *)malloc(sizeof(uint32_t) * 2 * (size_t)room);
    uint64_t *table = slots <= 128 ? small_slots : (uint64_t *)malloc(sizeof(uint64_t) * 2 * slots);
    if (vals == NULL || table == NULL) {
        if (vals != NULL && vals != small) free(vals);
        if (table != NULL && table != small_slots) free(table);
        Py_DECREF(scan.text);
        return PyErr_NoMemory();
    }
    memset(table, 0, sizeof(uint64_t) * 2 * slots);
    CrcSet seen = {table, slots - 1}, seen_named = {table + slots, slots - 1};
    uint32_t *words = vals, *names = vals + room;
    Py_ssize_t count = 0, named = 0;
    uint32_t crc;
    int number;
    /* the first ``limit`` distinct words (and distinct words that are not numbers) in the text's order, sorted
       once at the end */
    while ((count < scan.limit || named < scan.limit) && word_scan_next(&scan, &crc, &number)) {
        if (count < scan.limit && crc_set_add(&seen, crc)) words[count++] = crc;
        if (!number && named < scan.limit && crc_set_add(&seen_named, crc)) names[named++] = crc;
    }
    Py_DECREF(scan.text);
    sort_crcs(words, count);
    sort_crcs(names, named);
    PyObject *all = PyBytes_FromStringAndSize((const char *)words, (Py_ssize_t)sizeof(uint32_t) * count);
    PyObject *out = NULL;
    if (all != NULL) {
        if (named == count && memcmp(words, names, sizeof(uint32_t) * (size_t)count) == 0) {
            out = PyTuple_Pack(2, all, all);
        } else {
            PyObject *rest = PyBytes_FromStringAndSize((const char *)names, (Py_ssize_t)sizeof(uint32_t) * named);
            if (rest != NULL) {
                out = PyTuple_Pack(2, all, rest);
                Py_DECREF(rest);
            }
        }
        Py_DECREF(all);
    }
    if (vals != small) free(vals);
    if (table != small_slots) free(table);
    return out;
}

PyDoc_STRVAR(shared_words_doc,
             "shared_words(a: bytes, b: bytes) -> tuple[int, int, int]\n--\n\n"
             "Two sets of word hashes packed 4 bytes each (:func:`alnum_word_pair`): how many values they share, "
             "and how many distinct values each holds.");

static int cmp_u32(const void *x, const void *y) {
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return (a > b) - (a < b);
}

/* The packed values of ``obj``, sorted and distinct, in a copy ``*vals`` (``*own`` 1: free it; the values are sorted
   only when they are not already). Returns the count, or -1 (an exception set). */
static Py_ssize_t distinct_words(PyObject *obj, const char *which, uint32_t **vals, int *own) {
    if (!PyBytes_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "shared_words() expects bytes for %s, not %.100s", which, Py_TYPE(obj)->tp_name);
        return -1;
    }
    Py_ssize_t size = PyBytes_GET_SIZE(obj);
    if (size % 4) {
        PyErr_Format(PyExc_ValueError, "shared_words(): %s is not a whole number of 4-byte values", which);
        return -1;
    }
    Py_ssize_t n = size / 4;
    const char *raw = PyBytes_AS_STRING(obj);
    uint32_t *copy = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)(n ? n : 1));
    if (copy == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(copy, raw, (size_t)size); /* the bytes may not be aligned for uint32_t: read through a copy */
    int sorted = 1;
    for (Py_ssize_t i = 1; i < n && sorted; i++) sorted = copy[i - 1] < copy[i];
    if (!sorted) {
        qsort(copy, (size_t)n, sizeof(uint32_t), cmp_u32);
        Py_ssize_t k = 0;
        for (Py_ssize_t i = 0; i < n; i++)
            if (k == 0 || copy[k - 1] != copy[i]) copy[k++] = copy[i];
        n = k;
    }
    *vals = copy;
    *own = 1;
    return n;
}

static PyObject *shared_words(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "shared_words() takes exactly 2 arguments");
        return NULL;
    }
    uint32_t *a = NULL, *b = NULL;
    int own_a = 0, own_b = 0;
    Py_ssize_t na = distinct_words(args[0], "a", &a, &own_a);
    if (na < 0) return NULL;
    Py_ssize_t nb = distinct_words(args[1], "b", &b, &own_b);
    if (nb < 0) {
        if (own_a) free(a);
        return NULL;
    }
    Py_ssize_t i = 0, j = 0, shared = 0;
    while (i < na && j < nb) {
        if (a[i] < b[j])
            i++;
        else if (a[i] > b[j])
            j++;
        else {
            shared++;
            i++;
            j++;
        }
    }
    if (own_a) free(a);
    if (own_b) free(b);
    return Py_BuildValue("(nnn)", shared, na, nb);
}

/* -- rest_hash -------------------------------------------------------------------------------------------- */

PyDoc_STRVAR(rest_hash_doc,
             "rest_hash(data: bytes, known: bytes) -> int\n--\n\n"
             "The CRC-32 of the words (runs of letters and digits) of ``data`` decoded as UTF-8 and lowercased, "
             "without those whose hash is among ``known`` (packed 4 bytes each, as alnum_word_pair packs them), "
             "joined by single spaces: what a text says beyond the words it was asked with.");

static PyObject *rest_hash(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "rest_hash() takes exactly 2 arguments");
        return NULL;
    }
    PyObject *data = args[0], *known = args[1];
    /* bad arguments (the twin names the one at fault), and text that is not ASCII (Unicode's letters, digits and
       lowercase), go to the twin */
    int twin = !PyBytes_Check(data) || !PyBytes_Check(known) || PyBytes_GET_SIZE(known) % 4;
    const unsigned char *s = twin ? NULL : (const unsigned char *)PyBytes_AS_STRING(data);
    const Py_ssize_t n = twin ? 0 : PyBytes_GET_SIZE(data);
    for (Py_ssize_t i = 0; i < n && !twin; i++) twin = s[i] >= 0x80;
    if (twin) {
        PyObject *pair = PyTuple_Pack(2, data, known);
        if (pair == NULL) return NULL;
        PyObject *out = call_pure("rest_hash", pair);
        Py_DECREF(pair);
        return out;
    }
    const Py_ssize_t nknown = PyBytes_GET_SIZE(known) / 4;
    size_t slots = 4; /* a power of two, at least twice the values held */
    while (slots < 2 * (size_t)nknown) slots *= 2;
    uint64_t small_slots[128];
    uint64_t *table = slots <= 128 ? small_slots : (uint64_t *)malloc(sizeof(uint64_t) * slots);
    if (table == NULL) return PyErr_NoMemory();
    memset(table, 0, sizeof(uint64_t) * slots);
    CrcSet asked = {table, slots - 1};
    const char *raw = PyBytes_AS_STRING(known);
    for (Py_ssize_t i = 0; i < nknown; i++) {
        uint32_t value;
        memcpy(&value, raw + 4 * i, 4); /* the machine's order, as array('I') packs; maybe unaligned */
        crc_set_add(&asked, value);
    }
    uint32_t rest = CRC_START;
    int first = 1;
    Py_ssize_t p = 0;
    while (p < n) {
        while (p < n && !byte_alnum[s[p]]) p++;
        if (p == n) break;
        const Py_ssize_t start = p;
        uint32_t c = CRC_START;
        while (p < n && byte_alnum[s[p]]) c = CRC_BYTE(c, ascii_lower[s[p++]]);
        if (crc_set_has(&asked, CRC_FINAL(c))) continue; /* a word the text was asked with */
        if (!first) rest = CRC_BYTE(rest, ' ');
        first = 0;
        for (Py_ssize_t i = start; i < p; i++) rest = CRC_BYTE(rest, ascii_lower[s[i]]);
    }
    if (table != small_slots) free(table);
    return PyLong_FromUnsignedLong(CRC_FINAL(rest));
}

/* -- best_similarity --------------------------------------------------------------------------------------- */

/* The bits two sets of ``size`` bytes share and the bits either holds (bit counts do not care for the byte order). */
static inline __attribute__((always_inline)) void sketch_counts(const unsigned char *a, const unsigned char *b,
                                                                Py_ssize_t size, uint64_t *both_out,
                                                                uint64_t *either_out) {
    uint64_t both = 0, either = 0;
    Py_ssize_t i = 0;
    for (; i + 8 <= size; i += 8) {
        uint64_t x, y;
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        both += (uint64_t)__builtin_popcountll(x & y);
        either += (uint64_t)__builtin_popcountll(x | y);
    }
    for (; i < size; i++) {
        both += (uint64_t)__builtin_popcount((unsigned)(a[i] & b[i]));
        either += (uint64_t)__builtin_popcount((unsigned)(a[i] | b[i]));
    }
    *both_out = both;
    *either_out = either;
}

#ifdef X86_SIMD
/* The same with the processor's bit count instruction (asked at run time; the other calls a library function for
   each 8 bytes). */
__attribute__((target("popcnt"))) static void sketch_counts_popcnt(const unsigned char *a, const unsigned char *b,
                                                                  Py_ssize_t size, uint64_t *both_out,
                                                                  uint64_t *either_out) {
    sketch_counts(a, b, size, both_out, either_out);
}
#endif

PyDoc_STRVAR(best_similarity_doc,
             "best_similarity(history: bytes, sketch: bytes) -> float | None\n--\n\n"
             "The highest Jaccard similarity of the folded set ``sketch`` (big-endian bytes) to each of the sets "
             "packed one after another in ``history`` (each as long as ``sketch``); 0.0 for two empty sets, ``None`` "
             "when ``history`` is empty.");

static PyObject *best_similarity(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "best_similarity() takes exactly 2 arguments");
        return NULL;
    }
    static const char *const names[2] = {"history", "sketch"};
    for (int i = 0; i < 2; i++) {
        if (!PyBytes_Check(args[i])) {
            PyErr_Format(PyExc_TypeError, "best_similarity() expects bytes for %s, not %.100s", names[i],
                         Py_TYPE(args[i])->tp_name);
            return NULL;
        }
    }
    const unsigned char *h = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(args[1]);
    const Py_ssize_t nh = PyBytes_GET_SIZE(args[0]), size = PyBytes_GET_SIZE(args[1]);
    if (size == 0 || nh % size) {
        PyErr_SetString(PyExc_ValueError,
                        "best_similarity(): history is not a whole number of sketches as long as the one given");
        return NULL;
    }
    if (nh == 0) Py_RETURN_NONE;
    double best = -1.0;
    for (Py_ssize_t at = 0; at < nh; at += size) {
        uint64_t both = 0, either = 0;
#ifdef X86_SIMD
        if (popcnt_instruction)
            sketch_counts_popcnt(h + at, b, size, &both, &either);
        else
#endif
            sketch_counts(h + at, b, size, &both, &either);
        const double similarity = either ? (double)both / (double)either : 0.0;
        if (similarity > best) best = similarity;
    }
    return PyFloat_FromDouble(best);
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

/* Sets the bit of ``value`` in a folded set of ``mask + 1`` bits (``words``): bit ``value & mask``, as fold does. */
static inline void fold_in(uint64_t *words, uint64_t value, uint64_t mask) {
    const uint64_t bit = value & mask;
    words[bit >> 6] |= (uint64_t)1 << (bit & 63);
}

/* The first place in the sorted values[0..n) whose value is >= v: a binary search whose steps are conditional moves,
   not branches a processor mispredicts half the time (the number of steps depends on n alone). */
static inline Py_ssize_t lower_bound_u64(const uint64_t *values, Py_ssize_t n, uint64_t v) {
    if (n == 0) return 0;
    const uint64_t *base = values;
    while (n > 1) {
        Py_ssize_t half = n / 2;
        base = base[half] < v ? base + half : base;
        n -= half;
    }
    return (base - values) + (*base < v);
}

/* The k smallest distinct values folded into words[0:nwords]. With no more values than k, all of them, unsorted (a
   repeat sets the same bit); for a small k they are kept sorted as they come (most values are larger than the k-th
   smallest so far and cost one comparison); otherwise all are sorted. */
static void fold_bottom_k(uint64_t *values, Py_ssize_t n, Py_ssize_t k, uint64_t *words, Py_ssize_t nwords) {
    uint64_t mask = (uint64_t)nwords * 64 - 1;
    memset(words, 0, sizeof(uint64_t) * (size_t)nwords);
    if (k >= n) {
        for (Py_ssize_t i = 0; i < n; i++) fold_in(words, values[i], mask);
        return;
    }
    Py_ssize_t taken = 0;
    if (k > 0 && k <= SMALL_K) {
        uint64_t best[SMALL_K];
        for (Py_ssize_t i = 0; i < n; i++) {
            uint64_t v = values[i];
            if (taken == k && v >= best[k - 1]) continue;
            Py_ssize_t lo = lower_bound_u64(best, taken, v);
            if (lo < taken && best[lo] == v) continue;
            Py_ssize_t last = taken < k ? taken : k - 1;
            memmove(best + lo + 1, best + lo, sizeof(uint64_t) * (size_t)(last - lo));
            best[lo] = v;
            if (taken < k) taken++;
        }
        for (Py_ssize_t i = 0; i < taken; i++) fold_in(words, best[i], mask);
        return;
    }
    qsort(values, (size_t)n, sizeof(uint64_t), compare_u64);
    for (Py_ssize_t i = 0; i < n && taken < k; i++) {
        if (i > 0 && values[i] == values[i - 1]) continue;
        fold_in(words, values[i], mask);
        taken++;
    }
}

/* Is nargs the count of (data, [k,] bits)? Else a TypeError naming ``name``. */
static int sizes_counted(Py_ssize_t nargs, int with_k, const char *name) {
    const Py_ssize_t want = with_k ? 3 : 2;
    if (nargs == want) return 1;
    PyErr_Format(PyExc_TypeError, "%s() takes exactly %zd arguments", name, want);
    return 0;
}

/* k (with_k) and bits, the sizes after a sketch kernel's first argument: a size that is not an int, or too large
   for C, is left to the twin (k = -1 and bits = 0 send it there). */
static void read_sizes(PyObject *const *args, int with_k, Py_ssize_t *k, Py_ssize_t *bits) {
    if (with_k) {
        *k = PyLong_Check(args[1]) ? PyLong_AsSsize_t(args[1]) : -1;
        if (*k == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            *k = -1;
        }
    }
    PyObject *size = args[with_k ? 2 : 1];
    *bits = PyLong_Check(size) ? PyLong_AsSsize_t(size) : 0;
    if (*bits == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        *bits = 0;
    }
}

/* parse (hashes, [k,] bits); returns the hashes as a list or tuple (new reference) or NULL */
static PyObject *parse_sizes(PyObject *const *args, Py_ssize_t nargs, int with_k, const char *name, Py_ssize_t *k,
                             Py_ssize_t *bits) {
    if (!sizes_counted(nargs, with_k, name)) return NULL;
    read_sizes(args, with_k, k, bits);
    return PySequence_Fast(args[0], "hashes must be iterable");
}

/* parse (data, [k,] bits) with data bytes (else a TypeError naming ``name``, and ``what`` the argument is: "" or
   " for NAME"); 1, or 0 with the exception set */
static int parse_bytes_sizes(PyObject *const *args, Py_ssize_t nargs, int with_k, const char *name, const char *what,
                             Py_ssize_t *k, Py_ssize_t *bits) {
    if (!sizes_counted(nargs, with_k, name)) return 0;
    if (!PyBytes_Check(args[0])) {
        PyErr_Format(PyExc_TypeError, "%s() expects bytes%s, not %.100s", name, what, Py_TYPE(args[0])->tp_name);
        return 0;
    }
    read_sizes(args, with_k, k, bits);
    return 1;
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
        for (Py_ssize_t i = 0; i < n; i++) fold_in(words, values[i], mask);
    }
    free(values);
    return output == AS_TEXT ? words_to_text(words, nwords) : words_to_int(words, nwords);
}

PyDoc_STRVAR(fold_words_doc,
             "fold_words(words: bytes, k: int, bits: int) -> int\n--\n\n"
             "The first ``k`` word hashes packed 4 bytes each (as alnum_word_pair packs them, sorted: its bottom-k) "
             "folded into ``bits`` bits, as an integer: fold(array('I', words)[:k], bits), without a Python int "
             "for each.");

static PyObject *fold_words(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t k = -1, bits = 0;
    if (!parse_bytes_sizes(args, nargs, 1, "fold_words", " for words", &k, &bits)) return NULL;
    const Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    if (size % 4) {
        PyErr_SetString(PyExc_ValueError, "fold_words(): words is not a whole number of 4-byte values");
        return NULL;
    }
    if (k < 0 || !bits_supported(bits)) return pure_with("fold_words", args[0], args, nargs); /* the twin decides */
    const unsigned char *p = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    const Py_ssize_t count = size / 4 < k ? size / 4 : k;
    const uint64_t mask = (uint64_t)bits - 1;
    uint64_t words[MAX_WORDS] = {0};
    for (Py_ssize_t i = 0; i < count; i++) {
        uint32_t value;
        memcpy(&value, p + 4 * i, 4); /* the machine's order, as array("I") holds it */
        fold_in(words, value, mask);
    }
    return words_to_int(words, bits / 64);
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

PyDoc_STRVAR(line_bits_doc, "line_bits(data: bytes, bits: int) -> int\n--\n\n"
                            "fold(line_hashes(data), bits): the lines' CRCs folded into ``bits`` bits, without a set.");

PyDoc_STRVAR(unquoted_line_bits_doc,
             "unquoted_line_bits(data: bytes, bits: int) -> int\n--\n\n"
             "line_bits(data, bits) with each line's quoted strings (QUOTED) dropped before it is hashed.");

static PyObject *folded_lines(PyObject *const *args, Py_ssize_t nargs, int unquoted, const char *name) {
    Py_ssize_t bits = 0;
    if (!parse_bytes_sizes(args, nargs, 0, name, "", NULL, &bits)) return NULL;
    if (!bits_supported(bits)) return pure_with(name, args[0], args, nargs); /* the twin decides */
    Py_ssize_t n = PyBytes_GET_SIZE(args[0]);
    if (n > LINE_BYTES) n = LINE_BYTES;
    uint32_t crcs[LINE_BYTES + 1];
    const Py_ssize_t count = line_crcs((const unsigned char *)PyBytes_AS_STRING(args[0]), n, crcs, unquoted);
    uint64_t words[MAX_WORDS];
    const Py_ssize_t nwords = bits / 64;
    const uint64_t mask = (uint64_t)bits - 1;
    memset(words, 0, sizeof(words));
    for (Py_ssize_t i = 0; i < count; i++) fold_in(words, crcs[i], mask);
    return words_to_int(words, nwords);
}

static PyObject *line_bits(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return folded_lines(args, nargs, 0, "line_bits");
}

static PyObject *unquoted_line_bits(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return folded_lines(args, nargs, 1, "unquoted_line_bits");
}

PyDoc_STRVAR(word_sketch_doc,
             "word_sketch(data: bytes, k: int, bits: int) -> int\n--\n\n"
             "bottom_k(word_hashes(data), k, bits): the sketch of a text's words, without a list of their hashes.");

/* bottom_k of the CRC-32s of the words of args[0] at least ``min_len`` bytes long (args: data, k, bits) */
static PyObject *sketch_words(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t min_len, const char *name) {
    Py_ssize_t k = -1, bits = 0;
    if (!parse_bytes_sizes(args, nargs, 1, name, "", &k, &bits)) return NULL;
    if (k < 0 || !bits_supported(bits)) return pure_with(name, args[0], args, nargs); /* the twin decides */
    const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t n = PyBytes_GET_SIZE(args[0]);
    uint64_t *values = (uint64_t *)malloc(sizeof(uint64_t) * (size_t)(n / 2 + 1));
    if (values == NULL) return PyErr_NoMemory();
    Py_ssize_t count = 0, p = 0, len;
    uint32_t crc;
    while ((len = next_space_word(s, n, &p, &crc)) > 0) /* the words of word_hashes (long_word_hashes) */
        if (len >= min_len) values[count++] = crc;
    uint64_t words[MAX_WORDS];
    Py_ssize_t nwords = bits / 64;
    fold_bottom_k(values, count, k, words, nwords);
    free(values);
    return words_to_int(words, nwords);
}

static PyObject *word_sketch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return sketch_words(args, nargs, 1, "word_sketch");
}

PyDoc_STRVAR(long_word_sketch_doc,
             "long_word_sketch(data: bytes, k: int, bits: int) -> int\n--\n\n"
             "bottom_k(long_word_hashes(data), k, bits): the sketch of a text's words of two bytes or more.");

static PyObject *long_word_sketch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    return sketch_words(args, nargs, 2, "long_word_sketch");
}

/* -- masked_bytes: loopwatch.core._masking's volatile parts removed -------------------------------------------------

   The same scan as masking.volatile_spans (see its docstrings for what each kind is), written out: each regular
   expression it tries at an anchor is a loop here, with the regular expression's backtracking worked out by hand
   (the comments give the expression). Only the union of the spans matters for the masked text, so spans are
   collected, sorted and cut out; their kinds are not kept, and neither is the order they are found in. That lets
   one pass look for several anchors at once: each anchor keeps its own "resume from" position (where masking's
   ``find(anchor, end)`` would look next), so each finds exactly the spans its own scan finds.

   Two passes, each reading the text 8 bytes at a time:
   - the whole text, for the anchors made of digits and hex characters (times of day, durations, UUIDs, addresses,
     hex ids, long numbers): the digits and hex characters of 8 bytes are found at once, as bits, and only the few
     places where an anchor may be are looked at (mask_digits_and_hex);
   - the first and last 1 KB, for the rare kinds (process ids, shell line numbers, temporary paths): 7 byte pairs
     at a time are looked up in a table of the pairs their anchors start with, which finds the anchors that occur
     and where first; each is then followed from there (mask_rare).
   Then, where curl's progress meter header is, its rows (mask_meters). */

/* byte classes: one table look-up where a chain of comparisons would be */
enum { B_DIGIT = 1, B_HEX = 2, B_LETTER = 4, B_LOWER = 8, B_UNIT = 16, B_SPACE = 32 };
static unsigned char byte_class[256];

#define IS_DIGIT(c) (byte_class[(unsigned char)(c)] & B_DIGIT)              /* [0-9] */
#define IS_HEX(c) (byte_class[(unsigned char)(c)] & B_HEX)                  /* [0-9a-fA-F] */
#define IS_LETTER(c) (byte_class[(unsigned char)(c)] & B_LETTER)            /* [A-Za-z] */
#define IS_ALNUM(c) (byte_class[(unsigned char)(c)] & (B_DIGIT | B_LETTER)) /* [0-9A-Za-z] */
#define IS_LOWER(c) (byte_class[(unsigned char)(c)] & B_LOWER)              /* [a-z] */
#define IS_UNIT_START(c) (byte_class[(unsigned char)(c)] & B_UNIT)          /* s, m, u, n, and 0xC2 (µ's first byte) */
#define IS_RE_SPACE(c) (byte_class[(unsigned char)(c)] & B_SPACE)           /* the re module's \s: " \t\n\r\x0b\x0c" */

static void byte_class_init(void) {
    for (int c = 0; c < 256; c++) {
        int digit = c >= '0' && c <= '9', lower = c >= 'a' && c <= 'z', upper = c >= 'A' && c <= 'Z';
        int hex = digit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
        int unit = c == 's' || c == 'm' || c == 'u' || c == 'n' || c == 0xC2;
        int space = c == ' ' || (c >= '\t' && c <= '\r');
        byte_class[c] = (unsigned char)((digit ? B_DIGIT : 0) | (hex ? B_HEX : 0) | (lower || upper ? B_LETTER : 0) |
                                        (lower ? B_LOWER : 0) | (unit ? B_UNIT : 0) | (space ? B_SPACE : 0));
    }
}

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

/* -- times and durations -- */

/* the shape "0:00:00" at the digit at: \d:\d\d:\d\d */
static int clock_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t at) {
    return at + 7 <= n && s[at + 1] == ':' && IS_DIGIT(s[at + 2]) && IS_DIGIT(s[at + 3]) && s[at + 4] == ':' &&
           IS_DIGIT(s[at + 5]) && IS_DIGIT(s[at + 6]);
}

/* \d{4}-\d\d-\d\d[T ] at s[0:11] */
static int date_at(const unsigned char *s) {
    return IS_DIGIT(s[0]) && IS_DIGIT(s[1]) && IS_DIGIT(s[2]) && IS_DIGIT(s[3]) && s[4] == '-' && IS_DIGIT(s[5]) &&
           IS_DIGIT(s[6]) && s[7] == '-' && IS_DIGIT(s[8]) && IS_DIGIT(s[9]) && (s[10] == 'T' || s[10] == ' ');
}

/* masking._times at a clock_at: the time of day (with its date before it, if any) is a span when it is a whole
   word. Returns where the scan for the next time goes on (the end of this one), or -1 when out of memory. */
static Py_ssize_t time_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t at, span_list *spans) {
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
    return p;
}

static const char *const time_units[] = {"ns",  "us",   "\xc2\xb5s", "ms",     "s",      "sec",     "secs",
                                         "second", "seconds", "min", "mins", "minute", "minutes"};

static int is_time_unit(const unsigned char *s, Py_ssize_t len) {
    for (size_t i = 0; i < sizeof(time_units) / sizeof(time_units[0]); i++)
        if ((Py_ssize_t)strlen(time_units[i]) == len && memcmp(s, time_units[i], (size_t)len) == 0) return 1;
    return 0;
}

/* masking._durations at the shape "0L" (gap 0: a digit, then a byte a unit starts with) or "0_L" (gap 1: a digit,
   a space, then that byte) at at: the number and its unit are a span when the unit is a unit of time. Returns where
   the scan for the next "0L" (or "0_L") goes on, or -1 when out of memory. */
static Py_ssize_t duration_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t at, int gap, span_list *spans) {
    Py_ssize_t unit_at = at + 1 + gap, end = unit_at + 1;
    unsigned char first = s[unit_at];
    if (unit_at + 1 < n && IS_LETTER(s[unit_at + 1])) {
        unsigned char second = s[unit_at + 1];
        int starts_unit = (first == 's' && second == 'e') || (first == 'm' && second == 's') ||
                          (first == 'u' && second == 's') || (first == 'n' && second == 's') ||
                          (first == 'm' && second == 'i');
        if (!starts_unit) return end; /* "12 src", "3 new": a word, not a unit */
    }
    /* _UNIT: (?:\xc2\xb5)?[a-z]+ */
    Py_ssize_t q = unit_at;
    if (first == 0xC2) q = (q + 2 < n && s[q + 1] == 0xB5 && IS_LOWER(s[q + 2])) ? q + 2 : -1;
    if (q < 0 || !IS_LOWER(s[q])) return end;
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
    return end;
}

/* -- runs of hex characters -- */

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

/* masking._hex_runs at a run of 6 or more hex characters s[at:end] (the whole run: hexes.find("000000") lands on
   a run's start): a UUID from at, an address ("0x" before the run), a hex id or a long number is a span. Returns
   where the scan goes on (after the UUID, else the run's end), or -1 when out of memory. */
static Py_ssize_t hex_run_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t at, Py_ssize_t end, span_list *spans) {
    if (uuid_at(s, n, at) && word_edge(s, n, at, at + 36)) return add_span(spans, at, at + 36) < 0 ? -1 : at + 36;
    if (at >= 2 && s[at - 2] == '0' && (s[at - 1] == 'x' || s[at - 1] == 'X') && word_edge(s, n, at - 2, end))
        return add_span(spans, at - 2, end) < 0 ? -1 : end;
    if (!word_edge(s, n, at, end)) return end;
    int digits_only = 1, changes = 0;
    for (Py_ssize_t i = at; i < end; i++) {
        if (!IS_DIGIT(s[i])) digits_only = 0;
        if (i > at && !IS_DIGIT(s[i]) != !IS_DIGIT(s[i - 1])) changes++;
    }
    int keep = digits_only ? end - at >= 10 : changes >= 2;
    return (keep && add_span(spans, at, end) < 0) ? -1 : end;
}

/* -- one pass over the text, 8 bytes at a time, for the anchors made of digits and hex characters -- */

/* Which bytes of w are a-f or A-F, the same way as digit_bits: (w | 0x20) ^ 0x60 turns those, and only them, into
   bytes 1 to 6. */
static inline uint64_t hex_letter_bits(uint64_t w) {
    uint64_t y = (w | (ONES * 0x20)) ^ (ONES * 0x60), low = y & (ONES * 0x7F);
    uint64_t one_or_more = (low + ONES * 0x7F) | y, seven_or_more = (low + ONES * (0x80 - 7)) | y;
    return one_or_more & ~seven_or_more & (ONES * 0x80);
}

/* A byte flag of each of 8 bytes (the top bit of each byte: digit_bits, hex_letter_bits) as 8 bits, bit i for byte
   i: the products of the distinct flags never meet, so the top byte of the product holds each flag once. */
static inline uint64_t flags_packed(uint64_t top_bits) {
    return ((top_bits >> 7) * UINT64_C(0x0102040810204080)) >> 56;
}

/* Which bytes of p[0:64] are digits and which are hex characters, bit i for p[i]. */
static void block_bits_swar(const unsigned char *p, uint64_t *digits, uint64_t *hex) {
    uint64_t d = 0, h = 0;
    for (int i = 0; i < 8; i++) {
        const uint64_t w = word_at(p, 64, 8 * i), dw = digit_bits(w);
        d |= flags_packed(dw) << (8 * i);
        h |= flags_packed(dw | hex_letter_bits(w)) << (8 * i);
    }
    *digits = d;
    *hex = h;
}

#ifdef X86_SIMD
/* block_bits_swar with AVX2: 32 bytes a comparison. */
__attribute__((target("avx2"))) static void block_bits_avx2(const unsigned char *p, uint64_t *digits, uint64_t *hex) {
    const __m256i zero = _mm256_set1_epi8('0'), nine = _mm256_set1_epi8(9), case_bit = _mm256_set1_epi8(0x20),
                  a = _mm256_set1_epi8('a'), five = _mm256_set1_epi8(5);
    uint64_t d = 0, h = 0;
    for (int half = 0; half < 2; half++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(p + 32 * half));
        const __m256i from_zero = _mm256_sub_epi8(v, zero), from_a = _mm256_sub_epi8(_mm256_or_si256(v, case_bit), a);
        /* x <= k unsigned: min(x, k) == x */
        const __m256i digit = _mm256_cmpeq_epi8(_mm256_min_epu8(from_zero, nine), from_zero);
        const __m256i letter = _mm256_cmpeq_epi8(_mm256_min_epu8(from_a, five), from_a);
        d |= (uint64_t)(uint32_t)_mm256_movemask_epi8(digit) << (32 * half);
        h |= (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_or_si256(digit, letter)) << (32 * half);
    }
    *digits = d;
    *hex = h;
}
#endif

/* The digits and hex characters of s[at:at + 64] as bits (bytes past n are neither). */
static inline void block_bits(const unsigned char *s, Py_ssize_t n, Py_ssize_t at, uint64_t *digits, uint64_t *hex) {
    unsigned char padded[64];
    const unsigned char *p = block_at(s, n, at, padded);
#ifdef X86_SIMD
    if (avx2_instructions) {
        block_bits_avx2(p, digits, hex);
        return;
    }
#endif
    block_bits_swar(p, digits, hex);
}

/* masking._times, masking._durations and masking._hex_runs in one pass. For each 64 bytes (and the 64 after them,
   as an anchor may go on there), the digits and the hex characters are found as bits (32 bytes a comparison with
   AVX2, else 8 at a time); then
   - times and durations: each of their anchors ("0:00:00", "0L", "0_L") is a digit followed by ':', a space or a
     byte a unit starts with, so it can only be at the last digit of a number. Each anchor is tried at those digits
     its own scan has reached (where masking's shape.find(anchor, end) would look next);
   - hex runs: hexes.find("000000") lands on the start of a run of 6 or more hex characters: a byte that is hex, the
     5 after it too, and not the one before it. Each is judged as a whole run unless it is inside a UUID found
     before it (where masking's scan goes on).
   Bits are only set for anchors, which are few, and nothing else in the 64 bytes is looked at. */
static int mask_digits_and_hex(const unsigned char *s, Py_ssize_t n, span_list *spans) {
    Py_ssize_t time_from = 0, unit_from = 0, spaced_unit_from = 0, hex_from = 0; /* where each scan goes on */
    uint64_t digits, hex, hex_before = 0;
    block_bits(s, n, 0, &digits, &hex);
    for (Py_ssize_t at = 0; at < n; at += 64) {
        uint64_t next_digits, next_hex;
        block_bits(s, n, at + 64, &next_digits, &next_hex);

        uint64_t last_digits = digits & ~((digits >> 1) | (next_digits << 63)); /* the next byte is not a digit */
        for (; last_digits; last_digits &= last_digits - 1) {
            Py_ssize_t p = at + __builtin_ctzll(last_digits);
            if (p >= time_from && clock_at(s, n, p)) {
                time_from = time_at(s, n, p, spans);
                if (time_from < 0) return -1;
            }
            if (p >= unit_from && p + 2 <= n && IS_UNIT_START(s[p + 1])) { /* "0L" */
                unit_from = duration_at(s, n, p, 0, spans);
                if (unit_from < 0) return -1;
            }
            if (p >= spaced_unit_from && p + 3 <= n && s[p + 1] == ' ' && IS_UNIT_START(s[p + 2])) { /* "0_L" */
                spaced_unit_from = duration_at(s, n, p, 1, spans);
                if (spaced_unit_from < 0) return -1;
            }
        }

        uint64_t pairs = hex & ((hex >> 1) | (next_hex << 63));         /* bytes i and i + 1 are hex */
        uint64_t next_pairs = next_hex & (next_hex >> 1);              /* the same in the next 64 (its last unused) */
        uint64_t fours = pairs & ((pairs >> 2) | (next_pairs << 62));  /* i to i + 3 */
        uint64_t sixes = fours & ((pairs >> 4) | (next_pairs << 60));  /* i to i + 5 */
        uint64_t run_starts = sixes & ~((hex << 1) | (hex_before >> 63)); /* and not i - 1 */
        for (; run_starts; run_starts &= run_starts - 1) {
            Py_ssize_t p = at + __builtin_ctzll(run_starts), end = p + 6;
            if (p < hex_from) continue; /* inside a UUID */
            while (end < n && IS_HEX(s[end])) end++;
            hex_from = hex_run_at(s, n, p, end, spans);
            if (hex_from < 0) return -1;
        }

        hex_before = hex;
        hex = next_hex;
        digits = next_digits;
    }
    return 0;
}

/* -- process ids, shell line numbers, temporary paths -- */

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

typedef struct {
    const char *text;
    int kind;
} rare_anchor;

/* masking._rare's anchors, in the order it follows them */
static const rare_anchor rare_anchors[] = {
    {"bash:", SHELL_LINE}, {"sh:", SHELL_LINE},      {"zsh:", SHELL_LINE},          {"dash:", SHELL_LINE},
    {"pid", PID},          {"PID", PID},             {"Pid", PID},                  {"process ", PID},
    {"Process ", PID},     {"/tmp/", TMP_PATH},      {"/var/folders/", TMP_PATH},   {"/private/var/", TMP_PATH},
    {"/var/tmp/", TMP_PATH}, {"tmp", TMP_NAME},      {"/var/", TMP_PATH},
};
#define N_RARE ((int)(sizeof(rare_anchors) / sizeof(rare_anchors[0])))
#define FIRST_TMP_ROOT 9    /* "/tmp/" ... "tmp": followed when "tmp" occurs in any case */
#define VAR_ANCHOR 14       /* "/var/": followed when "tmp" does not occur in any case */
#define TMP_ANY_CASE N_RARE /* a bit of its own: "tmp", "TMP", "Tmp"... */
_Static_assert(N_RARE + 1 <= 32, "an anchor is a bit of a 32-bit rare_byte");

/* bit i of rare_byte[k][c]: the byte k of rare anchor i is c (every anchor is 3 bytes or longer); bit TMP_ANY_CASE:
   the byte k of "tmp" in some case is c. The three looked up at a position and and-ed say which anchors may start
   there (exactly, for the anchors of 3 bytes). */
static uint32_t rare_byte[3][256];
static unsigned char rare_pair[256 * 256]; /* [first | second << 8]: some anchor starts with these two bytes */

static void rare_init(void) {
    for (int i = 0; i < N_RARE; i++)
        for (int k = 0; k < 3; k++) rare_byte[k][(unsigned char)rare_anchors[i].text[k]] |= UINT32_C(1) << i;
    for (int k = 0; k < 3; k++) {
        rare_byte[k][(unsigned char)"tmp"[k]] |= UINT32_C(1) << TMP_ANY_CASE;
        rare_byte[k][(unsigned char)"TMP"[k]] |= UINT32_C(1) << TMP_ANY_CASE;
    }
    for (int first = 0; first < 256; first++)
        for (int second = 0; second < 256; second++)
            rare_pair[first | second << 8] = (rare_byte[0][first] & rare_byte[1][second]) != 0;
}

/* masking._anchored (and _shell_lines: a shell's span starts after its "sh:" and the scan goes on from there) for
   one anchor, from its first occurrence at */
static int anchored(const unsigned char *s, Py_ssize_t n, Py_ssize_t offset, Py_ssize_t at, const rare_anchor *anchor,
                    span_list *spans) {
    Py_ssize_t alen = (Py_ssize_t)strlen(anchor->text);
    while (at >= 0) {
        Py_ssize_t end = -1, start = at;
        switch (anchor->kind) {
            case SHELL_LINE:
                start = at + alen;
                end = shell_line_at(s, n, start);
                break;
            case PID:
                end = pid_at(s, n, at, anchor->text[alen - 1] == ' ' ? alen - 1 : alen);
                break;
            case TMP_PATH:
                end = tmp_path_at(s, n, at);
                break;
            default:
                end = tmp_name_at(s, n, at);
        }
        int before = at == 0 || !IS_LETTER(s[at - 1]);
        if (end >= 0 && before && add_span(spans, start + offset, end + offset) < 0) return -1;
        if (anchor->kind == SHELL_LINE)
            at = find_bytes(s, n, at + alen, anchor->text);
        else
            at = find_bytes(s, n, (end >= 0 && before) ? end : at + 1, anchor->text);
    }
    return 0;
}

/* notes in first[] the anchors (and "tmp" in any case) that start at p and were not seen before */
static void note_rare_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t p, Py_ssize_t *first, uint32_t *unseen) {
    if (p + 3 > n) return;
    uint32_t here = rare_byte[0][s[p]] & rare_byte[1][s[p + 1]] & rare_byte[2][s[p + 2]] & *unseen;
    for (int i = 0; here; i++, here >>= 1) {
        if (!(here & 1)) continue;
        if (i < N_RARE) { /* the first 3 bytes match: the rest too? */
            Py_ssize_t len = (Py_ssize_t)strlen(rare_anchors[i].text);
            if (p + len > n || memcmp(s + p, rare_anchors[i].text, (size_t)len) != 0) continue;
        }
        first[i] = p;
        *unseen &= ~(UINT32_C(1) << i);
    }
}

/* masking._rare: process ids, shell line numbers and temporary paths in s[0:n], a part of the text at offset */
static int mask_rare(const unsigned char *s, Py_ssize_t n, Py_ssize_t offset, span_list *spans) {
    Py_ssize_t first[N_RARE + 1]; /* where each anchor (and "tmp" in any case) first occurs; -1: nowhere */
    for (int i = 0; i <= N_RARE; i++) first[i] = -1;
    uint32_t unseen = (UINT32_C(1) << (N_RARE + 1)) - 1;
    /* 7 positions at a time: the 7 byte pairs of an 8-byte load looked up in rare_pair (most often no anchor may
       start at any of them), then the last positions one at a time */
    Py_ssize_t p = 0;
    for (; p + 8 <= n; p += 7) {
        uint64_t w = word_at(s, n, p);
#define PAIR(i) rare_pair[(w >> (8 * (i))) & 0xFFFF]
        int may_start = PAIR(0) | PAIR(1) | PAIR(2) | PAIR(3) | PAIR(4) | PAIR(5) | PAIR(6);
#undef PAIR
        if (may_start)
            for (int i = 0; i < 7; i++) note_rare_at(s, n, p + i, first, &unseen);
    }
    for (; p < n; p++) note_rare_at(s, n, p, first, &unseen);
    /* shells and process ids: where their anchors occur (masking._rare's "sh:" and "pid"/"process " tests, in
       lowercase, hold whenever one does) */
    for (int i = 0; i < FIRST_TMP_ROOT; i++)
        if (first[i] >= 0 && anchored(s, n, offset, first[i], &rare_anchors[i], spans) < 0) return -1;
    /* temporary paths: with "tmp" somewhere (in any case), its four roots and generated names; else "/var/" */
    int any_tmp = first[TMP_ANY_CASE] >= 0;
    for (int i = any_tmp ? FIRST_TMP_ROOT : VAR_ANCHOR; i < (any_tmp ? VAR_ANCHOR : N_RARE); i++)
        if (first[i] >= 0 && anchored(s, n, offset, first[i], &rare_anchors[i], spans) < 0) return -1;
    return 0;
}

#define RARE_EDGE 1024

/* masking._meters: curl's progress meter, the rows under its header up to the first byte a row cannot hold
   ([0-9 kMGTP.:\r\n-]*) */
static int mask_meters(const unsigned char *s, Py_ssize_t n, span_list *spans) {
    static const char header[] = "Dload  Upload   Total   Spent    Left  Speed";
    Py_ssize_t at = find_bytes(s, n, 0, header);
    while (at >= 0) {
        Py_ssize_t start = at + (Py_ssize_t)(sizeof(header) - 1), end = start;
        while (end < n && (IS_DIGIT(s[end]) || strchr(" kMGTP.:\r\n-", s[end]) != NULL) && s[end] != '\0') end++;
        if (end > start && add_span(spans, start, end) < 0) return -1;
        at = find_bytes(s, n, end, header);
    }
    return 0;
}

static int compare_spans(const void *a, const void *b) {
    const Py_ssize_t *x = (const Py_ssize_t *)a, *y = (const Py_ssize_t *)b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

PyDoc_STRVAR(masked_bytes_doc, "masked_bytes(data: bytes) -> bytes\n--\n\n"
                               "``data`` without its volatile parts (see loopwatch.core._masking.volatile_spans).");

static PyObject *masked_bytes(PyObject *self, PyObject *arg) {
    if (!PyBytes_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "masked_bytes() expects bytes, not %.100s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(arg);
    Py_ssize_t n = PyBytes_GET_SIZE(arg);
    span_list spans = {NULL, 0, 0};
    int failed = mask_digits_and_hex(s, n, &spans) < 0;
    if (!failed) {
        if (n <= 2 * RARE_EDGE)
            failed = mask_rare(s, n, 0, &spans) < 0;
        else
            failed = mask_rare(s, RARE_EDGE, 0, &spans) < 0 || mask_rare(s + n - RARE_EDGE, RARE_EDGE, n - RARE_EDGE,
                                                                         &spans) < 0;
    }
    if (!failed) failed = mask_meters(s, n, &spans) < 0;
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

/* -- poll words -------------------------------------------------------------------------------------------- */

PyDoc_STRVAR(poll_word_doc,
             "poll_word(text: str) -> bool\n--\n\n"
             "Does one of the poll words (``sleep``, ``wait``, ``watch``, ``tail``, ``gh``, ``kubectl``, "
             "``docker``, ``squeue``, ``qstat``, ``ps``, ``curl``) begin ``text``, or follow a blank (``str.isspace``), "
             "``;``, ``&``, ``|`` or ``(`` in it? One pass, where the pure twin tests for each word in turn.");

PyDoc_STRVAR(change_word_doc,
             "change_word(text: str) -> bool\n--\n\n"
             "Does one of the words a command that changes something starts with (CHANGE_WORDS: ``sed``, ``cp``, "
             "``git``, ``pip``...) begin ``text``, or follow a blank (``str.isspace``), ``;``, ``&``, ``|`` or ``(`` "
             "in it? One pass; the pure twin is the regular expression CHANGE_WORD.");

/* Words looked for where a part of a command starts (the start, or after a blank, ;, &, | or (): the words, and
   for each byte the words that begin with it, one bit each. */
typedef struct {
    const char *const *words;
    int count;
    uint64_t first[256];
} PartWords;

static const char *const poll_words[] = {"sleep", "wait", "watch", "tail", "gh", "kubectl",
                                         "docker", "squeue", "qstat", "ps", "curl"};
static const char *const change_words[] = {
    "sed", "perl",  "tee",   "patch",  "mv",     "cp",     "rm",          "mkdir",       "touch",    "chmod",
    "ln",  "git",   "pip",   "uv",     "npm",    "yarn",   "pnpm",        "apt",         "brew",     "conda",
    "cargo", "python", "create", "edit", "insert", "str_replace", "apply_patch", "truncate", "dd"};
#define WORD_COUNT(words) ((int)(sizeof(words) / sizeof(words[0])))
static PartWords poll_set = {poll_words, WORD_COUNT(poll_words), {0}};
static PartWords change_set = {change_words, WORD_COUNT(change_words), {0}};

static void part_words_init(PartWords *set) {
    for (int w = 0; w < set->count; w++) set->first[(unsigned char)set->words[w][0]] |= (uint64_t)1 << w;
}

static void part_words_tables_init(void) {
    part_words_init(&poll_set);
    part_words_init(&change_set);
    for (int c = 0; c < 256; c++)
        part_before[c] = (unsigned char)(c == ';' || c == '&' || c == '|' || c == '(' || Py_UNICODE_ISSPACE(c));
}

/* Does one of the set's words start at ``at`` (the text's characters read through PyUnicode_READ)? */
static int part_word_at(const PartWords *set, int kind, const void *data, Py_ssize_t n, Py_ssize_t at) {
    const Py_UCS4 first = PyUnicode_READ(kind, data, at);
    if (first > 255 || !set->first[first]) return 0;
    for (int w = 0; w < set->count; w++) {
        if (!(set->first[first] & ((uint64_t)1 << w))) continue;
        const char *word = set->words[w];
        Py_ssize_t k = 1;
        while (word[k] && at + k < n && PyUnicode_READ(kind, data, at + k) == (Py_UCS4)(unsigned char)word[k]) k++;
        if (!word[k]) return 1;
    }
    return 0;
}

static inline int part_boundary(Py_UCS4 c) {
    return c < 256 ? part_before[c] : Py_UNICODE_ISSPACE(c);
}

/* Does one of the set's words begin ``arg`` or a part of it (after a blank, ;, &, | or ()? */
static PyObject *part_word(const PartWords *set, PyObject *arg, const char *name) {
    if (!PyUnicode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "%s() expects str, not %.100s", name, Py_TYPE(arg)->tp_name);
        return NULL;
    }
    const Py_ssize_t n = PyUnicode_GET_LENGTH(arg);
    const int kind = PyUnicode_KIND(arg);
    const void *data = PyUnicode_DATA(arg);
    if (n > 0 && part_word_at(set, kind, data, n, 0)) Py_RETURN_TRUE;
    if (kind == PyUnicode_1BYTE_KIND) { /* most texts: a byte a character, a table look-up for the boundaries */
        const unsigned char *s = (const unsigned char *)data;
        for (Py_ssize_t i = 1; i < n; i++)
            if (set->first[s[i]] && part_before[s[i - 1]] && part_word_at(set, kind, data, n, i)) Py_RETURN_TRUE;
        Py_RETURN_FALSE;
    }
    for (Py_ssize_t i = 1; i < n; i++)
        if (part_boundary(PyUnicode_READ(kind, data, i - 1)) && part_word_at(set, kind, data, n, i)) Py_RETURN_TRUE;
    Py_RETURN_FALSE;
}

static PyObject *poll_word(PyObject *self, PyObject *arg) { return part_word(&poll_set, arg, "poll_word"); }

static PyObject *change_word(PyObject *self, PyObject *arg) { return part_word(&change_set, arg, "change_word"); }

/* -- failure_marked ---------------------------------------------------------------------------------------- */

PyDoc_STRVAR(failure_marked_doc,
             "failure_marked(text: str) -> bool\n--\n\n"
             "Does one of the texts that mark a failure wherever they show (FAILURE_MARKERS: ``Traceback (most recent "
             "call last)``, ``command not found``...) occur in ``text``? One pass for all of them; the pure twin "
             "looks for each in turn.");

static const char *const failure_markers[] = {
    "Traceback (most recent call last)", "command not found", "No such file or directory", "Permission denied",
    "syntax error", "unexpected EOF", "Exception in thread", "Segmentation fault (core dumped)",
    "Your proposed edit has introduced new syntax error", "(execution failed)", "EXECUTION TIMED OUT",
    "timed out and has been killed"};
#define N_MARKERS WORD_COUNT(failure_markers)
_Static_assert(N_MARKERS <= 32, "a marker is a bit of a 32-bit marker_first");
static Py_ssize_t marker_len[N_MARKERS];
static uint32_t marker_first[256]; /* bit m: failure_markers[m] starts with the byte */

/* Does one of ``candidates`` (markers that start with the byte at p) start at p? */
static int marker_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t p, uint32_t candidates) {
    for (int m = 0; candidates; m++, candidates >>= 1)
        if ((candidates & 1) && marker_len[m] <= n - p && memcmp(s + p, failure_markers[m], (size_t)marker_len[m]) == 0)
            return 1;
    return 0;
}

static int marked_portable(const unsigned char *s, Py_ssize_t n, Py_ssize_t from) {
    for (Py_ssize_t p = from; p < n; p++) {
        const uint32_t candidates = marker_first[s[p]];
        if (candidates && marker_at(s, n, p, candidates)) return 1;
    }
    return 0;
}

#ifdef X86_SIMD
/* With AVX2, 32 positions a step are ruled out by the first 3 bytes of the markers, as find_error_avx2 rules out
   keywords (teddy_candidates: 8 buckets, marker m in bucket m % 8; the bytes as they are, markers being
   case-sensitive); a position left standing is checked as marked_portable checks it. */
static unsigned char marker_low[3][16], marker_high[3][16];

__attribute__((target("avx2"))) static int marked_avx2(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t p = 0;
    for (; p + 34 <= n; p += 32) { /* 32 positions, each with its first 3 bytes in s */
        uint32_t left = teddy_candidates(s + p, marker_low, marker_high, 0);
        while (left) {
            const Py_ssize_t q = p + __builtin_ctz(left);
            left &= left - 1;
            if (marker_at(s, n, q, marker_first[s[q]])) return 1;
        }
    }
    return marked_portable(s, n, p);
}
#endif

static void markers_init(void) {
    for (int m = 0; m < N_MARKERS; m++) {
        const unsigned char *w = (const unsigned char *)failure_markers[m];
        marker_len[m] = (Py_ssize_t)strlen(failure_markers[m]);
        marker_first[w[0]] |= UINT32_C(1) << m;
#ifdef X86_SIMD
        for (int i = 0; i < 3; i++) { /* every marker is longer than 3 bytes */
            marker_low[i][w[i] & 0x0F] |= (unsigned char)(1u << (m % 8));
            marker_high[i][w[i] >> 4] |= (unsigned char)(1u << (m % 8));
        }
#endif
    }
}

/* The bytes of a str of one byte a character (1: ``*s``, ``*n``); for one past Latin-1 (rare), the pure twin ``name``'s
   answer (0: ``*result``, NULL with its error); -1 with a TypeError for what is no str. */
static int latin1_or_pure(PyObject *arg, const char *name, const unsigned char **s, Py_ssize_t *n, PyObject **result) {
    if (!PyUnicode_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "%s() expects str, not %.100s", name, Py_TYPE(arg)->tp_name);
        return -1;
    }
    if (PyUnicode_KIND(arg) != PyUnicode_1BYTE_KIND) {
        PyObject *args = PyTuple_Pack(1, arg);
        *result = args == NULL ? NULL : call_pure(name, args);
        Py_XDECREF(args);
        return 0;
    }
    *s = (const unsigned char *)PyUnicode_DATA(arg);
    *n = PyUnicode_GET_LENGTH(arg);
    return 1;
}

static PyObject *failure_marked(PyObject *self, PyObject *arg) {
    const unsigned char *s;
    Py_ssize_t n;
    PyObject *result = NULL;
    const int latin1 = latin1_or_pure(arg, "failure_marked", &s, &n, &result);
    if (latin1 <= 0) return result;
    /* a byte a character: the markers, all ASCII, are found byte for byte */
#ifdef X86_SIMD
    if (avx2_instructions) return PyBool_FromLong(marked_avx2(s, n));
#endif
    return PyBool_FromLong(marked_portable(s, n, 0));
}

/* -- surrogate_escape -------------------------------------------------------------------------------------- */

PyDoc_STRVAR(surrogate_escape_doc,
             "surrogate_escape(text: str) -> bool\n--\n\n"
             "Does ``text`` (JSON) hold the escape of a UTF-16 surrogate: a backslash, ``u``, ``d`` or ``D``, then one "
             "of ``89abcdefABCDEF`` (``SURROGATE_ESCAPE.search(text) is not None``)? Only the backslashes are checked: "
             "found 32 bytes a step with AVX2 (those before a ``u``), else by ``memchr``.");

/* Is there a surrogate's escape at p (4 bytes there)? (c | 0x20) lowercases an ASCII letter, and makes no other byte
   into 'd' or one of 'a'..'f'. */
static inline int surrogate_escape_at(const unsigned char *p) {
    const unsigned char third = p[3] | 0x20;
    return p[0] == '\\' && p[1] == 'u' && (p[2] | 0x20) == 'd' &&
           (p[3] == '8' || p[3] == '9' || (third >= 'a' && third <= 'f'));
}

/* From ``from`` on: each backslash found by memchr, with 3 bytes after it, checked. */
static int surrogate_escape_from(const unsigned char *s, Py_ssize_t n, Py_ssize_t from) {
    const unsigned char *p = s + from, *const end = s + n;
    while (end - p >= 4 && (p = memchr(p, '\\', (size_t)(end - p - 3))) != NULL) {
        if (surrogate_escape_at(p)) return 1;
        p++;
    }
    return 0;
}

#ifdef X86_SIMD
/* With AVX2, 32 positions a step: those holding a backslash followed by 'u' (JSON text has many backslashes, the
   escapes of line ends and quotes among them, and few of those are before a 'u'), each then checked whole. */
__attribute__((target("avx2"))) static int surrogate_escape_avx2(const unsigned char *s, Py_ssize_t n) {
    const __m256i backslash = _mm256_set1_epi8('\\'), u = _mm256_set1_epi8('u');
    Py_ssize_t p = 0;
    for (; p + 35 <= n; p += 32) { /* 32 positions, each with its 4 bytes in s */
        const __m256i here = _mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)(s + p)), backslash);
        const __m256i next = _mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)(s + p + 1)), u);
        uint32_t left = (uint32_t)_mm256_movemask_epi8(_mm256_and_si256(here, next));
        while (left) {
            if (surrogate_escape_at(s + p + __builtin_ctz(left))) return 1;
            left &= left - 1;
        }
    }
    return surrogate_escape_from(s, n, p);
}
#endif

static PyObject *surrogate_escape(PyObject *self, PyObject *arg) {
    const unsigned char *s;
    Py_ssize_t n;
    PyObject *result = NULL;
    const int latin1 = latin1_or_pure(arg, "surrogate_escape", &s, &n, &result);
    if (latin1 <= 0) return result;
#ifdef X86_SIMD
    if (avx2_instructions) return PyBool_FromLong(surrogate_escape_avx2(s, n));
#endif
    return PyBool_FromLong(surrogate_escape_from(s, n, 0));
}

/* -- collapsed --------------------------------------------------------------------------------------------- */

PyDoc_STRVAR(collapsed_doc,
             "collapsed(text: str, limit: int) -> str\n--\n\n"
             "``\" \".join(text.split())[:limit]`` for ``limit >= 0``: the words of ``text`` (split at ``str.isspace`` "
             "characters) one space apart, at most ``limit`` characters, in one pass that stops there.");

static PyObject *collapsed(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "collapsed() takes exactly 2 arguments");
        return NULL;
    }
    PyObject *text = args[0];
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "collapsed() expects str, not %.100s", Py_TYPE(text)->tp_name);
        return NULL;
    }
    const Py_ssize_t limit = PyLong_AsSsize_t(args[1]);
    if (limit == -1 && PyErr_Occurred()) return NULL;
    if (limit < 0) { /* a slice that counts from the end: the pure twin's */
        PyObject *pair = PyTuple_Pack(2, text, args[1]);
        if (pair == NULL) return NULL;
        PyObject *result = call_pure("collapsed", pair);
        Py_DECREF(pair);
        return result;
    }
    const Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    const int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    const Py_ssize_t room = limit < n ? limit : n; /* the words and the spaces between them are never longer */
    Py_UCS4 small[512];
    Py_UCS4 *out = room <= 512 ? small : (Py_UCS4 *)PyMem_Malloc(sizeof(Py_UCS4) * (size_t)room);
    if (out == NULL) return PyErr_NoMemory();
    Py_ssize_t kept = 0, p = 0;
    while (kept < room) {
        while (p < n && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, p))) p++;
        if (p == n) break;
        if (kept > 0) out[kept++] = ' ';
        for (; kept < room && p < n; p++) {
            const Py_UCS4 ch = PyUnicode_READ(kind, data, p);
            if (Py_UNICODE_ISSPACE(ch)) break;
            out[kept++] = ch;
        }
    }
    PyObject *result = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, out, kept);
    if (out != small) PyMem_Free(out);
    return result;
}

/* -- warm_up: a session's state brought into the cache while the event's features are computed ------------- */

/* Not a text kernel and without a twin (Python cannot ask for it): the guard calls it when an event comes for another
   session than the last one, before the event's features are read (its masking, hashing and tokenising touch no
   state). The state of many interleaved sessions does not stay in a core's cache, and the rules would otherwise reach
   into it one cold object after another; asked for all at once, the objects arrive together while the features are
   computed. Read-only: it follows references the way the garbage collector does (each type's tp_traverse, with the
   GIL held and no Python code run), skips type objects and modules, and stops at WARM_CAP objects. */

#define WARM_CAP 512

typedef struct {
    PyObject *found[WARM_CAP];
    Py_ssize_t n;
} warm_list;

static int warm_visit(PyObject *object, void *arg) {
    warm_list *list = (warm_list *)arg;
    if (object != NULL && list->n < WARM_CAP) {
        __builtin_prefetch(object);
        list->found[list->n++] = object;
    }
    return 0;
}

PyDoc_STRVAR(warm_up_doc, "warm_up(obj, levels, /)\n--\n\n"
                          "Ask the processor to bring obj and the objects it refers to, levels references deep (at "
                          "most 512 objects), into its cache; None. It reads nothing a caller sees and changes "
                          "nothing.");

static PyObject *warm_up(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "warm_up() takes an object and a number of levels");
        return NULL;
    }
    long levels = PyLong_AsLong(args[1]);
    if (levels == -1 && PyErr_Occurred()) return NULL;
    warm_list list;
    list.found[0] = args[0];
    list.n = 1;
    Py_ssize_t start = 0;
    for (long level = 0; level < levels && start < list.n; level++) {
        Py_ssize_t end = list.n; /* this level's objects: their references make the next level */
        for (Py_ssize_t i = start; i < end && list.n < WARM_CAP; i++) {
            PyObject *object = list.found[i];
            traverseproc traverse = Py_TYPE(object)->tp_traverse;
            if (traverse == NULL || !PyObject_IS_GC(object) || PyType_Check(object) || PyModule_Check(object)) continue;
            traverse(object, warm_visit, &list);
        }
        start = end;
    }
    Py_RETURN_NONE;
}

/* -- module ------------------------------------------------------------------------------------------------ */

/* -- the vector instructions in use, for the tests ----------------------------------------------------------- */

PyDoc_STRVAR(vector_instructions_doc,
             "_vector_instructions(use: bool | Collection[str] | None = None) -> dict[str, bool]\n--\n\n"
             "The processor's vector instructions the kernels use ({'ssse3': ..., 'popcnt': ..., 'avx2': ..., "
             "'avx512': ...}, all False off x86). ``use=False`` turns them off (the portable code runs: how the tests "
             "check it on a processor that has them); ``use=True`` asks the processor again; a collection of those "
             "names asks it again and keeps only the ones named. Not for production use.");

/* Is ``name`` in the collection ``use`` (-1: an error)? */
static int named(PyObject *use, const char *name) {
    PyObject *key = PyUnicode_FromString(name);
    if (key == NULL) return -1;
    const int found = PySequence_Contains(use, key);
    Py_DECREF(key);
    return found;
}

static PyObject *vector_instructions(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "_vector_instructions() takes at most 1 argument");
        return NULL;
    }
    int ssse3 = 0, popcnt = 0, avx2 = 0, avx512 = 0;
    if (nargs == 1 && args[0] != Py_None) {
        const int collection = !PyBool_Check(args[0]);
        if (collection && !(PyTuple_Check(args[0]) || PyList_Check(args[0]) || PyAnySet_Check(args[0]))) {
            PyErr_Format(PyExc_TypeError, "_vector_instructions() expects a bool or names, not %.100s",
                         Py_TYPE(args[0])->tp_name);
            return NULL;
        }
        int keep[4] = {1, 1, 1, 1};
        const char *names[4] = {"ssse3", "popcnt", "avx2", "avx512"};
        for (int i = 0; collection && i < 4; i++)
            if ((keep[i] = named(args[0], names[i])) < 0) return NULL;
#ifdef X86_SIMD
        if (collection || args[0] == Py_True)
            cpu_features_init();
        else
            blanks_simd = popcnt_instruction = avx2_instructions = avx512_compress = 0;
        if (!keep[0]) blanks_simd = 0;
        if (!keep[1]) popcnt_instruction = 0;
        if (!keep[2]) avx2_instructions = 0;
        if (!keep[3]) avx512_compress = 0;
#else
        (void)keep;
#endif
    }
#ifdef X86_SIMD
    ssse3 = blanks_simd, popcnt = popcnt_instruction, avx2 = avx2_instructions, avx512 = avx512_compress;
#endif
    return Py_BuildValue("{s:O,s:O,s:O,s:O}", "ssse3", ssse3 ? Py_True : Py_False, "popcnt",
                         popcnt ? Py_True : Py_False, "avx2", avx2 ? Py_True : Py_False, "avx512",
                         avx512 ? Py_True : Py_False);
}

static PyMethodDef methods[] = {
    {"error_lines", (PyCFunction)error_lines, METH_O, error_lines_doc},
    {"word_hashes", (PyCFunction)word_hashes, METH_O, word_hashes_doc},
    {"line_hashes", (PyCFunction)line_hashes, METH_O, line_hashes_doc},
    {"numbers_marked", (PyCFunction)numbers_marked, METH_O, numbers_marked_doc},
    {"blanks_dropped", (PyCFunction)blanks_dropped, METH_O, blanks_dropped_doc},
    {"best_similarity", (PyCFunction)(void (*)(void))best_similarity, METH_FASTCALL, best_similarity_doc},
    {"line_bits", (PyCFunction)(void (*)(void))line_bits, METH_FASTCALL, line_bits_doc},
    {"unquoted_line_bits", (PyCFunction)(void (*)(void))unquoted_line_bits, METH_FASTCALL, unquoted_line_bits_doc},
    {"alnum_word_pair", (PyCFunction)(void (*)(void))alnum_word_pair, METH_FASTCALL, alnum_word_pair_doc},
    {"shared_words", (PyCFunction)(void (*)(void))shared_words, METH_FASTCALL, shared_words_doc},
    {"rest_hash", (PyCFunction)(void (*)(void))rest_hash, METH_FASTCALL, rest_hash_doc},
    {"long_word_hashes", (PyCFunction)long_word_hashes, METH_O, long_word_hashes_doc},
    {"long_word_sketch", (PyCFunction)(void (*)(void))long_word_sketch, METH_FASTCALL, long_word_sketch_doc},
    {"fold", (PyCFunction)(void (*)(void))fold, METH_FASTCALL, fold_doc},
    {"fold_words", (PyCFunction)(void (*)(void))fold_words, METH_FASTCALL, fold_words_doc},
    {"bottom_k", (PyCFunction)(void (*)(void))bottom_k, METH_FASTCALL, bottom_k_doc},
    {"sketch_of", (PyCFunction)(void (*)(void))sketch_of, METH_FASTCALL, sketch_of_doc},
    {"word_sketch", (PyCFunction)(void (*)(void))word_sketch, METH_FASTCALL, word_sketch_doc},
    {"masked_bytes", (PyCFunction)masked_bytes, METH_O, masked_bytes_doc},
    {"last_error_line", (PyCFunction)last_error_line, METH_O, last_error_line_doc},
    {"poll_word", (PyCFunction)poll_word, METH_O, poll_word_doc},
    {"change_word", (PyCFunction)change_word, METH_O, change_word_doc},
    {"failure_marked", (PyCFunction)failure_marked, METH_O, failure_marked_doc},
    {"surrogate_escape", (PyCFunction)surrogate_escape, METH_O, surrogate_escape_doc},
    {"collapsed", (PyCFunction)(void (*)(void))collapsed, METH_FASTCALL, collapsed_doc},
    {"warm_up", (PyCFunction)(void (*)(void))warm_up, METH_FASTCALL, warm_up_doc},
    {"_vector_instructions", (PyCFunction)(void (*)(void))vector_instructions, METH_FASTCALL, vector_instructions_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "loopwatch.core._kernels_c",
    "The text kernels compiled (see loopwatch.core._kernels_py for their pure-Python twins).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernels_c(void) {
    crc_init();
    start_through_zeros_init();
    tables_init();
    byte_class_init();
    rare_init();
    keywords_init();
#ifdef X86_SIMD
    teddy_init();
#endif
    part_words_tables_init();
    markers_init();
#ifdef X86_SIMD
    cpu_features_init();
#endif
    return PyModule_Create(&module);
}
