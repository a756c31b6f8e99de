// log/crc32c.h — CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord framing and
// LevelDB use it. Check value: crc32c("123456789") = 0xE3069283.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kiln::log {

// CRC-32C of `size` bytes, continuing from `crc` (0 to start).
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);
inline uint32_t crc32c(std::string_view bytes) { return crc32c(bytes.data(), bytes.size()); }

// TFRecord's masked CRC: rotate right by 15 bits and add a constant, so that a CRC stored inside
// the data it covers does not read as a valid CRC of itself.
inline uint32_t masked_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace kiln::log
