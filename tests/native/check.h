/* check.h: the native tests' harness. A check that fails prints file:line,
 * the expression and the values, counts the failure and lets the test go
 * on; each test_*.c lists its test functions and hands them to check_main,
 * which runs them (all, or those whose name contains argv[1]) and returns
 * nonzero when any check failed.
 *
 *   static void concat_bits_every_offset(void) { CHECK_EQ_I64(got, want); }
 *   int main(int argc, char **argv) {
 *     static const struct check_test tests[] = {CHECK_TEST(concat_bits_every_offset)};
 *     return CHECK_MAIN(argc, argv, tests);
 *   }
 */
#ifndef FUNNEL_TEST_CHECK_H
#define FUNNEL_TEST_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "funnel.h"

/* Every check is an expression that is 1 when it held, so a test can stop
 * early: `if (!CHECK_OK(st, &err)) return;`. */
#define CHECK(cond) check_true_at(__FILE__, __LINE__, #cond, (cond) ? 1 : 0)
#define CHECK_EQ_I64(a, b) check_eq_i64_at(__FILE__, __LINE__, #a, #b, (int64_t)(a), (int64_t)(b))
#define CHECK_EQ_STR(a, b) check_eq_str_at(__FILE__, __LINE__, #a, #b, (a), (b))
/* `n` bytes at a and b are equal; prints the first difference. */
#define CHECK_MEM(a, b, n) check_mem_at(__FILE__, __LINE__, #a, #b, (a), (b), (int64_t)(n))
/* `st` is `expected`; for an error, `err` (may be NULL) holds the same code
 * and a non-empty message. Prints the error's message on a mismatch. */
#define CHECK_STATUS(st, expected, err) \
  check_status_at(__FILE__, __LINE__, #st, (st), (expected), (err))
#define CHECK_OK(st, err) CHECK_STATUS(st, FUNNEL_OK, err)

int check_true_at(const char *file, int line, const char *expr, int ok);
int check_eq_i64_at(const char *file, int line, const char *a_expr, const char *b_expr,
                    int64_t a, int64_t b);
int check_eq_str_at(const char *file, int line, const char *a_expr, const char *b_expr,
                    const char *a, const char *b);
int check_mem_at(const char *file, int line, const char *a_expr, const char *b_expr,
                 const void *a, const void *b, int64_t n);
int check_status_at(const char *file, int line, const char *expr, int st, int expected,
                    const struct funnel_error *err);

/* Reports a failure with a free-form message. */
__attribute__((format(printf, 3, 4)))
void check_fail(const char *file, int line, const char *fmt, ...);

/* Text printed with every failure until changed ("" clears it): which
 * case of a loop was running, e.g. check_context("src_bit %d dst_bit %d"). */
__attribute__((format(printf, 1, 2)))
void check_context(const char *fmt, ...);

/* The backend the tests run on: FUNNEL_TEST_BACKEND, default "cpu" (the
 * GPU run sets "cuda", or "cuda:N"). check_device_open opens it and checks
 * that the device got is the one asked for: a GPU test that silently ran
 * on the cpu backend would prove nothing. Returns FUNNEL_OK or the open's
 * status. */
const char *check_backend(void);
int check_device_open(struct funnel_device **out, struct funnel_error *err);

/* The CUDA driver, loaded here to check what funnel did without asking
 * funnel (a table on the right GPU, the GPUs' peer access). The number of
 * CUDA devices this process sees, 0 without a driver; whether device
 * `from` may map device `to`'s memory (1, 0; -1 without a driver); the
 * ordinal of the device holding the device memory at `ptr` (-1 when the
 * driver cannot say). */
int check_cuda_devices(void);
int check_cuda_peer(int from, int to);
int check_cuda_pointer_device(uint64_t ptr);

/* Failures so far, over all tests. */
long check_failures(void);

/* Whether a read went by the device path (FUNNEL_PARSE_DEVICE, or AUTO's
 * choice) and the device kept every partition. */
int check_on_device(const struct funnel_read_stats *s);
/* The invariants every read keeps, by the path it took (funnel.h, enum
 * funnel_parse): the host path makes no device call while parsing or
 * planning, no wait, at most a copy a partition and the segment table's,
 * one concat launch a column set; the device path makes no device call
 * while planning, one wait (for the parse's sums), at most a copy a
 * partition and two uploads, three launches (parse, scan when over 1024
 * partitions or after a parse in parts, concat). */
void check_read_invariants_at(const char *file, int line, const struct funnel_read_stats *s);
#define CHECK_READ_INVARIANTS(s) check_read_invariants_at(__FILE__, __LINE__, (s))

/* A deterministic generator (splitmix64): tests never use rand(). */
uint64_t check_rand(uint64_t *state);
/* Uniform in [0, n); n > 0. */
uint64_t check_rand_below(uint64_t *state, uint64_t n);

struct check_test {
  const char *name;
  void (*fn)(void);
};
#define CHECK_TEST(fn) {#fn, fn}
#define CHECK_MAIN(argc, argv, tests) \
  check_main((argc), (argv), (tests), sizeof(tests) / sizeof((tests)[0]))

int check_main(int argc, char **argv, const struct check_test *tests, size_t count);

#endif
