#include <string.h>

#include "bh.h"

static bh_reading slots[BH_RING_SLOTS];
static size_t head;
static size_t count;

void bh_ring_push(const bh_reading *reading)
{
    slots[head] = *reading;
    head = (head + 1) % BH_RING_SLOTS;
    if (count < BH_RING_SLOTS)
        count++;
}

/* Copies up to max readings, oldest first, and forgets them. */
size_t bh_ring_take(bh_reading *out, size_t max)
{
    size_t n = count < max ? count : max;
    size_t start = (head + BH_RING_SLOTS - count) % BH_RING_SLOTS;
    for (size_t i = 0; i < n; i++)
        out[i] = slots[(start + i) % BH_RING_SLOTS];
    count -= n;
    return n;
}
