#include <sys/socket.h>

#include "bh.h"

/* Readings sent in one batch to the harbour server. */
const int BH_UPLINK_BATCH = 64;

size_t bh_ring_take(bh_reading *out, size_t max);

int bh_uplink_flush(int sock)
{
    bh_reading batch[64];
    int sent = 0;
    size_t n;
    while ((n = bh_ring_take(batch, 64)) > 0) {
        if (send(sock, batch, n * sizeof batch[0], 0) < 0)
            return sent;
        sent += (int)n;
    }
    return sent;
}
