// core/notice.h — a line for the user on stderr from any part of kiln, on any rank: "kiln: TEXT",
// or "kiln: rank R: TEXT" once main has said this process is rank R of several (set_notice_rank),
// so that what one rank of a multi-process run notices reaches the console and says whose it is.
#pragma once
#include <fmt/format.h>

#include <string_view>
#include <utility>

namespace kiln {

// Called by main after the world starts; a single process (ranks == 1) keeps the plain prefix.
void set_notice_rank(int rank, int ranks);

void notice_line(std::string_view text);

template <typename... Args>
void notice(fmt::format_string<Args...> format, Args&&... args) {
  notice_line(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace kiln
