/* exchange.h — one rank's halo exchange on a padded tile [n, c, ht + 2r, wt + 2r] in the run's
 * dtype (f32, or f16/bf16: packed, sent and unpacked in 16 bits, half the bytes): the strips
 * its neighbours need are packed into one message per neighbour (faces, and corners on 2-D
 * grids), sent and received non-blocking, and what arrives is unpacked into the ring outside
 * the owned tile. Split into start / test / finish so that a caller can compute the interior
 * while the messages are in flight; the caller's time inside these calls is the exchange the
 * step waited for (exposed), and the time from start until the exchange was seen complete is
 * the exchange in flight. Bytes are measured by the communication layer's counter. */
#ifndef HALO_CONV_EXCHANGE_H
#define HALO_CONV_EXCHANGE_H

#include "grid.h"
#include "kernels.h"
#include "sl_coll.h"

typedef struct hc_exchange {
    sl_backend be;
    sl_comm *comm;
    hc_geom g;             /* g.n: the images of the tile */
    sl_dtype dt;           /* of the tile and the messages (g.es bytes an element) */
    hc_tile tile;
    int hp, wp;            /* padded tile */
    void *send[HC_DIRS], *recv[HC_DIRS]; /* one message per neighbour (backend memory, "comm") */
    size_t count[HC_DIRS]; /* its elements */
    sl_coll_req *req[2 * HC_DIRS];
    void *padded;          /* the tile being exchanged */
    int active, done;
    double t_start, t_done;          /* of the exchange in progress */
    double exposed, in_flight;       /* seconds, of the last exchange once finished */
    unsigned long long bytes;        /* sent by the last start, as the transport counted them */
} hc_exchange;

/* Allocates the messages of a tile of g->n images of dtype dt (counted under SL_MEM_COMM). */
void hc_exchange_init(hc_exchange *x, sl_backend be, sl_comm *comm, const hc_geom *g,
                      const hc_tile *tile, sl_dtype dt);
void hc_exchange_free(hc_exchange *x);
/* Packs the strips of padded's owned tile, posts the receives and the sends. */
void hc_exchange_start(hc_exchange *x, void *padded);
/* Progresses the messages; returns 1 once all are complete (then finish only unpacks). */
int hc_exchange_test(hc_exchange *x);
/* Waits for every message and unpacks the halos into padded's ring. */
void hc_exchange_finish(hc_exchange *x);

#endif
