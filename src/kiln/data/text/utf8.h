// data/text/utf8.h — UTF-8 <-> code points. Invalid bytes are dropped, as Google BERT's
// convert_to_unicode does with decode("utf-8", "ignore").
#pragma once
#include <string>
#include <string_view>

namespace kiln::data {

std::u32string utf8_decode(std::string_view text);
void utf8_append(std::string& out, char32_t cp);
std::string utf8_encode(std::u32string_view cps);

}  // namespace kiln::data
