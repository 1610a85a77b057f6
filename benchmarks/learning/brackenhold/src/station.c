#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bh.h"

static int field(const char *line, size_t len, int index)
{
    int seen = 0;
    for (size_t i = 0; i < len; i++) {
        if (seen == index)
            return atoi(line + i);
        if (line[i] == ',')
            seen++;
    }
    return -1;
}

/* Reads "$WIMWV,bearing,R,speed,N" sentences; anything else is ignored. */
int bh_parse_line(const char *line, size_t len, bh_reading *out)
{
    if (len < 6 || strncmp(line, "$WIMWV", 6) != 0)
        return -1;
    int bearing = field(line, len, 1);
    int speed = field(line, len, 3);
    if (bearing < 0 || speed < 0)
        return -1;
    out->bearing = (uint16_t)bearing;
    out->speed_dk = (uint16_t)(speed * 10);
    return 0;
}
