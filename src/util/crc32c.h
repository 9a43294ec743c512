/* crc32c: CRC-32C (Castagnoli), the checksum of OP_MSG frames
 * (checksumPresent) and of the journal's log and snapshot records. */
#ifndef ATOMDB_CRC32C_H
#define ATOMDB_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of `len` bytes (the SSE4.2 instruction when the CPU has it). */
uint32_t crc32c(const uint8_t *data, size_t len);

/* The same, always through the software tables (tests compare the two). */
uint32_t crc32c_sw(const uint8_t *data, size_t len);

#endif
