// backend/cpu/key_hash.h — hash and equality by bytes for primitive-cache keys. A key must be a
// trivially copyable struct without padding bytes (each key static_asserts its size).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace kiln::ops {

template <class Key>
struct KeyBytesHash {
  static_assert(std::is_trivially_copyable_v<Key>);
  size_t operator()(const Key& k) const {
    const auto* p = reinterpret_cast<const unsigned char*>(&k);
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the key's bytes
    for (size_t i = 0; i < sizeof(Key); ++i) h = (h ^ p[i]) * 1099511628211ull;
    return size_t(h);
  }
};

template <class Key>
struct KeyBytesEqual {
  bool operator()(const Key& a, const Key& b) const { return std::memcmp(&a, &b, sizeof(Key)) == 0; }
};

}  // namespace kiln::ops
