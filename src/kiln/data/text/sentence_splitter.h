// data/text/sentence_splitter.h — a rule-based English sentence splitter that stands in for
// NLTK's Punkt model in `kiln prepare indexed --split-sentences`.
//
// A sentence ends after a run of terminators ('.', '!', '?', or the ellipsis character U+2026),
// optionally followed by closing quotes or brackets (" ' ) ] } ” ’ »), when whitespace (or the
// end of the text) follows. These ends are NOT sentence breaks:
//   - the terminator is not followed by whitespace: decimals (3.14), "U.S.A", URLs, "e.g.,";
//   - a single '.' after a known abbreviation (kAbbreviations, compared lower-cased, with any
//     leading opening punctuation stripped), after a word that itself contains a '.' ("U.S.",
//     "a.m.", "Ph.D."), or after a single letter (an initial, "J. R. R. Tolkien");
//   - a '.' run (including an ellipsis "..." or "…") followed by a lower-case ASCII letter;
//   - an ellipsis followed by anything but an upper-case letter or an opening quote/bracket.
// '!' and '?' end a sentence whenever whitespace follows. Newlines are ordinary whitespace (as
// Punkt without --keep-newlines). Sentences are returned trimmed; empty ones are dropped.
#pragma once
#include <string_view>
#include <vector>

namespace kiln::data {

// Lower-case abbreviations, without the final period, after which '.' does not end a sentence.
extern const std::vector<std::string_view> kAbbreviations;

// Views into `text`, in order.
std::vector<std::string_view> split_sentences(std::string_view text);

}  // namespace kiln::data
