/* server: the one process-wide server instance and the wall clock. */
#include "cmd/server.h"

#include <sys/time.h>

server_t server;

int64_t server_now_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}
