/* Internal to src/wire (and its white-box test): the two CRC-32 engines
 * behind op_crc32. Both take and return the CRC register (the complement of
 * the CRC value), so they chain. */
#ifndef OFFPATH_WIRE_CRC32_INTERNAL_H
#define OFFPATH_WIRE_CRC32_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Slicing-by-8 over static const tables: any length, any CPU. */
uint32_t wire_crc32_slice8(uint32_t reg, const uint8_t *p, size_t len);

/* Carry-less multiply folding (x86-64 PCLMULQDQ). Only when
 * wire_crc32_has_clmul() is true; len must be a multiple of 16, at least 16. */
bool wire_crc32_has_clmul(void);
uint32_t wire_crc32_clmul(uint32_t reg, const uint8_t *p, size_t len);

#define WIRE_CRC32_CLMUL_MIN 16

/* The same with four 512-bit lanes (AVX-512 VPCLMULQDQ); wire_crc32_clmul
 * hands it buffers of WIRE_CRC32_VCLMUL_MIN bytes and more where the CPU has
 * it. Only when wire_crc32_has_vclmul(); len a multiple of 16, at least 256. */
bool wire_crc32_has_vclmul(void);
uint32_t wire_crc32_vclmul(uint32_t reg, const uint8_t *p, size_t len);

#define WIRE_CRC32_VCLMUL_MIN 256

/* The register after 12 bytes at lead and then p[0..len) (a RoCEv2 BTH
 * and the payload after it), len a multiple of 16, at least 16: folded
 * with no table look-up where wire_crc32_has_clmul() (a BTH by slicing
 * pulls tables into a cache the payload just filled); by slicing
 * elsewhere. */
uint32_t wire_crc32_clmul_lead12(uint32_t reg, const uint8_t lead[12], const uint8_t *p,
                                 size_t len);

#endif
