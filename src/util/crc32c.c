/* crc32c: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum
 * of OP_MSG's checksumPresent flag and of log and snapshot records. Software
 * slicing-by-8, and the SSE4.2 crc32 instruction when the CPU has it
 * (checked once at first use). */
#include "util/crc32c.h"

#include <stdbool.h>

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define CRC32C_HW 1
#endif

#define CRC32C_POLY 0x82F63B78u

static uint32_t crc32c_table[8][256];
static bool crc32c_use_hw;
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;

/* Fills the slicing tables and picks the implementation (runs once). */
static void crc32c_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        crc32c_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = crc32c_table[0][i];
        for (int t = 1; t < 8; t++) {
            c = crc32c_table[0][c & 0xff] ^ (c >> 8);
            crc32c_table[t][i] = c;
        }
    }
#ifdef CRC32C_HW
    __builtin_cpu_init();
    crc32c_use_hw = __builtin_cpu_supports("sse4.2");
#endif
}

/* Software CRC-32C over `len` bytes, continuing from the raw register `crc`. */
static uint32_t crc32c_table_run(uint32_t crc, const uint8_t *p, size_t len)
{
    while (len >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
#endif
        lo ^= crc;
        crc = crc32c_table[7][lo & 0xff] ^ crc32c_table[6][(lo >> 8) & 0xff] ^
              crc32c_table[5][(lo >> 16) & 0xff] ^ crc32c_table[4][lo >> 24] ^
              crc32c_table[3][hi & 0xff] ^ crc32c_table[2][(hi >> 8) & 0xff] ^
              crc32c_table[1][(hi >> 16) & 0xff] ^ crc32c_table[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = crc32c_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc;
}

#ifdef CRC32C_HW
/* Hardware CRC-32C (SSE4.2 crc32 instruction), same contract as crc32c_table_run. */
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const uint8_t *p,
                                                            size_t len)
{
    uint64_t c = crc;
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len--)
        c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}
#endif

uint32_t crc32c(const uint8_t *data, size_t len)
{
    pthread_once(&crc32c_once, crc32c_init);
    uint32_t crc = 0xFFFFFFFFu;
#ifdef CRC32C_HW
    if (crc32c_use_hw)
        return crc32c_hw(crc, data, len) ^ 0xFFFFFFFFu;
#endif
    return crc32c_table_run(crc, data, len) ^ 0xFFFFFFFFu;
}

uint32_t crc32c_sw(const uint8_t *data, size_t len)
{
    pthread_once(&crc32c_once, crc32c_init);
    return crc32c_table_run(0xFFFFFFFFu, data, len) ^ 0xFFFFFFFFu;
}
