/* A C client of `cf kv-server` in the Cornflakes format, through the C API
 * (include/cornflakes.h): puts a 4 KiB value allocated in the connection's
 * pool (sent zero-copy) under a key, gets it back and checks every byte,
 * then gets a key that is not there.
 *
 *   kv_client shm /tmp/cf-kv.sock
 *   kv_client tcp 127.0.0.1:7000
 *
 * Build: see crates/cornflakes-capi/README.md. Exit status 0 when every
 * answer was right. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cornflakes.h"

enum { OP_GET = 1, OP_PUT = 2 };
enum { STATUS_OK = 0, STATUS_NOT_FOUND = 1 };
#define VALUE_LEN 4096

static int fail(const char *what, CfStatus s) {
  fprintf(stderr, "kv_client: %s failed (%d): %s\n", what, (int)s, cf_last_error());
  return 1;
}

/* Sends `req` as message `id` and decodes the response into `*resp`. */
static int round_trip(CfConn *conn, CfArena *arena, uint32_t id, const CfKvRequest *req, CfKvResponse **resp) {
  CfStatus s = cf_conn_send_kv_request(conn, id, req, arena);
  if (s != CF_OK) return fail("send", s);
  uint32_t got_id = 0;
  CfBuf *packet = NULL;
  s = cf_conn_recv(conn, 5000, &got_id, &packet);
  if (s != CF_OK) return fail("receive", s);
  if (got_id != id) {
    fprintf(stderr, "kv_client: response to message %u, expected %u\n", got_id, id);
    cf_buf_free(packet);
    return 1;
  }
  s = cf_kv_response_decode(packet, resp);
  cf_buf_free(packet); /* the response holds its own reference */
  if (s != CF_OK) return fail("decode", s);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 3 || (strcmp(argv[1], "shm") != 0 && strcmp(argv[1], "tcp") != 0)) {
    fprintf(stderr, "usage: %s shm SOCKET_PATH | tcp IP:PORT\n", argv[0]);
    return 2;
  }
  CfConn *conn = NULL;
  CfStatus s = strcmp(argv[1], "shm") == 0 ? cf_conn_connect_shm(argv[2], &conn) : cf_conn_connect_tcp(argv[2], &conn);
  if (s != CF_OK) return fail("connect", s);

  CfPool *pool = NULL;
  CfArena *arena = NULL;
  if ((s = cf_conn_pool(conn, &pool)) != CF_OK) return fail("pool", s);
  if ((s = cf_arena_new(pool, &arena)) != CF_OK) return fail("arena", s);

  /* The value, written straight into a buffer of the connection's pool. */
  CfBufMut *w = NULL;
  if ((s = cf_buf_alloc(pool, VALUE_LEN, &w)) != CF_OK) return fail("alloc", s);
  uint8_t *bytes = cf_bufmut_data(w);
  for (size_t i = 0; i < VALUE_LEN; i++) bytes[i] = (uint8_t)(i * 7 + 3);
  CfBuf *value = NULL;
  if ((s = cf_bufmut_freeze(w, &value)) != CF_OK) return fail("freeze", s);

  const char *key = "c-client:key";
  CfKvRequest *put = cf_kv_request_new();
  cf_kv_request_set_op(put, OP_PUT);
  cf_kv_request_add_key(put, (const uint8_t *)key, strlen(key));
  if ((s = cf_kv_request_add_val_buf(put, value)) != CF_OK) return fail("add value", s);
  CfKvResponse *resp = NULL;
  if (round_trip(conn, arena, 1, put, &resp)) return 1;
  if (cf_kv_response_status(resp) != STATUS_OK) {
    fprintf(stderr, "kv_client: put answered status %u\n", cf_kv_response_status(resp));
    return 1;
  }
  cf_kv_response_free(resp);
  printf("put %s: ok (%d B, threshold %zu B)\n", key, VALUE_LEN, cf_arena_threshold(arena));

  CfKvRequest *get = cf_kv_request_new();
  cf_kv_request_set_op(get, OP_GET);
  cf_kv_request_add_key(get, (const uint8_t *)key, strlen(key));
  if (round_trip(conn, arena, 2, get, &resp)) return 1;
  const uint8_t *data = NULL;
  size_t len = 0;
  if (cf_kv_response_status(resp) != STATUS_OK || cf_kv_response_num_vals(resp) != 1) {
    fprintf(stderr, "kv_client: get answered status %u with %zu values\n", cf_kv_response_status(resp),
            cf_kv_response_num_vals(resp));
    return 1;
  }
  if ((s = cf_kv_response_val(resp, 0, &data, &len)) != CF_OK) return fail("value", s);
  if (len != VALUE_LEN || memcmp(data, cf_buf_data(value), VALUE_LEN) != 0) {
    fprintf(stderr, "kv_client: get returned %zu bytes that differ from what was put\n", len);
    return 1;
  }
  cf_kv_response_free(resp);
  printf("get %s: ok (%zu B, every byte as put)\n", key, len);

  CfKvRequest *missing = cf_kv_request_new();
  cf_kv_request_set_op(missing, OP_GET);
  cf_kv_request_add_key(missing, (const uint8_t *)"c-client:absent", 15);
  if (round_trip(conn, arena, 3, missing, &resp)) return 1;
  if (cf_kv_response_status(resp) != STATUS_NOT_FOUND) {
    fprintf(stderr, "kv_client: get of an absent key answered status %u\n", cf_kv_response_status(resp));
    return 1;
  }
  cf_kv_response_free(resp);
  printf("get c-client:absent: not found, as expected\n");

  cf_kv_request_free(put);
  cf_kv_request_free(get);
  cf_kv_request_free(missing);
  cf_buf_free(value);
  cf_arena_free(arena);
  cf_pool_free(pool);
  cf_conn_close(conn);
  return 0;
}
