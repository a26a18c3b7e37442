/* A C program using include/eagertpu.h: ops in all three modes, checked
 * against values computed here; errors; handles; deferred failures. Built and
 * run by ffi/tests/c_program.rs (and so by `make test`). Exit status 0 means
 * every check passed. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "eagertpu.h"

static int failures = 0;

#define CHECK(cond, ...)                                              \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "FAIL %s:%d (mode %d): ", __FILE__, __LINE__, mode); \
      fprintf(stderr, __VA_ARGS__);                                   \
      fprintf(stderr, "\n");                                          \
      failures++;                                                     \
    }                                                                 \
  } while (0)

#define OK(call)                                                                     \
  do {                                                                               \
    etpu_status s_ = (call);                                                         \
    if (s_ != ETPU_OK) {                                                             \
      fprintf(stderr, "FAIL %s:%d (mode %d): %s -> %d: %s\n", __FILE__, __LINE__, mode, \
              #call, s_, eagertpu_last_error());                                     \
      failures++;                                                                    \
    }                                                                                \
  } while (0)

static int mode = -1;

static etpu_tensor upload_f32(const float* v, const int64_t* dims, size_t rank, size_t n) {
  etpu_tensor t = 0;
  OK(etpu_tensor_from_host(0, ETPU_F32, dims, rank, v, n * sizeof(float), "abi.c", &t));
  return t;
}

static void read_f32(etpu_tensor t, float* out, size_t n) {
  OK(etpu_tensor_to_host(t, out, n * sizeof(float), "abi.c"));
}

static etpu_scalar f64(double v) { return (etpu_scalar){ETPU_SCALAR_FLOAT, 0, v}; }
static etpu_scalar i64(int64_t v) { return (etpu_scalar){ETPU_SCALAR_INT, v, 0.0}; }

static etpu_operand view_of(const int64_t* desc) { return (etpu_operand){ETPU_OPERAND_VIEW, 0, desc, {0, 0, 0.0}}; }
static etpu_operand handle_of(etpu_tensor t) { return (etpu_operand){ETPU_OPERAND_HANDLE, t, NULL, {0, 0, 0.0}}; }
static etpu_operand number(etpu_scalar s) { return (etpu_operand){ETPU_OPERAND_SCALAR, 0, NULL, s}; }

static int close_to(float a, float b) { return fabsf(a - b) <= 1e-5f * (1.0f + fabsf(b)); }

static void ops(void) {
  const float xv[6] = {1, -2, 3, -4, 5, -6};
  const float yv[3] = {10, 20, 30};
  const int64_t xd[2] = {2, 3}, yd[1] = {3};
  etpu_tensor x = upload_f32(xv, xd, 2, 6), y = upload_f32(yv, yd, 1, 3);

  /* z = relu(x * 2 - y / 10), broadcast over rows. */
  etpu_tensor x2 = 0, y10 = 0, d = 0, z = 0;
  OK(etpu_binary_scalar("mul", x, f64(2.0), false, "abi.c:ops", &x2));
  OK(etpu_binary_scalar("div", y, f64(10.0), false, "abi.c:ops", &y10));
  OK(etpu_binary("sub", x2, y10, "abi.c:ops", &d));
  OK(etpu_unary("relu", d, "abi.c:ops", &z));
  float zv[6];
  read_f32(z, zv, 6);
  for (int i = 0; i < 6; i++) {
    float want = xv[i] * 2 - yv[i % 3] / 10;
    want = want > 0 ? want : 0;
    CHECK(close_to(zv[i], want), "relu[%d] = %f, want %f", i, zv[i], want);
  }

  /* s = sum(x, dim 1); m = x @ x^T; p = softmax(x, -1); r = 1 - x (reversed). */
  etpu_tensor s = 0, xt = 0, m = 0, p = 0, r = 0;
  const int64_t dim1[1] = {1}, perm[2] = {1, 0};
  OK(etpu_reduce("sum", x, dim1, 1, false, "abi.c:ops", &s));
  OK(etpu_permute(x, perm, 2, "abi.c:ops", &xt));
  OK(etpu_matmul(x, xt, "abi.c:ops", &m));
  OK(etpu_softmax(x, -1, false, "abi.c:ops", &p));
  OK(etpu_binary_scalar("sub", x, i64(1), true, "abi.c:ops", &r));
  float sv[2], mv[4], pv[6], rv[6];
  read_f32(s, sv, 2);
  read_f32(m, mv, 4);
  read_f32(p, pv, 6);
  read_f32(r, rv, 6);
  CHECK(close_to(sv[0], 2) && close_to(sv[1], -5), "sum = %f %f", sv[0], sv[1]);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      float want = 0;
      for (int k = 0; k < 3; k++) want += xv[i * 3 + k] * xv[j * 3 + k];
      CHECK(close_to(mv[i * 2 + j], want), "matmul[%d][%d] = %f, want %f", i, j, mv[i * 2 + j], want);
    }
  for (int i = 0; i < 2; i++) {
    float den = 0;
    for (int k = 0; k < 3; k++) den += expf(xv[i * 3 + k]);
    for (int k = 0; k < 3; k++)
      CHECK(close_to(pv[i * 3 + k], expf(xv[i * 3 + k]) / den), "softmax[%d][%d]", i, k);
  }
  for (int i = 0; i < 6; i++) CHECK(close_to(rv[i], 1 - xv[i]), "1 - x[%d] = %f", i, rv[i]);

  /* Integer promotion through the ABI: int8 + 1000 stays int8 (wraps). */
  const int8_t iv[2] = {1, -3};
  const int64_t id[1] = {2};
  etpu_tensor i8 = 0, i8b = 0;
  int32_t dtype = -1;
  int8_t ib[2];
  OK(etpu_tensor_from_host(0, ETPU_I8, id, 1, iv, 2, NULL, &i8));
  OK(etpu_binary_scalar("add", i8, i64(1000), false, "abi.c:ops", &i8b));
  OK(etpu_tensor_dtype(i8b, &dtype));
  OK(etpu_tensor_to_host(i8b, ib, 2, "abi.c"));
  CHECK(dtype == ETPU_I8 && ib[0] == (int8_t)(1 + 1000) && ib[1] == (int8_t)(-3 + 1000),
        "int8 + 1000: dtype %d, %d %d", dtype, ib[0], ib[1]);

  /* Integers cross the ABI exactly: 2^60 + 1 is no double. */
  const int64_t big = (1LL << 60) + 1, two[1] = {2}, three[1] = {3};
  etpu_tensor filled = 0, shifted = 0, clamped = 0, range = 0;
  int64_t got[3] = {0};
  OK(etpu_full(0, two, 1, i64(big), ETPU_I64, "abi.c:ops", &filled));
  OK(etpu_binary_scalar("add", filled, i64(big), false, "abi.c:ops", &shifted));
  OK(etpu_tensor_to_host(shifted, got, 2 * sizeof(int64_t), "abi.c"));
  CHECK(got[0] == 2 * big && got[1] == 2 * big, "2^60+1 twice: %lld %lld", (long long)got[0],
        (long long)got[1]);
  etpu_scalar lo = i64(big + 2);
  OK(etpu_clamp(filled, &lo, NULL, "abi.c:ops", &clamped));
  OK(etpu_tensor_to_host(clamped, got, 2 * sizeof(int64_t), "abi.c"));
  CHECK(got[0] == big + 2 && got[1] == big + 2, "clamp(min=2^60+3): %lld", (long long)got[0]);
  OK(etpu_arange(0, i64(big), i64(big + 3), i64(1), ETPU_I64, "abi.c:ops", &range));
  OK(etpu_tensor_dims(range, got, 1));
  CHECK(got[0] == three[0], "arange(2^60+1, 2^60+4) has %lld elements", (long long)got[0]);
  OK(etpu_tensor_to_host(range, got, 3 * sizeof(int64_t), "abi.c"));
  CHECK(got[0] == big && got[1] == big + 1 && got[2] == big + 2, "arange: %lld %lld %lld",
        (long long)got[0], (long long)got[1], (long long)got[2]);
  etpu_tensor none = 0;
  etpu_scalar bad = {7, 0, 0.0};
  etpu_status bad_kind = etpu_binary_scalar("add", filled, bad, false, "abi.c:ops", &none);
  CHECK(bad_kind == ETPU_INVALID_ARGUMENT && strstr(eagertpu_last_error(), "scalar kind 7"),
        "scalar kind 7: %d %s", bad_kind, eagertpu_last_error());
  OK(etpu_tensor_free(filled));
  OK(etpu_tensor_free(shifted));
  OK(etpu_tensor_free(clamped));
  OK(etpu_tensor_free(range));

  /* Shape queries. */
  size_t rank = 0;
  int64_t dims[4] = {0};
  OK(etpu_tensor_rank(m, &rank));
  OK(etpu_tensor_dims(m, dims, 4));
  CHECK(rank == 2 && dims[0] == 2 && dims[1] == 2, "matmul shape %zu [%lld, %lld]", rank,
        (long long)dims[0], (long long)dims[1]);

  etpu_tensor all[] = {x, y, x2, y10, d, z, s, xt, m, p, r, i8, i8b};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) OK(etpu_tensor_free(all[i]));
}

/* Running sums, a stable sort (ties keep index order, NaN last) and top-k,
 * against values worked out by hand; a bad k names topk and the shape. */
static void scans(void) {
  const float xv[6] = {2, NAN, 1, 3, 3, -1};
  const int64_t xd[2] = {2, 3};
  etpu_tensor x = upload_f32(xv, xd, 2, 6), c = 0, v = 0, i = 0, tv = 0, ti = 0, bad = 0;
  OK(etpu_cumulative("cumsum", x, 0, "abi.c:scans", &c));
  OK(etpu_sort(x, -1, false, "abi.c:scans", &v, &i));
  OK(etpu_topk(x, 2, 1, true, true, "abi.c:scans", &tv, &ti));
  float cv[6], vv[6], tvv[4];
  int64_t iv[6], tiv[4];
  read_f32(c, cv, 6);
  read_f32(v, vv, 6);
  read_f32(tv, tvv, 4);
  OK(etpu_tensor_to_host(i, iv, sizeof iv, "abi.c"));
  OK(etpu_tensor_to_host(ti, tiv, sizeof tiv, "abi.c"));
  const float want_c[6] = {2, NAN, 1, 5, NAN, 0};
  for (int k = 0; k < 6; k++)
    CHECK(isnan(want_c[k]) ? isnan(cv[k]) : close_to(cv[k], want_c[k]), "cumsum[%d] = %f", k, cv[k]);
  const float want_v[6] = {1, 2, NAN, -1, 3, 3};
  const int64_t want_i[6] = {2, 0, 1, 2, 0, 1};
  for (int k = 0; k < 6; k++)
    CHECK((isnan(want_v[k]) ? isnan(vv[k]) : vv[k] == want_v[k]) && iv[k] == want_i[k],
          "sort[%d] = %f at %lld", k, vv[k], (long long)iv[k]);
  const int64_t want_ti[4] = {1, 0, 0, 1};
  CHECK(isnan(tvv[0]) && tvv[1] == 2 && tvv[2] == 3 && tvv[3] == 3, "topk values %f %f %f %f", tvv[0],
        tvv[1], tvv[2], tvv[3]);
  for (int k = 0; k < 4; k++) CHECK(tiv[k] == want_ti[k], "topk index[%d] = %lld", k, (long long)tiv[k]);
  etpu_status st = etpu_topk(x, 4, 1, true, true, "abi.c:scans", &tv, &ti);
  CHECK(st == ETPU_INVALID_ARGUMENT && strstr(eagertpu_last_error(), "topk") &&
            strstr(eagertpu_last_error(), "float32[2, 3]"),
        "topk k = 4: %d %s", st, eagertpu_last_error());
  st = etpu_cumulative("cumlogsumexp", x, 0, "abi.c:scans", &bad);
  CHECK(st == ETPU_INVALID_ARGUMENT && strstr(eagertpu_last_error(), "cumlogsumexp"), "cumlogsumexp: %s",
        eagertpu_last_error());
  etpu_tensor all[] = {x, c, v, i, tv, ti};
  for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) OK(etpu_tensor_free(all[k]));
}

static void errors(void) {
  const float v[6] = {0};
  const int64_t d23[2] = {2, 3}, d4[1] = {4};
  etpu_tensor a = upload_f32(v, d23, 2, 6), b = upload_f32(v, d4, 1, 4), out = 0;

  etpu_status st = etpu_binary("add", a, b, "abi.c:errors", &out);
  CHECK(st == ETPU_INVALID_ARGUMENT, "shape mismatch status %d", st);
  CHECK(strstr(eagertpu_last_error(), "add") && strstr(eagertpu_last_error(), "[2, 3]"),
        "message: %s", eagertpu_last_error());

  st = etpu_unary("exp", 987654321, "abi.c:errors", &out);
  CHECK(st == ETPU_BAD_HANDLE && strstr(eagertpu_last_error(), "unknown"), "bad handle: %d %s", st,
        eagertpu_last_error());
  st = etpu_unary("exp", 0, "abi.c:errors", &out);
  CHECK(st == ETPU_BAD_HANDLE && strstr(eagertpu_last_error(), "null"), "null handle: %d", st);
  st = etpu_unary("frobnicate", a, "abi.c:errors", &out);
  CHECK(st == ETPU_INVALID_ARGUMENT && strstr(eagertpu_last_error(), "frobnicate"), "unknown op: %d", st);
  st = etpu_unary("exp", a, "abi.c:errors", NULL);
  CHECK(st == ETPU_INVALID_ARGUMENT, "NULL out: %d", st);
  st = etpu_unary(NULL, a, "abi.c:errors", &out);
  CHECK(st == ETPU_INVALID_ARGUMENT, "NULL op: %d", st);
  st = etpu_cast(a, 42, "abi.c:errors", &out);
  CHECK(st == ETPU_INVALID_ARGUMENT && strstr(eagertpu_last_error(), "dtype"), "bad dtype: %d", st);
  st = etpu_tensor_to_host(a, (void*)v, 5, "abi.c");
  CHECK(st == ETPU_INVALID_ARGUMENT, "wrong size read: %d", st);

  OK(etpu_tensor_free(b));
  st = etpu_tensor_free(b);
  CHECK(st == ETPU_BAD_HANDLE, "double free: %d", st);
  st = etpu_unary("exp", b, "abi.c:errors", &out);
  CHECK(st == ETPU_BAD_HANDLE, "use after free: %d", st);

  /* A one-op scope: the ops inside give what they give alone; an end with no
   * begin is refused. */
  etpu_tensor s1 = 0, s2 = 0;
  float sv[6];
  OK(etpu_one_op_begin());
  OK(etpu_binary_scalar("add", a, f64(2.0), false, "abi.c:errors", &s1));
  OK(etpu_binary_scalar("mul", s1, f64(3.0), false, "abi.c:errors", &s2));
  OK(etpu_one_op_end());
  read_f32(s2, sv, 6);
  CHECK(close_to(sv[5], 6.0f), "(0 + 2) * 3 = %f", sv[5]);
  OK(etpu_tensor_free(s1));
  OK(etpu_tensor_free(s2));
  st = etpu_one_op_end();
  CHECK(st == ETPU_INVALID_ARGUMENT && strstr(eagertpu_last_error(), "begin_one_op"), "unmatched end: %d %s", st,
        eagertpu_last_error());

  /* And the next op works. */
  etpu_tensor e = 0;
  float ev[6];
  OK(etpu_unary("exp", a, "abi.c:errors", &e));
  read_f32(e, ev, 6);
  CHECK(close_to(ev[0], 1.0f), "exp(0) = %f", ev[0]);
  OK(etpu_tensor_free(a));
  OK(etpu_tensor_free(e));
}

/* A group of one rank (this program has one thread): its collectives, its
 * errors, and the handle's lifetime. Multi-rank groups are tested from Rust
 * (tests/process_group.rs) and PyTorch (python/tests/test_distributed.py). */
static void collectives(void) {
  const float v[3] = {1.5f, -2.0f, 4.0f};
  const int64_t d3[1] = {3}, device0[1] = {0};
  etpu_group g = 0;
  OK(etpu_group_new(device0, 1, 5.0, &g));
  etpu_tensor x = upload_f32(v, d3, 1, 3), out = 0;
  float got[3];
  OK(etpu_all_reduce(g, 0, x, ETPU_REDUCE_SUM, "abi.c:collectives", &out));
  read_f32(out, got, 3);
  CHECK(got[0] == 1.5f && got[1] == -2.0f && got[2] == 4.0f, "all_reduce of one rank: %f %f %f", got[0], got[1],
        got[2]);
  OK(etpu_tensor_free(out));
  OK(etpu_all_gather(g, 0, x, 0, "abi.c:collectives", &out));
  read_f32(out, got, 3);
  CHECK(got[2] == 4.0f, "all_gather of one rank: %f", got[2]);
  OK(etpu_tensor_free(out));
  OK(etpu_barrier(g, 0, "abi.c:collectives"));

  etpu_status st = etpu_all_reduce(g, 0, x, 7, "abi.c:collectives", &out);
  CHECK(st == ETPU_INVALID_ARGUMENT && strstr(eagertpu_last_error(), "reduction 7"), "bad reduce: %d %s", st,
        eagertpu_last_error());
  st = etpu_broadcast(g, 1, x, 0, "abi.c:collectives", &out);
  CHECK(st == ETPU_INVALID_ARGUMENT && strstr(eagertpu_last_error(), "rank 1"), "rank outside: %d %s", st,
        eagertpu_last_error());
  etpu_group bad = 0;
  st = etpu_group_new(device0, 1, -1.0, &bad);
  CHECK(st == ETPU_INVALID_ARGUMENT && strstr(eagertpu_last_error(), "timeout"), "negative timeout: %d", st);
  OK(etpu_group_free(g));
  st = etpu_all_reduce(g, 0, x, ETPU_REDUCE_SUM, "abi.c:collectives", &out);
  CHECK(st == ETPU_BAD_HANDLE, "freed group: %d", st);
  OK(etpu_tensor_free(x));
}

/* A 2x3 float tensor in a registered allocation: write it whole, read its
 * transpose, write a column through a strided view, read it all back. */
static void storages(void) {
  etpu_storage st = 0;
  const float v[6] = {1, 2, 3, 4, 5, 6};
  const int64_t d23[2] = {2, 3}, s23[2] = {3, 1}, d32[2] = {3, 2}, s32[2] = {1, 3};
  const int64_t col[1] = {2}, col_stride[1] = {3};
  int64_t count = 0, bytes = 0;
  OK(etpu_storage_new(0, 6 * sizeof(float), &st));
  OK(etpu_storage_stats(-1, &count, &bytes));
  CHECK(count >= 1 && bytes >= 24, "stats %lld %lld", (long long)count, (long long)bytes);
  etpu_tensor t = upload_f32(v, d23, 2, 6), tt = 0, c = 0, c10 = 0, all = 0;
  OK(etpu_view_write(st, 0, ETPU_F32, d23, s23, 2, t, "abi.c:storages"));
  OK(etpu_view_read(st, 0, ETPU_F32, d32, s32, 2, "abi.c:storages", &tt));
  float tv[6];
  read_f32(tt, tv, 6);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++)
      CHECK(tv[i * 2 + j] == v[j * 3 + i], "transpose[%d][%d] = %f", i, j, tv[i * 2 + j]);
  /* Column 1 (address + 4 bytes, stride 3) times 10, written back. */
  OK(etpu_view_read(st, 4, ETPU_F32, col, col_stride, 1, "abi.c:storages", &c));
  OK(etpu_binary_scalar("mul", c, f64(10), false, "abi.c:storages", &c10));
  OK(etpu_view_write(st, 4, ETPU_F32, col, col_stride, 1, c10, "abi.c:storages"));
  OK(etpu_view_read(st, 0, ETPU_F32, d23, s23, 2, "abi.c:storages", &all));
  float av[6];
  read_f32(all, av, 6);
  const float want[6] = {1, 20, 3, 4, 50, 6};
  for (int i = 0; i < 6; i++) CHECK(av[i] == want[i], "after the column write [%d] = %f", i, av[i]);
  /* The transpose read before the write still holds the old values. */
  read_f32(tt, tv, 6);
  CHECK(tv[2] == 2, "an earlier view is a snapshot: %f", tv[2]);
  /* Ops between views in one call, on the columns of the [2, 3] storage:
   * column 2 = column 0 + column 1, column 0 = -column 0 (in place), then
   * column 1 = 10 - column 1 (a reversed integer scalar). */
  const int64_t c0[6] = {(int64_t)st, 0, ETPU_F32, 1, 2, 3}, c1[6] = {(int64_t)st, 4, ETPU_F32, 1, 2, 3},
                c2[6] = {(int64_t)st, 8, ETPU_F32, 1, 2, 3};
  OK(etpu_pointwise("add", (etpu_operand[]){view_of(c0), view_of(c1)}, 2, c2, "abi.c:views", NULL));
  OK(etpu_pointwise("neg", (etpu_operand[]){view_of(c0)}, 1, c0, "abi.c:views", NULL));
  OK(etpu_pointwise("sub", (etpu_operand[]){number(i64(10)), view_of(c1)}, 2, c1, "abi.c:views", NULL));
  etpu_tensor after = 0;
  OK(etpu_view_read(st, 0, ETPU_F32, d23, s23, 2, "abi.c:views", &after));
  float vv[6];
  read_f32(after, vv, 6);
  const float want_v[6] = {-1, -10, 21, -4, -40, 54};
  for (int i = 0; i < 6; i++) CHECK(vv[i] == want_v[i], "after the view ops [%d] = %f", i, vv[i]);
  /* The allocation's contents as held: what every view above was read from. */
  etpu_tensor held = 0;
  OK(etpu_storage_read(st, ETPU_F32, &held));
  float hv[6];
  read_f32(held, hv, 6);
  for (int i = 0; i < 6; i++) CHECK(hv[i] == want_v[i], "the contents [%d] = %f", i, hv[i]);
  OK(etpu_tensor_free(held));
  etpu_status bad_dtype = etpu_storage_read(st, 99, &held);
  CHECK(bad_dtype == ETPU_INVALID_ARGUMENT && strstr(eagertpu_last_error(), "99"), "a bad dtype: %d %s", bad_dtype,
        eagertpu_last_error());
  /* Handles, views and scalars mixed, with a new handle as the result:
   * addcmul(column 0, column 2, all of [2, 3] as a handle, 0.5) broadcasts to
   * [2, 3] (the columns as [2, 1] views); lerp(column 0, column 2, 0.75). */
  etpu_tensor fused = 0, mixed = 0;
  const int64_t c0_col[8] = {(int64_t)st, 0, ETPU_F32, 2, 2, 1, 3, 1},
                c2_col[8] = {(int64_t)st, 8, ETPU_F32, 2, 2, 1, 3, 1};
  etpu_operand addcmul_args[4] = {view_of(c0_col), view_of(c2_col), handle_of(after), number(f64(0.5))};
  OK(etpu_pointwise("addcmul", addcmul_args, 4, NULL, "abi.c:views", &fused));
  float fv[6];
  read_f32(fused, fv, 6);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++) {
      float want_f = vv[i * 3] + 0.5f * vv[i * 3 + 2] * vv[i * 3 + j];
      CHECK(close_to(fv[i * 3 + j], want_f), "addcmul[%d][%d] = %f, expected %f", i, j, fv[i * 3 + j], want_f);
    }
  OK(etpu_pointwise("lerp", (etpu_operand[]){view_of(c0), view_of(c2), number(f64(0.75))}, 3, NULL, "abi.c:views",
                    &mixed));
  float lv[2];
  read_f32(mixed, lv, 2);
  for (int i = 0; i < 2; i++) {
    float a = vv[i * 3], b = vv[i * 3 + 2], want_l = b - (b - a) * 0.25f;
    CHECK(close_to(lv[i], want_l), "lerp[%d] = %f, expected %f", i, lv[i], want_l);
  }
  OK(etpu_tensor_free(fused));
  OK(etpu_tensor_free(mixed));
  OK(etpu_tensor_free(after));
  /* Bad operands and ops are errors. */
  const int64_t bad_rank[4] = {(int64_t)st, 0, ETPU_F32, -1};
  CHECK(etpu_pointwise("neg", (etpu_operand[]){view_of(NULL)}, 1, c0, "x", NULL) == ETPU_INVALID_ARGUMENT,
        "null view");
  CHECK(etpu_pointwise("neg", (etpu_operand[]){view_of(bad_rank)}, 1, c0, "x", NULL) == ETPU_INVALID_ARGUMENT,
        "rank -1");
  CHECK(etpu_pointwise("nope", (etpu_operand[]){view_of(c0)}, 1, c0, "x", NULL) == ETPU_INVALID_ARGUMENT &&
            strstr(eagertpu_last_error(), "nope"),
        "unknown op: %s", eagertpu_last_error());
  CHECK(etpu_pointwise("addcmul", (etpu_operand[]){view_of(c0), view_of(c1)}, 2, c0, "x", NULL) ==
                ETPU_INVALID_ARGUMENT &&
            strstr(eagertpu_last_error(), "addcmul got (float32[2], float32[2])"),
        "addcmul with two operands: %s", eagertpu_last_error());
  etpu_operand odd = view_of(c0);
  odd.kind = 9;
  CHECK(etpu_pointwise("neg", &odd, 1, c0, "x", NULL) == ETPU_INVALID_ARGUMENT &&
            strstr(eagertpu_last_error(), "operand kind 9"),
        "operand kind 9: %s", eagertpu_last_error());
  /* Put the storage back as the checks below expect. */
  OK(etpu_view_write(st, 0, ETPU_F32, d23, s23, 2, t, "abi.c:storages"));
  OK(etpu_view_write(st, 4, ETPU_F32, col, col_stride, 1, c10, "abi.c:storages"));
  int32_t dtype = -2;
  OK(etpu_storage_dtype(st, &dtype));
  CHECK(dtype == ETPU_F32, "storage dtype %d", dtype);
  /* Errors: misaligned, outside, wrong dtype or shape. */
  etpu_tensor bad = 0;
  CHECK(etpu_view_read(st, 2, ETPU_F32, col, col_stride, 1, "x", &bad) == ETPU_INVALID_ARGUMENT, "misaligned");
  CHECK(etpu_view_read(st, 4096, ETPU_F32, col, col_stride, 1, "x", &bad) == ETPU_INVALID_ARGUMENT, "outside");
  /* Another dtype reads the same bytes (as torch.save and Tensor.view(dtype) do). */
  OK(etpu_view_read(st, 0, ETPU_I32, col, col_stride, 1, "abi.c:storages", &bad));
  int32_t bits[2];
  CHECK(etpu_tensor_to_host(bad, bits, sizeof bits, "abi.c") == ETPU_OK, "read bits: %s", eagertpu_last_error());
  int32_t one_bits;
  memcpy(&one_bits, &want[0], 4);
  CHECK(bits[0] == one_bits, "float 1.0 read as int32: %d, expected %d", bits[0], one_bits);
  OK(etpu_tensor_free(bad));
  bad = 0;
  /* A value is converted and broadcast to the view, as PyTorch writes out=; [2] does not broadcast to [2, 3]. */
  CHECK(etpu_view_write(st, 0, ETPU_F32, d23, s23, 2, c10, "x") == ETPU_INVALID_ARGUMENT, "shape");
  etpu_storage none = 0;
  CHECK(etpu_storage_new(-1, 4, &none) == ETPU_INVALID_ARGUMENT, "negative device");
  OK(etpu_storage_free(st));
  CHECK(etpu_storage_free(st) == ETPU_INVALID_ARGUMENT && strstr(eagertpu_last_error(), "freed already"),
        "double free: %s", eagertpu_last_error());
  CHECK(etpu_view_read(st, 0, ETPU_F32, col, col_stride, 1, "x", &bad) == ETPU_INVALID_ARGUMENT, "read after free");
  etpu_tensor handles[] = {t, tt, c, c10, all};
  for (size_t i = 0; i < sizeof handles / sizeof handles[0]; i++) OK(etpu_tensor_free(handles[i]));
}

/* A tensor too large for the machine: its op fails when it runs. In strict and
 * fused mode the call succeeds and the read reports the op and its origin. */
static void deferred_failure(void) {
  const int64_t huge[1] = {40000000000LL};
  etpu_tensor big = 0, plus = 0;
  etpu_status st = etpu_full(0, huge, 1, f64(0.0), ETPU_F32, "train.py:42", &big);
  if (mode == ETPU_MODE_DEBUG) {
    CHECK(st == ETPU_FAILED && strstr(eagertpu_last_error(), "train.py:42"), "debug: %d %s", st,
          eagertpu_last_error());
    return;
  }
  CHECK(st == ETPU_OK, "recording a failing op succeeds: %d %s", st, eagertpu_last_error());
  OK(etpu_binary_scalar("add", big, f64(1.0), false, "train.py:43", &plus));
  float one;
  st = etpu_tensor_to_host(plus, &one, sizeof one, "abi.c");
  CHECK(st != ETPU_OK, "reading a failed value fails");
  st = etpu_tensor_sync(plus);
  CHECK(st == ETPU_FAILED && strstr(eagertpu_last_error(), "full(") &&
            strstr(eagertpu_last_error(), "train.py:42"),
        "sync: %d %s", st, eagertpu_last_error());
  eagertpu_sync(); /* reports it once more, then it is cleared */
  OK(eagertpu_sync());
  OK(etpu_tensor_free(big));
  OK(etpu_tensor_free(plus));
}

int main(void) {
  CHECK(eagertpu_abi_version() == EAGERTPU_ABI_VERSION, "ABI version %u", eagertpu_abi_version());
  int64_t devices = 0, live_before = 0, live_after = 0;
  OK(eagertpu_device_count(&devices));
  CHECK(devices >= 1, "devices %lld", (long long)devices);
  OK(etpu_live_tensors(&live_before));
  for (mode = ETPU_MODE_DEBUG; mode <= ETPU_MODE_FUSED; mode++) {
    OK(eagertpu_set_mode(mode));
    int32_t got = -1;
    OK(eagertpu_get_mode(&got));
    CHECK(got == mode, "mode %d", got);
    ops();
    scans();
    storages();
    errors();
    deferred_failure();
    collectives();
    OK(eagertpu_sync());
  }
  OK(etpu_live_tensors(&live_after));
  CHECK(live_after == live_before, "live handles %lld -> %lld", (long long)live_before,
        (long long)live_after);
  size_t length = 0;
  OK(eagertpu_metrics_report(NULL, 0, &length));
  char report[4096];
  OK(eagertpu_metrics_report(report, sizeof report, &length));
  CHECK(strstr(report, "chunks executed") != NULL, "report: %s", report);
  if (failures == 0) printf("abi.c: all checks passed in debug, strict and fused mode\n");
  return failures == 0 ? 0 : 1;
}
