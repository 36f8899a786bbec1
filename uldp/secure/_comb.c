/* The inner loop of the fixed-base comb of uldp.secure.fast (Protocol 1, step 2(b) of the ULDP-FL paper: the silo's
 * encrypted weighted sum prod_u Enc(w_u)^(E_uj) mod n^2) in C, on GMP limb arrays in Montgomery form.
 *
 * For one base b and its inverse b^-1 mod m, and digits d[i][j] (signed base-2^w digits of the exponents e_j,
 * least significant first), multiply_in_base multiplies accumulator j by b^(sum_i d[i][j] 2^(w i)) for every j:
 * per digit position i a table of (b^(2^(w i)))^k and (b^-(2^(w i)))^k for k = 1 .. the largest digit, then one
 * Montgomery multiplication per non-zero digit. No Python object is touched inside the loop (the GIL is released).
 *
 * Montgomery multiplication with R = B^L (B = 2^64, L limbs of m): mpn_mul_n / mpn_sqr, then GMP's REDC.
 * Accumulators, tables and bases are kept as x R mod m; from_montgomery takes the accumulators back out.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <gmp.h>
#include <stdlib.h>
#include <string.h>

/* GMP's own Montgomery reduction (the one mpz_powm uses above a few dozen limbs): rp = up / B^n mod mp for
 * up < mp B^n (2n limbs, clobbered), ip = mp^-1 mod B^n. It is exported by libgmp (every release since 5.0) but
 * declared in gmp-impl.h only; the Python side checks this module against gmpy2 once before using it
 * (uldp.secure.fast), so that a changed interface falls back to gmpy2 instead of giving wrong ciphertexts.
 * It costs about half a multiplication at 96 limbs, against a full one or more for a REDC from public mpn_mul_n
 * products or for mpn_tdiv_qr (measured in benchmarks/comb.py). */
void __gmpn_redc_n(mp_ptr rp, mp_ptr up, mp_srcptr mp, mp_size_t n, mp_srcptr ip);

typedef struct {
    const mp_limb_t *modulus;         /* m, odd, L limbs, top limb non-zero */
    const mp_limb_t *modulus_inverse; /* m^-1 mod B^L */
    mp_size_t limbs;                  /* L */
    mp_limb_t *product;               /* scratch: 2L limbs */
} Montgomery;

/* result = t / R mod m, in [0, m), for t < m R (2L limbs, clobbered). */
static void redc(const Montgomery *ctx, mp_limb_t *result, mp_limb_t *t)
{
    __gmpn_redc_n(result, t, ctx->modulus, ctx->limbs, ctx->modulus_inverse);
}

/* result = a b / R mod m (result may alias a or b). */
static void montgomery_multiply(const Montgomery *ctx, mp_limb_t *result, const mp_limb_t *a, const mp_limb_t *b)
{
    if (a == b)
        mpn_sqr(ctx->product, a, ctx->limbs);
    else
        mpn_mul_n(ctx->product, a, b, ctx->limbs);
    redc(ctx, result, ctx->product);
}

/* table[k - 1] = base^k (Montgomery form) for k = 1 .. top. */
static void power_table(const Montgomery *ctx, mp_limb_t *table, const mp_limb_t *base, long top)
{
    const mp_size_t L = ctx->limbs;
    if (top < 1)
        return;
    mpn_copyi(table, base, L);
    for (long k = 2; k <= top; k++) {
        if (k % 2 == 0)  /* a square is cheaper than a product */
            montgomery_multiply(ctx, table + (k - 1) * L, table + (k / 2 - 1) * L, table + (k / 2 - 1) * L);
        else
            montgomery_multiply(ctx, table + (k - 1) * L, table + (k - 2) * L, base);
    }
}

typedef struct {
    Py_buffer view;
    int held;
} Buffer;

static int get_buffer(PyObject *object, Buffer *buffer, const char *name, Py_ssize_t itemsize, int writable)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(object, &buffer->view, flags) < 0)
        return -1;
    buffer->held = 1;
    if (buffer->view.itemsize != itemsize) {
        PyErr_Format(PyExc_ValueError, "%s must have %zd-byte items, got %zd-byte items (format %s)", name,
                     itemsize, buffer->view.itemsize, buffer->view.format ? buffer->view.format : "B");
        return -1;
    }
    return 0;
}

static void release(Buffer *buffers, int count)
{
    for (int i = 0; i < count; i++)
        if (buffers[i].held)
            PyBuffer_Release(&buffers[i].view);
}

/* Checks m (odd, top limb non-zero) and its inverse (m m^-1 = 1 mod B^L); sets ctx's modulus fields. */
static int check_modulus(Montgomery *ctx, Buffer *modulus, Buffer *inverse)
{
    const mp_size_t L = (mp_size_t)(modulus->view.len / 8);
    const mp_limb_t *m = modulus->view.buf, *m_inverse = inverse->view.buf;
    if (L < 1 || m[L - 1] == 0 || (m[0] & 1) == 0) {
        PyErr_Format(PyExc_ValueError, "modulus must be odd with a non-zero top limb (Montgomery form), got %zd limbs, "
                     "lowest limb %llu", (Py_ssize_t)L, L ? (unsigned long long)m[0] : 0ULL);
        return -1;
    }
    if (inverse->view.len != modulus->view.len) {
        PyErr_Format(PyExc_ValueError, "modulus_inverse must have %zd limbs like the modulus, got %zd",
                     (Py_ssize_t)L, inverse->view.len / 8);
        return -1;
    }
    mp_limb_t *check = malloc(2 * L * sizeof(mp_limb_t));
    if (check == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    mpn_mul_n(check, m, m_inverse, L);
    int ok = check[0] == 1 && (L == 1 || mpn_zero_p(check + 1, L - 1));
    free(check);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "modulus_inverse is not the inverse of the modulus modulo 2^(64 limbs)");
        return -1;
    }
    ctx->modulus = m;
    ctx->modulus_inverse = m_inverse;
    ctx->limbs = L;
    return 0;
}

static PyObject *multiply_in_base(PyObject *self, PyObject *args)
{
    PyObject *objects[6];
    int window;
    if (!PyArg_ParseTuple(args, "OOOOOOi:multiply_in_base", &objects[0], &objects[1], &objects[2], &objects[3],
                          &objects[4], &objects[5], &window))
        return NULL;
    static const char *names[6] = {"accumulators", "digits", "base", "inverse", "modulus", "modulus_inverse"};
    static const Py_ssize_t itemsizes[6] = {8, 4, 8, 8, 8, 8};
    Buffer buffers[6];
    memset(buffers, 0, sizeof buffers);
    Montgomery ctx = {0};
    mp_limb_t *scratch = NULL, *tables = NULL;
    PyObject *result = NULL;
    for (int i = 0; i < 6; i++)
        if (get_buffer(objects[i], &buffers[i], names[i], itemsizes[i], i == 0) < 0)
            goto done;
    if (window < 1 || window > 16) {
        PyErr_Format(PyExc_ValueError, "window must be in [1, 16], got %d", window);
        goto done;
    }
    if (check_modulus(&ctx, &buffers[4], &buffers[5]) < 0)
        goto done;
    const mp_size_t L = ctx.limbs;
    const Py_ssize_t accumulator_bytes = buffers[0].view.len, row_bytes = (Py_ssize_t)L * 8;
    if (accumulator_bytes == 0 || accumulator_bytes % row_bytes) {
        PyErr_Format(PyExc_ValueError, "accumulators hold %zd bytes, not a positive whole number of %zd-limb rows",
                     accumulator_bytes, (Py_ssize_t)L);
        goto done;
    }
    const Py_ssize_t outputs = accumulator_bytes / row_bytes;
    if (buffers[1].view.len % (outputs * 4)) {
        PyErr_Format(PyExc_ValueError, "digits hold %zd int32 values, not a whole number of rows of %zd outputs",
                     buffers[1].view.len / 4, outputs);
        goto done;
    }
    for (int i = 2; i < 4; i++)
        if (buffers[i].view.len != row_bytes) {
            PyErr_Format(PyExc_ValueError, "%s must have %zd limbs like the modulus, got %zd", names[i],
                         (Py_ssize_t)L, buffers[i].view.len / 8);
            goto done;
        }
    const Py_ssize_t positions = buffers[1].view.len / (outputs * 4);
    const int32_t *digits = buffers[1].view.buf;
    const int32_t limit = (int32_t)1 << window;
    int32_t top = 0, bottom = 0;  /* the largest positive and negative digit: the tables' lengths */
    for (Py_ssize_t k = 0; k < positions * outputs; k++) {
        if (digits[k] <= -limit || digits[k] >= limit) {
            PyErr_Format(PyExc_ValueError, "digit %d at position %zd, output %zd is outside (-2^%d, 2^%d)",
                         (int)digits[k], k / outputs, k % outputs, window, window);
            goto done;
        }
        if (digits[k] > top) top = digits[k];
        if (digits[k] < bottom) bottom = digits[k];
    }

    scratch = malloc(4 * L * sizeof(mp_limb_t));
    tables = malloc(((size_t)top - bottom + 1) * L * sizeof(mp_limb_t));
    if (scratch == NULL || tables == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    ctx.product = scratch;
    mp_limb_t *power = scratch + 2 * L, *inverse_power = scratch + 3 * L;
    mp_limb_t *positive = tables, *negative = tables + (size_t)top * L;
    mp_limb_t *accumulators = buffers[0].view.buf;
    mpn_copyi(power, buffers[2].view.buf, L);
    mpn_copyi(inverse_power, buffers[3].view.buf, L);

    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t position = 0; position < positions; position++) {
        const int32_t *row = digits + position * outputs;
        if (position)  /* power = base^(2^(w position)), and the same for the inverse */
            for (int s = 0; s < window; s++) {
                montgomery_multiply(&ctx, power, power, power);
                montgomery_multiply(&ctx, inverse_power, inverse_power, inverse_power);
            }
        int32_t row_top = 0, row_bottom = 0;
        for (Py_ssize_t j = 0; j < outputs; j++) {
            if (row[j] > row_top) row_top = row[j];
            if (row[j] < row_bottom) row_bottom = row[j];
        }
        power_table(&ctx, positive, power, row_top);
        power_table(&ctx, negative, inverse_power, -row_bottom);
        for (Py_ssize_t j = 0; j < outputs; j++) {
            const int32_t digit = row[j];
            if (digit == 0)
                continue;
            const mp_limb_t *entry = digit > 0 ? positive + (size_t)(digit - 1) * L : negative + (size_t)(-digit - 1) * L;
            mp_limb_t *accumulator = accumulators + j * L;
            montgomery_multiply(&ctx, accumulator, accumulator, entry);
        }
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    free(scratch);
    free(tables);
    release(buffers, 6);
    return result;
}

static PyObject *from_montgomery(PyObject *self, PyObject *args)
{
    PyObject *objects[3];
    if (!PyArg_ParseTuple(args, "OOO:from_montgomery", &objects[0], &objects[1], &objects[2]))
        return NULL;
    static const char *names[3] = {"accumulators", "modulus", "modulus_inverse"};
    Buffer buffers[3];
    memset(buffers, 0, sizeof buffers);
    Montgomery ctx = {0};
    mp_limb_t *scratch = NULL;
    PyObject *result = NULL;
    for (int i = 0; i < 3; i++)
        if (get_buffer(objects[i], &buffers[i], names[i], 8, i == 0) < 0)
            goto done;
    if (check_modulus(&ctx, &buffers[1], &buffers[2]) < 0)
        goto done;
    const mp_size_t L = ctx.limbs;
    if (buffers[0].view.len % (L * 8)) {
        PyErr_Format(PyExc_ValueError, "accumulators hold %zd bytes, not a whole number of %zd-limb rows",
                     buffers[0].view.len, (Py_ssize_t)L);
        goto done;
    }
    scratch = malloc(2 * L * sizeof(mp_limb_t));
    if (scratch == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    ctx.product = scratch;
    mp_limb_t *accumulators = buffers[0].view.buf;
    const Py_ssize_t outputs = buffers[0].view.len / (L * 8);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t j = 0; j < outputs; j++) {
        mpn_copyi(ctx.product, accumulators + j * L, L);
        mpn_zero(ctx.product + L, L);
        redc(&ctx, accumulators + j * L, ctx.product);
    }
    Py_END_ALLOW_THREADS
    result = Py_None;
    Py_INCREF(result);
done:
    free(scratch);
    release(buffers, 3);
    return result;
}

static PyMethodDef methods[] = {
    {"multiply_in_base", multiply_in_base, METH_VARARGS,
     "multiply_in_base(accumulators, digits, base, inverse, modulus, modulus_inverse, window)\n\n"
     "accumulators[j] *= base^(sum_i digits[i, j] 2^(window i)) (Montgomery form, in place): uint64 limbs\n"
     "[J, L], int32 digits [P, J] in (-2^window, 2^window) with window <= 16, base and its inverse mod m in Montgomery form (L limbs),\n"
     "the odd modulus m and m^-1 mod 2^(64 L) (L limbs each)."},
    {"from_montgomery", from_montgomery, METH_VARARGS,
     "from_montgomery(accumulators, modulus, modulus_inverse)\n\n"
     "accumulators[j] = accumulators[j] / 2^(64 L) mod m (in place): out of Montgomery form."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_comb",
    .m_doc = "C inner loop of the fixed-base comb of uldp.secure.fast (Protocol 1, step 2(b)): GMP Montgomery "
             "arithmetic.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__comb(void)
{
    return PyModule_Create(&module);
}
