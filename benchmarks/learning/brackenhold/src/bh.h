#ifndef BRACKENHOLD_BH_H
#define BRACKENHOLD_BH_H

#include <stddef.h>
#include <stdint.h>

/* How many times a second the anemometer is read. */
#define BH_SAMPLE_HZ 25

/* Readings the ring buffer holds before the oldest is overwritten. */
#define BH_RING_SLOTS 4096

#define BH_DEFAULT_DEVICE "/dev/ttyAMA0"
#define BH_BAUD 9600 /* the anemometer's serial speed */

/* One reading: wind speed in tenths of a knot and the direction in degrees. */
typedef struct bh_reading {
    uint32_t at_ms;
    uint16_t speed_dk;
    uint16_t bearing;
} bh_reading;

/* Parses one line the sensor sends into a reading; returns 0 on success. */
int bh_parse_line(const char *line, size_t len, bh_reading *out);

/* Adds a reading to the ring buffer, overwriting the oldest when it is full. */
void bh_ring_push(const bh_reading *reading);

/* Sends what the ring buffer holds upstream; returns how many readings were sent. */
int bh_uplink_flush(int sock);

#endif
